package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/rivertype"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

const ws = "wsp_jobs"

// stepModel answers turn n (the assistant messages the request carries) with turns[n]: a call
// of the tool it names, or, past the list, the final text. failFirst makes its first request
// fail, as a provider's outage would.
type stepModel struct {
	turns     []string
	mu        sync.Mutex
	failFirst bool
	requests  int
}

func (m *stepModel) Name() string            { return "test:steps" }
func (m *stepModel) Dialect() schema.Dialect { return schema.OpenAI }

func (m *stepModel) Generate(_ context.Context, req *model.Request, _ func(model.Delta)) (*model.Response, error) {
	m.mu.Lock()
	m.requests++
	fail := m.failFirst && m.requests == 1
	m.mu.Unlock()
	if fail {
		return nil, errors.New("the provider is down")
	}
	n := 0
	for _, msg := range req.Messages {
		if msg.Role == model.RoleAssistant {
			n++
		}
	}
	if n < len(m.turns) {
		return &model.Response{ToolCalls: []model.ToolCall{{ID: fmt.Sprintf("call_%d", n+1), Name: m.turns[n], Args: []byte(`{}`)}}}, nil
	}
	return &model.Response{Text: "done"}, nil
}

// backend is a store and how to start the runs of its database.
type backend struct {
	name  string
	st    thread.Store
	start func(t *testing.T, cfg Config) *Jobs
}

func backends(t *testing.T) []backend {
	dir := t.TempDir()
	path := filepath.Join(dir, "q.db")
	lite, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	out := []backend{{"sqlite", lite, func(t *testing.T, cfg Config) *Jobs {
		j, err := StartSQLite(context.Background(), path, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Stop(context.Background()) })
		return j
	}}}
	if os.Getenv(pgtest.EnvDSN) == "" && os.Getenv("CI") != "true" {
		t.Logf("PostgreSQL not tested: %s is not set", pgtest.EnvDSN)
		return out
	}
	dsn := pgtest.DSN(t)
	schemaName := pgtest.Schema(t, dsn)
	pg, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schemaName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	return append(out, backend{"postgres", pg, func(t *testing.T, cfg Config) *Jobs {
		pc, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		pc.ConnConfig.RuntimeParams["search_path"] = schemaName
		pool, err := pgxpool.NewWithConfig(context.Background(), pc)
		if err != nil {
			t.Fatal(err)
		}
		j, err := StartPostgres(context.Background(), pool, cfg)
		if err != nil {
			pool.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Stop(context.Background()); pool.Close() })
		return j
	}})
}

// tools are a tool that counts its runs by call id and one that waits until released.
type tools struct {
	mu      sync.Mutex
	ran     map[string]int
	release chan struct{}
	started chan struct{}
}

func newTools(t testing.TB) (*tools, *quiver.Registry) {
	tl := &tools{ran: map[string]int{}, release: make(chan struct{}), started: make(chan struct{}, 16)}
	reg := &quiver.Registry{}
	count := func(ctx context.Context) {
		tl.mu.Lock()
		tl.ran[quiver.CallFrom(ctx).ID]++
		tl.mu.Unlock()
	}
	if err := reg.Register(
		quiver.Func("work", "Works.", func(ctx context.Context, _ struct{}) (string, error) { count(ctx); return "worked", nil }),
		quiver.Func("wait", "Waits to be released.", func(ctx context.Context, _ struct{}) (string, error) {
			count(ctx)
			tl.started <- struct{}{}
			select {
			case <-tl.release:
				return "released", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}),
	); err != nil {
		t.Fatal(err)
	}
	return tl, reg
}

func config(st thread.Store, reg *quiver.Registry, m model.Model) Config {
	a := &agent.Agent{Name: "helper", Prompt: &agent.Prompt{Name: "helper", Tools: []string{"work", "wait"}, Stop: agent.StopRules{MaxSteps: 20}}}
	return Config{
		Runner: &agent.Runner{Store: st, Registry: reg, Model: m},
		Agents: func(_ context.Context, name string) (*agent.Agent, error) {
			if name != "helper" {
				return nil, fmt.Errorf("no agent %q", name)
			}
			return a, nil
		},
		Logger:       slog.New(slog.DiscardHandler),
		pollInterval: 20 * time.Millisecond,
	}
}

// waitState waits for the run's job to reach state.
func waitState(t *testing.T, j *Jobs, id int64, state rivertype.JobState) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		row, err := j.client.JobGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got := row.State; got == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %s after 30s, want %s", id, row.State, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newThread(t *testing.T, st thread.Store) *thread.Thread {
	t.Helper()
	th, err := thread.Create(context.Background(), st, thread.Options{WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// history is the thread's messages as "role:content" or "tool:name=text".
func history(t testing.TB, th *thread.Thread) []string {
	t.Helper()
	msgs, err := th.History(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		switch m.Role {
		case store.RoleTool:
			out = append(out, "tool:"+m.ToolName)
		case store.RoleAssistant:
			if len(m.ToolCalls) > 0 {
				out = append(out, "call:"+m.ToolCalls[0].Name)
			} else {
				out = append(out, "assistant:"+m.Content)
			}
		default:
			out = append(out, string(m.Role)+":"+m.Content)
		}
	}
	return out
}

// A run queued in the background answers its message: the message once, the call once, the
// final answer, on both databases.
func TestRunInTheBackground(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			tl, reg := newTools(t)
			j := b.start(t, config(b.st, reg, &stepModel{turns: []string{"work"}}))
			th := newThread(t, b.st)
			id, err := j.Start(context.Background(), RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", MessageID: ids.New("msg"), Message: "do the work"})
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, j, id, rivertype.JobStateCompleted)
			if got, want := strings.Join(history(t, th), " | "), "user:do the work | call:work | tool:work | assistant:done"; got != want {
				t.Errorf("history %q, want %q", got, want)
			}
			if tl.ran["call_1"] != 1 {
				t.Errorf("the call ran %d times", tl.ran["call_1"])
			}
		})
	}
}

