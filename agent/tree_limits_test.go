package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/vars"
)

// A run starts at most MaxSpawnsPerRun children: the spawn past it is an error result the
// model can act on, and the run goes on.
func TestSpawnsPerRunCap(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		f.r.MaxSpawnsPerRun = 2
		f.prompt(&agent.Prompt{Name: "summarize", ExposeAsTool: true})
		f.ms.add("summarize", model.Response{Text: "short"})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"summarize"}}})
		f.ms.add("lead", model.Response{ToolCalls: calls(call("p1", "summarize", `{"message":"a"}`), call("p2", "summarize", `{"message":"b"}`),
			call("p3", "summarize", `{"message":"c"}`))}, model.Response{Text: "done"})
		th := f.root(t, lead)
		out, err := f.r.Run(ctx, th, lead, "go")
		if err != nil || out.Text != "done" {
			t.Fatalf("run: %+v %v", out, err)
		}
		for _, id := range []string{"p1", "p2"} {
			if r := resultOf(t, th, id); r.IsError() {
				t.Fatalf("%s: %+v", id, r)
			}
		}
		if r := resultOf(t, th, "p3"); !r.IsError() || r.Code != agent.CodeSpawnRefused || !strings.Contains(r.Error, "limit") {
			t.Fatalf("the third spawn: %+v", r)
		}
		if ks, _ := th.Children(ctx); len(ks) != 2 {
			t.Fatalf("%d children, want 2", len(ks))
		}
	})
}

// failOnce fails its first request, as a provider's outage would.
type failOnce struct {
	named
	failed atomic.Bool
}

func (m *failOnce) Generate(ctx context.Context, req *model.Request, d func(model.Delta)) (*model.Response, error) {
	if m.failed.CompareAndSwap(false, true) {
		return nil, errors.New("the provider is down")
	}
	return m.named.Generate(ctx, req, d)
}

// An immediate child spawned but whose run failed is run again by the lead's next run, not
// skipped for having been spawned, and not spawned twice.
func TestImmediateChildRetried(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		f.agent(&agent.Agent{Name: "scout", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "scout"}})
		scout := &failOnce{named: named{&turnModel{turns: []model.Response{{Text: "scouted"}}}, "t:scout"}}
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead",
			Subagents: []agent.Subagent{{Name: "scout", Immediate: &agent.Immediate{Enabled: true}}}}})
		f.ms.add("lead", model.Response{Text: "lead answer"})
		open := f.r.OpenModel
		f.r.OpenModel = func(spec string) (model.Model, error) {
			if spec == "t:scout" {
				return scout, nil
			}
			return open(spec)
		}
		th := f.root(t, lead)
		if _, err := f.r.Run(ctx, th, lead, "go"); err == nil || !strings.Contains(err.Error(), "provider is down") {
			t.Fatalf("the first run: %v, want the scout's failure", err)
		}
		out, err := f.r.Resume(ctx, th, lead)
		if err != nil || out.Text != "lead answer" {
			t.Fatalf("the second run: %+v %v", out, err)
		}
		ks, err := th.Children(ctx)
		if err != nil || len(ks) != 1 || ks[0].Status != store.StatusTerminated {
			t.Fatalf("children %+v %v: want one, finished", ks, err)
		}
		if !strings.Contains(everything(t, f.ms.by["t:lead"].reqs[0]), "scouted") {
			t.Fatal("the lead's step did not get the scout's answer")
		}
	})
}

