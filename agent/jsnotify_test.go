package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/schema"
)

// A JavaScript tool's state.notifyParent is the runtime's explicit parent communication, as
// agent.NotifyParent is a Go tool's: the runner hands it to the tools it runs (jsfunc cannot
// import agent). A child's notice reaches its parent; on a root thread it is the runner's
// refusal (not the one a call outside any run gets), and the run goes on.
func TestJavaScriptNotifyParent(t *testing.T) {
	var in schema.Schema
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`), &in); err != nil {
		t.Fatal(err)
	}
	tell, err := jsfunc.New(jsfunc.Definition{Name: "tell_parent", Description: "Tells the parent.", InputSchema: &in,
		Code: `export default async ({ text }, state) => {
			try { await state.notifyParent(text) } catch (e) { return { status: "error", error: e.message } }
			return { status: "success", result: "sent" }
		}`})
	if err != nil {
		t.Fatal(err)
	}
	backends(t, func(t *testing.T, st treeStore) {
		t.Run("from a child", func(t *testing.T) {
			f := moreTree(t, st)
			if err := f.reg.Register(tell); err != nil {
				t.Fatal(err)
			}
			f.agent(&agent.Agent{Name: "helper", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "helper", Tools: []string{"tell_parent"}}})
			f.ms.add("helper", model.Response{ToolCalls: calls(call("n1", "tell_parent", `{"text":"progress: half"}`))},
				model.Response{Text: "final answer"})
			lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"tell_parent"}, // a child calls what its parent may
				Subagents: []agent.Subagent{{Name: "helper", Blocking: off(), Resumable: &agent.Resumable{ParentCommunication: agent.Explicit}}}}})
			f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", "subagent_create", `{"agent":"helper","name":"h1","message":"work"}`))},
				model.Response{Text: "waiting"}, model.Response{Text: "noted"}, model.Response{Text: "noted"})
			th := f.root(t, lead)
			run(t, f, th, lead, "go")
			f.r.Wait()
			child := onlyKid(t, th)
			if r := resultOf(t, child, "n1"); r.IsError() || r.Text != "sent" {
				t.Fatalf("the tool's result %+v", r)
			}
			ns := notices(t, th)
			if len(ns) != 1 || !strings.Contains(ns[0], "says]\nprogress: half") || !strings.Contains(ns[0], child.ID()) {
				t.Fatalf("the parent's notices %q", ns)
			}
		})
		t.Run("from a root thread", func(t *testing.T) {
			f := moreTree(t, st)
			if err := f.reg.Register(tell); err != nil {
				t.Fatal(err)
			}
			lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"tell_parent"}}})
			f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", "tell_parent", `{"text":"hi"}`))}, model.Response{Text: "done"})
			th := f.root(t, lead)
			if out := run(t, f, th, lead, "go"); out.Text != "done" {
				t.Fatalf("outcome %+v", out)
			}
			if r := resultOf(t, th, "c1"); !r.IsError() || !strings.Contains(r.Error, "agent: NotifyParent: the call does not run on a child thread") {
				t.Fatalf("result %+v", r)
			}
		})
	})
}
