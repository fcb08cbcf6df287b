package platform_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/platform/limits"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/sqlite"
)

// budgetWorld is a platform with background runs on one backend.
type budgetWorld struct {
	st        store.Backend
	startJobs func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error)
}

func budgetBackends(t *testing.T, fn func(t *testing.T, w budgetWorld)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "q.db")
		st, err := sqlite.Open(path)
		must(t, err)
		t.Cleanup(func() { st.Close() })
		fn(t, budgetWorld{st: st, startJobs: func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) { return jobs.StartSQLite(ctx, path, c) }})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		schema := pgtest.Schema(t, dsn)
		st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schema))
		must(t, err)
		t.Cleanup(func() { st.Close() })
		fn(t, budgetWorld{st: st, startJobs: func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) {
			pc, err := pgxpool.ParseConfig(dsn)
			if err != nil {
				return nil, err
			}
			pc.ConnConfig.RuntimeParams["search_path"] = schema
			pool, err := pgxpool.NewWithConfig(ctx, pc)
			if err != nil {
				return nil, err
			}
			t.Cleanup(pool.Close)
			return jobs.StartPostgres(ctx, pool, c)
		}})
	})
}

// waitRun waits for the thread's last run to end as the test wants, within a minute.
func waitRun(t *testing.T, st store.Backend, ws, threadID string, done func(*agent.Outcome) bool) *agent.Outcome {
	t.Helper()
	var last *agent.Outcome
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		th, err := st.Thread(context.Background(), ws, threadID)
		must(t, err)
		if last = agent.ReadState(th).Outcome; th.Status == store.StatusIdle && last != nil && done(last) {
			return last
		}
	}
	t.Fatalf("thread %s: the run did not end as wanted within a minute; its last outcome: %+v", threadID, last)
	return nil
}

func budgetPaused(o *agent.Outcome) bool { return o.Reason == agent.ReasonBudgetExhausted }
func finished(o *agent.Outcome) bool     { return o.Status == agent.RunFinished }

