package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// Runner runs agents on threads. Configure it by setting its fields before the first run, as
// with http.Server; it is safe for concurrent runs on different threads after that. Two runs
// on the same thread at once are refused (ErrBusy) as long as they share a Runner; across
// processes, run a thread from one place at a time.
type Runner struct {
	// Store keeps the threads. Required.
	Store thread.Store
	// Registry holds the tools; nil means quiver.Default.
	Registry *quiver.Registry
	// Registries, when set, returns the tools of a thread's workspace, in place of Registry:
	// a server serving many workspaces gives each run its own workspace's tools (see
	// platform.Platform.Workspace). A cache of them answers FreshRegistry(ctx) with the tools
	// as stored now: a run asks so before it fails for a tool its prompt names.
	Registries func(ctx context.Context, workspaceID string) (*quiver.Registry, error)
	// Rules, when set, are what a platform decides for a run's caller (see caller.go and
	// CallerRules): asked once as a run prepares, with the thread's workspace, the run's
	// caller (nil: none known) and the agents of its chain, the outermost first.
	Rules func(ctx context.Context, workspaceID string, caller json.RawMessage, agents []string) CallerRules
	// Model is used for prompts that name no model.
	Model model.Model
	// OpenModel opens the model a prompt names; nil means model.Open.
	OpenModel func(spec string) (model.Model, error)
	// Resolver supplies variable values to tools (see store/vars); nil resolves none.
	Resolver   quiver.VariableResolver
	Hooks      quiver.Hooks
	Middleware []quiver.Middleware
	// Timeout bounds a tool that sets none; Grace is how long a cancelled tool gets before it
	// is abandoned (see quiver.Dispatcher).
	Timeout, Grace time.Duration
	// TracerProvider makes spans as OpenTelemetry's GenAI conventions name them: one per run
	// ("invoke_agent NAME", the thread as the conversation), one per model request ("chat
	// MODEL", with the provider, the token usage and the finish reason) and one per call
	// ("execute_tool NAME"), nested in that order. nil means the global provider as set at
	// the run's start; without one, runs make no spans. TraceContent records calls' arguments
	// and results too (see quiver.Dispatcher).
	TracerProvider trace.TracerProvider
	TraceContent   bool
	// MeterProvider records runs (quiver.agent.runs, by quiver.run.event: started, finished,
	// paused or failed, and agent), model requests (the conventions' gen_ai.client.operation.
	// duration and gen_ai.client.token.usage, by provider and model) and calls (see
	// quiver.Dispatcher). nil means the global provider as set at the run's start; without one,
	// nothing is recorded.
	MeterProvider metric.MeterProvider

	// Catalog holds the prompts and agents that prompts name as tools (prompt tools, handoffs,
	// sub-agents) and that child threads and handed-over threads run; nil means none.
	// SetCatalog replaces it while the runner runs.
	Catalog *Catalog
	// MaxDepth bounds the tree of nested prompts and sub-agents: a spawn deeper than this is
	// an error result; 0 means DefaultMaxDepth. MaxSpawnsPerRun bounds the children one run
	// starts the same way; 0 means DefaultMaxSpawnsPerRun.
	MaxDepth        int
	MaxSpawnsPerRun int
	// Background runs non-blocking children and wakes parents that have a child's result
	// waiting, durably (jobs.Jobs sets itself here when it starts); nil runs them on goroutines
	// of this process (see Wait).
	Background Background
	// Variables stores the scopedEnv values an immediate sub-agent's children get; nil means
	// the Resolver when it can (a *vars.Resolver can).
	Variables VariableWriter
	// VariablesRequestURL names, in a subagent_env_required result, where the variables a
	// deferred sub-agent waits for are provided (quiver serve's API); nil names no place, and
	// the result gives the request id alone.
	VariablesRequestURL func(parentID, requestID string) string
	// Logger gets what goes wrong in the background; nil means slog.Default.
	Logger *slog.Logger
	// Lease, when set, keeps processes that share the database from running one thread at
	// once: every run takes its thread's lease first (ErrBusy when another holds it), a child
	// run inside a call included. jobs sets it on PostgreSQL, where several nodes run; nil
	// relies on this runner's own record of the runs it has going.
	Lease Lease

	events      events
	busy        busySet
	bg          sync.WaitGroup
	nestedTools nestedCache
	swapped     swappedCatalog // see SetCatalog
}

