package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// endingStore is a backend that counts the thread updates and final appends a run makes, and
// fails the next final append when told to.
type endingStore struct {
	backendtest.Store
	updates, finals atomic.Int32
	failNext        atomic.Bool
	// sends makes the transaction that ends a run send the events it is offered
	// (agent.Announced), as a fleet's relay does; offered keeps what each end was offered.
	sends   bool
	offered [][]agent.Event
}

var errLostCommit = errors.New("the database went away")

func (s *endingStore) UpdateThread(ctx context.Context, workspaceID, threadID string, fn func(*store.Thread) error) (*store.Thread, error) {
	s.updates.Add(1)
	return s.Store.UpdateThread(ctx, workspaceID, threadID, fn)
}

func (s *endingStore) AppendPeek(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) (bool, error) {
	return s.Store.(store.QueuePeeker).AppendPeek(ctx, workspaceID, threadID, msgs...)
}

func (s *endingStore) AppendFinal(ctx context.Context, workspaceID, threadID string, fn func(*store.Thread) error, msgs ...*store.Message) (*store.Thread, bool, error) {
	s.finals.Add(1)
	if s.failNext.Swap(false) {
		return nil, false, errLostCommit
	}
	end := func(t *store.Thread) error {
		if err := fn(t); err != nil {
			return err
		}
		events, sent := agent.Announced(ctx, threadID)
		s.offered = append(s.offered, events)
		if s.sends && sent != nil {
			sent()
		}
		return nil
	}
	return s.Store.(store.FinalAppender).AppendFinal(ctx, workspaceID, threadID, end, msgs...)
}

// answersModel answers each request with the next of its texts, and first calls before (with
// the request's number) when set.
type answersModel struct {
	texts  []string
	asked  int
	before func(n int) error
}

func (m *answersModel) Name() string            { return "test:answers" }
func (m *answersModel) Dialect() schema.Dialect { return schema.OpenAI }
func (m *answersModel) Generate(context.Context, *model.Request, func(model.Delta)) (*model.Response, error) {
	n := m.asked
	m.asked++
	if m.before != nil {
		if err := m.before(n); err != nil {
			return nil, err
		}
	}
	return &model.Response{Text: m.texts[min(n, len(m.texts)-1)]}, nil
}

func finalFixture(t *testing.T, st backendtest.Store, m model.Model) (*endingStore, *agent.Runner, *agent.Agent, *thread.Thread, *[]agent.Event) {
	t.Helper()
	es := &endingStore{Store: st}
	r := &agent.Runner{Store: es, Registry: &quiver.Registry{}, Model: m}
	var events []agent.Event
	r.Subscribe(func(e agent.Event) { events = append(events, e) })
	th, err := thread.Create(context.Background(), es, thread.Options{WorkspaceID: "wsp_final"})
	if err != nil {
		t.Fatal(err)
	}
	return es, r, &agent.Agent{Name: "final", Prompt: &agent.Prompt{Name: "final"}}, th, &events
}

func contents(t *testing.T, th *thread.Thread) []string {
	t.Helper()
	hist, err := th.History(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range hist {
		out = append(out, m.Content)
	}
	return out
}

func types(events []agent.Event) []agent.EventType {
	var out []agent.EventType
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}

// TestRunEndsWithItsAnswerInOneWrite: the answer that ends a run and the run's end on the
// thread (idle, its outcome) are one write; the run's other write is the mark that it runs.
// The model's turn is announced after that write, then the run's end.
func TestRunEndsWithItsAnswerInOneWrite(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		ctx := context.Background()
		es, r, a, th, events := finalFixture(t, st, &answersModel{texts: []string{"done"}})
		out, err := r.Run(ctx, th, a, "start")
		if err != nil || out.Text != "done" || out.Steps != 1 || out.Reason != agent.ReasonNoCalls {
			t.Fatalf("Run = %+v, %v", out, err)
		}
		if u, f := es.updates.Load(), es.finals.Load(); u != 1 || f != 1 {
			t.Errorf("the run updated the thread %d times and ended it with its answer %d times; want 1 (running) and 1", u, f)
		}
		info, err := th.Refresh(ctx)
		if err != nil || info.Status != store.StatusIdle || info.StepCount != 1 {
			t.Fatalf("thread after the run: %+v, %v", info, err)
		}
		if st := agent.ReadState(&info); st.Outcome == nil || st.Outcome.Text != "done" || st.RanBy != "final" {
			t.Errorf("the outcome recorded: %+v", st)
		}
		if got := contents(t, th); !slices.Equal(got, []string{"start", "done"}) {
			t.Errorf("history %q", got)
		}
		got := types(*events)
		if n := len(got); n < 2 || got[n-2] != agent.EventModelTurn || got[n-1] != agent.EventFinished {
			t.Errorf("events %v: want the model's turn, then the run's end, last", got)
		}
	})
}

