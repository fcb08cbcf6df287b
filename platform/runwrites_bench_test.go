package platform_test

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/jobs"
	_ "github.com/quiverhq/quiver/model/scripted" // the agents' model: "scripted:FILE"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
)

// BenchmarkRunWriteTxns counts the write transactions of a run on PostgreSQL (issue 52),
// queued as /v1 queues it (Platform.StartRun, River in the same database) and waited for
// until River records its job completed: a one-step agent (the model answers with text) and a
// two-step one (a call of a Go tool, then text). Each op is one run on a thread of its own.
// It reports, counted by a tracer on every connection (writeCounter):
//   - write-txns/run: from StartRun to River's completion, River's own transactions and the
//     run events' notifications included (what the growth of PostgreSQL's transaction ids
//     counts);
//   - notify-txns/run: those of them that only notified, which commit without waiting for
//     the disk;
//   - write-txns/thread: the thread's creation, which a run's POST follows;
//   - river-upkeep-txns/run: River's leader election and maintenance meanwhile, which are the
//     node's whatever its runs, and are counted in no other figure.
//
// It logs the run's write transactions by what they were, in the order first seen, with how
// many of each a run made (all of them with -test.v). Beside the runs, river-job is the
// baseline: a bare River job that does nothing, the least River itself writes for a job.
func BenchmarkRunWriteTxns(b *testing.B) {
	b.Run("river-job", benchRiverJobWrites)
	for _, steps := range []int{1, 2} {
		b.Run(map[int]string{1: "one-step", 2: "two-step"}[steps], func(b *testing.B) {
			r := newWriteBench(b)
			ag := map[int]string{1: "greeter", 2: "echoer"}[steps]
			ctx := context.Background()
			// A first run, not counted, with River's first leader election and the purge job
			// it queues at its start.
			th, err := r.p.OpenThread(ctx, r.actor, platform.NewThread{Agent: ag})
			benchMust(b, err)
			benchMust(b, r.runToEnd(ctx, th.ID, ag))
			time.Sleep(100 * time.Millisecond)
			var thread, run, notify, background int
			kinds := map[string]int{} // the run's write transactions by what they were
			var order []string
			xids := serverXIDs(b, r.dsn)
			for b.Loop() {
				r.counter.take()
				th, err := r.p.OpenThread(ctx, r.actor, platform.NewThread{Agent: ag})
				if err != nil {
					b.Fatal(err)
				}
				for _, txn := range r.counter.take() {
					if txn.background() {
						background++
						continue
					}
					thread++
				}
				if err := r.runToEnd(ctx, th.ID, ag); err != nil {
					b.Fatal(err)
				}
				r.counter.waitFor("-- name: JobSetStateIfRunningMany ")
				for _, txn := range r.counter.take() {
					if txn.background() {
						background++
						continue
					}
					if txn.notifyOnly() {
						notify++
					}
					run++
					k := txn.describe()
					if kinds[k] == 0 {
						order = append(order, k)
					}
					kinds[k]++
				}
			}
			// River completes jobs in batches, some time after: waited for, so that what its
			// completer writes for the last runs counts too.
			time.Sleep(2 * time.Second)
			b.ReportMetric(float64(serverXIDs(b, r.dsn)-xids)/float64(b.N), "server-xids/run")
			b.ReportMetric(float64(run)/float64(b.N), "write-txns/run")
			b.ReportMetric(float64(notify)/float64(b.N), "notify-txns/run")
			b.ReportMetric(float64(thread)/float64(b.N), "write-txns/thread")
			b.ReportMetric(float64(background)/float64(b.N), "river-upkeep-txns/run")
			for _, k := range order {
				b.Logf("%.2f/run: %s", float64(kinds[k])/float64(b.N), k)
			}
		})
	}
}

// writeBench is a platform on PostgreSQL whose every connection a writeCounter traces.
type writeBench struct {
	p       *platform.Platform
	actor   platform.Actor
	counter *writeCounter
	dsn     string
}

