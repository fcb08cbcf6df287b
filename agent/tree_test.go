package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// treeStore is a backend for the tree tests: both run every test.
type treeStore interface {
	thread.Store
	store.Variables
}

// backends runs fn on SQLite and on PostgreSQL.
func backends(t *testing.T, fn func(t *testing.T, st treeStore)) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		ts, ok := st.(treeStore)
		if !ok {
			t.Fatalf("%T keeps no variables", st)
		}
		fn(t, ts)
	})
}

// models hands each prompt its own scripted model by the prompt's model name ("t:NAME").
type models struct {
	mu sync.Mutex
	by map[string]*turnModel
}

func (ms *models) add(name string, turns ...model.Response) *turnModel {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.by == nil {
		ms.by = map[string]*turnModel{}
	}
	m := &turnModel{turns: turns}
	ms.by["t:"+name] = m
	return m
}

func (ms *models) open(spec string) (model.Model, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	m, ok := ms.by[spec]
	if !ok {
		return nil, fmt.Errorf("no scripted model %s", spec)
	}
	return named{m, spec}, nil
}

// named gives a turnModel the name its prompt asked for.
type named struct {
	*turnModel
	name string
}

func (n named) Name() string { return n.name }

// requests returns every request any model received.
func (ms *models) requests() []*model.Request {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var out []*model.Request
	for _, m := range ms.by {
		m.mu.Lock()
		out = append(out, m.reqs...)
		m.mu.Unlock()
	}
	return out
}

// pad puts a turn at index n: turnModel answers by the number of assistant turns in the
// thread, and an agent taking a thread over mid-way starts at that count.
func pad(n int, turns ...model.Response) []model.Response {
	return append(make([]model.Response, n), turns...)
}

type treeFixture struct {
	st     treeStore
	reg    *quiver.Registry
	ms     *models
	cat    *agent.Catalog
	r      *agent.Runner
	ran    *runLog
	events *eventLog
}

func newTree(t *testing.T, st treeStore) *treeFixture {
	t.Helper()
	f := &treeFixture{st: st, reg: &quiver.Registry{}, ms: &models{}, ran: &runLog{}, events: &eventLog{},
		cat: &agent.Catalog{Prompts: map[string]*agent.Prompt{}, Agents: map[string]*agent.Agent{}}}
	type text struct {
		Text string `json:"text"`
	}
	if err := f.reg.Register(
		quiver.Func("echo", "Echoes text.", func(ctx context.Context, in text) (string, error) {
			th, _ := thread.FromContext(ctx)
			f.ran.add(th.ID() + ":echo:" + in.Text)
			return "echo: " + in.Text, nil
		}),
		quiver.Func("fail", "Always fails.", func(context.Context, struct{}) (string, error) {
			return "", fmt.Errorf("the disk is full")
		}),
		quiver.Func("secret_tool", "Only the lead may not call it.", func(context.Context, struct{}) (string, error) {
			f.ran.add("secret_tool")
			return "leak", nil
		}),
		quiver.Func("draw", "Draws a picture into the thread's files.", func(ctx context.Context, _ struct{}) (*quiver.Result, error) {
			return &quiver.Result{Text: "drawn", Attachments: []quiver.Attachment{{Name: "pic.png", MimeType: "image/png",
				Data: "iVBORw0KGgo="}}}, nil
		}),
	); err != nil {
		t.Fatal(err)
	}
	f.r = &agent.Runner{Store: st, Registry: f.reg, Catalog: f.cat, OpenModel: f.ms.open}
	f.r.Subscribe(func(e agent.Event) {
		f.events.mu.Lock()
		f.events.evs = append(f.events.evs, e)
		f.events.mu.Unlock()
	})
	return f
}

func (f *treeFixture) prompt(p *agent.Prompt) *agent.Prompt {
	if p.Model == "" {
		p.Model = "t:" + p.Name
	}
	f.cat.Prompts[p.Name] = p
	return p
}

func (f *treeFixture) agent(a *agent.Agent) *agent.Agent {
	if a.Prompt.Model == "" {
		a.Prompt.Model = "t:" + a.Name
	}
	f.cat.Agents[a.Name] = a
	return a
}

