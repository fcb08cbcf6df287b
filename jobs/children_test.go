package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
)

// roleModel answers by prompt: the lead asks for its non-blocking child in its first turn and
// then answers with how many child results it has seen; the child answers at once.
type roleModel struct {
	name string
	mu   sync.Mutex
	reqs int
}

func (m *roleModel) Name() string            { return "test:" + m.name }
func (m *roleModel) Dialect() schema.Dialect { return schema.OpenAI }

func (m *roleModel) Generate(_ context.Context, req *model.Request, _ func(model.Delta)) (*model.Response, error) {
	m.mu.Lock()
	m.reqs++
	m.mu.Unlock()
	if m.name == "child" {
		return &model.Response{Text: "child answer"}, nil
	}
	turns, results := 0, 0
	for _, msg := range req.Messages {
		if msg.Role == model.RoleAssistant {
			turns++
		}
		if msg.Role == model.RoleUser && strings.Contains(msg.Text, "child answer") {
			results++
		}
	}
	if turns == 0 {
		return &model.Response{ToolCalls: []model.ToolCall{{ID: "call_spawn", Name: "child", Args: []byte(`{"message":"go"}`)}}}, nil
	}
	return &model.Response{Text: fmt.Sprintf("seen %d", results)}, nil
}

// statesAtWorkEnd records, as each job's worker returns, the state the database holds for the job
// then, by the thread the job ran.
type statesAtWorkEnd struct {
	river.HookDefaults
	j      *Jobs
	mu     sync.Mutex
	states map[string][]rivertype.JobState
}

func (h *statesAtWorkEnd) WorkEnd(ctx context.Context, job *rivertype.JobRow, err error) error {
	var args RunArgs
	row, gerr := h.j.client.JobGet(context.WithoutCancel(ctx), job.ID) // the work's context has ended
	if gerr == nil && json.Unmarshal(job.EncodedArgs, &args) == nil {
		h.mu.Lock()
		h.states[args.ThreadID] = append(h.states[args.ThreadID], row.State)
		h.mu.Unlock()
	}
	return err
}

