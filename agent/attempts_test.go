package agent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/thread"
)

// attemptsFixture is a runner whose tools record the execution state each execution sees:
// "effect" runs at once, "charge" needs a person's confirmation, "locate" runs in the client.
// A tool whose call and attempt are in crashAt cancels its run as a process handing the run
// on would (quiver.WithHandBack) and stops before its result is stored: what a crash in the
// middle of the call leaves.
type attemptsFixture struct {
	th *thread.Thread
	r  *agent.Runner
	a  *agent.Agent

	mu      sync.Mutex
	seen    []quiver.Execution
	crashAt map[string]int // call id -> the attempt that crashes
	cancel  context.CancelFunc
}

func newAttemptsFixture(t *testing.T, st backendtest.Store, turns ...model.Response) *attemptsFixture {
	t.Helper()
	f := &attemptsFixture{crashAt: map[string]int{}}
	tool := func(ctx context.Context, _ struct{}) (string, error) {
		e, _ := quiver.ExecutionFrom(ctx)
		f.mu.Lock()
		f.seen = append(f.seen, e)
		crash := f.crashAt[e.CallID] == e.Attempt
		cancel := f.cancel
		f.mu.Unlock()
		if crash {
			cancel()
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "done", nil
	}
	reg := &quiver.Registry{}
	locate, err := quiver.NewTool(quiver.Spec{Name: "locate", Description: "Where the user is.", Target: quiver.TargetClient}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(
		quiver.Func("effect", "Has an external effect.", tool),
		quiver.Func("charge", "Charges a card.", tool, quiver.WithConfirmation()),
		locate,
	); err != nil {
		t.Fatal(err)
	}
	f.th, err = thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_test"})
	if err != nil {
		t.Fatal(err)
	}
	f.r = &agent.Runner{Store: st, Registry: reg, Model: &turnModel{turns: turns}}
	f.a = &agent.Agent{Name: "a", Prompt: &agent.Prompt{Name: "p", Tools: []string{"effect", "charge", "locate"},
		Stop: agent.StopRules{MaxSteps: 10}}}
	return f
}

// run runs (message set) or resumes the thread in a context that a crashing tool cancels.
func (f *attemptsFixture) run(message string) (*agent.Outcome, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f.mu.Lock()
	f.cancel = cancel
	f.mu.Unlock()
	if message != "" {
		return f.r.Run(quiver.WithHandBack(cctx), f.th, f.a, message)
	}
	return f.r.Resume(quiver.WithHandBack(cctx), f.th, f.a)
}

// executions returns what the executions saw so far, as "call#attempt", and forgets them.
func (f *attemptsFixture) executions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.seen {
		out = append(out, fmt.Sprintf("%s#%d", e.CallID, e.Attempt))
	}
	f.seen = nil
	return out
}

// finished checks that the run finished, every call has one result, and the thread keeps no
// attempt count (counts are kept only for calls without a result).
func (f *attemptsFixture) finished(t *testing.T, out *agent.Outcome, err error) {
	t.Helper()
	if err != nil || out == nil || out.Status != agent.RunFinished {
		t.Fatalf("the run ended with %+v, %v; want it finished", out, err)
	}
	made, results := resultsByCall(t, f.th)
	for _, c := range made {
		if n := len(results[c.ID]); n != 1 {
			t.Errorf("call %s has %d results, want 1", c.ID, n)
		}
	}
	info, err := f.th.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := agent.ReadState(&info).Attempts; len(n) != 0 {
		t.Errorf("the finished thread keeps attempt counts %v", n)
	}
}

func wantExecutions(t *testing.T, when string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: executions %v, want %v", when, got, want)
	}
}

// The calls of a run's own steps are first attempts, with the call's id; counting them writes
// nothing to the thread.
func TestRunsGiveEachCallItsIdAndAttemptOne(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		f := newAttemptsFixture(t, st,
			model.Response{ToolCalls: calls(call("e1", "effect", `{}`), call("e2", "effect", `{}`))},
			model.Response{ToolCalls: calls(call("e3", "effect", `{}`))},
			model.Response{Text: "done"})
		out, err := f.run("go")
		f.finished(t, out, err)
		wantExecutions(t, "one run", f.executions(), "e1#1", "e2#1", "e3#1")
	})
}

