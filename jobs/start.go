package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	_ "modernc.org/sqlite"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/genai" // the database/sql driver River's SQLite driver uses
)

// StartSQLite starts the runs of the SQLite database at path, the store's file: River's tables
// go in it (migrated first), on a connection of River's own. One process serves a SQLite
// database, so the runs it finds running were left by one that died: they are made available
// again before the first job is taken.
func StartSQLite(ctx context.Context, path string, cfg Config) (*Jobs, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: abs}).String()+"?"+url.Values{
		// The store checkpoints the file's WAL itself (store/sqlite): River's connection leaves
		// it to the store.
		"_pragma": {"busy_timeout(5000)", "journal_mode(WAL)", "wal_autocheckpoint(0)", "synchronous(NORMAL)"},
		"_txlock": {"immediate"},
	}.Encode())
	if err != nil {
		return nil, fmt.Errorf("jobs: opening %s: %w", path, err)
	}
	// River runs operations side by side, which SQLite answers with SQLITE_BUSY: one
	// connection makes them take turns (the driver's own advice).
	db.SetMaxOpenConns(1)
	l := newLocalLease()
	drv := localSQLite{riversqlite.New(db)}
	if err := migrateRiver(ctx, drv, &cfg); err != nil {
		return nil, err
	}
	j, _, err := start(ctx, drv, &cfg, l, l, true)
	if err != nil {
		db.Close()
		return nil, err
	}
	j.client = closing{j.client, db.Close}
	return j, nil
}

// localSQLite is River's SQLite driver without its listener. River's SQLite driver stands in
// for PostgreSQL's LISTEN/NOTIFY with a table of notifications that every process polls every
// 50 ms, and sends at most one per FetchCooldown: a run waited up to 50 ms for its insert to
// be noticed, and a run queued within 100 ms of another was not noticed at all until River's
// next fetch poll, up to a second later. One process serves a SQLite database, so there is no
// one else to notify: without a listener, River wakes the process's own producer as soon as
// an insert commits (the way it serves drivers that have none), and stops polling the table.
type localSQLite struct{ *riversqlite.Driver }

func (localSQLite) SupportsListener() bool     { return false }
func (localSQLite) SupportsListenNotify() bool { return false }

// StartPostgres starts the runs of the PostgreSQL database pool connects to: River's tables go
// in it (migrated first). Other processes may serve the same database: a run takes its
// thread's lease as an advisory lock, which other nodes see.
func StartPostgres(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Jobs, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	// A run holds its lease's connection from its first moment to its last, and inserts jobs
	// as it goes (its non-blocking children, the wake of its parent). Taken from pool, the
	// leases of Workers runs at once took every connection of a default-sized pool (max(4,
	// CPUs), River's listener holding one), and each run waited forever for one to insert
	// with: the leases take theirs from a pool of their own, one per worker and one for the
	// orphan check, so that they never keep River from pool.
	//
	// Every run takes its lease, a child's run inside its parent's call included (the runner
	// takes them: Runner.Lease), so that a wake on another node cannot run a child that a
	// call here runs: a worker's tree holds up to one lease per level (MaxDepth of them, and
	// the root's).
	depth := cfg.Runner.MaxDepth
	if depth <= 0 {
		depth = agent.DefaultMaxDepth
	}
	l, err := newAdvisoryLease(ctx, pool, int32(cfg.Workers*(depth+1)+1), leaseWait)
	if err != nil {
		return nil, err
	}
	leases := l.pool
	var workerLease lease = l
	if cfg.Runner.Lease == nil {
		cfg.Runner.Lease = runnerLease{l}
		workerLease = heldByRunner{} // the runner takes it: taken here too, the run's own try would fail
	}
	cfg.completeAtEnd = true
	drv := riverpgxv5.New(pool)
	if err := migrateRiverLocked(ctx, pool, drv, &cfg); err != nil {
		leases.Close()
		return nil, err
	}
	// Before the workers start: a run's end sends its last events through it (completeAtEnd).
	rl, stopRelay, err := startRelay(ctx, pool, cfg.Runner, cfg.Logger)
	if err != nil {
		leases.Close()
		return nil, err
	}
	cfg.relay = rl
	j, c, err := start(ctx, drv, &cfg, workerLease, l, false)
	if err != nil {
		stopRelay()
		leases.Close()
		return nil, err
	}
	// A node that died left its runs running, their leases free: take them again soon,
	// rather than when River's rescuer finds them stuck (RunTimeout later).
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go watchOrphans(watchCtx, done, c, drv, l, &cfg)
	j.relay = rl
	j.insertTx = insertTx(pool, c)
	j.client = closing{j.client, func() error { stopRelay(); stopWatch(); <-done; leases.Close(); return nil }}
	return j, nil
}

