package jobs

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

// On SQLite a run starts because it was queued, not because River polls: with River's fetch
// poll set to an hour, twelve runs queued one after another, each as soon as the one before has
// started, all start. Before, River noticed an insert only through a table it polled every
// 50 ms, and ignored one made within 100 ms of the last, which then waited for the fetch poll
// (a second in quiver serve; here, an hour: the test would time out).
func TestSQLiteRunStartsWhenQueued(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, reg := newTools(t)
	cfg := config(st, reg, &stepModel{})
	cfg.pollInterval = 0
	cfg.fetchPoll = time.Hour // only a wake on insert starts a run
	j, err := StartSQLite(context.Background(), path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop(context.Background())
	for i := range 12 {
		th := newThread(t, st)
		if _, err := j.Start(context.Background(), RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", Message: "hi"}); err != nil {
			t.Fatal(err)
		}
		// The run's user message is appended by the run itself: its presence says it started.
		for deadline := time.Now().Add(30 * time.Second); len(history(t, th)) == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("run %d did not start: queued runs wait for River's fetch poll", i+1)
			}
		}
	}
}

// A wake whose first try took the thread's queued messages and was killed mid-step leaves
// the thread marked running with nothing queued; River tries the wake again after the
// restart, and that try must finish the run, not end because the queue is empty (the lead
// of the sub-agent crash test stayed running for good).
func TestWakeFinishesARunACrashCut(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			_, reg := newTools(t)
			cfg := config(b.st, reg, &stepModel{})
			th := newThread(t, b.st)
			ctx := context.Background()
			// What the killed try left: the delivered message taken into the history, the
			// thread marked running, no answer.
			if _, err := th.AppendUser(ctx, "a child's result"); err != nil {
				t.Fatal(err)
			}
			if _, err := th.SetStatus(ctx, store.StatusRunning); err != nil {
				t.Fatal(err)
			}
			j := b.start(t, cfg)
			res, err := j.client.Insert(ctx, WakeArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, j, res.Job.ID, rivertype.JobStateCompleted)
			h := history(t, th)
			info, err := th.Refresh(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if last := h[len(h)-1]; last != "assistant:done" || info.Status != store.StatusIdle {
				t.Fatalf("after the wake the thread is %s with the history %q, want idle and answered", info.Status, h)
			}
			// A wake of an idle thread with nothing queued still runs nothing.
			n := len(h)
			if res, err = j.client.Insert(ctx, WakeArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper"}, nil); err != nil {
				t.Fatal(err)
			}
			waitState(t, j, res.Job.ID, rivertype.JobStateCompleted)
			if h = history(t, th); len(h) != n {
				t.Fatalf("a wake with nothing to take ran the thread: %q", h)
			}
		})
	}
}
