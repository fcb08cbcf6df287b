package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/thread"
)

// A run that cannot start or go on ends failed, never silently: its thread records an outcome
// of status failed, whose Reason is the kind of failure and whose Error says what went wrong
// in words safe to show (no secret, no internal detail: the log has those), its subscribers get
// a failed event carrying that outcome, and the log one warning line.
//
// A failure is recorded when it is for good: when trying again cannot help (the agent is not
// there, the definition is wrong, variables are missing, a secret cannot be opened, the model
// is not configured or its provider refuses the request), or when the try was the last one
// (see WithFinalTry: River gives up on a background run after its retries). Anything else (a
// provider's outage, a timeout, the store, a remote MCP server still connecting) stops the run
// resumably, and the thread keeps the outcome it had: the run is tried again.
//
// A request refused before the run began (ErrBusy, ErrPaused) is no failure of a run: nothing
// is recorded.

// Failure reasons: the Reason of a failed run's Outcome.
const (
	// For good at once.
	ReasonUnknownAgent     Reason = "unknown_agent"     // the node that took the run has no such agent
	ReasonBadDefinition    Reason = "bad_definition"    // the agent or prompt is not well formed (unknown tools...)
	ReasonMissingVariables Reason = "missing_variables" // a variable the run requires has no value
	ReasonSecret           Reason = "secret_unreadable" // a secret value cannot be opened with the server's keys
	ReasonModelSetup       Reason = "model_not_configured"
	ReasonModelRefused     Reason = "model_refused" // the provider refused the request (a bad key, an unknown model...)
	ReasonEmptyThread      Reason = "empty_thread"  // a run without a message on a thread that has none
	// For good once the last try failed.
	ReasonToolsUnavailable Reason = "tools_unavailable" // the source of tools the prompt names is not connected
	ReasonModelUnavailable Reason = "model_unavailable" // the provider failed or could not be reached
	ReasonTimeout          Reason = "timeout"
	ReasonInternal         Reason = "internal" // the server's own fault (its store...): the log says what
)

var (
	// ErrUnknownAgent: the agent a run names is not one this runner's process can run (jobs: the
	// node that took the run has no agent of that name).
	ErrUnknownAgent = errors.New("agent: unknown agent")
	// ErrToolsUnavailable: a prompt names tools whose source knows them but is not connected
	// yet (a remote MCP server connecting or reconnecting): trying again later may find them.
	ErrToolsUnavailable = errors.New("agent: tools not available yet")
)

// FailedError is the error of a run recorded as failed for good: its thread's outcome is
// Outcome. It wraps the cause.
type FailedError struct {
	Outcome *Outcome
	Err     error
}

func (e *FailedError) Error() string { return e.Err.Error() }
func (e *FailedError) Unwrap() error { return e.Err }

// Classify says what kind of failure err is (the Reason a failed run records) and whether it is
// for good: trying again cannot help.
func Classify(err error) (reason Reason, forGood bool) {
	if failed, ok := errors.AsType[*FailedError](err); ok {
		return failed.Outcome.Reason, true
	}
	for _, c := range failureKinds {
		if c.is(err) {
			return c.reason, c.forGood
		}
	}
	return ReasonInternal, false
}

// failureKinds are the kinds of failure Classify tells apart, in the order it looks for them.
var failureKinds = []struct {
	is      func(error) bool
	reason  Reason
	forGood bool
}{
	{isError(ErrUnknownAgent), ReasonUnknownAgent, true},
	{isError(ErrToolsUnavailable), ReasonToolsUnavailable, false},
	{isError(ErrDefinition), ReasonBadDefinition, true},
	{hasType[*quiver.MissingVariablesError], ReasonMissingVariables, true},
	{isError(secret.ErrDecrypt), ReasonSecret, true},
	{isModelSetup, ReasonModelSetup, true},
	{isModelRefusal, ReasonModelRefused, true},
	{hasType[*modelCallError], ReasonModelUnavailable, false},
	{isError(ErrEmptyThread), ReasonEmptyThread, true},
	{isError(context.DeadlineExceeded), ReasonTimeout, false},
}

