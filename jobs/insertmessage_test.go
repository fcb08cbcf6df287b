package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
)

// A run refused because the thread has one queued leaves no trace of its message: on
// PostgreSQL the message and the job are written in one transaction (insertWithMessage),
// rolled back with the insert River refuses. (TestStartRecordsTheMessage has a run taken.)
func TestRefusedRunLeavesNoMessage(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			_, reg := newTools(t)
			j := b.start(t, config(b.st, reg, &stepModel{}))
			th := newThread(t, b.st)
			ctx := context.Background()
			// A run queued for later: the thread's lease is free, and River refuses another.
			later, err := j.client.Insert(ctx, RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper"},
				&river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = j.Start(ctx, RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", Message: "refused"})
			if !errors.Is(err, ErrRunQueued) {
				t.Fatalf("a run while one is queued: %v, want ErrRunQueued", err)
			}
			if got := history(t, th); len(got) != 0 {
				t.Errorf("the refused run left %q in the history, want nothing", got)
			}
			if row, err := j.client.JobGet(ctx, later.Job.ID); err != nil || row.State != "scheduled" {
				t.Errorf("the queued run: %v %v, want it scheduled still", row, err)
			}
		})
	}
}

// heldModel answers "done" once released, and says on started that it was asked.
type heldModel struct{ started, release chan struct{} }