// A thread has one run queued or running at a time; once it has finished, the next is taken.
func TestOneRunPerThread(t *testing.T) {
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
			again := args
			again.MessageID = ids.New("msg")
			if _, err := j.Start(context.Background(), again); !errors.Is(err, ErrRunQueued) {
				t.Fatalf("a second run while the first runs: %v, want ErrRunQueued", err)
			}
			close(tl.release)
			waitState(t, j, first, rivertype.JobStateCompleted)
			next, err := j.Start(context.Background(), again)
			if err != nil {
				t.Fatalf("a run after the first finished: %v", err)
			}
			waitState(t, j, next, rivertype.JobStateCompleted)
			if n := strings.Count(strings.Join(history(t, th), "|"), "user:wait"); n != 2 {
				t.Errorf("%d user messages, want 2: %q", n, history(t, th))
			}
		})
	}
}

// A run whose first try fails (the provider is down) is tried again: its message is appended
// once, and the call runs once.
func TestRetriedRunAppendsOnce(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			tl, reg := newTools(t)
			j := b.start(t, config(b.st, reg, &stepModel{turns: []string{"work"}, failFirst: true}))
			th := newThread(t, b.st)
			id, err := j.Start(context.Background(), RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", MessageID: ids.New("msg"), Message: "again"})
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, j, id, rivertype.JobStateCompleted)
			if got, want := strings.Join(history(t, th), " | "), "user:again | call:work | tool:work | assistant:done"; got != want {
				t.Errorf("history %q, want %q", got, want)
			}
			if tl.ran["call_1"] != 1 {
				t.Errorf("the call ran %d times", tl.ran["call_1"])
			}
		})
	}
}