// Lease is a thread's lease across processes (see Runner.Lease).
type Lease interface {
	// Acquire takes the thread's lease: ok is false when another holds it. release gives it
	// back.
	Acquire(ctx context.Context, threadID string) (release func(), ok bool, err error)
}

// RunStatus is how a run ended.
type RunStatus string

// Run statuses.
const (
	RunFinished RunStatus = "finished" // a stop rule holds
	RunPaused   RunStatus = "paused"   // a call waits for a decision or a client's result
	// RunFailed: the run could not start or go on, for good (see failure.go); Reason says
	// what kind of failure, Error what went wrong. A later run replaces it, as any run's
	// outcome is replaced.
	RunFailed RunStatus = "failed"
)

// Reason is why a run stopped, paused or failed (Outcome.Reason), or why a call waits
// (Pending.Reason).
type Reason string

// Stop and pause reasons.
const (
	ReasonNoCalls      Reason = "no_calls"
	ReasonOutput       Reason = "output"
	ReasonStopTool     Reason = "stop_tool"
	ReasonMaxSteps     Reason = "max_steps"
	ReasonConfirmation Reason = "confirmation"
	ReasonClientTool   Reason = "client_tool"
	// ReasonAuthorization: a call acts as the run's person at a provider they have not
	// connected (Pending.Authorization says which, and where): the run goes on, and runs the
	// call, once they have.
	ReasonAuthorization Reason = "waiting_for_authorization"
	// ReasonBudgetExhausted: a bound on the caller's model tokens or cost is reached
	// (Outcome.Budget says which, and when the run goes on).
	ReasonBudgetExhausted Reason = "budget_exhausted"
)

// Outcome is where a run stopped.
type Outcome struct {
	ThreadID string    `json:"thread_id"`
	Status   RunStatus `json:"status" enum:"finished,paused,failed" doc:"finished: a stop rule holds; paused: a call waits for a person's decision or a client's result (pending), or the caller's budget of model tokens or cost is reached (budget); failed: the run could not start or go on (reason, error)."`
	Reason   Reason    `json:"reason" doc:"Why it stopped (no_calls, output, stop_tool, max_steps, max_turns, until), paused (confirmation, client_tool, budget_exhausted) or failed: unknown_agent, bad_definition, missing_variables, secret_unreadable, model_not_configured, model_refused, empty_thread (for good at once), tools_unavailable, model_unavailable, timeout, internal (once its retries were spent)."`
	// Error says why a failed run failed, in words safe to show: no secret value, no
	// internal detail (the server's log has those).
	Error string `json:"error,omitempty" doc:"Why the run failed (status failed), safe to show: the server's log has the details."`
	// Text is the model's last text.
	Text string `json:"text,omitempty"`
	// Output is the structured output, when the prompt asks for one and the model gave it.
	Output json.RawMessage `json:"output,omitempty"`
	// Pending is the call the run waits on (paused): the first call of the step that cannot
	// run yet; the calls after it wait their turn.
	Pending *Pending `json:"pending,omitempty"`
	// Budget is the bound a run paused for its budget waits on (ReasonBudgetExhausted).
	Budget *Budget `json:"budget,omitempty"`
	// Steps is the thread's model turns so far.
	Steps int `json:"steps"`
	// Side is the side whose answer Text (or Output) is, for a two-sided dual-AI agent.
	Side string `json:"side,omitempty" enum:"side_a,side_b"`
}