func (m *heldModel) Name() string            { return "test:held" }
func (m *heldModel) Dialect() schema.Dialect { return schema.OpenAI }
func (m *heldModel) Generate(ctx context.Context, _ *model.Request, _ func(model.Delta)) (*model.Response, error) {
	m.started <- struct{}{}
	select {
	case <-m.release:
		return &model.Response{Text: "done"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// updateCounter is a PostgreSQL store that counts the thread updates made through it (not
// those made in a transaction of the caller's, as the queue's).
type updateCounter struct {
	*postgres.Store
	updates atomic.Int32
}

func (s *updateCounter) UpdateThread(ctx context.Context, workspaceID, threadID string, fn func(*store.Thread) error) (*store.Thread, error) {
	s.updates.Add(1)
	return s.Store.UpdateThread(ctx, workspaceID, threadID, fn)
}

// On PostgreSQL a run queued with its message marks its thread running, with the caller it
// is entitled as, in the transaction that queues it: the thread reads as running once Start
// returns, and the run writes no mark of its own when it begins; its end clears the mark.
func TestQueuedRunMarksItsThreadWithItsJob(t *testing.T) {
	for _, b := range backends(t) {
		if b.name != "postgres" {
			continue // one process serves SQLite: the run marks its thread as it begins
		}
		t.Run(b.name, func(t *testing.T) {
			st := &updateCounter{Store: b.st.(*postgres.Store)}
			m := &heldModel{started: make(chan struct{}, 1), release: make(chan struct{})}
			_, reg := newTools(t)
			j := b.start(t, config(st, reg, m))
			th := newThread(t, st)
			ctx := context.Background()
			caller := json.RawMessage(`{"user":"ann"}`)
			id, err := j.Start(ctx, RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", Message: "greet", Caller: caller})
			if err != nil {
				t.Fatal(err)
			}
			marked := func() (store.Thread, agent.ThreadState) {
				info, err := th.Refresh(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return info, agent.ReadState(&info)
			}
			if info, state := marked(); info.Status != store.StatusRunning || !state.Queued || string(state.Caller) != string(caller) {
				t.Fatalf("once Start returned: status %s, state %s; want running, queued, the caller kept", info.Status, info.State)
			}
			select {
			case <-m.started:
			case <-time.After(30 * time.Second):
				t.Fatal("the run did not begin within 30s")
			}
			if info, state := marked(); info.Status != store.StatusRunning || !state.Queued {
				t.Errorf("while the run works: status %s, state %s", info.Status, info.State)
			}
			close(m.release)
			waitState(t, j, id, rivertype.JobStateCompleted)
			info, state := marked()
			if info.Status != store.StatusIdle || state.Queued || state.Outcome == nil || state.Outcome.Text != "done" {
				t.Errorf("after the run: status %s, state %s", info.Status, info.State)
			}
			if n := st.updates.Load(); n != 0 {
				t.Errorf("the run updated its thread %d times; want none (marked with its job, ended with its answer)", n)
			}
		})
	}
}

// A wake finds nothing to do on a thread marked running as its run was queued: that run takes
// the queue, as the agent and the caller it was queued for. A thread running without the mark
// was left so by a crash, and is run.
func TestWakeLeavesAQueuedRunItsThread(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := config(b.st, nil, &stepModel{})
			w := &runWorker{cfg: &cfg}
			for _, tc := range []struct {
				name    string
				mark    func(*store.Thread) error
				queue   bool
				nothing bool
			}{
				{"queued run, message queued", func(t *store.Thread) error { return agent.MarkQueued(t, nil) }, true, true},
				{"idle, message queued", func(*store.Thread) error { return nil }, true, false},
				{"left running by a crash", func(t *store.Thread) error { t.Status = store.StatusRunning; return nil }, false, false},
				{"idle, nothing queued", func(*store.Thread) error { return nil }, false, true},
			} {
				th := newThread(t, b.st)
				if _, err := th.Update(ctx, tc.mark); err != nil {
					t.Fatal(err)
				}
				if tc.queue {
					if err := th.Queue(ctx, &store.Message{Role: store.RoleUser, Content: "and this"}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := th.Refresh(ctx); err != nil {
					t.Fatal(err)
				}
				if nothing, err := w.nothingToWake(ctx, th); err != nil || nothing != tc.nothing {
					t.Errorf("%s: nothing to wake %v, %v; want %v", tc.name, nothing, err, tc.nothing)
				}
			}
		})
	}
}

// A wake looks at its thread with the thread's lease held. On PostgreSQL the runner takes the
// lease for the run, so the wake takes it for its look: read before, the thread of a run still
// going on (marked as queued, agent.MarkQueued) would send the wake away, while that run ends
// without the message queued since. Here a holder of the lease plays that run: the wake must
// wait for it, then find the thread idle with a message queued, and run it.
func TestWakeLooksWithTheLeaseHeld(t *testing.T) {
	for _, b := range backends(t) {
		if b.name != "postgres" {
			continue // one process serves SQLite: the worker takes the lease itself, before it looks
		}
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			_, reg := newTools(t)
			cfg := config(b.st, reg, &stepModel{})
			j := b.start(t, cfg)
			th := newThread(t, b.st)
			if _, err := th.Update(ctx, func(t *store.Thread) error { return agent.MarkQueued(t, nil) }); err != nil {
				t.Fatal(err)
			}
			release, ok, err := cfg.Runner.Lease.Acquire(ctx, th.ID())
			if err != nil || !ok {
				t.Fatalf("taking the lease: %v %v", ok, err)
			}
			if err := th.Queue(ctx, &store.Message{Role: store.RoleUser, Content: "and this"}); err != nil {
				t.Fatal(err)
			}
			if _, err := j.client.Insert(ctx, WakeArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper"}, nil); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // the wake's worker has looked by now, were it not waiting
			// The run the holder plays ends: idle, its mark gone, the message left queued.
			if _, err := th.Update(ctx, func(t *store.Thread) error { t.Status, t.State = store.StatusIdle, nil; return nil }); err != nil {
				t.Fatal(err)
			}
			release()
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				h := history(t, th)
				if len(h) >= 2 && h[0] == "user:and this" && strings.HasPrefix(h[len(h)-1], "assistant:") {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the wake did not run the thread within 20s of the lease's release: %q", h)
				}
			}
		})
	}
}

// A wake asked for without an agent (a child's result reached a thread created without one
// while its first run went on, before that run recorded its agent) runs the thread as the
// agent its last run ended with, read when the wake looks, rather than failing it for an
// agent named "".
func TestWakeWithoutAnAgentRunsAsTheLastRun(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			_, reg := newTools(t)
			j := b.start(t, config(b.st, reg, &stepModel{}))
			th := newThread(t, b.st)
			if _, err := th.Update(ctx, func(t *store.Thread) error {
				t.State = json.RawMessage(`{"status":"finished","reason":"no_calls","ran_by":"helper"}`)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := th.Queue(ctx, &store.Message{Role: store.RoleUser, Content: "and this"}); err != nil {
				t.Fatal(err)
			}
			if _, err := j.client.Insert(ctx, WakeArgs{WorkspaceID: ws, ThreadID: th.ID()}, nil); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				h := history(t, th)
				if len(h) >= 2 && h[0] == "user:and this" && strings.HasPrefix(h[len(h)-1], "assistant:") {
					break
				}
				if time.Now().After(deadline) {
					info, _ := th.Refresh(ctx)
					t.Fatalf("the wake did not run the thread within 20s: %q, state %s", h, info.State)
				}
			}
			info, err := th.Refresh(ctx)
			if st := agent.ReadState(&info); err != nil || st.RanBy != "helper" || st.Outcome == nil || st.Outcome.Status != agent.RunFinished {
				t.Errorf("after the wake: %s, %v", info.State, err)
			}
		})
	}
}
