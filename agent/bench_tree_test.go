package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

// benchLeadModel asks for one call of tool per step until the run has made perRun of them,
// then answers with text. It decides from the request alone (the assistant turns in it) and
// costs next to nothing, so a benchmark measures the runtime. perRun is set before each run.
type benchLeadModel struct {
	tool   string
	perRun int
}

func (m *benchLeadModel) Name() string            { return "bench:lead" }
func (m *benchLeadModel) Dialect() schema.Dialect { return schema.OpenAI }
func (m *benchLeadModel) Generate(_ context.Context, req *model.Request, _ func(model.Delta)) (*model.Response, error) {
	turn := 0
	for _, msg := range req.Messages {
		if msg.Role == model.RoleAssistant {
			turn++
		}
	}
	if turn >= m.perRun {
		return &model.Response{Text: "all done"}, nil
	}
	return &model.Response{ToolCalls: []model.ToolCall{{ID: fmt.Sprintf("call_%d", turn), Name: m.tool,
		Args: json.RawMessage(`{"message":"find x"}`)}}}, nil
}

// benchChildModel answers at once, with text: the child's run is one step. It counts its
// requests, so the benchmark can check that every child ran its model once.
type benchChildModel struct{ asked int }

func (m *benchChildModel) Name() string            { return "bench:child" }
func (m *benchChildModel) Dialect() schema.Dialect { return schema.OpenAI }
func (m *benchChildModel) Generate(_ context.Context, req *model.Request, _ func(model.Delta)) (*model.Response, error) {
	m.asked++
	if n := len(req.Messages); n != 1 || req.Messages[0].Role != model.RoleUser {
		return nil, fmt.Errorf("the child was asked with %d messages, want its one first message", n)
	}
	return &model.Response{Text: "found x"}, nil
}

// BenchmarkBlockingChild measures a blocking dual-AI sub-agent called as a tool (issue 14):
// the lead's model asks for one call of the sub-agent "researcher" per step; each call spawns
// a child thread, runs the child (one model step that answers with text at once) to its end in
// the call, and records its answer as the call's result in the lead's thread. SQLite (WAL,
// synchronous=NORMAL), everything persisted.
//
// per-run=N makes N children in one Run of the lead on a fresh thread (N+1 lead steps: N
// with a call, one that answers); b.N is the number of children, so ns/op is per child and
// includes the lead's step that asked for it (and 1/N of the run's own start and last step).
// per-run=10 is the figure of the target (as BenchmarkLoopStep's runs of 10 steps);
// per-run=1 is one whole Run of the lead per child, the lead's own run included in ns/op;
// per-run=100 shows what a lead with many children pays as they accumulate.
// The p50/p99-µs/call metrics are per child: from the lead's tool_call event to its
// tool_result event (the result persisted), that is spawn + the child's whole run + the
// result recorded in the parent; p50-µs/step is one lead step start to the next (the lead's
// model turn persisted, then the call). BenchmarkPlainToolCall is the same loop with a
// registered Go tool in place of the child, the baseline.
func BenchmarkBlockingChild(b *testing.B) {
	for _, perRun := range []int{10, 1, 100} {
		b.Run(fmt.Sprintf("per-run=%d", perRun), func(b *testing.B) { benchTreeCalls(b, perRun, true) })
	}
}

// BenchmarkPlainToolCall is BenchmarkBlockingChild's loop with a trivial registered Go tool
// ("echo", which returns its message) in place of the sub-agent: the baseline.
func BenchmarkPlainToolCall(b *testing.B) {
	for _, perRun := range []int{10, 1, 100} {
		b.Run(fmt.Sprintf("per-run=%d", perRun), func(b *testing.B) { benchTreeCalls(b, perRun, false) })
	}
}