func newWriteBench(b *testing.B) *writeBench {
	b.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(b)
	schema := pgtest.Schema(b, dsn)
	counter := newWriteCounter()
	st, err := postgres.Open(ctx, dsn, postgres.WithSchema(schema), postgres.WithTracer(counter))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	ws, u := &store.Workspace{Name: "bench"}, &store.User{Email: "bench-" + strings.ToLower(rand.Text()[:8]) + "@example.test"}
	benchMust(b, st.CreateWorkspace(ctx, ws))
	benchMust(b, st.CreateUser(ctx, u))
	benchMust(b, st.AddMember(ctx, &store.Membership{WorkspaceID: ws.ID, UserID: u.ID, Role: store.MemberRoleMember}))

	dir := b.TempDir()
	oneStep, twoSteps := filepath.Join(dir, "greeter.yaml"), filepath.Join(dir, "echoer.yaml")
	benchMust(b, os.WriteFile(oneStep, []byte("turns:\n  - text: Hello.\n"), 0o600))
	benchMust(b, os.WriteFile(twoSteps, []byte("turns:\n  - calls:\n      - name: echo\n        args: {text: hi}\n  - text: It said hi.\n"), 0o600))
	agents := map[string]*agent.Agent{
		"greeter": {Name: "greeter", Prompt: &agent.Prompt{Name: "greeter", Model: "scripted:" + oneStep, Stop: agent.StopRules{MaxSteps: 4}}},
		"echoer": {Name: "echoer", Prompt: &agent.Prompt{Name: "echoer", Model: "scripted:" + twoSteps, Tools: []string{"echo"},
			Stop: agent.StopRules{MaxSteps: 4}}},
	}
	reg := &quiver.Registry{}
	benchMust(b, reg.Register(quiver.Func("echo", "Echoes its text.", func(_ context.Context, a struct {
		Text string `json:"text"`
	}) (string, error) {
		return a.Text, nil
	})))
	p, err := platform.New(platform.Config{Store: st, Registry: reg, Logger: slog.New(slog.DiscardHandler), Catalog: &agent.Catalog{Agents: agents}})
	benchMust(b, err)
	b.Cleanup(func() { p.Close() })

	pcfg := tracedPool(b, dsn, schema, counter)
	benchMust(b, p.StartJobs(ctx, func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) {
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return nil, err
		}
		b.Cleanup(pool.Close)
		return jobs.StartPostgres(ctx, pool, c)
	}))
	b.Cleanup(func() { _ = p.Stop(context.Background()) })
	return &writeBench{p: p, counter: counter, dsn: dsn,
		actor: platform.Actor{WorkspaceID: ws.ID, UserID: u.ID, Role: store.KeyRoleMember, KeyID: "key_bench"}}
}

// serverXIDs is the next transaction id of the PostgreSQL server. Its growth counts every
// transaction that wrote, on any database of the server (exact when nothing else writes),
// including those the tracer does not: one that wrote and then failed (a statement refused
// after its first rows, which rolls back), and it tells what the tracer cannot from a
// statement's tag (River's completer returns the jobs it was given, changed or not).
func serverXIDs(b *testing.B, dsn string) int64 {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	benchMust(b, err)
	defer conn.Close(ctx)
	var xid int64
	benchMust(b, conn.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&xid))
	return xid
}

// tracedPool is the configuration of a pool on dsn's database whose connections work in
// schema and are traced by counter.
func tracedPool(b *testing.B, dsn, schema string, counter *writeCounter) *pgxpool.Config {
	pu, err := url.Parse(dsn)
	benchMust(b, err)
	q := pu.Query()
	q.Set("search_path", schema)
	pu.RawQuery = q.Encode()
	pcfg, err := pgxpool.ParseConfig(pu.String())
	benchMust(b, err)
	pcfg.ConnConfig.Tracer = counter
	return pcfg
}

// runToEnd starts agent's run on the thread and waits for River to record its job done.
func (r *writeBench) runToEnd(ctx context.Context, threadID, agentName string) error {
	run, err := r.p.StartRun(ctx, r.actor, threadID, agentName, "Hi")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		status, err := r.p.Jobs().RunStatus(ctx, r.actor.WorkspaceID, threadID, run.JobID)
		if err != nil {
			return err
		}
		switch status {
		case jobs.RunDone:
			return nil
		case jobs.RunGivenUp:
			return errRunGivenUp
		}
		time.Sleep(2 * time.Millisecond)
	}
	return errRunTimeout
}

var (
	errRunGivenUp = errorString("the run was given up")
	errRunTimeout = errorString("the run did not end within a minute")
)

type errorString string

func (e errorString) Error() string { return string(e) }

func benchMust(b testing.TB, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
