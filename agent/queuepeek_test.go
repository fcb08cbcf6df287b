package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
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

// peekingStore is a backend that counts the reads of a thread's queue, and passes AppendPeek
// on when the backend has it.
type peekingStore struct {
	backendtest.Store
	reads atomic.Int32
}

func (s *peekingStore) Queued(ctx context.Context, workspaceID, threadID string) ([]*store.Message, error) {
	s.reads.Add(1)
	return s.Store.Queued(ctx, workspaceID, threadID)
}

func (s *peekingStore) AppendPeek(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) (bool, error) {
	return s.Store.(store.QueuePeeker).AppendPeek(ctx, workspaceID, threadID, msgs...)
}

// requestsModel calls "note" once per turn until it has made steps calls, then answers, and
// keeps the text of every request's messages.
type requestsModel struct {
	steps int
	mu    sync.Mutex
	seen  []string
}

func (m *requestsModel) Name() string            { return "test:requests" }
func (m *requestsModel) Dialect() schema.Dialect { return schema.OpenAI }
func (m *requestsModel) Generate(_ context.Context, req *model.Request, _ func(model.Delta)) (*model.Response, error) {
	var b strings.Builder
	calls := 0
	for _, msg := range req.Messages {
		b.WriteString(msg.Text + "\n")
		calls += len(msg.ToolCalls)
	}
	m.mu.Lock()
	m.seen = append(m.seen, b.String())
	m.mu.Unlock()
	if calls >= m.steps {
		return &model.Response{Text: "done"}, nil
	}
	return &model.Response{ToolCalls: []model.ToolCall{{ID: fmt.Sprintf("call_%d", calls), Name: "note", Args: json.RawMessage(`{}`)}}}, nil
}

// TestLoopLooksAtTheQueueInItsAppends: the loop learns whether messages are queued from the
// append that ends each step, in that append's transaction, instead of reading the queue
// before every step; a message another process queues while a tool runs (written to the store
// directly, as that process would) still reaches the very next request.
func TestLoopLooksAtTheQueueInItsAppends(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		ps := &peekingStore{Store: st}
		const steps = 5
		var th *thread.Thread
		reg := &quiver.Registry{}
		calls := 0
		if err := reg.Register(quiver.Func("note", "Notes.", func(ctx context.Context, _ struct{}) (string, error) {
			calls++
			if calls == 3 {
				err := st.Enqueue(ctx, th.WorkspaceID(), th.ID(), &store.Message{Role: store.RoleUser, Content: "sent from elsewhere"})
				if err != nil {
					return "", err
				}
			}
			return "noted", nil
		})); err != nil {
			t.Fatal(err)
		}
		m := &requestsModel{steps: steps}
		r := &agent.Runner{Store: ps, Registry: reg, Model: m}
		a := &agent.Agent{Name: "peek", Prompt: &agent.Prompt{Name: "peek", Tools: []string{"note"}, Stop: agent.StopRules{MaxSteps: 20}}}
		var err error
		if th, err = thread.Create(ctx, ps, thread.Options{WorkspaceID: "wsp_peek"}); err != nil {
			t.Fatal(err)
		}
		out, err := r.Run(ctx, th, a, "start")
		if err != nil {
			t.Fatal(err)
		}
		if out.Steps != steps+1 || calls != steps {
			t.Fatalf("the run took %d steps and ran the tool %d times, want %d and %d", out.Steps, calls, steps+1, steps)
		}
		for i, req := range m.seen {
			if has := strings.Contains(req, "sent from elsewhere"); has != (i >= 3) {
				t.Fatalf("request %d carries the message queued during the third call: %v, want %v\n%s", i, has, i >= 3, req)
			}
		}
		// One read at most (the first step's, when nothing appended in this run has looked):
		// not one per step.
		if n := ps.reads.Load(); n > 1 {
			t.Errorf("the queue was read %d times in a run of %d steps, want at most once", n, steps+1)
		}
		if q, err := th.Queued(ctx); err != nil || len(q) != 0 {
			t.Fatalf("left queued: %v, %v", q, err)
		}
	})
}