// A scopedEnv value the child declares secret is read as a secret and stored sealed on the
// child: never as text.
func TestImmediateSecretScopedEnv(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		res := f.resolver(t, true)
		var read atomic.Value
		if err := f.reg.Register(quiver.Func("use_key", "Uses the key.", func(ctx context.Context, _ struct{}) (string, error) {
			v, _ := quiver.Var(ctx, "API_KEY")
			read.Store(v)
			return "used", nil
		}, quiver.WithVariables(quiver.Variable{Name: "API_KEY", Type: quiver.VarSecret, Required: true, Scoped: true}))); err != nil {
			t.Fatal(err)
		}
		f.agent(&agent.Agent{Name: "worker", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "worker", Tools: []string{"use_key"},
			Variables: quiver.Variables{{Name: "API_KEY", Type: quiver.VarSecret, Scoped: true}}}})
		f.ms.add("worker", model.Response{ToolCalls: calls(call("u1", "use_key", `{}`))}, model.Response{Text: "worked"})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"use_key"},
			Subagents: []agent.Subagent{{Name: "worker", Immediate: &agent.Immediate{Enabled: true, NameEnv: "NAMES", ScopedEnv: []string{"API_KEY"}}}}}})
		f.ms.add("lead", model.Response{Text: "lead answer"})
		th := f.root(t, lead)
		setVar(t, res, th, "NAMES", `["w1"]`, false)
		if err := res.Set(ctx, th.WorkspaceID(), quiver.LayerThread, th.ID(), vars.Value{Name: "API_KEY", Value: "sk-live-123", Secret: true}); err != nil {
			t.Fatal(err)
		}
		if out, err := f.r.Run(ctx, th, lead, "go"); err != nil || out.Text != "lead answer" {
			t.Fatalf("run: %+v %v", out, err)
		}
		f.r.Wait()
		if got := read.Load(); got != "sk-live-123" {
			t.Fatalf("the child's tool read %v", got)
		}
		ks := kids(t, th)
		stored, err := st.Variables(ctx, th.WorkspaceID(), store.LayerThread, ks[0].ID())
		if err != nil || len(stored) != 1 || !stored[0].Secret || !stored[0].Scoped || strings.Contains(stored[0].Value, "sk-live") {
			t.Fatalf("the child's value: %+v %v", stored, err)
		}
		for _, req := range f.ms.requests() {
			if strings.Contains(everything(t, req), "sk-live") {
				t.Fatal("a model request carries the secret")
			}
		}
	})
}

// A child that is not resumable but started a non-blocking child of its own stays idle until
// that one reports: the grandchild's result reaches it, and its answer then reaches the lead.
func TestGrandchildResultsReachTheLead(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		writer := f.ms.add("writer", model.Response{Text: "draft ready"})
		writer.block = make(chan struct{})
		f.agent(&agent.Agent{Name: "writer", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "writer"}})
		f.agent(&agent.Agent{Name: "researcher", Type: agent.DualAI, ExposeAsTool: true, Prompt: &agent.Prompt{Name: "researcher",
			Subagents: []agent.Subagent{{Name: "writer", Blocking: new(bool)}}}})
		f.ms.add("researcher", model.Response{ToolCalls: calls(call("w1", "writer", `{"message":"draft"}`))},
			model.Response{Text: "researching"}, model.Response{Text: "research done with the draft"})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"researcher"}}})
		f.ms.add("lead", model.Response{ToolCalls: calls(call("r1", "researcher", `{"message":"go"}`))},
			model.Response{Text: "lead waiting"}, model.Response{Text: "lead final"})
		th := f.root(t, lead)
		if out, err := f.r.Run(ctx, th, lead, "go"); err != nil || out.Text != "lead waiting" {
			t.Fatalf("run: %+v %v", out, err)
		}
		if r := resultOf(t, th, "r1"); r.Text != "researching" {
			t.Fatalf("the researcher's first answer: %+v", r)
		}
		ks := kids(t, th)
		if len(ks) != 1 || ks[0].Info().Status != store.StatusIdle {
			t.Fatalf("the researcher is %v: want idle while its writer works", ks[0].Info().Status)
		}
		close(writer.block)
		f.r.Wait()
		var got int
		for _, m := range history(t, th) {
			if m.Role == store.RoleSystem && strings.Contains(m.Content, "research done with the draft") {
				got++
			}
		}
		if h := history(t, th); got != 1 || h[len(h)-1].Content != "lead final" {
			t.Fatalf("the researcher's later answer reached the lead %d times: %s", got, dump(h))
		}
		if info, _ := ks[0].Refresh(ctx); info.Status != store.StatusTerminated {
			t.Fatalf("the researcher is %s after its writer reported: want terminated", info.Status)
		}
	})
}

