package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/store"
)

// holdEnd holds every job between its worker's return and River's record of it, until
// released: the moment a run has ended on its thread while River still has its job running.
type holdEnd struct {
	river.HookDefaults
	ended   chan struct{}
	release chan struct{}
}

func (h *holdEnd) WorkEnd(_ context.Context, _ *rivertype.JobRow, err error) error {
	h.ended <- struct{}{}
	<-h.release
	return err
}

// A run that has ended on its thread does not refuse the next one while River records its
// end: Start waits for it (the client saw the run end) and queues the next; a run whose
// thread is still running is refused at once, as before. On PostgreSQL there is no such
// moment for a run that ends with its answer: its job is completed in the transaction that
// ends the run, before the worker returns, and the next run is queued at once.
func TestStartWaitsForARunThatEnded(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			_, reg := newTools(t)
			hold := &holdEnd{ended: make(chan struct{}, 4), release: make(chan struct{})}
			cfg := config(b.st, reg, &stepModel{turns: []string{"work"}})
			cfg.hooks = []rivertype.Hook{hold}
			j := b.start(t, cfg)
			th := newThread(t, b.st)
			args := RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", MessageID: ids.New("msg"), Message: "work"}
			first, err := j.Start(context.Background(), args)
			if err != nil {
				t.Fatal(err)
			}
			<-hold.ended
			info, err := b.st.Thread(context.Background(), ws, th.ID())
			if err != nil || info.Status != store.StatusIdle {
				t.Fatalf("the thread after its run: %+v, %v; want idle", info, err)
			}
			completedWithRun := b.name == "postgres"
			if row, err := j.client.JobGet(context.Background(), first); err != nil ||
				(row.State == rivertype.JobStateCompleted) != completedWithRun {
				t.Fatalf("the first job as its worker returns: %v, %v; completed with the run: %v", row.State, err, completedWithRun)
			}
			// SQLite: the first job still running in River, its thread idle: refused while held
			// (the wait is bounded), queued once River has recorded the end.
			released := time.AfterFunc(300*time.Millisecond, func() { close(hold.release) })
			defer func() {
				if released.Stop() {
					close(hold.release)
				}
			}()
			again := args
			again.MessageID, again.Message = ids.New("msg"), "again"
			start := time.Now()
			next, err := j.Start(context.Background(), again)
			if err != nil {
				t.Fatalf("a run after the first ended on its thread: %v", err)
			}
			// On PostgreSQL nothing is left to wait for (checked above, not timed here).
			if waited := time.Since(start); !completedWithRun && waited < 250*time.Millisecond {
				t.Errorf("Start returned after %s, before River recorded the first run's end", waited)
			}
			waitState(t, j, first, rivertype.JobStateCompleted)
			waitState(t, j, next, rivertype.JobStateCompleted)
			if got := strings.Count(strings.Join(history(t, th), "|"), "user:"); got != 2 {
				t.Errorf("%d user messages, want 2: %q", got, history(t, th))
			}
		})
	}
}

// A run whose job River holds as running while its thread runs is refused without waiting.
func TestStartRefusesARunningThreadAtOnce(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			tl, reg := newTools(t)
			j := b.start(t, config(b.st, reg, &stepModel{turns: []string{"wait"}}))
			th := newThread(t, b.st)
			args := RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", MessageID: ids.New("msg"), Message: "wait"}
			first, err := j.Start(context.Background(), args)
			if err != nil {
				t.Fatal(err)
			}
			<-tl.started
			defer close(tl.release)
			start := time.Now()
			args.MessageID = ids.New("msg")
			if _, err := j.Start(context.Background(), args); !errors.Is(err, ErrRunQueued) {
				t.Fatalf("a run while the thread runs: %v, want ErrRunQueued", err)
			}
			if waited := time.Since(start); waited > settleWait/2 {
				t.Errorf("refused after %s: a running thread's refusal should not wait", waited)
			}
			_ = first
		})
	}
}
