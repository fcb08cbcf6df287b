package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/internal/backendtest"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// executions counts how often each call's handler started, by the call's "id" argument.
type executions struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *executions) add(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]int{}
	}
	e.n[id]++
}

func (e *executions) get(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[id]
}

// resultsByCall returns, for every call made in the thread, the results stored for it.
func resultsByCall(t *testing.T, th *thread.Thread) (calls []store.ToolCall, results map[string][]*store.Message) {
	t.Helper()
	hist, err := th.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	results = map[string][]*store.Message{}
	for _, m := range hist {
		calls = append(calls, m.ToolCalls...)
		if m.Role == store.RoleTool {
			results[m.ToolCallID] = append(results[m.ToolCallID], m)
		}
	}
	return calls, results
}

// X2, X3: a run cancelled while a tool runs stores that call's result (cancelled) before it
// stops, so Resume goes on after it and never runs it again.
func TestCancelledCallIsRecordedAndNotRunAgain(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		var runs executions
		started := make(chan struct{}, 1)
		reg := &quiver.Registry{}
		if err := reg.Register(quiver.Func("wait", "Waits until cancelled.", func(ctx context.Context, in struct {
			ID string `json:"id"`
		}) (string, error) {
			runs.add(in.ID)
			started <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		})); err != nil {
			t.Fatal(err)
		}
		m := &turnModel{turns: []model.Response{
			{ToolCalls: calls(call("w1", "wait", `{"id":"w1"}`))},
			{Text: "resumed"},
		}}
		th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_test"})
		if err != nil {
			t.Fatal(err)
		}
		r := &agent.Runner{Store: st, Registry: reg, Model: m, Grace: time.Second}
		ag := &agent.Agent{Name: "a", Prompt: &agent.Prompt{Name: "p", Tools: []string{"wait"}}}
		cctx, cancel := context.WithCancel(ctx)
		go func() { <-started; cancel() }()
		if _, err := r.Run(cctx, th, ag, "go"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		_, results := resultsByCall(t, th)
		if got := results["w1"]; len(got) != 1 || got[0].Result == nil || got[0].Result.Code != string(quiver.CodeCancelled) {
			t.Fatalf("after the cancel, call w1 has results %+v; want one, cancelled", got)
		}
		out, err := r.Resume(ctx, th, ag)
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != agent.RunFinished || out.Text != "resumed" {
			t.Fatalf("Resume = %+v", out)
		}
		if n := runs.get("w1"); n != 1 {
			t.Fatalf("the cancelled call ran %d times, want 1", n)
		}
	})
}