// A call left without a result by a run that died while it ran is executed again by the run
// that resumes the thread, with the same id and the next attempt number; the calls after it in
// its turn, which the dead run may have reached, count an attempt too. Dying again counts
// again.
func TestResumedCallsAreLaterAttemptsOfTheSameCall(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		f := newAttemptsFixture(t, st,
			model.Response{ToolCalls: calls(call("c1", "effect", `{}`), call("c2", "effect", `{}`))},
			model.Response{Text: "done"})
		f.crashAt["c1"] = 1
		if _, err := f.run("go"); !errors.Is(err, context.Canceled) {
			t.Fatalf("the run whose tool crashed ended with %v", err)
		}
		wantExecutions(t, "the run that crashed", f.executions(), "c1#1")
		f.crashAt["c1"] = 2
		if _, err := f.run(""); !errors.Is(err, context.Canceled) {
			t.Fatalf("the resumed run whose tool crashed ended with %v", err)
		}
		wantExecutions(t, "the resume that crashed", f.executions(), "c1#2")
		out, err := f.run("")
		f.finished(t, out, err)
		wantExecutions(t, "the resume that finished", f.executions(), "c1#3", "c2#3")
	})
}

// A call stored in the thread without a result, by whatever wrote it, may have been started:
// the run that finds it makes attempt 2.
func TestAPendingCallFoundInTheThreadIsASecondAttempt(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		f := newAttemptsFixture(t, st, model.Response{Text: "unused"}, model.Response{Text: "done"})
		if _, err := f.th.AppendUser(ctx, "go"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.th.AppendAssistant(ctx, "", []quiver.Call{{ID: "p1", Name: "effect"}}); err != nil {
			t.Fatal(err)
		}
		out, err := f.run("")
		f.finished(t, out, err)
		wantExecutions(t, "the resume", f.executions(), "p1#2")
	})
}

// A run that pauses for a person's decision or a client's result started none of the calls
// still waiting: approved (or once the client's result is in), they are first attempts, however
// often the thread was resumed before. Once an approved call has started, a crash makes its
// next execution attempt 2.
func TestCallsPausedBeforeTheyRanAreFirstAttempts(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		t.Run("confirmation", func(t *testing.T) {
			f := newAttemptsFixture(t, st,
				model.Response{ToolCalls: calls(call("k1", "charge", `{}`), call("k2", "effect", `{}`))},
				model.Response{Text: "done"})
			paused(t, f, "go", agent.ReasonConfirmation)
			paused(t, f, "", agent.ReasonConfirmation) // resumed without a decision: waits again
			if err := f.r.Decide(ctx, f.th, f.a, "k1", quiver.Decision{Action: quiver.Approve}); err != nil {
				t.Fatal(err)
			}
			out, err := f.run("")
			f.finished(t, out, err)
			wantExecutions(t, "after the approval", f.executions(), "k1#1", "k2#1")
		})
		t.Run("client result", func(t *testing.T) {
			f := newAttemptsFixture(t, st,
				model.Response{ToolCalls: calls(call("g1", "locate", `{}`), call("g2", "effect", `{}`))},
				model.Response{Text: "done"})
			paused(t, f, "go", agent.ReasonClientTool)
			paused(t, f, "", agent.ReasonClientTool)
			if err := f.r.SubmitResult(ctx, f.th, f.a, "g1", quiver.Text("Paris")); err != nil {
				t.Fatal(err)
			}
			out, err := f.run("")
			f.finished(t, out, err)
			wantExecutions(t, "after the client's result", f.executions(), "g2#1")
		})
		t.Run("approved, then a crash while it ran", func(t *testing.T) {
			f := newAttemptsFixture(t, st,
				model.Response{ToolCalls: calls(call("k1", "charge", `{}`))},
				model.Response{Text: "done"})
			paused(t, f, "go", agent.ReasonConfirmation)
			if err := f.r.Decide(ctx, f.th, f.a, "k1", quiver.Decision{Action: quiver.Approve}); err != nil {
				t.Fatal(err)
			}
			f.crashAt["k1"] = 1
			if _, err := f.run(""); !errors.Is(err, context.Canceled) {
				t.Fatalf("the run whose tool crashed ended with %v", err)
			}
			out, err := f.run("")
			f.finished(t, out, err)
			wantExecutions(t, "approved, crashed, resumed", f.executions(), "k1#1", "k1#2")
		})
	})
}

func paused(t *testing.T, f *attemptsFixture, message string, reason agent.Reason) {
	t.Helper()
	out, err := f.run(message)
	if err != nil || out.Status != agent.RunPaused || out.Reason != reason {
		t.Fatalf("want a run paused for %s, got %+v, %v", reason, out, err)
	}
	if got := f.executions(); len(got) != 0 {
		t.Fatalf("a paused run executed %v", got)
	}
}