// TestRunQueuedMarkedRunningWritesNoMark: a thread marked running as its run was queued
// (agent.MarkQueued, in the queue's transaction) is not marked again when the run begins,
// unless the run is entitled as another caller than the mark kept; the run's end clears the
// mark. A terminated thread is not marked.
func TestRunQueuedMarkedRunningWritesNoMark(t *testing.T) {
	for _, tc := range []struct {
		name          string
		marked, asRun string // the caller the mark keeps, the one the run comes with
		updates       int32
	}{
		{name: "same caller", marked: `{"user":"ann"}`, asRun: `{"user": "ann"}`, updates: 0},
		{name: "no caller", updates: 0},
		{name: "another caller", marked: `{"user":"ann"}`, asRun: `{"user":"bob"}`, updates: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
				ctx := context.Background()
				es, r, a, th, _ := finalFixture(t, st, &answersModel{texts: []string{"done"}})
				if _, err := th.Update(ctx, func(x *store.Thread) error { return agent.MarkQueued(x, callerOrNil(tc.marked)) }); err != nil {
					t.Fatal(err)
				}
				th, err := thread.Open(ctx, es, th.WorkspaceID(), th.ID()) // as the run's job opens it
				if err != nil {
					t.Fatal(err)
				}
				if info := th.Info(); info.Status != store.StatusRunning || !agent.ReadState(&info).Queued {
					t.Fatalf("marked: status %s, state %s", info.Status, info.State)
				}
				es.updates.Store(0)
				if _, err := r.Run(agent.WithCaller(ctx, callerOrNil(tc.asRun)), th, a, "start"); err != nil {
					t.Fatal(err)
				}
				if n := es.updates.Load(); n != tc.updates {
					t.Errorf("the run updated the thread %d times, want %d", n, tc.updates)
				}
				info, err := th.Refresh(ctx)
				if err != nil {
					t.Fatal(err)
				}
				state := agent.ReadState(&info)
				if info.Status != store.StatusIdle || state.Queued || state.Outcome == nil || state.Outcome.Text != "done" {
					t.Errorf("after the run: status %s, state %s", info.Status, info.State)
				}
				if want := cmpOr(tc.asRun, tc.marked); want != "" && !jsonEqual(t, state.Caller, want) {
					t.Errorf("the caller kept is %s, want %s", state.Caller, want)
				}
			})
		})
	}
	t.Run("terminated", func(t *testing.T) {
		info := store.Thread{Status: store.StatusTerminated}
		if err := agent.MarkQueued(&info, json.RawMessage(`{"user":"ann"}`)); err != nil || info.Status != store.StatusTerminated || len(info.State) != 0 {
			t.Errorf("a terminated thread marked: %+v, %v", info, err)
		}
	})
}

func callerOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func jsonEqual(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(a, b)
}

// TestRunsLastEventsRideItsEnd: the write that ends a run with its answer is offered the
// events that announce it (the model's turn, the run's end) for its transaction to send to a
// fleet's other nodes; once sent there, the run announces them marked Relayed, so that the
// relay does not send them again; not sent, unmarked. The run's earlier events are never
// offered.
func TestRunsLastEventsRideItsEnd(t *testing.T) {
	for _, sends := range []bool{true, false} {
		t.Run(map[bool]string{true: "sent", false: "not sent"}[sends], func(t *testing.T) {
			backendtest.Each(t, func(t *testing.T, st backendtest.Store) { runsLastEventsRideItsEnd(t, st, sends) })
		})
	}
}

func runsLastEventsRideItsEnd(t *testing.T, st backendtest.Store, sends bool) {
	ctx := context.Background()
	es, r, a, th, events := finalFixture(t, st, &answersModel{texts: []string{"done"}})
	es.sends = sends
	if _, err := r.Run(ctx, th, a, "start"); err != nil {
		t.Fatal(err)
	}
	if len(es.offered) != 1 || !slices.Equal(types(es.offered[0]), []agent.EventType{agent.EventModelTurn, agent.EventFinished}) {
		t.Fatalf("the end's write was offered %v, want the model's turn and the run's end", es.offered)
	}
	if turn, end := es.offered[0][0], es.offered[0][1]; turn.Text != "done" || turn.Step != 1 || turn.ThreadID != th.ID() ||
		end.Outcome == nil || end.Outcome.Text != "done" || end.Step != 1 {
		t.Errorf("offered %+v and %+v", turn, end)
	}
	for _, e := range *events {
		last := e.Type == agent.EventModelTurn || e.Type == agent.EventFinished
		if e.Relayed != (last && sends) {
			t.Errorf("%s announced with Relayed %v", e.Type, e.Relayed)
		}
	}
	if got := types(*events); !slices.Equal(got, []agent.EventType{agent.EventStepStarted, agent.EventModelTurn, agent.EventFinished}) {
		t.Errorf("events %v", got)
	}
}