// subagent_terminate ends an idle resumable child for good and frees its place under
// maxInstances; a message to it is refused after.
func TestSubagentTerminate(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		f.agent(&agent.Agent{Name: "keeper", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "keeper"}})
		f.ms.add("keeper", model.Response{Text: "kept"}, model.Response{Text: "kept again"})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead",
			Subagents: []agent.Subagent{{Name: "keeper", Resumable: &agent.Resumable{MaxInstances: 1}}}}})
		f.ms.add("lead",
			model.Response{ToolCalls: calls(call("c1", agent.ToolSubagentCreate, `{"agent":"keeper","name":"k1","message":"hold"}`))},
			model.Response{ToolCalls: calls(call("t1", agent.ToolSubagentTerminate, `{"ref":"k1"}`))},
			model.Response{ToolCalls: calls(call("c2", agent.ToolSubagentCreate, `{"agent":"keeper","name":"k2","message":"hold"}`))},
			model.Response{ToolCalls: calls(call("m1", agent.ToolSubagentMessage, `{"ref":"k1","message":"more"}`))},
			model.Response{Text: "done"})
		th := f.root(t, lead)
		if out, err := f.r.Run(ctx, th, lead, "go"); err != nil || out.Text != "done" {
			t.Fatalf("run: %+v %v", out, err)
		}
		if r := resultOf(t, th, "t1"); r.IsError() || !strings.Contains(r.Text, "terminated") {
			t.Fatalf("terminate: %+v", r)
		}
		if r := resultOf(t, th, "c2"); r.IsError() {
			t.Fatalf("a create once k1 was terminated: %+v", r)
		}
		if r := resultOf(t, th, "m1"); !r.IsError() || r.Code != agent.CodeUnknownChild {
			t.Fatalf("a message to the terminated k1: %+v", r)
		}
		ks, _ := th.Children(ctx)
		if len(ks) != 2 || ks[0].Status != store.StatusTerminated || ks[1].Status != store.StatusIdle {
			t.Fatalf("children %+v", ks)
		}
		// The second request (after the create) offered subagent_terminate; the first did not.
		reqs := f.ms.by["t:lead"].reqs
		if offers(reqs[0], agent.ToolSubagentTerminate) || !offers(reqs[1], agent.ToolSubagentTerminate) {
			t.Fatal("subagent_terminate is offered only while a live child exists")
		}
	})
}

func offers(req *model.Request, name string) bool {
	if req.Tools == nil {
		return false
	}
	for _, tl := range req.Tools.Tools {
		if tl.Name == name {
			return true
		}
	}
	return false
}

