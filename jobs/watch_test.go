package jobs

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store"
)

// A process that records an answer and dies before it queues the run leaves the thread paused
// with the answer stored: the watch queued before the answer finds it and queues the run,
// which acts on the answer once. A watch that finds the thread still waiting (the answer was
// never recorded), or finished, does nothing.
func TestWatchResumesARunLeftPaused(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			_, reg := newTools(t)
			var ran atomic.Int32
			if err := reg.Register(quiver.Func("wipe", "Wipes the disk.", func(context.Context, struct{}) (string, error) { ran.Add(1); return "wiped", nil },
				quiver.WithConfirmation())); err != nil {
				t.Fatal(err)
			}
			cfg := config(b.st, reg, &stepModel{turns: []string{"wipe"}})
			helper := &agent.Agent{Name: "helper", Prompt: &agent.Prompt{Name: "helper", Tools: []string{"wipe"}, Stop: agent.StopRules{MaxSteps: 5}}}
			cfg.Agents = func(context.Context, string) (*agent.Agent, error) { return helper, nil }
			j := b.start(t, cfg)
			th := newThread(t, b.st)
			args := RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", Message: "wipe it"}
			id, err := j.Start(ctx, args)
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, j, id, rivertype.JobStateCompleted)
			w, err := cfg.Runner.Waiting(ctx, th, helper)
			if err != nil || w == nil {
				t.Fatalf("the run did not pause for the confirmation: %v %v", w, err)
			}
			// A watch of a thread still waiting does nothing.
			early, err := j.Watch(ctx, args, 0)
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, j, early, rivertype.JobStateCompleted)
			if info, err := b.st.Thread(ctx, ws, th.ID()); err != nil || info.Status != store.StatusIdle {
				t.Fatalf("the thread after a watch while it waits: %+v %v", info, err)
			}
			// The answer recorded, and the process gone before the run was queued.
			if _, err := j.Watch(ctx, args, 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if err := cfg.Runner.Decide(ctx, th, helper, w.Call.ID, quiver.Decision{Action: quiver.Approve}); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				info, err := b.st.Thread(ctx, ws, th.ID())
				if err != nil {
					t.Fatal(err)
				}
				if st := agent.ReadState(info); info.Status == store.StatusIdle && st.Outcome != nil && st.Outcome.Status == agent.RunFinished {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the thread is %s (%+v) 30s after its watch was due, want finished", info.Status, agent.ReadState(info).Outcome)
				}
				time.Sleep(20 * time.Millisecond)
			}
			// A watch of a finished thread does nothing either.
			late, err := j.Watch(ctx, args, 0)
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, j, late, rivertype.JobStateCompleted)
			if got, want := strings.Join(history(t, th), " | "), "user:wipe it | call:wipe | tool:wipe | assistant:done"; got != want || ran.Load() != 1 {
				t.Errorf("history %q, the tool ran %d times; want %q, once", got, ran.Load(), want)
			}
		})
	}
}
