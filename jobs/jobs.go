// Package jobs runs agent runs in the background, durably, on River
// (github.com/riverqueue/river), in the database the store already uses: SQLite through
// River's SQLite driver, PostgreSQL through its pgx driver. River's tables are migrated on
// start.
//
// A run is a job (RunArgs): its user message, when it has one, is appended to the thread once
// (by the message's id) however often the job is tried, and the agent loop then runs or
// resumes the thread, which never runs a completed tool call twice (see agent.Runner). So a
// process killed in the middle of a run loses nothing: on SQLite, the jobs it was running are
// made available again when the next process starts; on PostgreSQL, where other nodes go on
// running, every node takes again, within seconds, a running job whose thread lease no one
// holds (a dead node's advisory locks go with its connections), and River's rescuer remains
// for a job running longer than RunTimeout plus a margin.
//
// Two runs of one thread never execute at once: River refuses a second run of a thread while
// one is queued or running (Start returns ErrRunQueued), and a run holds its thread's lease
// while it works (an advisory lock on PostgreSQL, across nodes; within the process on SQLite,
// whose database one process serves), so that a rescued job cannot overlap the one it rescued.
//
// No run ends silently: a run that cannot start or go on ends with its thread's outcome
// failed, saying why (see runWorker.work). What trying again cannot fix (an agent this node
// does not have, a bad definition, missing variables, a secret the keys cannot open, a model
// not configured or refusing the request) fails at once and its job is cancelled; anything
// else (a provider's outage, a timeout, a remote MCP server still connecting, the store) is
// tried again by River, each try's failure on the thread's streams as retrying, until River's
// last try, whose failure is recorded the same way.
package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/endtx"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// RunArgs asks for an agent run on a thread.
type RunArgs struct {
	WorkspaceID string `json:"workspace_id" river:"unique"`
	ThreadID    string `json:"thread_id" river:"unique"`
	// Agent names the agent that runs (see Config.Agents).
	Agent string `json:"agent"`
	// Message, when set, is the user's message the run answers. It is appended before the
	// run, once: a job tried again finds it there by MessageID, which Start sets when empty.
	Message   string `json:"message,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	// Trace is the W3C trace context of the request that queued the run (traceparent, and
	// tracestate when there is one), so that the run's spans join that request's trace
	// whichever process runs it. It is not part of the run's identity.
	Trace map[string]string `json:"trace,omitempty"`
	// Caller is who started the run at a door, as the runner is entitled as it (see
	// agent.WithCaller); none: the thread's last caller. Not part of the run's identity.
	Caller json.RawMessage `json:"caller,omitempty"`
}

// Kind is the job's kind in River's tables.
func (RunArgs) Kind() string { return "quiver.run" }

// InsertOpts makes a thread's runs unique while one is queued or running (River's unique
// jobs, by workspace and thread): a run finished, failed for good or cancelled does not count.
func (RunArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queue, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled}}}
}

const queue = "runs"

// Defaults of Config.
const (
	DefaultWorkers    = 4
	DefaultRunTimeout = time.Hour
	// rescueMargin is how much longer than RunTimeout a job runs before River takes it for
	// stuck: its process died.
	rescueMargin = 5 * time.Minute
	// busyRetry is how long a run waits before it tries again when another run has its
	// thread's lease (a rescued job whose first try still works, a run started in the
	// foreground).
	busyRetry = 2 * time.Second
)

// Errors.
var (
	// ErrRunQueued: the thread already has a run queued or running.
	ErrRunQueued = errors.New("jobs: the thread already has a run queued or running")
	// ErrRunNotFound: RunStatus's answer for a job that is not a run of the thread named.
	ErrRunNotFound = errors.New("jobs: no such run on this thread")
)

// Config is what the runs need.
type Config struct {
	// Runner runs the agents; its Store is where the threads are. Required.
	Runner *agent.Runner
	// Agents returns the agent a job names. Required. An error fails the run for good: the
	// thread records a failed outcome (reason unknown_agent) and the job is cancelled, since
	// the name does not become valid by trying again.
	Agents func(ctx context.Context, name string) (*agent.Agent, error)
	// Workers is how many runs execute at once in this process; 0 means DefaultWorkers.
	Workers int
	// RunTimeout bounds one run; 0 means DefaultRunTimeout.
	RunTimeout time.Duration
	// Logger gets River's logs and the runs' failures (the Runner's too, when it has none);
	// nil means slog.Default.
	Logger *slog.Logger
	// Entities, when set, is purged of the deleted tools whose retention has passed, at start
	// and every PurgeEvery (0 means DefaultPurgeEvery); each tool removed is logged.
	Entities   store.Entities
	PurgeEvery time.Duration
	// UsageRetention is how long the purge keeps the usage Entities keeps (store.Usage): hour
	// and day rows this long, minute rows usage.MinuteRetention. 0 keeps it all.
	UsageRetention time.Duration
	// Now is the jobs' clock: the purge's, and River's (when a job scheduled for later, such
	// as a run paused for its budget, is due); nil means time.Now. Tests move it.
	Now func() time.Time
	// pollInterval, when set, is how often River looks for new jobs (tests shorten it).
	pollInterval time.Duration
	// fetchPoll, when set, is River's fetch poll alone (a test lengthens it, to show that
	// runs start because they are queued).
	fetchPoll time.Duration
	// maxAttempts, when set, is how often River tries a job before it gives up (River's
	// default: 25); tests lower it.
	maxAttempts int
	// completeAtEnd says that a run's job is completed in the transaction that ends the run
	// (PostgreSQL: River's tables and the store's in one database; see completeAtEnd).
	completeAtEnd bool
	// relay, on PostgreSQL, carries the runs' events to the other nodes; a run's end sends
	// its last ones in its transaction (see completeAtEnd).
	relay *relay
	// hooks, when set, are River's hooks (a test holds a job between its end and River's
	// record of it).
	hooks []rivertype.Hook
	// orphanGrace and orphanCheck: see orphaned (tests shorten them).
	orphanGrace, orphanCheck time.Duration
}

func (c *Config) check() error {
	if c.Runner == nil || c.Runner.Store == nil || c.Agents == nil {
		return errors.New("jobs: Config needs a Runner with a Store, and Agents")
	}
	if c.Workers < 0 || c.RunTimeout < 0 || c.PurgeEvery < 0 {
		return fmt.Errorf("jobs: Workers (%d), RunTimeout (%s) and PurgeEvery (%s) must not be negative; 0 takes the default", c.Workers, c.RunTimeout, c.PurgeEvery)
	}
	c.setDefaults()
	return nil
}

// setDefaults sets the fields left zero to their defaults.
func (c *Config) setDefaults() {
	c.PurgeEvery = cmp.Or(c.PurgeEvery, DefaultPurgeEvery)
	c.orphanGrace = cmp.Or(c.orphanGrace, orphanGrace)
	c.orphanCheck = cmp.Or(c.orphanCheck, orphanCheck)
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	c.RunTimeout = cmp.Or(c.RunTimeout, DefaultRunTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// fetchCooldown is how soon River fetches again after a fetch, and how often one process
// notifies the others of a queued run (River sends one insert notification per queue per
// cooldown). With River's default (100 ms), a run queued within 100 ms of the last
// notification sent none, and on PostgreSQL it waited for the next fetch poll, up to a second
// (p90 0.8 s back to back); on SQLite, where an insert wakes the process's own producer at once,
// it waited out the rest of the cooldown. 5 ms bounds both waits at 5 ms for at most 200
// notifications and fetches a second per node.
const fetchCooldown = 5 * time.Millisecond

// riverConfig is River's configuration for cfg's runs, done by workers.
func (c *Config) riverConfig(workers *river.Workers) *river.Config {
	rc := &river.Config{
		Queues:               map[string]river.QueueConfig{queue: {MaxWorkers: c.Workers}, purgeQueue: {MaxWorkers: 1}},
		Workers:              workers,
		JobTimeout:           c.RunTimeout,
		RescueStuckJobsAfter: c.RunTimeout + rescueMargin,
		FetchCooldown:        fetchCooldown,
		Logger:               c.Logger,
		RetryPolicy:          runRetry{},
	}
	if c.pollInterval > 0 {
		rc.FetchPollInterval, rc.FetchCooldown = c.pollInterval, c.pollInterval
	}
	if c.fetchPoll > 0 {
		rc.FetchPollInterval = c.fetchPoll
	}
	if c.maxAttempts > 0 {
		rc.MaxAttempts = c.maxAttempts
	}
	rc.Hooks = c.hooks
	if c.Now != nil {
		rc.Test.Time = clock(c.Now)
	}
	if pj := c.purgeJob(); pj != nil {
		rc.PeriodicJobs = []*river.PeriodicJob{pj}
	}
	return rc
}

// clock is River's time as Config.Now says: a stubbed time, which River also gives the
// database where it compares with its own (a job due, a lease expired).
type clock func() time.Time

func (c clock) Now() time.Time { return c() }

func (c clock) NowOrNil() *time.Time {
	t := c()
	return &t
}

// runRetry is when a failed run is tried again. A run fails mostly for what passes in
// seconds (its database restarting, a node that started a moment ago and has not loaded its
// workspace's tools yet): River's default (attempt^4 seconds: 16 s, 81 s, 256 s...) left a run
// stuck for minutes after two or three of those; here the wait grows from 1 s to at most 10 s.
type runRetry struct{}

// NextRetry implements river.ClientRetryPolicy.
func (runRetry) NextRetry(job *rivertype.JobRow) time.Time {
	wait := min(time.Duration(job.Attempt)*time.Second, runRetryMax)
	return time.Now().Add(wait)
}

// runRetryMax is the longest wait before a failed run is tried again.
const runRetryMax = 10 * time.Second

// Jobs runs the background runs of one database. Its methods are safe for concurrent use.
type Jobs struct {
	client client
	relay  *relay // the other nodes' run events; nil on SQLite, which one process serves
	runner *agent.Runner
	// threads is the threads' lease, which Start holds for a moment to record a run's
	// message (see recordMessage).
	threads lease
	// insertTx, on PostgreSQL, queues a run in a transaction of River's pool that first
	// does what before does (see insertWithMessage), and rolls it back when before fails or
	// the thread has a run already (the result says so); nil on SQLite.
	insertTx func(ctx context.Context, args RunArgs, before func(pgx.Tx) error) (*rivertype.JobInsertResult, error)
}

// client is the part of a river.Client Jobs uses: the client's type depends on its driver's.
type client interface {
	Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	JobGet(ctx context.Context, id int64) (*rivertype.JobRow, error)
	Stop(ctx context.Context) error
	StopAndCancel(ctx context.Context) error
}

// Stop stops taking jobs and waits for the runs in progress to end until ctx ends; runs still
// going then are cancelled (each stops at its next step or its call's end, resumable), and
// Stop returns once they have given back what they hold, with ctx's error.
func (j *Jobs) Stop(ctx context.Context) error { return j.client.Stop(ctx) }

// Subscribe calls fn with every event of the runs other processes on the database run (on
// PostgreSQL: the other nodes of the fleet), until the returned function is called. The
// runner's Subscribe has this process's own. fn is called in order and must be quick.
func (j *Jobs) Subscribe(fn func(agent.Event)) (unsubscribe func()) {
	if j.relay == nil {
		return func() {}
	}
	return j.relay.subscribe(fn)
}

// Broadcast hands a note (body, under key) to the subscribers of topic on the other processes
// on the database (on PostgreSQL: the other nodes of the fleet; nowhere on SQLite, whose
// database one process serves), in the order this process broadcasts. A note is at most about
// 5 KB; it may be lost when a node's connection to the database breaks, so it must be worth
// no more than what it saves (an MCP client's answer that a node is waiting for, say).
func (j *Jobs) Broadcast(ctx context.Context, topic, key string, body []byte) error {
	if j.relay == nil {
		return nil
	}
	return j.relay.broadcast(ctx, topic, key, body)
}

// Hear calls fn with the notes of topic that other processes broadcast, until the returned
// function is called. fn is called in order and must be quick.
func (j *Jobs) Hear(topic string, fn func(key string, body []byte)) (unsubscribe func()) {
	if j.relay == nil {
		return func() {}
	}
	return j.relay.hear(topic, fn)
}

// runWorker does the runs.
type runWorker struct {
	river.WorkerDefaults[RunArgs]
	cfg     *Config
	lease   lease // taken for the run
	threads lease // the threads' lease, when lease is the runner's (heldByRunner)
}

// lease keeps two runs of a thread from working at once.
type lease interface {
	// acquire takes the thread's lease, false when another run holds it (after waiting up
	// to leaseWait for it: Start holds a lease for a moment); release gives it back.
	acquire(ctx context.Context, threadID string) (release func(), ok bool, err error)
	// try takes the lease only if it is free now.
	try(ctx context.Context, threadID string) (release func(), ok bool, err error)
}

// leaseWait is how long a run waits for a thread's lease held by another before it gives up
// (and its job is snoozed): long enough for Start's hold of it (an append, a few
// milliseconds), short against busyRetry.
const leaseWait = 100 * time.Millisecond

func (w *runWorker) Timeout(*river.Job[RunArgs]) time.Duration { return w.cfg.RunTimeout }

func (w *runWorker) Work(ctx context.Context, job *river.Job[RunArgs]) error {
	return w.work(agent.WithCaller(withTrace(ctx, job.Args.Trace), job.Args.Caller), job.Args, job.JobRow, false)
}

// traceOf is the W3C trace context of ctx's span, through the global propagator, for a job
// to carry; nil when ctx has none.
func traceOf(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	return carrier
}

// withTrace is ctx continuing the trace a job carries.
func withTrace(ctx context.Context, tc map[string]string) context.Context {
	if len(tc) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(tc))
}

// work runs a thread: a run (RunArgs) or, with wake, a run only if the thread has queued
// messages or a run a crash cut short (WakeArgs).
//
// A run that cannot start or go on ends failed on its thread (agent's failure.go): for good at
// once when trying again cannot help (the runner records it, or Fail for an agent this node
// does not have), and its job is cancelled; otherwise River tries it again, each failed try
// announced to the thread's streams (agent.EventRetrying) and logged, and the last try's
// failure is recorded as the others are.
func (w *runWorker) work(ctx context.Context, a RunArgs, job *rivertype.JobRow, wake bool) error {
	// The job's context ends when this node stops or loses the lease: the run is handed to
	// another node, which runs again the calls cut short here.
	ctx = quiver.WithHandBack(ctx)
	if job.Attempt >= job.MaxAttempts {
		ctx = agent.WithFinalTry(ctx, a.ThreadID)
	}
	release, ok, err := w.lease.acquire(ctx, a.ThreadID)
	if err != nil {
		return fmt.Errorf("jobs: taking the lease of thread %s: %w", a.ThreadID, err)
	}
	if !ok {
		return river.JobSnooze(busyRetry)
	}
	defer release()
	th, err := thread.Open(ctx, w.cfg.Runner.Store, a.WorkspaceID, a.ThreadID)
	if errors.Is(err, store.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("jobs: no thread %s in workspace %s", a.ThreadID, a.WorkspaceID))
	}
	if err != nil {
		return err
	}
	if wake {
		idle, err := w.wakeIdle(ctx, th)
		if err != nil || idle {
			return err
		}
		if a.Agent == "" {
			// Asked for while the first run of a thread created without an agent went on (a
			// child's result): the agent is the one that run ended with, read now.
			info := th.Info()
			a.Agent = agent.CurrentAgent(&info)
		}
	}
	return w.runThread(ctx, th, a, job)
}

// runThread runs the thread by its agent, once its message (if any) is in the history.
func (w *runWorker) runThread(ctx context.Context, th *thread.Thread, a RunArgs, job *rivertype.JobRow) error {
	ag, err := w.cfg.Agents(ctx, a.Agent)
	if err != nil {
		// Trying again does not make the name valid: the agent is not in the configuration the
		// node serves (the fleet's latest, which Agents reads again before it refuses).
		err = fmt.Errorf("%w %q (%w); every node serves the fleet's configuration, whose agents quiver apply changes",
			agent.ErrUnknownAgent, a.Agent, err)
		return w.failed(ctx, th, a, job, w.cfg.Runner.Fail(ctx, th, a.Agent, err))
	}
	if a.MessageID != "" {
		if err := w.appendMessage(ctx, th, a); err != nil {
			return w.failed(ctx, th, a, job, err)
		}
	}
	if w.cfg.completeAtEnd && th.ParentID() == "" {
		ctx = completeAtEnd(ctx, a.ThreadID, job, w.cfg.relay)
	}
	out, err := w.cfg.Runner.Resume(ctx, th, ag)
	if err != nil {
		return w.failed(ctx, th, a, job, err)
	}
	w.cfg.Logger.Debug("jobs: run ended", "thread", a.ThreadID, "status", out.Status, "reason", out.Reason)
	return nil
}

// completeAtEnd has River complete job in the transaction that ends the run with its answer
// (store/postgres's AppendFinal), rather than in a transaction of its own once Work returns:
// one commit fewer to wait for, and no moment when the run has ended and its job still runs
// (Start waits that moment out for the thread's next run). River's completer then finds the
// job completed and writes nothing. The same transaction sends the run's last events (its
// answer, its end) to the other nodes through rl: they hear of the end with its commit, and
// the relay's own transaction for them is saved. A run that ends otherwise (paused, failed,
// its last answer written apart) leaves its job to River and its events to the relay as
// before. Not for a child's run: it delivers its result to its parent after that transaction,
// and River's retry of an uncompleted job is what redoes a delivery a crash cut short.
func completeAtEnd(ctx context.Context, threadID string, job *rivertype.JobRow, rl *relay) context.Context {
	return endtx.With(ctx, threadID, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, &river.Job[RunArgs]{JobRow: job}); err != nil {
			return err
		}
		if rl == nil {
			return nil
		}
		return rl.sendAnnounced(ctx, tx, threadID)
	})
}

// failed is the job's end after the run failed with err: cancelled once the failure is
// recorded for good on the thread (the runner logged it); on the last try, recorded so; else
// tried again by River, the try's failure announced and logged. A busy thread snoozes the job.
func (w *runWorker) failed(ctx context.Context, th *thread.Thread, a RunArgs, job *rivertype.JobRow, err error) error {
	var snooze *river.JobSnoozeError
	if errors.Is(err, agent.ErrBusy) || errors.As(err, &snooze) {
		return river.JobSnooze(busyRetry)
	}
	var failed *agent.FailedError
	if errors.As(err, &failed) {
		return river.JobCancel(err)
	}
	if job.Attempt >= job.MaxAttempts {
		// Failed before the runner could record it (the message's append, say): River gives up.
		if ferr := w.cfg.Runner.Fail(context.WithoutCancel(ctx), th, a.Agent, err); errors.As(ferr, &failed) {
			return river.JobCancel(ferr)
		}
		return err
	}
	reason, _ := agent.Classify(err)
	w.cfg.Runner.Announce(agent.Event{Type: agent.EventRetrying, ThreadID: a.ThreadID, Text: agent.FailureText(err)})
	w.cfg.Logger.Warn("jobs: the run failed; River will try again", "thread", a.ThreadID, "agent", a.Agent, "reason", reason,
		"attempt", job.Attempt, "of", job.MaxAttempts, "err", err)
	return err
}

// wakeIdle is nothingToWake read with the thread's lease held, as its reading needs: where the
// runner takes the lease for the run (heldByRunner), it is taken here for the look and given
// back before the run. Read without it, a wake could find the thread as a run still going on
// left it, marked as queued, a moment before that run ended without the message queued since.
func (w *runWorker) wakeIdle(ctx context.Context, th *thread.Thread) (bool, error) {
	release, err := w.holdForRunner(ctx, th.ID())
	if err != nil {
		return false, err
	}
	defer release()
	if _, err := th.Refresh(ctx); err != nil {
		return false, err
	}
	return w.nothingToWake(ctx, th)
}

// nothingToWake says whether a wake finds nothing to do: no queued messages (a run since the
// wake was asked for took them) and no run a crash cut short, or a run queued that will take
// them.
func (w *runWorker) nothingToWake(ctx context.Context, th *thread.Thread) (bool, error) {
	info := th.Info()
	if agent.QueuedMark(&info) {
		// Marked running as its run was queued (agent.MarkQueued): that run's job, not
		// begun yet (this wake holds the lease) or cut short and taken again, takes the queue
		// at its first step, as the agent it was queued for.
		return true, nil
	}
	queued, err := th.Queued(ctx)
	if err != nil {
		return false, err
	}
	// With the lease held, a thread still marked running is a run a crash cut short after
	// it took the queue (this wake's own first try, killed mid-step): nothing else would
	// finish it, since its messages are no longer queued.
	return len(queued) == 0 && info.Status != store.StatusRunning, nil
}

// appendMessage appends the run's user message, once, while no other run holds the thread: in
// the middle of another's step, it would come between a model's calls and their results.
// Where the runner takes the lease itself (the run has not yet), it is taken for the append.
func (w *runWorker) appendMessage(ctx context.Context, th *thread.Thread, a RunArgs) error {
	release, err := w.holdForRunner(ctx, a.ThreadID)
	if err != nil {
		return err
	}
	defer release()
	return appendOnce(ctx, th, a.MessageID, a.Message)
}

// holdForRunner takes the thread's lease for what the worker does before the run, where the
// runner takes the lease for the run itself (heldByRunner), and returns what gives it back
// (nothing to give back otherwise: the worker holds it already). A lease another holds
// snoozes the job.
func (w *runWorker) holdForRunner(ctx context.Context, threadID string) (release func(), err error) {
	if _, runners := w.lease.(heldByRunner); !runners {
		return func() {}, nil
	}
	release, ok, err := w.threads.acquire(ctx, threadID)
	if err != nil {
		return nil, fmt.Errorf("jobs: taking the lease of thread %s: %w", threadID, err)
	}
	if !ok {
		return nil, river.JobSnooze(busyRetry)
	}
	return release, nil
}

// appendOnce appends the run's user message unless a try before this one did.
func appendOnce(ctx context.Context, th *thread.Thread, id, text string) error {
	err := th.Inject(ctx, &store.Message{ID: id, Role: store.RoleUser, Content: text})
	if errors.Is(err, store.ErrIDTaken) {
		return nil // appended by an earlier try
	}
	return err
}

// WakeArgs asks for a run of a thread that was given queued messages (a child's result), to
// take them: after the run going on the thread, if any, has ended (the worker waits for the
// thread's lease), and only if they are still queued then, or a run that took them was cut
// short by a crash (the thread is still marked running). Wakes are not unique: the run going
// on may have looked at the queue already, and River's unique jobs cannot leave out running
// ones. A wake that finds the queue empty ends at once.
type WakeArgs struct {
	WorkspaceID string `json:"workspace_id"`
	ThreadID    string `json:"thread_id"`
	Agent       string `json:"agent"`
	// Answered makes the wake a watch (Jobs.Watch): it also runs a thread paused on a call
	// that has been answered since.
	Answered bool `json:"answered,omitempty"`
	// Budget makes the wake the end of a pause for a budget (agent.Scheduler): it runs the
	// thread if its last run is still paused for its budget.
	Budget bool `json:"budget,omitempty"`
	// Trace: see RunArgs.
	Trace map[string]string `json:"trace,omitempty"`
}

// Kind is the job's kind in River's tables.
func (WakeArgs) Kind() string { return "quiver.wake" }

// InsertOpts puts wakes with the runs.
func (WakeArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: queue} }

type wakeWorker struct {
	river.WorkerDefaults[WakeArgs]
	run *runWorker
}

func (w *wakeWorker) Timeout(*river.Job[WakeArgs]) time.Duration { return w.run.cfg.RunTimeout }

func (w *wakeWorker) Work(ctx context.Context, job *river.Job[WakeArgs]) error {
	a := job.Args
	ctx = withTrace(ctx, a.Trace)
	if a.Answered {
		return w.watch(ctx, a)
	}
	if a.Budget {
		return w.budget(ctx, a)
	}
	return w.run.work(ctx, RunArgs{WorkspaceID: a.WorkspaceID, ThreadID: a.ThreadID, Agent: a.Agent}, job.JobRow, true)
}

// watch queues the run of a thread left paused on a call that has been answered (see
// Jobs.Watch). It queues rather than runs: a run queued or going on is left to act, and
// River's unique runs make the run queued here that one.
func (w *wakeWorker) watch(ctx context.Context, a WakeArgs) error {
	cfg := w.run.cfg
	th, err := thread.Open(ctx, cfg.Runner.Store, a.WorkspaceID, a.ThreadID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	info := th.Info()
	if st := agent.ReadState(&info); info.Status != store.StatusIdle || st.Outcome == nil || st.Outcome.Status != agent.RunPaused {
		return nil
	}
	ag, err := cfg.Agents(ctx, a.Agent)
	if err != nil {
		return nil // the run that paused could not go on either
	}
	if waits, err := cfg.Runner.Waiting(ctx, th, ag); err != nil || waits != nil {
		return err // still waiting: the answer was never recorded, or the run went on and waits again
	}
	cfg.Logger.Warn("jobs: a run left paused with its answer recorded is queued again", "thread", a.ThreadID, "agent", a.Agent)
	return cfg.Runner.Background.Run(ctx, a.WorkspaceID, a.ThreadID, a.Agent)
}

// budget queues the run of a thread paused for its budget (agent.Scheduler): unless a run
// since went on, ended otherwise or paused again for a budget with a later time to go on.
// The run checks the budget again: one still reached pauses the thread again, and schedules
// the next try.
func (w *wakeWorker) budget(ctx context.Context, a WakeArgs) error {
	cfg := w.run.cfg
	t, err := cfg.Runner.Store.Thread(ctx, a.WorkspaceID, a.ThreadID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if st := agent.ReadState(t); t.Status != store.StatusIdle || st.Outcome == nil || st.Outcome.Budget == nil {
		return nil
	}
	return cfg.Runner.Background.Run(ctx, a.WorkspaceID, a.ThreadID, a.Agent)
}

// background is agent.Background on River: the runner's non-blocking children run as jobs, and
// a parent given a child's result is woken by one, so both survive a crash and, on PostgreSQL,
// run on any node.
type background struct {
	client interface {
		Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	}
}

var (
	_ agent.Background = background{}
	_ agent.Scheduler  = background{}
)

// Run queues a run of the thread; one already queued or running does (a child started again
// after a crash).
func (b background) Run(ctx context.Context, workspaceID, threadID, agentName string) error {
	res, err := b.client.Insert(ctx, RunArgs{WorkspaceID: workspaceID, ThreadID: threadID, Agent: agentName, Trace: traceOf(ctx)}, nil)
	if err != nil {
		return fmt.Errorf("jobs: queueing the run of thread %s: %w", threadID, err)
	}
	if res.UniqueSkippedAsDuplicate {
		// A run of the thread is queued or running: one running may be past reading what
		// was just given to the thread (a resumable child's next message). A wake runs it
		// after that run, if anything is still queued.
		return b.Wake(ctx, workspaceID, threadID, agentName)
	}
	return nil
}

// RunAt queues a wake of a thread paused for its budget, for at (see WakeArgs.Budget).
func (b background) RunAt(ctx context.Context, workspaceID, threadID, agentName string, at time.Time) error {
	args := WakeArgs{WorkspaceID: workspaceID, ThreadID: threadID, Agent: agentName, Budget: true, Trace: traceOf(ctx)}
	if _, err := b.client.Insert(ctx, args, &river.InsertOpts{Queue: queue, ScheduledAt: at}); err != nil {
		return fmt.Errorf("jobs: scheduling the run of thread %s for %s: %w", threadID, at.Format(time.RFC3339), err)
	}
	return nil
}

// Wake queues a wake of the thread.
func (b background) Wake(ctx context.Context, workspaceID, threadID, agentName string) error {
	if _, err := b.client.Insert(ctx, WakeArgs{WorkspaceID: workspaceID, ThreadID: threadID, Agent: agentName, Trace: traceOf(ctx)}, nil); err != nil {
		return fmt.Errorf("jobs: queueing a wake of thread %s: %w", threadID, err)
	}
	return nil
}