// A sub-agent's run is traced under the call that started it: its invoke_agent span is a child
// of the parent's execute_tool span, in the same trace, for a blocking child and for a
// non-blocking one whose run goes on after the call has returned.
func TestSubagentSpansNest(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		defer tp.Shutdown(ctx)
		f.r.TracerProvider = tp
		f.agent(&agent.Agent{Name: "researcher", Type: agent.DualAI, ExposeAsTool: true, Prompt: &agent.Prompt{Name: "researcher"}})
		f.ms.add("researcher", model.Response{Text: "found"})
		f.agent(&agent.Agent{Name: "writer", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "writer"}})
		f.ms.add("writer", model.Response{Text: "written"})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"researcher"},
			Subagents: []agent.Subagent{{Name: "writer", Blocking: new(bool)}}}})
		f.ms.add("lead", model.Response{ToolCalls: calls(call("r1", "researcher", `{"message":"a"}`), call("w1", "writer", `{"message":"b"}`))},
			model.Response{Text: "done"}, model.Response{Text: "done again"})
		th := f.root(t, lead)
		if _, err := f.r.Run(ctx, th, lead, "go"); err != nil {
			t.Fatal(err)
		}
		f.r.Wait()
		byName := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			if _, seen := byName[s.Name()]; !seen { // the lead's first run's spans
				byName[s.Name()] = s
			}
		}
		leadRun := byName["invoke_agent lead"]
		for child, tool := range map[string]string{"invoke_agent researcher": "execute_tool researcher", "invoke_agent writer": "execute_tool writer"} {
			c, p := byName[child], byName[tool]
			if c == nil || p == nil || leadRun == nil {
				t.Fatalf("spans %v: want %s under %s", keysOf(byName), child, tool)
			}
			if c.Parent().SpanID() != p.SpanContext().SpanID() || c.SpanContext().TraceID() != leadRun.SpanContext().TraceID() {
				t.Errorf("%s is under %s in trace %s, want under %s (%s) in the lead's trace", child, c.Parent().SpanID(),
					c.SpanContext().TraceID(), tool, p.SpanContext().SpanID())
			}
		}
	})
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Limits a model or a tool could push: an immediate configuration naming more than 100
// instances starts none and fails the run with the reason; a NotifyParent text over the
// message cap is refused, and nothing reaches the parent.
func TestTreeInputLimits(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		res := f.resolver(t, true)
		f.agent(&agent.Agent{Name: "worker", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "worker"}})
		f.ms.add("worker", model.Response{Text: "done"})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead",
			Subagents: []agent.Subagent{{Name: "worker", Immediate: &agent.Immediate{Enabled: true, NameEnv: "NAMES"}}}}})
		f.ms.add("lead", model.Response{Text: "lead answer"})
		th := f.root(t, lead)
		names := make([]string, 101)
		for i := range names {
			names[i] = fmt.Sprintf("w%d", i)
		}
		b, _ := json.Marshal(names)
		setVar(t, res, th, "NAMES", string(b), false)
		if _, err := f.r.Run(ctx, th, lead, "go"); err == nil || !strings.Contains(err.Error(), "over the limit of 100") {
			t.Fatalf("101 immediate instances: %v, want the limit named", err)
		}
		if ks, _ := th.Children(ctx); len(ks) != 0 {
			t.Fatalf("%d children started past the limit", len(ks))
		}

		// NotifyParent: over the cap, refused.
		if err := f.reg.Register(quiver.Func("tell", "Tells the parent.", func(ctx context.Context, in struct {
			N int `json:"n"`
		}) (string, error) {
			return "told", agent.NotifyParent(ctx, strings.Repeat("x", in.N))
		})); err != nil {
			t.Fatal(err)
		}
		f.agent(&agent.Agent{Name: "teller", Type: agent.DualAI, ExposeAsTool: true, Prompt: &agent.Prompt{Name: "teller", Tools: []string{"tell"}}})
		f.ms.add("teller", model.Response{ToolCalls: calls(call("n1", "tell", `{"n":70000}`))}, model.Response{Text: "tried"})
		boss := f.agent(&agent.Agent{Name: "boss", Prompt: &agent.Prompt{Name: "boss", Tools: []string{"teller", "tell"}}})
		f.ms.add("boss", model.Response{ToolCalls: calls(call("t1", "teller", `{"message":"go"}`))}, model.Response{Text: "ok"})
		th2 := f.root(t, boss)
		if _, err := f.r.Run(ctx, th2, boss, "go"); err != nil {
			t.Fatal(err)
		}
		child := kids(t, th2)[0]
		if r := resultOf(t, child, "n1"); !r.IsError() || !strings.Contains(r.Error, "1 to 65536 bytes") {
			t.Fatalf("an oversized notice: %+v", r)
		}
		if q, _ := th2.Queued(ctx); len(q) != 0 {
			t.Fatalf("an oversized notice reached the parent: %d queued", len(q))
		}
		for _, m := range history(t, th2) {
			if m.Role == store.RoleSystem && strings.Contains(m.Content, "says") {
				t.Fatal("an oversized notice reached the parent's history")
			}
		}
	})
}