// Pending is a call waiting for a person's decision or a client's result.
type Pending struct {
	Call   quiver.Call `json:"call"`
	Reason Reason      `json:"reason"` // confirmation, client_tool or waiting_for_authorization
	// Authorization is the connection the call waits for (ReasonAuthorization).
	Authorization *Authorization `json:"authorization,omitempty"`
	// Description is the tool's, to show the person deciding.
	Description string `json:"description,omitempty"`
}

// Errors of the runner.
var (
	// ErrBusy: a run is already going on the thread in this runner.
	ErrBusy = errors.New("agent: a run is already going on this thread")
	// ErrPaused: the thread waits for a decision or a client result; a new message cannot be
	// added until then (providers require every call to be answered first).
	ErrPaused = errors.New("agent: the thread is waiting for a decision or a client result")
	// ErrNotPending: the call is not waiting for what was given.
	ErrNotPending = errors.New("agent: the call is not waiting for this")
	// ErrNoModel: no model is configured.
	ErrNoModel = errors.New("agent: no model configured")
	// ErrEmptyThread: a run without a message on a thread that has none: there is nothing to
	// answer. Trying again does not change that.
	ErrEmptyThread = errors.New("agent: the thread has no messages; start the run with one")
)

// Run adds message (when not empty) to the thread as the user's and runs a on the thread until
// a stop rule holds or a call waits for a person or a client. Work left by an interrupted run
// (calls without results) is finished first. The error is non-nil only when the runtime fails
// (the store, the model's API, cancellation); the run is then resumable with Resume.
//
// A thread handed over to another agent, or a child thread, is run by the agent it records
// (see ThreadState) when the runner's Catalog has it, whatever a names.
//
// A thread's first run (Run or Resume before any step or outcome) checks the variables it
// requires, as CreateThread does, before it writes anything: a *quiver.MissingVariablesError
// names every one missing. Create threads with CreateThread to be refused before the thread
// exists; one made with thread.Create is refused here.
func (r *Runner) Run(ctx context.Context, th *thread.Thread, a *Agent, message string) (*Outcome, error) {
	out, _, err := r.runThread(ctx, th, a, message, true)
	return out, err
}

// Resume continues the run on the thread: after a decision, a client's result, or a crash.
func (r *Runner) Resume(ctx context.Context, th *thread.Thread, a *Agent) (*Outcome, error) {
	out, _, err := r.runThread(ctx, th, a, "", true)
	return out, err
}

// Decide records a person's decision on a call that waits for confirmation. Resume the run
// afterwards to act on it.
func (r *Runner) Decide(ctx context.Context, th *thread.Thread, a *Agent, callID string, d quiver.Decision) error {
	p, err := r.waiting(ctx, th, a)
	if err != nil {
		return err
	}
	if p == nil || p.Call.ID != callID || p.Reason != ReasonConfirmation {
		return fmt.Errorf("%w: call %q does not wait for a confirmation (waiting: %s)", ErrNotPending, callID, describe(p))
	}
	var action store.DecisionAction
	switch d.Action {
	case quiver.Approve:
		action = store.Approve
	case quiver.Edit:
		action = store.Edit
	case quiver.Deny:
		action = store.Deny
	default:
		return fmt.Errorf("%w: decision %q: want approve, edit or deny", store.ErrInvalid, d.Action)
	}
	// Who decided is d's person; a door that names no one (the CLI's prompt at the terminal)
	// leaves it to the thread's user, who is the one at hand.
	user := cmp.Or(d.UserID, th.UserID())
	return r.Store.Decide(ctx, th.WorkspaceID(), th.ID(), &store.Decision{CallID: callID, Action: action, Args: d.Args,
		Message: d.Message, UserID: user, KeyID: d.KeyID, AccessToken: d.AccessToken, DecidedAt: d.DecidedAt})
}

