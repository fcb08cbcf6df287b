package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/store/memstore"
	"github.com/quiverhq/quiver/thread"
)

// A run on a thread: the model asks for a tool that needs confirmation, the run pauses, a
// person approves, and the run resumes exactly there.
func ExampleRunner() {
	st := memstore.New()
	defer st.Close()
	ctx := context.Background()

	reg := &quiver.Registry{}
	_ = reg.Register(quiver.Func("refund", "Refunds an order.", func(_ context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "refunded " + in.Order, nil
	}, quiver.WithConfirmation()))
	m := scripted.Turns(
		scripted.Turn{Calls: []scripted.Call{{Name: "refund", Args: map[string]any{"order": "A-17"}}}},
		scripted.Turn{Text: "Order A-17 is refunded."},
	)
	r := &agent.Runner{Store: st, Registry: reg, Model: m}
	support := &agent.Agent{Name: "support", Prompt: &agent.Prompt{Name: "support", System: "You handle refunds.", Tools: []string{"refund"}}}

	th, _ := thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_demo"})
	out, _ := r.Run(ctx, th, support, "Please refund A-17.")
	fmt.Println(out.Status, out.Reason, out.Pending.Call.Name)

	_ = r.Decide(ctx, th, support, out.Pending.Call.ID, quiver.Decision{Action: quiver.Approve})
	out, _ = r.Resume(ctx, th, support)
	fmt.Println(out.Status, out.Text)
	// Output:
	// paused confirmation refund
	// finished Order A-17 is refunded.
}

// Agents and prompts can be written in YAML, one file each, and loaded from a directory.
func ExampleLoadDir() {
	dir, _ := os.MkdirTemp("", "quiver-agents")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "triage.yaml"), []byte(`
name: triage
description: Sorts incoming tickets.
model: openai:gpt-4.1-mini
system: Label each ticket.
tools: [get_current_time]
stop: {max_steps: 5}
`), 0o600)
	c, err := agent.LoadDir(dir)
	if err != nil {
		panic(err)
	}
	a, _ := c.Agent("triage")
	fmt.Println(a.Name, a.Prompt.Model, a.Prompt.Tools, a.Prompt.Stop.MaxSteps)
	// Output:
	// triage openai:gpt-4.1-mini [get_current_time] 5
}

// A lead agent calls a dual-AI agent as a tool: the sub-agent works in a child thread of the
// lead's, and its answer is the call's result. Each prompt names its own model.
func ExampleRunner_subagent() {
	st := memstore.New()
	defer st.Close()
	ctx := context.Background()

	models := map[string]model.Model{
		"lead": scripted.Turns(
			scripted.Turn{Calls: []scripted.Call{{Name: "researcher", Args: map[string]any{"message": "One fact about otters."}}}},
			scripted.Turn{Text: "The researcher says: otters hold hands while they sleep."}),
		"researcher": scripted.Turns(scripted.Turn{Text: "Otters hold hands while they sleep."}),
	}
	catalog := &agent.Catalog{Prompts: map[string]*agent.Prompt{}, Agents: map[string]*agent.Agent{
		"researcher": {Name: "researcher", Description: "Finds facts.", Type: agent.DualAI, ExposeAsTool: true,
			Prompt: &agent.Prompt{Name: "researcher", Model: "researcher"}},
		"lead": {Name: "lead", Prompt: &agent.Prompt{Name: "lead", Model: "lead", Tools: []string{"researcher"}}},
	}}
	r := &agent.Runner{Store: st, Registry: &quiver.Registry{}, Catalog: catalog,
		OpenModel: func(name string) (model.Model, error) { return models[name], nil }}
	lead, _ := catalog.Agent("lead")

	th, _ := thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_demo", AgentID: "lead"})
	out, err := r.Run(ctx, th, lead, "Tell me about otters.")
	if err != nil {
		panic(err)
	}
	r.Wait() // non-blocking sub-agents, had there been any
	fmt.Println(out.Text)
	kids, _ := th.Children(ctx)
	fmt.Println(len(kids), kids[0].AgentID, kids[0].Status, kids[0].Blocking)
	// Output:
	// The researcher says: otters hold hands while they sleep.
	// 1 researcher terminated true
}
