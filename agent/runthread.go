package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/genai"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// runThread is a run: Run and Resume, and a child's run (deliver says whether its result goes
// to its parent as a message when it ends, as it does unless a blocking call waits for it).
// It returns the run's state too, for the blocking call to read the child's history from.
//
// A run goes through phases, each a method below: acquire the thread (one run at a time, in
// this process and across processes), open it, begin (the history, the message), loop
// (startImmediate and loop), and settle (the thread idle again, the outcome recorded and
// delivered). observe wraps the span and the metrics around the last three, as Dispatch wraps
// dispatch.
func (r *Runner) runThread(ctx context.Context, th *thread.Thread, a *Agent, message string, deliver bool) (*Outcome, *run, error) {
	if err := a.Check(); err != nil {
		return nil, nil, err
	}
	release, err := r.acquire(ctx, th.ID())
	if err != nil {
		return nil, nil, err
	}
	defer release()
	out, rs, begun, err := r.runAcquired(ctx, th, a, message, deliver)
	if err != nil && !begun {
		// A run that could not begin (its agent, its variables, its model...) did not reach
		// settle: it ends failed here when it is for good (failure.go).
		return nil, nil, r.endFailed(ctx, th, a.Name, err, false)
	}
	return out, rs, err
}

// runAcquired is runThread once the thread is the run's; begun says whether the run began
// (and settle ended it).
func (r *Runner) runAcquired(ctx context.Context, th *thread.Thread, a *Agent, message string, deliver bool) (*Outcome, *run, bool, error) {
	info, err := th.Refresh(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	if info.Status == store.StatusTerminated {
		out, rs, err := r.redeliver(ctx, th, &info, message, deliver)
		return out, rs, true, err // its outcome stands, failure or not
	}
	a = r.agentFor(info, a)
	if FirstRun(&info) {
		// Whatever created the thread (CreateThread, which checked, or thread.Create, which
		// cannot), its first run starts only once every variable it requires resolves
		// (required.go), and writes nothing before but its failure.
		if err := r.checkThread(ctx, th, &info, a); err != nil {
			return nil, nil, false, err
		}
	}
	rs, err := r.prepare(ctx, th, a, true)
	if err != nil {
		return nil, nil, false, err
	}
	ctx = quiver.WithPrompt(quiver.WithDoor(ctx, quiver.DoorAgent), a.Prompt.Name)
	begun := false
	out, err := rs.observe(ctx, a.Name, func(ctx context.Context) (out *Outcome, err error) {
		if err := rs.begin(ctx, message); err != nil {
			return nil, err
		}
		begun = true
		// The thread is idle again whatever happens, a panic included.
		defer func() { out, err = rs.settle(ctx, &info, deliver, out, err) }()
		if err := rs.startImmediate(ctx); err != nil {
			return nil, err
		}
		return rs.loop(ctx)
	})
	if !begun {
		return nil, nil, false, err
	}
	return out, rs, true, err
}

// acquire makes the thread this Runner's and, with a Lease, this process's, until release;
// ErrBusy when a run holds it.
func (r *Runner) acquire(ctx context.Context, threadID string) (release func(), err error) {
	if !r.busy.acquire(threadID) {
		return nil, ErrBusy
	}
	if r.Lease == nil {
		return func() { r.busy.release(threadID) }, nil
	}
	releaseLease, ok, err := r.Lease.Acquire(ctx, threadID)
	if err != nil || !ok {
		r.busy.release(threadID)
		if err != nil {
			return nil, fmt.Errorf("agent: the lease of thread %s: %w", threadID, err)
		}
		return nil, ErrBusy
	}
	return func() { releaseLease(); r.busy.release(threadID) }, nil
}

// redeliver is the run of a terminated thread, which has none: an error, except for a child
// that is not resumable, which ends terminated with its answer recorded and then delivers it.
// Its run tried again after a crash (its job's completion not yet recorded, or the call that
// started it dispatched again) has nothing left to run but that delivery, which may have been
// cut short: it is redone (once: the message's id is derived from the child's history) and the
// run ends as it did. Failing instead would have River try the run again for days and then
// report a failure to the parent, a second completion, or leave a completion never delivered.
func (r *Runner) redeliver(ctx context.Context, th *thread.Thread, info *store.Thread, message string, deliver bool) (*Outcome, *run, error) {
	st := ReadState(info)
	if message != "" || !deliver || st.Spawn == nil || info.Resumable || st.Outcome == nil || st.Outcome.Status != RunFinished {
		return nil, nil, fmt.Errorf("agent: thread %s is terminated: %w", th.ID(), store.ErrInvalid)
	}
	rs := &run{r: r, th: th, spawn: st.Spawn, agentName: st.RanBy}
	var err error
	if rs.hist, err = th.History(ctx); err != nil {
		return nil, nil, err
	}
	r.deliver(ctx, rs, st.Outcome, nil)
	return st.Outcome, rs, nil
}

// observe runs fn in the run's span and counts the run and its outcome.
func (rs *run) observe(ctx context.Context, agentName string, fn func(context.Context) (*Outcome, error)) (out *Outcome, err error) {
	if rs.tracer != nil {
		var span trace.Span
		ctx, span = rs.tracer.Start(ctx, genai.OpInvokeAgent+" "+agentName, trace.WithAttributes(
			genai.Operation.String(genai.OpInvokeAgent), genai.AgentName.String(agentName), genai.ConversationID.String(rs.th.ID())))
		defer func() { endRunSpan(span, out, err) }()
	}
	if rs.meters != nil {
		rs.meters.run(ctx, agentName, "started")
		defer func() {
			switch {
			case err != nil:
				rs.meters.run(ctx, agentName, "failed")
			case out != nil:
				rs.meters.run(ctx, agentName, string(out.Status))
			}
		}()
	}
	return fn(ctx)
}

// begin reads the thread's history into the run, adds the message (none: the run resumes the
// calls left without a result) and marks the thread running.
func (rs *run) begin(ctx context.Context, message string) error {
	rs.th.QueueSeen() // what an append before this run saw is stale: the first step reads the queue
	if err := rs.readHistory(ctx); err != nil {
		return err
	}
	if err := rs.addMessage(ctx, message); err != nil {
		return err
	}
	if len(rs.hist) == 0 {
		queued, err := rs.th.Queued(ctx)
		if err != nil {
			return err
		}
		if len(queued) == 0 {
			return ErrEmptyThread
		}
	}
	return rs.markRunning(ctx) // and counts the attempts of the pending calls (attempts.go)
}

// readHistory reads the thread's history, the calls in it without a result, and the steps
// taken: the step count is the model turns stored, even after a crash.
func (rs *run) readHistory(ctx context.Context) error {
	var err error
	if rs.hist, err = rs.th.History(ctx); err != nil {
		return err
	}
	if n := len(rs.hist); n > 0 {
		rs.startSeq = rs.hist[n-1].Seq
	}
	rs.pending = pendingIn(rs.hist)
	for _, m := range rs.hist {
		if m.Role == store.RoleAssistant {
			rs.steps++
		}
	}
	return nil
}

// addMessage appends the run's message to the history; without one the run resumes the calls
// left without a result, and a message cannot come before they have theirs.
func (rs *run) addMessage(ctx context.Context, message string) error {
	switch {
	case message != "" && len(rs.pending) > 0:
		return fmt.Errorf("%w: %d call(s) without a result; decide or submit results, then Resume", ErrPaused, len(rs.pending))
	case message != "":
		m, err := rs.th.AppendUser(ctx, message)
		if err != nil {
			return err
		}
		rs.hist = append(rs.hist, m)
	case len(rs.pending) > 0:
		rs.r.events.emit(Event{Type: EventResumed, ThreadID: rs.th.ID(), Step: rs.steps})
	}
	return nil
}

// settle ends a begun run whatever became of it, even when ctx was cancelled: the thread is
// idle again (terminated, for a child that is not resumable and has done its one job) with
// the outcome and who ran it recorded, and the outcome goes to the parent when deliver says
// so. It returns the run's outcome and error as they finally are.
func (rs *run) settle(ctx context.Context, info *store.Thread, deliver bool, out *Outcome, err error) (*Outcome, error) {
	idle := context.WithoutCancel(ctx)
	terminate := false
	if rs.jobDone(info, out, err) && !rs.endWritten {
		// Unless children of its own still work in the background: their results would reach
		// a thread that no longer runs. It stays idle until they have reported, and answers
		// again then.
		terminate, err = rs.noLiveChildren(idle)
	}
	var failure *Outcome // the outcome of a run that failed for good (failure.go)
	if forGood(ctx, rs.th.ID(), err) {
		failure = failedOutcome(rs.th.ID(), rs.steps, err)
	}
	var serr error
	if !rs.endWritten { // else written with the run's last answer (endWithAnswer)
		_, serr = rs.th.Update(idle, func(t *store.Thread) error { return rs.endThread(t, out, failure, terminate) })
	}
	if err == nil && serr != nil {
		out, err = nil, serr
	}
	if err == nil && out != nil && out.Budget != nil {
		rs.r.resumeAt(idle, rs, out.Budget.RetryAt)
	}
	err = rs.reportFailure(err, failure, serr)
	if deliver {
		rs.deliverEnd(idle, out, err)
	}
	return out, err
}

// jobDone reports whether the run is a child's that is not resumable and has done its one job.
func (rs *run) jobDone(info *store.Thread, out *Outcome, err error) bool {
	return rs.spawn != nil && !info.Resumable && out != nil && out.Status == RunFinished && err == nil
}

// endThread makes t idle again (terminated when terminate) with the run's outcome and who ran
// it recorded, or its failure.
func (rs *run) endThread(t *store.Thread, out, failure *Outcome, terminate bool) error {
	t.Status = store.StatusIdle
	t.StepCount = rs.steps
	if failure != nil {
		return writeFailure(t, failure)
	}
	st := ReadState(t)
	if out == nil {
		if !st.Queued {
			return nil
		}
		st.Queued = false
		return writeState(t, st)
	}
	st.Queued = false
	if terminate {
		t.Status = store.StatusTerminated
	}
	st.Outcome, st.RanBy = out, rs.agentName
	st.Attempts = rs.attemptsAtEnd(st)
	dropStateTags(t)
	if out.Status == RunPaused {
		t.Tags = append(t.Tags, WaitingTag) // indexed: what an inbox of waiting runs lists
	}
	if out.Budget != nil {
		t.Tags = append(t.Tags, BudgetTag)
	}
	if out.Pending != nil && out.Pending.Authorization != nil {
		t.Tags = append(t.Tags, AuthorizationTag)
	}
	return writeState(t, st)
}

// reportFailure reports a run that failed: as failed for good when its failure was recorded,
// else as an event.
func (rs *run) reportFailure(err error, failure *Outcome, serr error) error {
	switch {
	case err != nil && failure != nil && serr == nil:
		return rs.r.failed(rs.th.ID(), rs.agentName, failure, err)
	case err != nil:
		rs.r.events.emit(Event{Type: EventFailed, ThreadID: rs.th.ID(), Step: rs.steps, Text: FailureText(err), Err: err})
	}
	return err
}

// deliverEnd gives the parent the run's outcome; a failure, only when the run failed for good
// or no one tries again in this process.
func (rs *run) deliverEnd(ctx context.Context, out *Outcome, err error) {
	var failed *FailedError
	switch {
	case err == nil:
		rs.r.deliver(ctx, rs, out, nil)
	case errors.As(err, &failed), rs.r.Background == nil && !errors.Is(err, context.Canceled):
		rs.r.deliver(ctx, rs, nil, err)
	}
}

// noLiveChildren says whether every child the thread started in the background has ended.
func (rs *run) noLiveChildren(ctx context.Context) (bool, error) {
	kids, err := rs.th.Children(ctx)
	if err != nil {
		return false, err
	}
	for _, k := range kids {
		if !k.Blocking && k.Status != store.StatusTerminated {
			return false, nil
		}
	}
	return true, nil
}

// busySet tracks the threads with a run going on in this runner.
type busySet struct {
	mu      sync.Mutex
	threads map[string]bool
}

func (b *busySet) acquire(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.threads[id] {
		return false
	}
	if b.threads == nil {
		b.threads = map[string]bool{}
	}
	b.threads[id] = true
	return true
}

func (b *busySet) release(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.threads, id)
}

// endRunSpan ends a run's span with how the run ended.
func endRunSpan(span trace.Span, out *Outcome, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(genai.ErrorType.String(errorType(err)))
	} else if out != nil {
		span.SetAttributes(attribute.String("quiver.run.status", string(out.Status)), attribute.String("quiver.run.reason", string(out.Reason)),
			attribute.Int("quiver.run.steps", out.Steps))
	}
	span.End()
}

// errorType is the error.type of a failed run or model request: the sentinel it wraps when it
// is one of the well-known ones, else the Go type of the error.
func errorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, model.ErrNotConfigured):
		return "not_configured"
	}
	return fmt.Sprintf("%T", err)
}