// insertTx is Jobs.insertTx on pool, for River's client c.
func insertTx(pool *pgxpool.Pool, c *river.Client[pgx.Tx]) func(context.Context, RunArgs, func(pgx.Tx) error) (*rivertype.JobInsertResult, error) {
	return func(ctx context.Context, args RunArgs, before func(pgx.Tx) error) (*rivertype.JobInsertResult, error) {
		var res *rivertype.JobInsertResult
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := before(tx); err != nil {
				return err
			}
			var err error
			if res, err = c.InsertTx(ctx, tx, args, nil); err != nil {
				return err
			}
			if res.UniqueSkippedAsDuplicate {
				return errDuplicate // rolled back: the thread has a run
			}
			return nil
		})
		if errors.Is(err, errDuplicate) {
			err = nil
		}
		return res, err
	}
}

// errDuplicate rolls back insertTx's transaction when the thread has a run already.
var errDuplicate = errors.New("jobs: the thread has a run queued or running")

// watchOrphans looks for the runs a stopped node left every cfg.orphanCheck, until ctx ends;
// then it closes done.
func watchOrphans[TTx any](ctx context.Context, done chan struct{}, c *river.Client[TTx], drv riverdriver.Driver[TTx], l *advisoryLease, cfg *Config) {
	defer close(done)
	tick := time.NewTicker(cfg.orphanCheck)
	defer tick.Stop()
	for {
		if err := checkOrphans(ctx, c, drv, l, cfg.orphanGrace); err != nil && ctx.Err() == nil {
			cfg.Logger.WarnContext(ctx, "jobs: looking for runs a stopped node left", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// On PostgreSQL, a run whose job is running but whose thread's lease no one holds has lost its
// node: every run holds its lease from its first moment to its last, and a node's advisory
// locks go with its connections when it dies (at once when its process is killed; when its
// machine vanishes, once PostgreSQL's TCP keepalives give up on its connections). orphanGrace
// leaves a job just fetched the time to take its lease; orphanCheck is how often the fleet
// looks, one node at a time (Config's test-only fields shorten both). A run of a killed node
// runs again within orphanCheck and orphanSettle of the kill, or of orphanGrace after it
// started when later.
const (
	orphanGrace = 2 * time.Second
	orphanCheck = time.Second
)

// orphanChecker names the advisory lock the node that looks for orphans holds while it looks,
// so that the fleet lists its running jobs once per orphanCheck, not once per node. No thread
// id has its form.
const orphanChecker = "quiver:orphan-check"

// orphanSettle is how long a job found orphaned must stay so before it is taken: a run
// gives its lease up a moment before River records its job completed (River completes jobs
// in batches), and a job seen between the two is not an orphan.
const orphanSettle = 500 * time.Millisecond

// checkOrphans makes the runs whose node is gone available again, unless another node is
// looking for them at the moment. It probes the leases on the connection that holds the
// checker's lock, so that it never needs a second one from a pool the runs may have filled,
// and takes a job only when two probes orphanSettle apart find it orphaned, in the same
// attempt.
func checkOrphans[TTx any](ctx context.Context, c *river.Client[TTx], drv riverdriver.Driver[TTx], l *advisoryLease, grace time.Duration) error {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, int32(leaseSpace), leaseKey(orphanChecker)).Scan(&ok); err != nil || !ok {
		return err
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, $2)`, int32(leaseSpace), leaseKey(orphanChecker)); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) // a closed session holds no lock
		}
	}()
	var now time.Time // the database's clock, which stamped the jobs' attempts
	if err := conn.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return err
	}
	first := map[int64]time.Time{} // the orphans of the first probe, by job, with their attempt
	err = rescueOrphans(ctx, c, drv, func(job *rivertype.JobRow) bool {
		if orphaned(ctx, conn.Conn(), job, now, grace) {
			first[job.ID] = *job.AttemptedAt
		}
		return false
	})
	if err != nil || len(first) == 0 {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(orphanSettle):
	}
	return rescueOrphans(ctx, c, drv, func(job *rivertype.JobRow) bool {
		at, seen := first[job.ID]
		return seen && job.AttemptedAt.Equal(at) && orphaned(ctx, conn.Conn(), job, now, grace)
	})
}

// orphaned says whether job, a running run, has no one running it: it had run longer than
// grace at now, by the database's clock, and its thread's lease is free (probed on conn).
func orphaned(ctx context.Context, conn *pgx.Conn, job *rivertype.JobRow, now time.Time, grace time.Duration) bool {
	if job.AttemptedAt == nil || now.Sub(*job.AttemptedAt) < grace {
		return false
	}
	var args RunArgs
	if err := json.Unmarshal(job.EncodedArgs, &args); err != nil || args.ThreadID == "" {
		return false
	}
	var free bool
	err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, int32(leaseSpace), leaseKey(args.ThreadID)).Scan(&free)
	if err != nil || !free {
		return false
	}
	_, err = conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, int32(leaseSpace), leaseKey(args.ThreadID))
	return err == nil
}

// migrateRiver brings River's tables up to date.
func migrateRiver[TTx any](ctx context.Context, drv riverdriver.Driver[TTx], cfg *Config) error {
	m, err := rivermigrate.New(drv, &rivermigrate.Config{Logger: cfg.Logger})
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("jobs: migrating River's tables: %w", err)
	}
	return nil
}

// migrateRiverLocked brings River's tables up to date while it holds an advisory lock of the
// schema's, on a connection of its own: nodes started at once on a new database take turns,
// where River's own migration, unlocked, fails on all but one ("relation river_migration
// already exists"). (Not one transaction: a migration of River's uses an enum value an earlier
// one adds, which PostgreSQL refuses within the transaction that added it.)
func migrateRiverLocked(ctx context.Context, pool *pgxpool.Pool, drv riverdriver.Driver[pgx.Tx], cfg *Config) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("jobs: a connection for River's migration: %w", err)
	}
	defer conn.Release()
	const key = `hashtext('quiver:river-migrate:' || current_schema())`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, `+key+`)`, int32(leaseSpace)); err != nil {
		return fmt.Errorf("jobs: taking River's migration lock: %w", err)
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, `+key+`)`, int32(leaseSpace)); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) // a closed session holds no lock
		}
	}()
	return migrateRiver(ctx, drv, cfg)
}

// start starts River on drv for cfg's runs. The workers take workerLease for a run; threads is
// the threads' lease itself, which is workerLease unless the runner takes it (heldByRunner).
func start[TTx any](ctx context.Context, drv riverdriver.Driver[TTx], cfg *Config, workerLease, threads lease, orphansRun bool) (*Jobs, *river.Client[TTx], error) {
	workers, err := newWorkers(cfg, workerLease, threads)
	if err != nil {
		return nil, nil, err
	}
	c, err := river.NewClient(drv, cfg.riverConfig(workers))
	if err != nil {
		return nil, nil, fmt.Errorf("jobs: %w", err)
	}
	if orphansRun {
		if err := rescueOrphans(ctx, c, drv, func(*rivertype.JobRow) bool { return true }); err != nil {
			return nil, nil, err
		}
	}
	cfg.setRunnerDefaults(background{c})
	if err := c.Start(ctx); err != nil {
		return nil, nil, fmt.Errorf("jobs: starting River: %w", err)
	}
	var cl client = c
	if reg := jobMetrics(drv); reg != nil {
		cl = closing{c, reg.Unregister}
	}
	return &Jobs{client: cl, runner: cfg.Runner, threads: threads}, c, nil
}

// newWorkers are River's workers of cfg's runs, wakes and purges.
func newWorkers(cfg *Config, workerLease, threads lease) (*river.Workers, error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &runWorker{cfg: cfg, lease: workerLease, threads: threads}); err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &wakeWorker{run: &runWorker{cfg: cfg, lease: workerLease, threads: threads}}); err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &purgeWorker{cfg: cfg}); err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	return workers, nil
}

// setRunnerDefaults gives the runner what it lacks before the first job is taken: River to
// start a run in the background (a run may start a non-blocking child at once), and the
// logger of the runs' failures, which the runner records and logs.
func (cfg *Config) setRunnerDefaults(bg background) {
	if cfg.Runner.Background == nil {
		cfg.Runner.Background = bg
	}
	if cfg.Runner.Logger == nil {
		cfg.Runner.Logger = cfg.Logger
	}
}

// jobStates are the states the job gauge reports: work waiting, being done, or to be tried
// again.
var jobStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStateRunning, rivertype.JobStateRetryable,
	rivertype.JobStateScheduled}

// jobMetrics reports the jobs of the database by state (quiver.jobs, attribute
// quiver.job.state) when the global meter provider's metrics are read: the depth of the queue
// of runs, wakes and purges across every node. nil when there are no metrics.
func jobMetrics[TTx any](drv riverdriver.Driver[TTx]) metric.Registration {
	m := genai.Meter(nil)
	if m == nil {
		return nil
	}
	gauge, err := m.Int64ObservableGauge(genai.MetricJobs, metric.WithUnit("{job}"),
		metric.WithDescription("Background jobs (runs, wakes, purges) by state."))
	if err != nil {
		return nil
	}
	reg, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for _, state := range jobStates {
			n, err := drv.GetExecutor().JobCountByState(ctx, &riverdriver.JobCountByStateParams{State: state})
			if err != nil {
				return err
			}
			o.ObserveInt64(gauge, int64(n), metric.WithAttributes(attribute.String("quiver.job.state", string(state))))
		}
		return nil
	}, gauge)
	if err != nil {
		return nil
	}
	return reg
}

// rescueOrphans makes the runs a process that died left running available again, with an
// attempt error that says so. It is River's own rescue (the driver's JobRescueMany, which its
// rescuer calls for jobs running too long), done at once: on a database only this process
// serves, a job found running at start has no one running it. (The client's JobRetry leaves
// running jobs alone.)
func rescueOrphans[TTx any](ctx context.Context, c *river.Client[TTx], drv riverdriver.Driver[TTx], orphan func(*rivertype.JobRow) bool) error {
	params := river.NewJobListParams().Kinds(RunArgs{}.Kind(), WakeArgs{}.Kind()).States(rivertype.JobStateRunning).First(1000)
	now := time.Now().UTC()
	for {
		res, err := c.JobList(ctx, params)
		if err != nil {
			return fmt.Errorf("jobs: listing the runs a stopped process left: %w", err)
		}
		if len(res.Jobs) == 0 {
			return nil
		}
		rescue := &riverdriver.JobRescueManyParams{StuckHorizon: now.Add(time.Second)}
		for _, job := range res.Jobs {
			if !orphan(job) {
				continue
			}
			why, err := json.Marshal(rivertype.AttemptError{At: now, Attempt: max(job.Attempt, 0),
				Error: "the process running this run stopped; taken again when the next process started"})
			if err != nil {
				return err
			}
			rescue.ID = append(rescue.ID, job.ID)
			rescue.Error = append(rescue.Error, why)
			rescue.FinalizedAt = append(rescue.FinalizedAt, nil)
			rescue.ScheduledAt = append(rescue.ScheduledAt, now)
			rescue.State = append(rescue.State, string(rivertype.JobStateAvailable))
		}
		if len(rescue.ID) == 0 {
			// no orphan on this page
		} else if _, err := drv.GetExecutor().JobRescueMany(ctx, rescue); err != nil {
			return fmt.Errorf("jobs: making the runs a stopped process left available again: %w", err)
		}
		if len(res.Jobs) < 1000 {
			return nil
		}
		params = params.After(res.LastCursor)
	}
}

// closing closes what the client used once it has stopped.
type closing struct {
	client
	close func() error
}

func (c closing) Stop(ctx context.Context) error {
	err := c.client.Stop(ctx)
	if err != nil && ctx.Err() != nil {
		// Runs still going when ctx ended are cancelled rather than waited for past it:
		// closing waits for what they hold (a lease's connection) to come back.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelWait)
		err = errors.Join(err, c.client.StopAndCancel(cctx))
		cancel()
	}
	return errors.Join(err, c.close())
}

// cancelWait bounds how long a Stop whose ctx has ended waits for the runs it cancels to
// return.
const cancelWait = 10 * time.Second

// localLease is a thread's lease within this process.
type localLease struct {
	wait time.Duration // how long acquire waits for a held lease
	mu   sync.Mutex
	held map[string]chan struct{} // closed when the thread's lease is given back
}

func newLocalLease() *localLease {
	return &localLease{wait: leaseWait, held: map[string]chan struct{}{}}
}

func (l *localLease) acquire(ctx context.Context, threadID string) (func(), bool, error) {
	deadline := time.NewTimer(l.wait)
	defer deadline.Stop()
	for {
		release, freed := l.take(threadID)
		if release != nil {
			return release, true, nil
		}
		select {
		case <-freed:
		case <-deadline.C:
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

func (l *localLease) try(_ context.Context, threadID string) (func(), bool, error) {
	release, _ := l.take(threadID)
	return release, release != nil, nil
}

// take takes the thread's lease if it is free (release gives it back), or says when it is.
func (l *localLease) take(threadID string) (release func(), freed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ch, ok := l.held[threadID]; ok {
		return nil, ch
	}
	ch := make(chan struct{})
	l.held[threadID] = ch
	return func() {
		l.mu.Lock()
		delete(l.held, threadID)
		l.mu.Unlock()
		close(ch)
	}, nil
}

// advisoryLease is a thread's lease across the processes of one PostgreSQL database: a
// session advisory lock on the thread id's hash, held by a connection of its own for the run.
// A process that dies loses its connection, and with it the lock.
type advisoryLease struct{ pool *pgxpool.Pool }

// newAdvisoryLease is the leases of pool's database, on a pool of their own of at most
// maxConns connections (one per lease held), each of which waits at most wait for a lock
// (lock_timeout), so that acquire does not wait forever.
func newAdvisoryLease(ctx context.Context, pool *pgxpool.Pool, maxConns int32, wait time.Duration) (*advisoryLease, error) {
	lc := pool.Config()
	lc.MinConns, lc.MaxConns = 0, maxConns
	lc.ConnConfig.RuntimeParams["lock_timeout"] = strconv.FormatInt(max(wait.Milliseconds(), 1), 10)
	leases, err := pgxpool.NewWithConfig(ctx, lc)
	if err != nil {
		return nil, fmt.Errorf("jobs: a pool for the runs' leases: %w", err)
	}
	return &advisoryLease{pool: leases}, nil
}

// leaseSpace keeps Quiver's advisory locks apart from other users of the database (the
// two-key form of pg_try_advisory_lock: this space, the thread's hash). Two threads whose ids
// hash alike share a lease: their runs take turns, which is safe.
const leaseSpace = 0x51564552 // "QVER"

// leaseKey is the second key of a thread's lease: its id's hash.
func leaseKey(threadID string) int32 {
	h := fnv.New32a()
	h.Write([]byte(threadID))
	return int32(h.Sum32())
}

func (l *advisoryLease) acquire(ctx context.Context, threadID string) (func(), bool, error) {
	// The pool's connections wait at most leaseWait for a lock (newAdvisoryLease), and
	// PostgreSQL ends the wait the moment the lock is given back.
	return l.take(ctx, threadID, func(conn *pgxpool.Conn, key int32) (bool, error) {
		_, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, int32(leaseSpace), key)
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == lockNotAvailable {
			return false, nil
		}
		return err == nil, err
	})
}

func (l *advisoryLease) try(ctx context.Context, threadID string) (func(), bool, error) {
	return l.take(ctx, threadID, func(conn *pgxpool.Conn, key int32) (ok bool, err error) {
		err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, int32(leaseSpace), key).Scan(&ok)
		return ok, err
	})
}

// take takes the thread's lease with lock on a connection that then holds it until released.
func (l *advisoryLease) take(ctx context.Context, threadID string, lock func(*pgxpool.Conn, int32) (bool, error)) (func(), bool, error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	key := leaseKey(threadID)
	ok, err := lock(conn, key)
	if err != nil || !ok {
		conn.Release()
		return nil, false, err
	}
	return func() {
		// Unlocked on the same connection, whatever the run's context did.
		ctx := context.WithoutCancel(ctx)
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, int32(leaseSpace), key); err != nil {
			conn.Conn().Close(ctx) // a closed session holds no lock
		}
		conn.Release()
	}, true, nil
}

// lockNotAvailable is PostgreSQL's error code for a lock not taken within lock_timeout.
const lockNotAvailable = "55P03"

// runnerLease is the advisory lease as agent.Runner takes it.
type runnerLease struct{ l *advisoryLease }

func (r runnerLease) Acquire(ctx context.Context, threadID string) (func(), bool, error) {
	return r.l.acquire(ctx, threadID)
}

// heldByRunner is the workers' lease when the runner takes the leases itself: the worker's
// run reports a lease another holds as agent.ErrBusy, which snoozes the job.
type heldByRunner struct{}

func (heldByRunner) acquire(context.Context, string) (func(), bool, error) {
	return func() {}, true, nil
}

func (h heldByRunner) try(ctx context.Context, threadID string) (func(), bool, error) {
	return h.acquire(ctx, threadID)
}
