package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

// stepsModel calls "add" once per turn until it has made steps calls, then answers. It costs
// next to nothing, so a benchmark measures the loop.
type stepsModel struct{ steps int }

func (m stepsModel) Name() string            { return "bench:steps" }
func (m stepsModel) Dialect() schema.Dialect { return schema.OpenAI }
func (m stepsModel) Generate(_ context.Context, req *model.Request, _ func(model.Delta)) (*model.Response, error) {
	turn := (len(req.Messages) - 1) / 2 // user, then (assistant, tool) per turn
	if turn >= m.steps {
		return &model.Response{Text: "done"}, nil
	}
	return &model.Response{ToolCalls: []model.ToolCall{{ID: fmt.Sprintf("call_%d", turn), Name: "add",
		Args: json.RawMessage(`{"a":1,"b":2}`)}}}, nil
}

// BenchmarkLoopStep measures the loop's overhead per step with a model that answers at once and
// SQLite (WAL, synchronous=NORMAL), one tool call per step, everything persisted: the model's
// turn, the call, its result. Runs are 10 steps on a fresh thread; ns/op is per step, and the
// p50/p99 metrics are per step too (from one step's start to the next's).
func BenchmarkLoopStep(b *testing.B) {
	const stepsPerRun = 10
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	reg := &quiver.Registry{}
	// The handler counts its calls: every step's call must be valid and run, so that the
	// benchmark measures the loop's path, not an invalid-arguments answer.
	ran := 0
	if err := reg.Register(quiver.Func("add", "Adds.", func(_ context.Context, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		ran++
		return in.A + in.B, nil
	})); err != nil {
		b.Fatal(err)
	}
	r := &agent.Runner{Store: st, Registry: reg, Model: stepsModel{steps: stepsPerRun}}
	a := &agent.Agent{Name: "bench", Prompt: &agent.Prompt{Name: "bench", Tools: []string{"add"}, Stop: agent.StopRules{MaxSteps: 100}}}
	var durations []time.Duration
	var last time.Time
	r.Subscribe(func(e agent.Event) {
		switch e.Type {
		case agent.EventStepStarted:
			now := time.Now()
			if e.Step > 1 {
				durations = append(durations, now.Sub(last))
			}
			last = now
		}
	})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	steps := 0
	for steps < b.N {
		th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_bench"})
		if err != nil {
			b.Fatal(err)
		}
		out, err := r.Run(ctx, th, a, "add things")
		if err != nil {
			b.Fatal(err)
		}
		if out.Steps != stepsPerRun+1 {
			b.Fatalf("run took %d steps", out.Steps)
		}
		steps += stepsPerRun + 1
		if ran != steps/(stepsPerRun+1)*stepsPerRun {
			b.Fatalf("the tool ran %d times in %d steps: the model's calls were refused", ran, steps)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/step")
	slices.Sort(durations)
	if n := len(durations); n > 0 {
		b.ReportMetric(float64(durations[n/2].Nanoseconds())/1e3, "p50-µs/step")
		b.ReportMetric(float64(durations[n*99/100].Nanoseconds())/1e3, "p99-µs/step")
	}
}