// A non-blocking child runs as its own job; its result is queued to the parent, which had
// finished, and a wake job runs the parent again to take it: on both databases. On PostgreSQL
// the parent's runs complete their jobs with their ends, and the child's run leaves its job to
// River, which completes it after the child's result is delivered.
func TestNonBlockingChildRunsAsAJob(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			lead, child := &roleModel{name: "lead"}, &roleModel{name: "child"}
			cat := &agent.Catalog{Prompts: map[string]*agent.Prompt{}, Agents: map[string]*agent.Agent{
				"lead": {Name: "lead", Prompt: &agent.Prompt{Name: "lead", Model: "test:lead",
					Subagents: []agent.Subagent{{Name: "child", Blocking: new(bool)}}}},
				"child": {Name: "child", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "child", Model: "test:child"}},
			}}
			runner := &agent.Runner{Store: b.st, Catalog: cat, OpenModel: func(spec string) (model.Model, error) {
				if spec == "test:child" {
					return child, nil
				}
				return lead, nil
			}}
			states := &statesAtWorkEnd{states: map[string][]rivertype.JobState{}}
			// The runs' log, shown when the test fails: its failure under load was a wake's run
			// failing, which only the log said.
			var logbuf syncBuf
			runner.Logger = slog.New(slog.NewTextHandler(&logbuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			defer func() {
				if t.Failed() {
					t.Logf("log:\n%s", logbuf.String())
				}
			}()
			j := b.start(t, Config{Runner: runner, Logger: runner.Logger, pollInterval: 20 * time.Millisecond,
				hooks: []rivertype.Hook{states},
				Agents: func(_ context.Context, name string) (*agent.Agent, error) {
					if a, ok := cat.Lookup(name); ok {
						return a, nil
					}
					return nil, fmt.Errorf("no agent %q", name)
				}})
			if runner.Background == nil {
				t.Fatal("starting the jobs did not give the runner its Background")
			}
			states.j = j
			th := newThread(t, b.st)
			id, err := j.Start(context.Background(), RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "lead", MessageID: ids.New("msg"), Message: "start"})
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, j, id, rivertype.JobStateCompleted)
			// The child's job and the parent's wake follow.
			deadline := time.Now().Add(30 * time.Second)
			for {
				h := history(t, th)
				if last := h[len(h)-1]; last == "assistant:seen 1" {
					break
				}
				if time.Now().After(deadline) {
					kids, _ := th.Children(context.Background())
					for _, k := range kids {
						c, _ := th.Child(context.Background(), k.Ref)
						t.Logf("child %+v: %q state %s", k, history(t, c), c.Info().State)
					}
					q, _ := th.Queued(context.Background())
					t.Logf("queued %d", len(q))
					t.Fatalf("the lead never took the child's result: %q", h)
				}
				time.Sleep(20 * time.Millisecond)
			}
			kids, err := th.Children(context.Background())
			if err != nil || len(kids) != 1 || kids[0].Status != store.StatusTerminated || kids[0].Blocking {
				t.Fatalf("children %+v, %v", kids, err)
			}
			var delivered int
			for _, m := range history(t, th) {
				if strings.HasPrefix(m, "system:") && strings.Contains(m, "child answer") {
					delivered++
				}
			}
			if delivered != 1 || child.reqs != 1 {
				t.Fatalf("the child's result was delivered %d times; the child was asked %d times", delivered, child.reqs)
			}
			// The workers return a moment after their runs have written what was read above.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				states.mu.Lock()
				lead, kid := len(states.states[th.ID()]), len(states.states[kids[0].Ref])
				states.mu.Unlock()
				if lead >= 2 && kid >= 1 {
					break
				}
			}
			states.mu.Lock()
			defer states.mu.Unlock()
			running, completed := rivertype.JobStateRunning, rivertype.JobStateCompleted
			if b.name == "sqlite" {
				completed = running // River's completer records every end on SQLite
			}
			if got := states.states[th.ID()]; len(got) != 2 || got[0] != completed || got[1] != completed {
				t.Errorf("the lead's jobs as their workers returned: %v, want %v twice (its run, then the wake's)", got, completed)
			}
			if got := states.states[kids[0].Ref]; len(got) != 1 || got[0] != running {
				t.Errorf("the child's job as its worker returned: %v, want %s: River completes a child's job", got, running)
			}
		})
	}
}

// On PostgreSQL the runner takes every run's lease itself, a child's run inside its parent's
// call included: a thread another node holds is refused (agent.ErrBusy), not run twice.
func TestRunnerTakesTheLease(t *testing.T) {
	for _, b := range backends(t) {
		if b.name != "postgres" {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			dsn := pgtest.DSN(t)
			here, there := nodeLease(t, dsn, leaseWait), nodeLease(t, dsn, leaseWait)
			_, reg := newTools(t)
			cfg := config(b.st, reg, &stepModel{})
			cfg.Runner.Lease = runnerLease{here}
			a, _ := cfg.Agents(context.Background(), "helper")
			th := newThread(t, b.st)
			release, ok, err := there.acquire(context.Background(), th.ID())
			if err != nil || !ok {
				t.Fatalf("the other node's lease: %v %v", ok, err)
			}
			if _, err := cfg.Runner.Run(context.Background(), th, a, "hello"); !errors.Is(err, agent.ErrBusy) {
				t.Fatalf("a run of a thread another node holds: %v, want ErrBusy", err)
			}
			release()
			if out, err := cfg.Runner.Run(context.Background(), th, a, "hello"); err != nil || out.Text != "done" {
				t.Fatalf("the run once the lease is free: %+v %v", out, err)
			}
		})
	}
}

// syncBuf is a buffer that several goroutines write to.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