// isError is the test for errors that are target.
func isError(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// hasType reports whether err is, or wraps, an error of type T.
func hasType[T error](err error) bool {
	_, ok := errors.AsType[T](err)
	return ok
}

// isModelSetup reports whether err is a model that is not set up: unknown, or without its
// configuration.
func isModelSetup(err error) bool {
	return hasType[*modelSetupError](err) || errors.Is(err, ErrNoModel) || errors.Is(err, model.ErrNotConfigured)
}

// isModelRefusal reports whether err is a provider's refusal of a model request, which trying
// again does not change.
func isModelRefusal(err error) bool {
	api, ok := errors.AsType[*model.APIError](err)
	return hasType[*modelCallError](err) && ok && !api.Temporary()
}

// FailureText is err said to whoever reads a run's failure (the thread's outcome, its event
// stream, A2A): the error of a definition, of variables or of a provider is the operator's to
// fix and is said as it is; the runtime's own errors, which may name what no client should see
// (a database's address), are said by kind, the log having the rest.
func FailureText(err error) string {
	reason, _ := Classify(err)
	if failed, ok := errors.AsType[*FailedError](err); ok {
		return failed.Outcome.Error
	}
	switch {
	case reason == ReasonModelRefused || reason == ReasonModelUnavailable:
		return modelFailureText(err)
	case reason == ReasonTimeout:
		return "the run took longer than a run may (the server's run timeout)"
	case reason == ReasonInternal && errors.Is(err, context.Canceled):
		return "the run was cut short: its server stopped or lost the thread"
	case reason == ReasonInternal:
		return "the run stopped on an error of the server (the server's log has the details)"
	}
	return shortText(err.Error())
}

// modelFailureText says how a model request failed.
func modelFailureText(err error) string {
	call, _ := errors.AsType[*modelCallError](err)
	if api, ok := errors.AsType[*model.APIError](err); ok {
		return shortText("the model " + call.model + " failed: " + api.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "the model " + call.model + " did not answer in time"
	}
	return "the model " + call.model + " could not be reached (the server's log has the details)"
}

// maxFailureText bounds a failure's text: a definition's error may list every tool there is.
const maxFailureText = 1000

// shortText is s on one line, at most maxFailureText bytes.
func shortText(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= maxFailureText {
		return s
	}
	cut := maxFailureText - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// refusal says whether err refused the run before it began, leaving the thread as it was: no
// failure of a run.
func refusal(err error) bool {
	return errors.Is(err, ErrBusy) || errors.Is(err, ErrPaused)
}

type finalTryKey struct{}

// WithFinalTry marks ctx as the last try of a run of the thread: a failure of it, whatever its
// kind, is recorded for good (jobs marks the try River will not repeat). Only that thread's run
// reads it, not a child's run inside one of its calls.
func WithFinalTry(ctx context.Context, threadID string) context.Context {
	return context.WithValue(ctx, finalTryKey{}, threadID)
}

// forGood says whether the error of a run of threadID is to be recorded as its failure.
func forGood(ctx context.Context, threadID string, err error) bool {
	if err == nil || refusal(err) {
		return false
	}
	if _, ok := Classify(err); ok {
		return true
	}
	final, _ := ctx.Value(finalTryKey{}).(string)
	return final == threadID
}

// failedOutcome is the outcome a run of th that failed with err records, after steps model
// turns.
func failedOutcome(threadID string, steps int, err error) *Outcome {
	reason, _ := Classify(err)
	return &Outcome{ThreadID: threadID, Status: RunFailed, Reason: reason, Error: FailureText(err), Steps: steps}
}

// writeFailure sets a failed outcome on the thread inside an UpdateThread function: idle, the
// outcome replacing the last one, no longer waiting. The attempt counts stay: calls still
// pending may have started.
func writeFailure(t *store.Thread, out *Outcome) error {
	st := ReadState(t)
	st.Outcome, st.Queued = out, false
	dropStateTags(t)
	t.Tags = append(t.Tags, FailedTag) // indexed: what a list of failed threads reads
	return writeState(t, st)
}

// Fail records that a run of the thread by agentName failed for good with err, when the
// runner did not get to run it (jobs: the node that took the run has no such agent, or River
// gave up before the run began): as a run that fails for good does, the thread becomes idle
// with a failed outcome, the runner's subscribers get a failed event, the log a warning, and a
// child's parent is told (implicit communication). It takes the thread's lease as a run does:
// ErrBusy when a run holds it. A terminated thread keeps its outcome. The error returned is err
// as a *FailedError once recorded.
func (r *Runner) Fail(ctx context.Context, th *thread.Thread, agentName string, err error) error {
	release, lerr := r.acquire(ctx, th.ID())
	if lerr != nil {
		return lerr
	}
	defer release()
	return r.endFailed(ctx, th, agentName, err, true)
}

// endFailed ends a run of th that failed with err before it began (settle ends the others):
// recorded, announced and delivered to a parent when for good (always, from Fail), else left
// for the next try. It returns the run's error.
func (r *Runner) endFailed(ctx context.Context, th *thread.Thread, agentName string, err error, always bool) error {
	if refusal(err) || (!always && !forGood(ctx, th.ID(), err)) {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	var out *Outcome
	info, uerr := th.Update(ctx, func(t *store.Thread) error {
		out = nil
		if t.Status == store.StatusTerminated {
			return nil // its one job done: its outcome stands
		}
		out = failedOutcome(th.ID(), t.StepCount, err)
		t.Status = store.StatusIdle
		return writeFailure(t, out)
	})
	if uerr != nil {
		r.logger().Warn("agent: a run failed, and recording it failed too", "thread", th.ID(), "agent", agentName, "err", err, "record_err", uerr)
		return err
	}
	if out == nil {
		return err
	}
	failed := r.failed(th.ID(), agentName, out, err)
	if sp := ReadState(&info).Spawn; sp != nil {
		rs := &run{r: r, th: th, spawn: sp, agentName: agentName}
		if rs.hist, uerr = th.History(ctx); uerr == nil {
			r.deliver(ctx, rs, nil, err)
		}
	}
	return failed
}

// failed logs and announces a failure recorded for good, and returns its error.
func (r *Runner) failed(threadID, agentName string, out *Outcome, err error) error {
	r.logger().Warn("agent: the run failed", "thread", threadID, "agent", agentName, "reason", out.Reason, "error", out.Error, "err", err)
	r.events.emit(Event{Type: EventFailed, ThreadID: threadID, Step: out.Steps, Outcome: out, Text: out.Error, Err: err})
	return &FailedError{Outcome: out, Err: err}
}

// modelCallError is a model request that failed: the provider refused it or could not be
// reached.
type modelCallError struct {
	model string
	err   error
}

func (e *modelCallError) Error() string { return fmt.Sprintf("agent: model %s: %v", e.model, e.err) }
func (e *modelCallError) Unwrap() error { return e.err }

// modelSetupError is a prompt's model that cannot be opened (an unknown provider, a missing
// key): the definition or the server's configuration is to be fixed.
type modelSetupError struct{ err error }

func (e *modelSetupError) Error() string { return e.err.Error() }
func (e *modelSetupError) Unwrap() error { return e.err }