// SubmitResult records a client's result for a client tool's call. Resume the run
// afterwards. Secrets are not masked in what a client submits: it never had them.
func (r *Runner) SubmitResult(ctx context.Context, th *thread.Thread, a *Agent, callID string, res *quiver.Result) error {
	p, err := r.waiting(ctx, th, a)
	if err != nil {
		return err
	}
	if p == nil || p.Call.ID != callID || p.Reason != ReasonClientTool {
		return fmt.Errorf("%w: call %q does not wait for a client result (waiting: %s)", ErrNotPending, callID, describe(p))
	}
	if !submittable(res) {
		return fmt.Errorf("%w: a client result needs status success or error", store.ErrInvalid)
	}
	// Recorded through the run's dispatcher, as a result it ran would be: a call naming
	// _outputPath writes the client's output into the state with it.
	rs, err := r.prepare(ctx, th, r.agentFor(th.Info(), a), false)
	if err != nil {
		return err
	}
	_, err = rs.d.Record(ctx, p.Call, res)
	return err
}

// submittable reports whether a client may submit res: a success or an error.
func submittable(res *quiver.Result) bool {
	return res != nil && (res.Status == quiver.StatusSuccess || res.Status == quiver.StatusError)
}

func describe(p *Pending) string {
	if p == nil {
		return "nothing"
	}
	return fmt.Sprintf("call %q to %s for a %s", p.Call.ID, p.Call.Name, p.Reason)
}

// Waiting returns the call the thread waits on, a person's decision or a client's result, or
// nil when it waits on nothing: what an API lists as pending.
func (r *Runner) Waiting(ctx context.Context, th *thread.Thread, a *Agent) (*Pending, error) {
	return r.waiting(ctx, th, a)
}

// waiting returns the call the thread waits on, or nil.
func (r *Runner) waiting(ctx context.Context, th *thread.Thread, a *Agent) (*Pending, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	a = r.agentFor(th.Info(), a)
	rs, err := r.prepare(ctx, th, a, false)
	if err != nil {
		return nil, err
	}
	pending, err := th.Pending(ctx)
	if err != nil || len(pending) == 0 {
		return nil, err
	}
	// Only the first pending call can be waiting: the ones after it wait their turn.
	return rs.mustWait(ctx, pending[0])
}

// decision returns the persisted decision on a call, reading the thread's decisions the first
// time one is needed.
func (rs *run) decision(ctx context.Context, callID string) (*store.Decision, error) {
	if rs.decisions == nil {
		list, err := rs.r.Store.Decisions(ctx, rs.th.WorkspaceID(), rs.th.ID())
		if err != nil {
			return nil, err
		}
		rs.decisions = make(map[string]*store.Decision, len(list))
		for _, d := range list {
			rs.decisions[d.CallID] = d
		}
	}
	return rs.decisions[callID], nil
}

// mustWait says whether c cannot run yet: a client tool's call, or a call that needs a
// confirmation nobody has given. A call the policy does not permit runs (and is refused with
// an error result the model sees).
func (rs *run) mustWait(ctx context.Context, c quiver.Call) (*Pending, error) {
	t, ok := rs.d.Registry.Lookup(c.Name)
	if !ok {
		return nil, nil
	}
	if permitted, _ := rs.policy.Permits(t); !permitted {
		return nil, nil
	}
	spec := t.Spec()
	if len(spec.Connections) > 0 && rs.unconnected != nil {
		// Before anyone is asked to confirm it: the call cannot run until it can act as them.
		auth, err := rs.unconnected(ctx, t)
		if err != nil || auth != nil {
			if auth == nil {
				return nil, err
			}
			return &Pending{Call: c, Reason: ReasonAuthorization, Description: spec.Description, Authorization: auth}, nil
		}
	}
	if spec.Target != quiver.TargetClient && !spec.RequiresConfirmation {
		return nil, nil
	}
	if refused := rs.d.Check(ctx, c); refused != nil {
		return nil, nil // it cannot run as asked: the dispatcher refuses it now, nobody is asked
	}
	if spec.Target == quiver.TargetClient {
		return &Pending{Call: c, Reason: ReasonClientTool, Description: spec.Description}, nil
	}
	d, err := rs.decision(ctx, c.ID)
	if err != nil || d != nil {
		return nil, err
	}
	return &Pending{Call: c, Reason: ReasonConfirmation, Description: spec.Description}, nil
}