func (f *treeFixture) root(t *testing.T, a *agent.Agent) *thread.Thread {
	t.Helper()
	th, err := thread.Create(ctx, f.st, thread.Options{WorkspaceID: "wsp_tree", UserID: "usr_1", AgentID: a.Name})
	if err != nil {
		t.Fatal(err)
	}
	return th
}

func history(t *testing.T, th *thread.Thread) []*store.Message {
	t.Helper()
	h, err := th.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// resultOf returns the result of call id in th.
func resultOf(t *testing.T, th *thread.Thread, id string) *quiver.Result {
	t.Helper()
	for _, m := range history(t, th) {
		if m.Role == store.RoleTool && m.ToolCallID == id {
			r, err := thread.Result(m.Result)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("thread %s has no result for %s", th.ID(), id)
	return nil
}

// TestTree: one lead run reaches a prompt tool, a blocking sub-agent, a non-blocking one
// (whose result arrives later and starts a new step of the finished lead) and a handoff.
func TestTree(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		f.prompt(&agent.Prompt{Name: "summarize", Description: "Summarizes text.", ExposeAsTool: true, Tools: []string{"echo"}})
		f.ms.add("summarize",
			model.Response{ToolCalls: calls(call("s1", "echo", `{"text":"s"}`))},
			model.Response{Text: "summary done"})
		f.agent(&agent.Agent{Name: "researcher", Type: agent.DualAI, ExposeAsTool: true, Prompt: &agent.Prompt{Name: "researcher"}})
		f.ms.add("researcher", model.Response{Text: "found x"})
		f.agent(&agent.Agent{Name: "writer", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "writer"}})
		writer := f.ms.add("writer", model.Response{Text: "draft ready"})
		writer.block = make(chan struct{}) // the writer answers after the lead's run has finished
		f.agent(&agent.Agent{Name: "billing", Description: "Handles refunds.", ExposeAsTool: true, Prompt: &agent.Prompt{Name: "billing"}})
		f.ms.add("billing", pad(3, model.Response{Text: "Billing here: refund done."})...)
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"echo", "summarize", "researcher", "billing"},
			Subagents: []agent.Subagent{{Name: "writer", Blocking: new(bool)}}}})
		leadModel := f.ms.add("lead",
			model.Response{ToolCalls: calls(call("c1", "summarize", `{"message":"sum it"}`), call("c2", "researcher", `{"message":"find x"}`),
				call("c3", "writer", `{"message":"draft"}`))},
			model.Response{Text: "Working on it."},
			model.Response{ToolCalls: calls(call("c4", "billing", `{"message":"refund please"}`))})

		th := f.root(t, lead)
		out, err := f.r.Run(ctx, th, lead, "go")
		if err != nil {
			t.Fatal(err)
		}
		close(writer.block)
		f.r.Wait()
		if out.Text != "Working on it." {
			t.Fatalf("first outcome %+v", out)
		}
		if r := resultOf(t, th, "c1"); r.IsError() || !strings.Contains(r.Text, "summary done") || !strings.Contains(r.Text, "- echo: echo: s") {
			t.Fatalf("prompt tool result %+v", r)
		}
		if r := resultOf(t, th, "c2"); r.IsError() || r.Text != "found x" {
			t.Fatalf("blocking sub-agent result %+v", r)
		}
		r3 := resultOf(t, th, "c3")
		var ref struct{ Ref, Status string }
		if err := json.Unmarshal(r3.Value, &ref); err != nil || ref.Status != "running" || !strings.HasPrefix(ref.Ref, "thr_") {
			t.Fatalf("non-blocking result %+v", r3)
		}
		// The writer's result came as a queued message and started a new step of the lead,
		// which handed the thread to billing.
		hist := history(t, th)
		var delivered int
		for _, m := range hist {
			if m.Role == store.RoleSystem && strings.Contains(m.Content, "draft ready") && strings.Contains(m.Content, ref.Ref) {
				delivered++
			}
		}
		if delivered != 1 {
			t.Fatalf("the writer's result was delivered %d times; history %s", delivered, dump(hist))
		}
		last := hist[len(hist)-1]
		if last.Role != store.RoleAssistant || last.Content != "Billing here: refund done." {
			t.Fatalf("last message %+v; history %s", last, dump(hist))
		}
		info, _ := th.Refresh(ctx)
		if got := agent.CurrentAgent(&info); got != "billing" {
			t.Fatalf("the thread is had by %q, want billing", got)
		}
		// The third lead request offered the handoff; billing's request the billing tools.
		if n := len(leadModel.reqs); n != 3 {
			t.Fatalf("lead asked %d times", n)
		}
		kids, err := th.Children(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(kids) != 3 {
			t.Fatalf("children %+v", kids)
		}
		for _, k := range kids {
			if k.Status != store.StatusTerminated || k.Resumable {
				t.Fatalf("child %+v: want terminated, not resumable", k)
			}
		}
		if got := f.ran.list(); len(got) != 1 || !strings.HasSuffix(got[0], ":echo:s") || strings.HasPrefix(got[0], th.ID()) {
			t.Fatalf("ran %v: the prompt's echo runs once, in its flow's thread", got)
		}
	})
}