// X2, X3 under fire: runs cancelled at random points (while the model answers, while a tool
// runs, between calls, while results are stored) and resumed until done. Every call the model
// made ran exactly once and has exactly one result.
func TestRandomCancellationsRunEveryCallExactlyOnce(t *testing.T) {
	const steps, perStep = 12, 3
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		var runs executions
		reg := &quiver.Registry{}
		if err := reg.Register(quiver.Func("work", "Works a little.", func(ctx context.Context, in struct {
			ID string `json:"id"`
		}) (string, error) {
			runs.add(in.ID)
			select {
			case <-time.After(time.Duration(rand.IntN(3000)) * time.Microsecond):
				return "did " + in.ID, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})); err != nil {
			t.Fatal(err)
		}
		var turns []model.Response
		for s := range steps {
			var cs []model.ToolCall
			for i := range perStep {
				id := fmt.Sprintf("c%d_%d", s, i)
				cs = append(cs, call(id, "work", fmt.Sprintf(`{"id":%q}`, id)))
			}
			turns = append(turns, model.Response{ToolCalls: cs})
		}
		turns = append(turns, model.Response{Text: "all done"})
		m := &turnModel{turns: turns}
		th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_test"})
		if err != nil {
			t.Fatal(err)
		}
		r := &agent.Runner{Store: st, Registry: reg, Model: m, Grace: time.Second}
		ag := &agent.Agent{Name: "a", Prompt: &agent.Prompt{Name: "p", Tools: []string{"work"}, Stop: agent.StopRules{MaxSteps: 100}}}
		var out *agent.Outcome
		cancels, stalled, stored := 0, 0, 0
		for attempt := 0; attempt < 500 && (out == nil || out.Status != agent.RunFinished); attempt++ {
			// Most runs are cut within a few milliseconds. Each attempt that stored nothing
			// doubles the window of the next (every second one), so that the run finishes on
			// any machine: a slow one (the race detector on one busy core) needs longer than
			// a few milliseconds for a step, and a fixed window never let it make one.
			window := 4 * time.Millisecond << min(stalled/2, 12)
			if attempt%4 == 3 {
				window *= 15
			}
			cctx, cancel := context.WithCancel(ctx)
			timer := time.AfterFunc(rand.N(window), cancel)
			if attempt == 0 {
				out, err = r.Run(cctx, th, ag, "start")
			} else {
				out, err = r.Resume(cctx, th, ag)
			}
			timer.Stop()
			cancel()
			switch {
			case errors.Is(err, context.Canceled):
				cancels++
				out = nil
				if attempt == 0 {
					// The first run may have been cancelled before it stored the message.
					if hist, _ := th.History(ctx); len(hist) == 0 {
						attempt = -1
					}
				}
			case err != nil:
				t.Fatalf("attempt %d: %v", attempt, err)
			}
			if hist, _ := th.History(ctx); len(hist) > stored {
				stored, stalled = len(hist), 0
			} else {
				stalled++
			}
		}
		if out == nil || out.Status != agent.RunFinished || out.Text != "all done" {
			t.Fatalf("the run did not finish after the cancellations: %+v", out)
		}
		if cancels == 0 {
			t.Fatal("no run was cancelled: the test proved nothing")
		}
		made, results := resultsByCall(t, th)
		if len(made) != steps*perStep {
			t.Fatalf("the thread holds %d calls, want %d", len(made), steps*perStep)
		}
		for _, c := range made {
			var args struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(thread.CallArgs(c.Args), &args)
			if n := runs.get(args.ID); n != 1 {
				t.Errorf("call %s ran %d times, want exactly 1", args.ID, n)
			}
			if n := len(results[c.ID]); n != 1 {
				t.Errorf("call %s has %d results, want exactly 1", c.ID, n)
			}
		}
		t.Logf("%d runs cancelled at random points, %d calls checked", cancels, len(made))
	})
}

// X8: a BeforeStore hook that drops a result leaves the call answered in the thread (a
// placeholder, so the next model request is valid), and the call is never run again.
func TestDroppedResultIsAnsweredAndNotRunAgain(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		var runs executions
		reg := &quiver.Registry{}
		if err := reg.Register(quiver.Func("lookup", "Looks something up.", func(_ context.Context, in struct {
			ID string `json:"id"`
		}) (string, error) {
			runs.add(in.ID)
			return "private details of " + in.ID, nil
		})); err != nil {
			t.Fatal(err)
		}
		m := &turnModel{turns: []model.Response{
			{ToolCalls: calls(call("l1", "lookup", `{"id":"l1"}`))},
			{Text: "answered"},
		}}
		th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_test"})
		if err != nil {
			t.Fatal(err)
		}
		var seen string
		r := &agent.Runner{Store: st, Registry: reg, Model: m, Hooks: quiver.Hooks{
			BeforeStore: func(_ context.Context, _ *quiver.Call, res *quiver.Result) (*quiver.Result, bool) {
				seen = res.Text
				return nil, false
			}}}
		ag := &agent.Agent{Name: "a", Prompt: &agent.Prompt{Name: "p", Tools: []string{"lookup"}}}
		out, err := r.Run(ctx, th, ag, "go")
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != agent.RunFinished || out.Text != "answered" {
			t.Fatalf("Run = %+v", out)
		}
		if seen != "private details of l1" {
			t.Fatalf("the hook saw %q", seen)
		}
		// The second request answers the call, without the withheld text.
		req := m.lastRequest()
		var answered bool
		for _, msg := range req.Messages {
			if msg.Role == model.RoleTool && msg.ToolCallID == "l1" {
				answered = true
				if strings.Contains(msg.Text, "private") || !strings.Contains(msg.Text, "withheld") {
					t.Errorf("the model was sent %q for the dropped result", msg.Text)
				}
			}
		}
		if !answered {
			t.Fatalf("the model request left call l1 unanswered: %+v", req.Messages)
		}
		_, results := resultsByCall(t, th)
		if got := results["l1"]; len(got) != 1 || strings.Contains(got[0].Content, "private") {
			t.Fatalf("stored for l1: %+v", got)
		}
		if _, err := r.Resume(ctx, th, ag); err != nil {
			t.Fatal(err)
		}
		if n := runs.get("l1"); n != 1 {
			t.Fatalf("the call whose result was dropped ran %d times, want 1", n)
		}
	})
}