// A run naming an agent that does not exist, or a thread that does not, is cancelled at once
// rather than tried again; a run without its parts is refused when queued.
func TestBadRuns(t *testing.T) {
	b := backends(t)[0]
	_, reg := newTools(t)
	j := b.start(t, config(b.st, reg, &stepModel{}))
	th := newThread(t, b.st)
	for _, args := range []RunArgs{
		{WorkspaceID: ws, ThreadID: th.ID(), Agent: "nobody"},
		{WorkspaceID: ws, ThreadID: "thr_missing", Agent: "helper"},
		{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper"}, // no message on a thread without any
	} {
		id, err := j.Start(context.Background(), args)
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, j, id, rivertype.JobStateCancelled)
	}
	// The thread is free again: a run with a message is taken.
	id, err := j.Start(context.Background(), RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", Message: "now something"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, j, id, rivertype.JobStateCompleted)
	for _, args := range []RunArgs{{ThreadID: th.ID(), Agent: "helper"}, {WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", MessageID: "msg_without_a_message"}} {
		if _, err := j.Start(context.Background(), args); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Start(%+v): %v, want ErrInvalid", args, err)
		}
	}
}

// A thread's lease is held by one run at a time: within the process, and across processes on
// PostgreSQL (two pools stand for two nodes), where a node that dies gives it up with its
// connection.
func TestLease(t *testing.T) {
	local := newLocalLease()
	type pair struct {
		name string
		a, b lease
		die  func() // ends a's holder, as a process dying would; nil: not tested
	}
	pairs := []pair{{name: "local", a: local, b: local}}
	if os.Getenv(pgtest.EnvDSN) != "" || os.Getenv("CI") == "true" {
		dsn := pgtest.DSN(t)
		first, second := nodeLease(t, dsn, leaseWait), nodeLease(t, dsn, leaseWait)
		// A node that dies loses its connection: the server ends the session holding the lock.
		die := func() {
			if _, err := second.pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_locks
				WHERE locktype = 'advisory' AND classid = $1 AND granted`, int64(leaseSpace)); err != nil {
				t.Fatal(err)
			}
		}
		pairs = append(pairs, pair{"postgres", first, second, die})
	}
	ctx := context.Background()
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			thread := ids.New("thr")
			release, ok, err := p.a.acquire(ctx, thread)
			if err != nil || !ok {
				t.Fatalf("the first holder: %v %v", ok, err)
			}
			if _, ok, err := p.b.acquire(ctx, thread); err != nil || ok {
				t.Fatalf("a second holder of the same thread: %v %v, want refused", ok, err)
			}
			other, ok, err := p.b.acquire(ctx, ids.New("thr"))
			if err != nil || !ok {
				t.Fatalf("another thread: %v %v", ok, err)
			}
			other()
			if p.die != nil {
				p.die()
				defer release() // its connection is gone: it closes it and gives it back
			} else {
				release()
			}
			// A terminated session ends a moment after it is told to.
			deadline := time.Now().Add(10 * time.Second)
			for {
				again, ok, err := p.b.acquire(ctx, thread)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					again()
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the lease is still held 10s after its holder let go or died")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// nodeLease is the leases of a node of dsn's database, waiting up to wait for a held one: a
// pool of its own, closed by the test.
func nodeLease(t *testing.T, dsn string, wait time.Duration) *advisoryLease {
	t.Helper()
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	l, err := newAdvisoryLease(context.Background(), p, 4, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.pool.Close)
	return l
}

// Continue, while the thread's run still runs, waits for it to end and queues another run, so
// that what was added meanwhile (a decision) is acted on; with a run queued, that run suffices.
func TestContinue(t *testing.T) {
	b := backends(t)[0]
	tl, reg := newTools(t)
	j := b.start(t, config(b.st, reg, &stepModel{turns: []string{"wait"}}))
	th := newThread(t, b.st)
	args := RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", Message: "wait"}
	first, err := j.Start(context.Background(), args)
	if err != nil {
		t.Fatal(err)
	}
	<-tl.started
	go func() { time.Sleep(100 * time.Millisecond); close(tl.release) }()
	next, err := j.Continue(context.Background(), args)
	if err != nil || next == first {
		t.Fatalf("Continue while the run runs: job %d (the first %d), %v; want a new job", next, first, err)
	}
	waitState(t, j, next, rivertype.JobStateCompleted)
}

// A failed run is tried again within seconds, the wait growing with its attempts up to 10 s,
// not after River's default of attempt^4 seconds.
func TestFailedRunsAreTriedAgainSoon(t *testing.T) {
	for _, c := range []struct {
		attempt int
		want    time.Duration
	}{{1, time.Second}, {3, 3 * time.Second}, {25, 10 * time.Second}} {
		got := time.Until(runRetry{}.NextRetry(&rivertype.JobRow{Attempt: c.attempt}))
		if got > c.want || got < c.want-time.Second {
			t.Errorf("attempt %d: tried again in %v, want %v", c.attempt, got, c.want)
		}
	}
}

// A run's status is read within its thread and workspace: the job number of another thread's
// run, another workspace's, a job of another kind or none at all is the same "not found", so
// that a caller learns nothing of jobs it does not own.
func TestRunStatusWithinItsThread(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			_, reg := newTools(t)
			j := b.start(t, config(b.st, reg, &stepModel{turns: []string{"work"}}))
			mine, theirs := newThread(t, b.st), newThread(t, b.st)
			id, err := j.Start(context.Background(), RunArgs{WorkspaceID: ws, ThreadID: mine.ID(), Agent: "helper", Message: "do the work"})
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, j, id, rivertype.JobStateCompleted)
			watch, err := j.Watch(context.Background(), RunArgs{WorkspaceID: ws, ThreadID: mine.ID(), Agent: "helper"}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := j.RunStatus(context.Background(), ws, mine.ID(), id); err != nil || got != RunDone {
				t.Errorf("own run: %q, %v; want %q", got, err, RunDone)
			}
			for _, c := range []struct {
				name   string
				ws, th string
				job    int64
			}{
				{"another thread's run", ws, theirs.ID(), id},
				{"another workspace's run", "wsp_other", mine.ID(), id},
				{"a job of another kind", ws, mine.ID(), watch},
				{"no such job", ws, mine.ID(), id + 1000},
			} {
				if got, err := j.RunStatus(context.Background(), c.ws, c.th, c.job); !errors.Is(err, ErrRunNotFound) {
					t.Errorf("%s: %q, %v; want ErrRunNotFound", c.name, got, err)
				}
			}
		})
	}
}