func dump(hist []*store.Message) string {
	var b strings.Builder
	for _, m := range hist {
		fmt.Fprintf(&b, "\n  %d %s %q calls=%d %s", m.Seq, m.Role, m.Content, len(m.ToolCalls), m.ToolCallID)
	}
	return b.String()
}

var _ = slices.Contains[[]string]

// TestHandoffCutsTheTurn: the calls the old agent asked for after its handoff are not run
// under the new agent's policy, and a handoff recorded before a crash kept its result from
// being stored is answered, not dispatched again to an agent without that tool.
func TestHandoffCutsTheTurn(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		f.agent(&agent.Agent{Name: "billing", ExposeAsTool: true, Prompt: &agent.Prompt{Name: "billing", Tools: []string{"secret_tool", "echo"}}})
		f.ms.add("billing", pad(1, model.Response{Text: "Billing here."})...)
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"echo", "billing"}}})
		f.ms.add("lead", model.Response{ToolCalls: calls(call("h1", "billing", `{}`), call("h2", "secret_tool", `{}`), call("h3", "echo", `{"text":"x"}`))})

		th := f.root(t, lead)
		if _, err := f.r.Run(ctx, th, lead, "refund"); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"h2", "h3"} {
			if r := resultOf(t, th, id); !r.IsError() || r.Code != quiver.CodeRejected || !strings.Contains(r.Error, "handed over to billing") {
				t.Errorf("call %s after the handoff: %+v", id, r)
			}
		}
		if got := f.ran.list(); len(got) != 0 {
			t.Fatalf("calls after the handoff ran: %v", got)
		}
		if last := history(t, th); last[len(last)-1].Content != "Billing here." {
			t.Fatalf("billing did not answer: %s", dump(last))
		}

		// The crash case: the thread records billing, the handoff call has no result.
		th2 := f.root(t, lead)
		if _, err := th2.AppendUser(ctx, "refund"); err != nil {
			t.Fatal(err)
		}
		if _, err := th2.AppendAssistant(ctx, "", []quiver.Call{{ID: "h1", Name: "billing", Args: json.RawMessage(`{}`)},
			{ID: "h2", Name: "secret_tool", Args: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := th2.Update(ctx, func(x *store.Thread) error { x.State = json.RawMessage(`{"agent":"billing"}`); return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := f.r.Resume(ctx, th2, lead); err != nil {
			t.Fatal(err)
		}
		if r := resultOf(t, th2, "h1"); r.IsError() || !strings.Contains(r.Text, "handed over to billing") {
			t.Fatalf("the recorded handoff's result: %+v", r)
		}
		if r := resultOf(t, th2, "h2"); !r.IsError() || r.Code != quiver.CodeRejected {
			t.Fatalf("the call after the recorded handoff: %+v", r)
		}
		if got := f.ran.list(); len(got) != 0 {
			t.Fatalf("calls ran: %v", got)
		}
	})
}