func benchTreeCalls(b *testing.B, perRun int, child bool) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	reg := &quiver.Registry{}
	echoed := 0
	if err := reg.Register(quiver.Func("echo", "Echoes its message.", func(_ context.Context, in struct {
		Message string `json:"message"`
	}) (string, error) {
		echoed++
		return in.Message, nil
	})); err != nil {
		b.Fatal(err)
	}
	tool, answer := "echo", "find x"
	if child {
		tool, answer = "researcher", "found x"
	}
	lead := &benchLeadModel{tool: tool}
	kid := &benchChildModel{}
	cat := &agent.Catalog{Prompts: map[string]*agent.Prompt{}, Agents: map[string]*agent.Agent{}}
	cat.Agents["researcher"] = &agent.Agent{Name: "researcher", Description: "Finds things.", Type: agent.DualAI, ExposeAsTool: true,
		Prompt: &agent.Prompt{Name: "researcher", Model: "bench:child"}}
	a := &agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Model: "bench:lead", Tools: []string{tool},
		Stop: agent.StopRules{MaxSteps: 1000}}}
	cat.Agents["lead"] = a
	r := &agent.Runner{Store: st, Registry: reg, Catalog: cat, OpenModel: func(spec string) (model.Model, error) {
		switch spec {
		case "bench:lead":
			return lead, nil
		case "bench:child":
			return kid, nil
		}
		return nil, fmt.Errorf("no model %s", spec)
	}}

	// Events are emitted synchronously on the run's goroutine, and runs here are sequential.
	var (
		leadID              string
		calls, steps        []time.Duration
		callStart, stepLast time.Time
		bad                 string
		started, finished   int
	)
	r.Subscribe(func(e agent.Event) {
		if e.ThreadID != leadID {
			return // the child's own events
		}
		switch e.Type {
		case agent.EventStepStarted:
			now := time.Now()
			if e.Step > 1 {
				steps = append(steps, now.Sub(stepLast))
			}
			stepLast = now
		case agent.EventToolCall:
			callStart = time.Now()
		case agent.EventToolResult:
			calls = append(calls, time.Since(callStart))
			if e.Call.Name != tool || e.Result.IsError() || e.Result.Text != answer {
				bad = fmt.Sprintf("call of %s: result %+v", e.Call.Name, e.Result)
			}
		case agent.EventChildStarted:
			started++
		case agent.EventChildFinished:
			finished++
		}
	})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	done, runs := 0, 0
	for done < b.N {
		lead.perRun = min(perRun, b.N-done)
		th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_bench", AgentID: "lead"})
		if err != nil {
			b.Fatal(err)
		}
		leadID = th.ID()
		out, err := r.Run(ctx, th, a, "find things")
		if err != nil {
			b.Fatal(err)
		}
		if out.Steps != lead.perRun+1 || out.Text != "all done" {
			b.Fatalf("run took %d steps, answered %q", out.Steps, out.Text)
		}
		if bad != "" {
			b.Fatal(bad)
		}
		done += lead.perRun
		runs++
	}
	b.StopTimer()
	if len(calls) != done {
		b.Fatalf("%d calls measured for %d", len(calls), done)
	}
	if child {
		if kid.asked != done || started != done || finished != done {
			b.Fatalf("%d children: the child model was asked %d times, %d started, %d finished", done, kid.asked, started, finished)
		}
		checkChildren(b, st, leadID, lead.perRun)
	} else if echoed != done {
		b.Fatalf("echo ran %d times for %d calls", echoed, done)
	}
	b.ReportMetric(float64(runs), "runs")
	report := func(d []time.Duration, unit string) {
		slices.Sort(d)
		if n := len(d); n > 0 {
			b.ReportMetric(float64(d[n/2].Nanoseconds())/1e3, "p50-µs/"+unit)
			b.ReportMetric(float64(d[n*99/100].Nanoseconds())/1e3, "p99-µs/"+unit)
		}
	}
	report(calls, "call")
	if perRun > 1 {
		report(steps, "step")
	}
}

// checkChildren checks that the last lead thread has its children, each terminated and
// holding its first message and its answer.
func checkChildren(b *testing.B, st thread.Store, leadID string, want int) {
	b.Helper()
	ctx := context.Background()
	kids, err := st.Children(ctx, "wsp_bench", leadID)
	if err != nil {
		b.Fatal(err)
	}
	if len(kids) != want {
		b.Fatalf("the last lead thread has %d children, want %d", len(kids), want)
	}
	for _, k := range kids {
		if k.Status != store.StatusTerminated || !k.Blocking || !slices.ContainsFunc(k.Tags, func(t string) bool { return strings.HasPrefix(t, "call:") }) {
			b.Fatalf("child %+v: want a terminated blocking child tagged with its call", k)
		}
		th, err := thread.Open(ctx, st, "wsp_bench", k.ID)
		if err != nil {
			b.Fatal(err)
		}
		h, err := th.History(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(h) != 2 || h[0].Role != store.RoleUser || h[0].Content != "find x" || h[1].Content != "found x" {
			b.Fatalf("child %s history: %d messages", k.ID, len(h))
		}
	}
}
