package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// Start queues a run and returns at once with its job's id; ErrRunQueued when the thread
// already has one queued or running.
//
// A run that has ended on its thread (outcome recorded, the thread idle: what its events
// say) is not refused: its job stays running in River for the moment River takes to
// complete it, and a client answering at once would otherwise be told to wait for a run it
// saw end. Start waits out that moment, at most settleWait.
func (j *Jobs) Start(ctx context.Context, args RunArgs) (int64, error) {
	if err := checkRun(ctx, &args); err != nil {
		return 0, err
	}
	args.Trace = traceOf(ctx)
	deadline := time.Now().Add(settleWait)
	for {
		id, err := j.insert(ctx, args)
		if !errors.Is(err, ErrRunQueued) || time.Now().After(deadline) || !j.ending(ctx, args, id) {
			return id, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// settleWait bounds how long Start waits for River to complete the job of a run that ended.
const settleWait = 5 * time.Second

// ending says whether job, which refused the insert of args's run, is a run that has ended or
// is ending: River holds it as running while its thread no longer runs (or its worker has not
// yet marked the thread; waiting is right then too, since the insert that follows is refused
// again once it has), or it has ended since the insert.
func (j *Jobs) ending(ctx context.Context, args RunArgs, job int64) bool {
	row, err := j.client.JobGet(ctx, job)
	if err != nil {
		return false
	}
	switch row.State {
	case rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
		return true
	case rivertype.JobStateRunning:
		th, err := j.runner.Store.Thread(ctx, args.WorkspaceID, args.ThreadID)
		return err == nil && th.Status != store.StatusRunning
	}
	return false
}

// insert queues args's run: ErrRunQueued, with the job's id, when the thread has one.
func (j *Jobs) insert(ctx context.Context, args RunArgs) (int64, error) {
	// The thread's lease is taken before the job is queued, so that the job's worker, however
	// soon it starts, waits for the message to be recorded instead of taking the lease first.
	var release func()
	if args.MessageID != "" {
		release = j.holdThread(ctx, args.ThreadID)
	}
	// Given back after Start returns: on PostgreSQL that is a round trip its caller need not
	// wait for (the job's worker, should it come first, waits for the lease).
	defer func() {
		if release != nil {
			go release()
		}
	}()
	if release != nil {
		if id, done, err := j.insertWithMessage(ctx, args); done {
			return id, err
		}
	}
	res, err := j.client.Insert(ctx, args, nil)
	if err != nil {
		return 0, fmt.Errorf("jobs: queueing the run: %w", err)
	}
	if res.UniqueSkippedAsDuplicate {
		return res.Job.ID, fmt.Errorf("%w (job %d)", ErrRunQueued, res.Job.ID)
	}
	if release != nil {
		j.recordMessage(ctx, args)
	}
	return res.Job.ID, nil
}

// txWriter is a store that writes in a transaction of pgx's (store/postgres).
type txWriter interface {
	AppendTx(ctx context.Context, tx pgx.Tx, workspaceID, threadID string, msgs ...*store.Message) error
	UpdateThreadTx(ctx context.Context, tx pgx.Tx, workspaceID, threadID string, fn func(*store.Thread) error) (*store.Thread, error)
}

// insertWithMessage queues args's run, appends its message and marks its thread running
// (agent.MarkQueued) in one transaction, where the store can write in River's (PostgreSQL,
// River's tables and the store's in one database): one commit to wait for instead of three
// (the run, when it begins, finds its thread marked), and no moment when the job is queued
// without its message or the message stored without its job. done is false when it could
// not, the message's append or the mark failing included, and nothing of it is stored then:
// the run is queued without it, and recordMessage appends it as before, or the job's worker
// does.
func (j *Jobs) insertWithMessage(ctx context.Context, args RunArgs) (id int64, done bool, err error) {
	app, ok := j.runner.Store.(txWriter)
	if j.insertTx == nil || !ok {
		return 0, false, nil
	}
	var appendErr error
	announced := agent.Event{Type: agent.EventMessage, ThreadID: args.ThreadID}
	// The job carries no message: it commits with it, so its worker has none to append. (Its
	// worker's append, refused as a message id taken, cost each run a transaction that wrote
	// and rolled back.)
	job := args
	job.Message, job.MessageID = "", ""
	res, err := j.insertTx(ctx, job, func(tx pgx.Tx) error {
		appendErr = app.AppendTx(ctx, tx, args.WorkspaceID, args.ThreadID, &store.Message{ID: args.MessageID, Role: store.RoleUser, Content: args.Message})
		if appendErr == nil {
			_, appendErr = app.UpdateThreadTx(ctx, tx, args.WorkspaceID, args.ThreadID, func(t *store.Thread) error {
				return agent.MarkQueued(t, args.Caller)
			})
		}
		if appendErr != nil || j.relay == nil {
			return appendErr
		}
		// The other nodes' streams hear of the message with the commit that stores it.
		announced.Relayed = true
		return j.relay.sendIn(ctx, tx, announced)
	})
	switch {
	case appendErr != nil:
		return 0, false, nil
	case err != nil:
		return 0, true, fmt.Errorf("jobs: queueing the run: %w", err)
	case res.UniqueSkippedAsDuplicate:
		return res.Job.ID, true, fmt.Errorf("%w (job %d)", ErrRunQueued, res.Job.ID)
	}
	j.runner.Announce(announced)
	return res.Job.ID, true, nil
}

// checkRun checks a run's arguments, and gives its message an id: fixed in the job, so that
// every try appends the same message.
func checkRun(ctx context.Context, args *RunArgs) error {
	if args.WorkspaceID == "" || args.ThreadID == "" || args.Agent == "" {
		return fmt.Errorf("jobs: a run needs a workspace, a thread and an agent: %w", store.ErrInvalid)
	}
	switch {
	case args.Message == "" && args.MessageID != "":
		return fmt.Errorf("jobs: a run has a message id but no message: %w", store.ErrInvalid)
	case args.Message != "" && args.MessageID == "":
		args.MessageID = stamp.ID(ctx, store.PrefixMessage)
	}
	return nil
}

// holdThread takes the thread's lease when no run holds it, for Start to record a queued run's
// message (see recordMessage), and returns what gives it back; nil when it is held, or the
// lease could not be read.
func (j *Jobs) holdThread(ctx context.Context, threadID string) func() {
	if j.threads == nil || j.runner == nil {
		return nil
	}
	release, ok, err := j.threads.try(ctx, threadID)
	if err != nil || !ok {
		return nil
	}
	return release
}

// recordMessage appends a queued run's message at once, under the thread's lease Start holds,
// so that the thread's streams show it now and a reader of the thread finds it once Start
// returns, instead of when a worker takes the job. The job carries the message too: when the
// thread is held (a wake's run, a run in the foreground: a message appended in the middle of
// their step would split a model's calls from their results), or the append fails, or this
// process dies first, the job's worker appends it, under the lease, once; the same id makes
// the two appends one.
func (j *Jobs) recordMessage(ctx context.Context, args RunArgs) {
	err := j.runner.Store.Append(ctx, args.WorkspaceID, args.ThreadID, &store.Message{ID: args.MessageID, Role: store.RoleUser, Content: args.Message})
	if err == nil {
		j.runner.Announce(agent.Event{Type: agent.EventMessage, ThreadID: args.ThreadID})
	}
}

// continueWait bounds how long Continue waits for a thread's run to finish.
const continueWait = 10 * time.Second

// Continue queues a run without a message, to act on what was just added to a paused thread (a
// decision, a client's result). A run queued and not yet started will see it, so it is the
// run; but a run still running may have read the thread already: the run that paused is
// finishing, so Continue waits for it to end (at most continueWait) and queues another.
func (j *Jobs) Continue(ctx context.Context, args RunArgs) (int64, error) {
	args.Message, args.MessageID = "", ""
	deadline := time.Now().Add(continueWait)
	for {
		id, err := j.Start(ctx, args)
		if !errors.Is(err, ErrRunQueued) {
			return id, err
		}
		row, serr := j.client.JobGet(ctx, id)
		if serr != nil {
			return 0, serr
		}
		switch row.State {
		case rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateScheduled, rivertype.JobStateRetryable:
			return id, nil // queued, not started: it will see the change
		case rivertype.JobStateRunning:
			// The run that paused, finishing: wait for it.
		default:
			continue // it ended between the insert and the read: insert again
		}
		if time.Now().After(deadline) {
			return id, fmt.Errorf("jobs: thread %s still has a run going after %s; try again: %w", args.ThreadID, continueWait, ErrRunQueued)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Watch queues a watch of a paused thread that is about to be answered (a decision, a
// client's result), due after delay: recording the answer and queueing the run that acts on
// it (Continue) are two steps, and a process that dies between them leaves the answer stored
// and the thread paused with no run. Queued before the answer is recorded, the watch finds
// such a thread and runs it; it does nothing when a run went on as it should (or the answer
// was never recorded: the thread still waits).
// It returns the watch's job id.
func (j *Jobs) Watch(ctx context.Context, args RunArgs, delay time.Duration) (int64, error) {
	res, err := j.client.Insert(ctx, WakeArgs{WorkspaceID: args.WorkspaceID, ThreadID: args.ThreadID, Agent: args.Agent,
		Answered: true, Trace: traceOf(ctx)}, &river.InsertOpts{Queue: queue, ScheduledAt: time.Now().Add(delay)})
	if err != nil {
		return 0, fmt.Errorf("jobs: queueing the watch of thread %s: %w", args.ThreadID, err)
	}
	return res.Job.ID, nil
}