// Budgets in agent runs, on both backends with background runs: a run whose caller's model
// tokens of the minute are spent stops before its next request, paused with budget_exhausted,
// and goes on by itself once the minute has room, without running a call again; a run over
// the day's cost by the price table stops until an admin raises the limit, and then goes on.
//
// The clock seam: the platform and River count by one clock, which the test moves a minute on
// once the worker has paused, as waiting that minute would.
func TestBudgetsInRuns(t *testing.T) {
	budgetBackends(t, func(t *testing.T, w budgetWorld) {
		ctx := context.Background()
		ws := &store.Workspace{Name: "acme"}
		must(t, w.st.CreateWorkspace(ctx, ws))
		dir := t.TempDir()
		script := func(name, body string) string {
			path := filepath.Join(dir, name+".yaml")
			must(t, os.WriteFile(path, []byte(body), 0o600))
			return "scripted:" + path
		}
		worker := script("worker", `turns:
  - {calls: [{name: count, args: {}}], usage: {input_tokens: 6}}
  - {calls: [{name: count, args: {}}], usage: {input_tokens: 6}}
  - {text: done, usage: {input_tokens: 6}}
`)
		spender := script("spender", `turns:
  - {calls: [{name: count, args: {}}], usage: {input_tokens: 6, output_tokens: 100}}
  - {text: spent, usage: {input_tokens: 6}}
  - {text: more, usage: {input_tokens: 6}}
`)
		var counted atomic.Int64
		reg := &quiver.Registry{}
		must(t, reg.Register(quiver.Func("count", "Counts.", func(context.Context, struct{}) (string, error) {
			counted.Add(1)
			return "counted", nil
		})))
		agents := map[string]*agent.Agent{
			"worker":  {Name: "worker", Prompt: &agent.Prompt{Name: "worker", Model: worker, Tools: []string{"count"}}},
			"spender": {Name: "spender", Prompt: &agent.Prompt{Name: "spender", Model: spender, Tools: []string{"count"}}},
		}
		var ahead atomic.Int64
		now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
		p, err := platform.New(platform.Config{Store: w.st, Registry: reg, Logger: slog.New(slog.DiscardHandler),
			Catalog: &agent.Catalog{Agents: agents}, Now: now})
		must(t, err)
		t.Cleanup(func() { p.Close() })
		must(t, p.StartJobs(ctx, func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) {
			c.Now = now
			return w.startJobs(ctx, c)
		}))
		t.Cleanup(func() { _ = p.Stop(context.Background()) })
		admin := platform.Actor{WorkspaceID: ws.ID, Role: store.KeyRoleAdmin, KeyID: "key_admin", UserID: "usr_admin"}
		member := platform.Actor{WorkspaceID: ws.ID, Role: store.KeyRoleMember, KeyID: "key_member", UserID: "usr_member"}
		doc := limits.Document{
			Limits: []limits.Limit{
				{Name: "worker-tokens", Who: whoAgent("worker"), Tokens: limits.Tokens{InputPerMinute: 10}},
				{Name: "spend", Who: whoAgent("spender"), Cost: limits.Cost{PerDay: 1}},
			},
			// 0.1 an input token: each request of 6 costs 0.6, and output is free.
			Prices: []limits.Price{{Model: "scripted:*", InputPerMillion: 100_000}},
		}
		l, err := p.SetLimits(ctx, admin, doc, 0)
		must(t, err)

		// The worker's third request would pass the minute's 10 input tokens: it stops.
		th, err := p.OpenThread(ctx, member, platform.NewThread{Agent: "worker"})
		must(t, err)
		_, err = p.StartRun(ctx, member, th.ID, "worker", "work")
		must(t, err)
		out := waitRun(t, w.st, ws.ID, th.ID, budgetPaused)
		if out.Status != agent.RunPaused || out.Budget == nil || out.Budget.Limit != "worker-tokens" ||
			!strings.Contains(out.Budget.Message, "allows 10 input tokens per minute and is reached") {
			t.Fatalf("the worker's outcome: %+v %+v", out, out.Budget)
		}
		if wait := out.Budget.RetryAt.Sub(now()); wait < 55*time.Second || wait > 62*time.Second {
			t.Fatalf("the worker goes on in %s, want the minute", wait)
		}
		info, err := w.st.Thread(ctx, ws.ID, th.ID)
		must(t, err)
		if st, _ := platform.StatusOf(info); st != platform.StatusWaiting {
			t.Fatalf("the thread's status: %s", st)
		}
		if n := counted.Load(); n != 2 {
			t.Fatalf("count ran %d times before the pause, want 2", n)
		}
		// River runs it once the minute has room, and it ends without counting again.
		ahead.Store(int64(62 * time.Second))
		if out := waitRun(t, w.st, ws.ID, th.ID, finished); out.Text != "done" {
			t.Fatalf("the worker ended with %+v", out)
		}
		if n := counted.Load(); n != 2 {
			t.Fatalf("count ran %d times, want 2: a call ran again", n)
		}

		// The spender's second run would pass the day's cost of 1 (0.6 + 0.6 spent): it stops
		// until tomorrow, and goes on as soon as an admin raises the bound.
		sp, err := p.OpenThread(ctx, member, platform.NewThread{Agent: "spender"})
		must(t, err)
		_, err = p.StartRun(ctx, member, sp.ID, "spender", "spend")
		must(t, err)
		if out := waitRun(t, w.st, ws.ID, sp.ID, finished); out.Text != "spent" {
			t.Fatalf("the spender's first run: %+v", out)
		}
		_, err = p.StartRun(ctx, member, sp.ID, "spender", "spend more")
		must(t, err)
		out = waitRun(t, w.st, ws.ID, sp.ID, budgetPaused)
		if out.Budget == nil || out.Budget.Limit != "spend" || !strings.Contains(out.Budget.Message, "allows a cost of 1 per day") {
			t.Fatalf("the spender's outcome: %+v", out.Budget)
		}
		if wait := out.Budget.RetryAt.Sub(now()); wait < 23*time.Hour || wait > 25*time.Hour {
			t.Fatalf("the spender goes on in %s, want about a day", wait)
		}
		status, err := p.LimitStatus(ctx, admin)
		must(t, err)
		for _, s := range status {
			if s.Limit == "spend" && s.Quantity == limits.CostPerDay && s.Used != 1_200_000 {
				t.Errorf("the day's spend: %+v, want 1.2 (in millionths)", s)
			}
		}
		doc.Limits[1].Cost.PerDay = 5
		_, err = p.SetLimits(ctx, admin, doc, l.Version)
		must(t, err)
		if out := waitRun(t, w.st, ws.ID, sp.ID, finished); out.Text != "more" {
			t.Fatalf("the spender after the raise: %+v", out)
		}
	})
}

func whoAgent(name string) (w entitle.Who) { w.Agent = name; return }