// TestMessageQueuedDuringTheLastStepIsAnswered: a message queued while the model writes what
// would be its last answer (by another process: straight to the store) is stored after that
// answer, and the run goes on to answer it instead of ending.
func TestMessageQueuedDuringTheLastStepIsAnswered(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		ctx := context.Background()
		var th *thread.Thread
		m := &answersModel{texts: []string{"first", "second"}, before: func(n int) error {
			if n > 0 {
				return nil
			}
			return st.Enqueue(ctx, th.WorkspaceID(), th.ID(), &store.Message{Role: store.RoleUser, Content: "and this"})
		}}
		es, r, a, created, _ := finalFixture(t, st, m)
		th = created
		out, err := r.Run(ctx, th, a, "start")
		if err != nil || out.Text != "second" || out.Steps != 2 {
			t.Fatalf("Run = %+v, %v; want the answer to the queued message", out, err)
		}
		if got := contents(t, th); !slices.Equal(got, []string{"start", "first", "and this", "second"}) {
			t.Errorf("history %q", got)
		}
		if f := es.finals.Load(); f != 2 {
			t.Errorf("%d final appends, want 2 (the first found the message queued)", f)
		}
		if q, err := th.Queued(ctx); err != nil || len(q) != 0 {
			t.Errorf("left queued: %v, %v", q, err)
		}
	})
}

// TestAnswerNotStoredIsAskedAgain: when the write of the last answer with the run's end fails,
// neither is stored (the thread is not left running); the run tried again asks the model
// again, and the history holds the answer once.
func TestAnswerNotStoredIsAskedAgain(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		ctx := context.Background()
		m := &answersModel{texts: []string{"done"}}
		es, r, a, th, _ := finalFixture(t, st, m)
		es.failNext.Store(true)
		if _, err := r.Run(ctx, th, a, "start"); !errors.Is(err, errLostCommit) {
			t.Fatalf("Run: %v, want the failed write", err)
		}
		info, err := th.Refresh(ctx)
		if err != nil || info.Status == store.StatusRunning || info.StepCount != 0 {
			t.Fatalf("thread after the failed write: status %s, %d steps, %v; want not running, no step", info.Status, info.StepCount, err)
		}
		if got := contents(t, th); !slices.Equal(got, []string{"start"}) {
			t.Fatalf("history after the failed write %q, want the message alone", got)
		}
		out, err := r.Resume(ctx, th, a)
		if err != nil || out.Text != "done" || out.Steps != 1 || m.asked != 2 {
			t.Fatalf("Resume = %+v, %v after %d requests; want the answer, asked again", out, err, m.asked)
		}
		if got := contents(t, th); !slices.Equal(got, []string{"start", "done"}) {
			t.Errorf("history %q", got)
		}
	})
}

// plainEndingStore has no AppendFinal (the thread stores the answer, then the end) and fails
// its next thread update when told to.
type plainEndingStore struct {
	backendtest.Store
	failNext atomic.Bool
}

func (s *plainEndingStore) UpdateThread(ctx context.Context, workspaceID, threadID string, fn func(*store.Thread) error) (*store.Thread, error) {
	if s.failNext.Swap(false) {
		return nil, errLostCommit
	}
	return s.Store.UpdateThread(ctx, workspaceID, threadID, fn)
}

// TestAnswerStoredWithoutItsEndCounts: with a store that writes the answer and the end apart,
// an answer stored whose end then failed stays the run's: the failure recorded counts its step.
func TestAnswerStoredWithoutItsEndCounts(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		ctx := context.Background()
		ps := &plainEndingStore{Store: st}
		r := &agent.Runner{Store: ps, Registry: &quiver.Registry{}, Model: &answersModel{texts: []string{"done"}}}
		th, err := thread.Create(ctx, ps, thread.Options{WorkspaceID: "wsp_final"})
		if err != nil {
			t.Fatal(err)
		}
		a := &agent.Agent{Name: "final", Prompt: &agent.Prompt{Name: "final"}}
		r.Subscribe(func(e agent.Event) {
			if e.Type == agent.EventStepStarted {
				ps.failNext.Store(true) // the next update is the run's end
			}
		})
		if _, err := r.Run(ctx, th, a, "start"); !errors.Is(err, errLostCommit) {
			t.Fatalf("Run: %v, want the failed end", err)
		}
		info, err := th.Refresh(ctx)
		if err != nil || info.StepCount != 1 || info.Status == store.StatusRunning {
			t.Fatalf("thread after the failed end: status %s, %d steps, %v; want not running, the stored answer's step", info.Status, info.StepCount, err)
		}
		if got := contents(t, th); !slices.Equal(got, []string{"start", "done"}) {
			t.Errorf("history %q", got)
		}
	})
}
