package quiver_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
)

// event is one thing a tool reported.
type event struct {
	Kind        string // "progress" or "log"
	Done, Total float64
	Level       quiver.LogLevel
	Message     string
	Tool        string // the call the reporter saw in its context
}

type recordingReporter struct {
	mu     sync.Mutex
	events []event
}

func (r *recordingReporter) Progress(ctx context.Context, done, total float64, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{Kind: "progress", Done: done, Total: total, Message: msg, Tool: toolOf(ctx)})
}

func (r *recordingReporter) Log(ctx context.Context, level quiver.LogLevel, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{Kind: "log", Level: level, Message: msg, Tool: toolOf(ctx)})
}

func toolOf(ctx context.Context) string {
	if c := quiver.CallFrom(ctx); c != nil {
		return c.Name
	}
	return ""
}

func TestReportProgressAndLog(t *testing.T) {
	type args struct {
		Steps int `json:"steps"`
	}
	worker := quiver.Func("worker", "Works in steps, reporting progress and logging.",
		func(ctx context.Context, a args) (string, error) {
			key, _ := quiver.Var(ctx, "api_key")
			quiver.Log(ctx, quiver.LogInfo, "starting with key "+key)
			for i := 1; i <= a.Steps; i++ {
				quiver.ReportProgress(ctx, float64(i), float64(a.Steps), "step using "+key)
			}
			quiver.Log(ctx, quiver.LogDebug, "done")
			return "ok", nil
		}, quiver.WithVariables(quiver.Variable{Name: "api_key", Type: quiver.VarSecret, Required: true}))
	reg := newRegistry(t, worker)
	d := &quiver.Dispatcher{Registry: reg, Resolver: quiver.Layered{Thread: quiver.Vars{"api_key": "sk-123"}}}

	cases := []struct {
		name     string
		reporter bool
		steps    int
		want     []event
	}{
		{"no reporter: reports are dropped and the call still succeeds", false, 2, nil},
		{"progress and logs reach the reporter in order, secrets masked", true, 2, []event{
			{Kind: "log", Level: quiver.LogInfo, Message: "starting with key [REDACTED]", Tool: "worker"},
			{Kind: "progress", Done: 1, Total: 2, Message: "step using [REDACTED]", Tool: "worker"},
			{Kind: "progress", Done: 2, Total: 2, Message: "step using [REDACTED]", Tool: "worker"},
			{Kind: "log", Level: quiver.LogDebug, Message: "done", Tool: "worker"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			rep := &recordingReporter{}
			if c.reporter {
				ctx = quiver.WithReporter(ctx, rep)
			}
			r, err := d.Call(ctx, "worker", map[string]int{"steps": c.steps})
			if err != nil {
				t.Fatal(err)
			}
			wantSuccess(t, r)
			if !slices.Equal(rep.events, c.want) {
				t.Errorf("events:\n got %+v\nwant %+v", rep.events, c.want)
			}
		})
	}
}

func TestReportOutsideACall(t *testing.T) {
	rep := &recordingReporter{}
	ctx := quiver.WithReporter(context.Background(), rep)
	quiver.ReportProgress(ctx, 1, 0, "plain")
	quiver.Log(ctx, quiver.LogWarning, "plain")
	want := []event{{Kind: "progress", Done: 1, Message: "plain"}, {Kind: "log", Level: quiver.LogWarning, Message: "plain"}}
	if !slices.Equal(rep.events, want) {
		t.Errorf("events:\n got %+v\nwant %+v", rep.events, want)
	}
}
