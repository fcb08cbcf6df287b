package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/genai"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
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
	// platform.Platform.Workspace).
	Registries func(ctx context.Context, workspaceID string) (*quiver.Registry, error)
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
)

// Reason is why a run stopped or paused (Outcome.Reason), or why a call waits (Pending.Reason).
type Reason string

// Stop and pause reasons.
const (
	ReasonNoCalls      Reason = "no_calls"
	ReasonOutput       Reason = "output"
	ReasonStopTool     Reason = "stop_tool"
	ReasonMaxSteps     Reason = "max_steps"
	ReasonConfirmation Reason = "confirmation"
	ReasonClientTool   Reason = "client_tool"
)

// Outcome is where a run stopped.
type Outcome struct {
	ThreadID string    `json:"thread_id"`
	Status   RunStatus `json:"status"`
	Reason   Reason    `json:"reason"`
	// Text is the model's last text.
	Text string `json:"text,omitempty"`
	// Output is the structured output, when the prompt asks for one and the model gave it.
	Output json.RawMessage `json:"output,omitempty"`
	// Pending is the call the run waits on (paused): the first call of the step that cannot
	// run yet; the calls after it wait their turn.
	Pending *Pending `json:"pending,omitempty"`
	// Steps is the thread's model turns so far.
	Steps int `json:"steps"`
}

// Pending is a call waiting for a person's decision or a client's result.
type Pending struct {
	Call   quiver.Call `json:"call"`
	Reason Reason      `json:"reason"` // confirmation or client_tool
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
	return r.Store.Decide(ctx, th.WorkspaceID(), th.ID(), &store.Decision{CallID: callID, Action: action, Args: d.Args,
		Message: d.Message, UserID: th.UserID()})
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
	if res == nil || (res.Status != quiver.StatusSuccess && res.Status != quiver.StatusError) {
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

// run is one run: the state a run needs, gathered once.
type run struct {
	r         *Runner
	th        *thread.Thread
	agent     *Agent
	agentName string
	spawn     *Spawn // how the thread was spawned; nil for a root thread
	prompt    *Prompt
	d         *quiver.Dispatcher
	policy    quiver.Policy
	model     model.Model
	tools     *schema.ToolSet // tool-calling mode
	composed  *schema.Schema  // composed {calls, output} mode
	system    string
	tracer    trace.Tracer // nil: no spans
	meters    *meters      // nil: no metrics

	// The thread as this run knows it: read once when the run starts, then kept up to date
	// with what the run writes (a Runner runs a thread once at a time), so a step reads
	// nothing back. steps counts the thread's model turns.
	hist      []*store.Message
	pending   []quiver.Call
	decisions map[string]*store.Decision // read when a call first needs one
	steps     int

	handoffTo *Agent         // set by a handoff call: the agent the next steps run with
	startSeq  int64          // the last message before this run: what the run added comes after
	lifecycle lifecycleTools // which of subagent_create and subagent_message are offered
	spawned   int            // the children this run has started (see MaxSpawnsPerRun)
}

type recorder struct{ rs *run }

// RecordResult persists the result and keeps the stored message in the run's history.
func (rec recorder) RecordResult(ctx context.Context, c *quiver.Call, r *quiver.Result) error {
	m, err := rec.rs.th.Record(ctx, c, r)
	if err != nil {
		return err
	}
	rec.rs.hist = append(rec.rs.hist, m)
	return nil
}

// Instances implements quiver.StateRecorder: the run's thread's instances.
func (rec recorder) Instances(ctx context.Context) ([]string, error) { return rec.rs.th.Instances(ctx) }

// RecordOutput implements quiver.StateRecorder: the result and the state write of its output
// in one transaction (thread.RecordWithOutput), the stored message kept in the run's history.
func (rec recorder) RecordOutput(ctx context.Context, c *quiver.Call, r *quiver.Result, out json.RawMessage) (*quiver.Result, error) {
	m, got, err := rec.rs.th.RecordWithOutput(ctx, c, r, out)
	if err != nil {
		return nil, err
	}
	rec.rs.hist = append(rec.rs.hist, m)
	return got, nil
}

// prepare gathers what a run needs; withModel opens the model too.
func (r *Runner) prepare(ctx context.Context, th *thread.Thread, a *Agent, withModel bool) (*run, error) {
	if r.Store == nil {
		return nil, errors.New("agent: Runner.Store is not set")
	}
	rs := &run{r: r, th: th, tracer: genai.Tracer(r.TracerProvider), meters: newMeters(r.MeterProvider)}
	info := th.Info()
	rs.spawn = ReadState(&info).Spawn
	return rs, r.prepareInto(ctx, rs, a, withModel)
}

// prepareInto sets what running a's prompt on rs's thread needs: the tools it may call (the
// registry's and the nested ones its definition names), their rendering, the model. A handoff
// prepares the same run again for the agent taking over.
func (r *Runner) prepareInto(ctx context.Context, rs *run, a *Agent, withModel bool) error {
	th := rs.th
	reg := r.Registry
	if r.Registries != nil {
		var err error
		if reg, err = r.Registries(ctx, th.WorkspaceID()); err != nil {
			return fmt.Errorf("agent: the tools of workspace %s: %w", th.WorkspaceID(), err)
		}
	}
	if reg == nil {
		reg = quiver.Default
	}
	p := a.Prompt
	rs.agent, rs.agentName, rs.prompt = a, a.Name, p
	rs.tools, rs.composed, rs.model = nil, nil, nil
	// The prompt's variables (an optional sub-agent's flag) resolve on its own layer.
	ctx = quiver.WithPrompt(ctx, p.Name)
	reg, runtime, err := rs.withNested(ctx, reg)
	if err != nil {
		return err
	}
	if err := p.CheckTools(reg); err != nil {
		return err
	}
	if len(p.Instances) > 0 && withModel {
		// The instances the prompt keeps state for exist before its calls name them; those
		// the thread has are only read (a run, not a look at what waits, adds them).
		have, err := th.Instances(ctx)
		if err != nil {
			return fmt.Errorf("agent: prompt %s: the instances of thread %s: %w", p.Name, th.ID(), err)
		}
		if missing := slices.DeleteFunc(slices.Clone(p.Instances), func(n string) bool { return slices.Contains(have, n) }); len(missing) > 0 {
			if err := th.AddInstances(ctx, missing...); err != nil {
				return fmt.Errorf("agent: prompt %s: the instances of thread %s: %w", p.Name, th.ID(), err)
			}
		}
	}
	rs.policy = p.policy()
	rs.policy.Bound = append(slices.Clone(rs.policy.Bound), runtime...) // the prompt's list is shared by its runs
	if rs.spawn != nil && rs.spawn.Ceiling != nil {
		// P2: a child calls only what its parent may too; the nested tools are governed by
		// the spawn rules (allowed targets, depth) instead, so that a sub-agent can have
		// sub-agents of its own.
		rs.policy = rs.policy.Within(openFor(*rs.spawn.Ceiling, runtime))
	}
	rs.d = &quiver.Dispatcher{Registry: reg, Policy: rs.policy, Resolver: r.Resolver, Hooks: r.Hooks,
		Middleware: r.Middleware, Recorder: recorder{rs}, Timeout: r.Timeout, Grace: r.Grace,
		MetaFields: p.MetaFields, Delegator: delegator{rs},
		TracerProvider: r.TracerProvider, TraceContent: r.TraceContent, MeterProvider: r.MeterProvider,
		// A call reaches the confirmation gate only with a persisted decision (see mustWait).
		Confirm: func(ctx context.Context, c *quiver.Call) (quiver.Decision, error) {
			if rs := runFrom(ctx); rs != nil {
				if dec := rs.decisions[c.ID]; dec != nil {
					return quiver.Decision{Action: quiver.DecisionAction(dec.Action), Args: dec.Args, Message: dec.Message}, nil
				}
			}
			return quiver.Decision{Action: quiver.Pause}, nil
		}}
	if !withModel {
		return nil
	}
	m, err := r.openModel(p)
	if err != nil {
		return err
	}
	rs.model = m
	tools := rs.d.Tools()
	rs.system = p.System
	if ex := quiver.RenderExamples(tools); ex != "" {
		rs.system += "\n\n" + ex
	}
	if p.Output != nil {
		if rs.composed, err = rs.d.Compose(p.Output); err != nil {
			return fmt.Errorf("agent: prompt %s: composing the output schema: %w", p.Name, err)
		}
		rs.system += "\n\n" + composedInstructions
		return nil
	}
	dialect := m.Dialect()
	if p.Strict && dialect == schema.OpenAI {
		dialect = schema.OpenAIStrict
	}
	schemas := quiver.ToolSchemas(reg, tools)
	for i := range schemas {
		schemas[i].Reasoning = p.ReasoningForCall
		schemas[i].MetaFields = quiver.MergeMetaFields(schemas[i].MetaFields, p.MetaFields)
	}
	if rs.tools, err = schema.Render(dialect, schemas); err != nil {
		return fmt.Errorf("agent: prompt %s: rendering tools for %s: %w", p.Name, m.Name(), err)
	}
	return nil
}

const composedInstructions = `Answer with one JSON document as the response schema describes: "calls" lists the tools ` +
	`to call now (each with "_tool" naming it), and "output" is your final answer, or null while you still need ` +
	`results. Results of calls come back in the next message.`

func (r *Runner) openModel(p *Prompt) (model.Model, error) {
	if p.Model == "" {
		if r.Model == nil {
			return nil, fmt.Errorf("%w: prompt %s names no model and the runner has none; set model: in the definition "+
				"(for example model: openai:gpt-4.1-mini) or pass --model", ErrNoModel, p.Name)
		}
		return r.Model, nil
	}
	if r.Model != nil && r.Model.Name() == p.Model {
		return r.Model, nil
	}
	open := r.OpenModel
	if open == nil {
		open = model.Open
	}
	m, err := open(p.Model)
	if err != nil {
		return nil, fmt.Errorf("agent: prompt %s: model %s: %w", p.Name, p.Model, err)
	}
	return m, nil
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
	if spec.Target == quiver.TargetClient || spec.RequiresConfirmation {
		if refused := rs.d.Check(ctx, c); refused != nil {
			return nil, nil // it cannot run as asked: the dispatcher refuses it now, nobody is asked
		}
	}
	switch {
	case spec.Target == quiver.TargetClient:
		return &Pending{Call: c, Reason: ReasonClientTool, Description: spec.Description}, nil
	case spec.RequiresConfirmation:
		d, err := rs.decision(ctx, c.ID)
		if err != nil || d != nil {
			return nil, err
		}
		return &Pending{Call: c, Reason: ReasonConfirmation, Description: spec.Description}, nil
	}
	return nil, nil
}

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
	info, err := th.Refresh(ctx)
	if err != nil {
		return nil, nil, err
	}
	if info.Status == store.StatusTerminated {
		return r.redeliver(ctx, th, &info, message, deliver)
	}
	a = r.agentFor(info, a)
	rs, err := r.prepare(ctx, th, a, true)
	if err != nil {
		return nil, nil, err
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
		return nil, nil, err
	}
	return out, rs, err
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
// run ends as it did. Failing instead had River try the run again for days and then report a
// failure to the parent, a second completion, or left a completion never delivered.
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
			rs.steps++ // the step count is the model turns stored, even after a crash
		}
	}
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
	if len(rs.hist) == 0 {
		queued, err := rs.th.Queued(ctx)
		if err != nil {
			return err
		}
		if len(queued) == 0 {
			return ErrEmptyThread
		}
	}
	_, err = rs.th.SetStatus(ctx, store.StatusRunning)
	return err
}

// settle ends a begun run whatever became of it, even when ctx was cancelled: the thread is
// idle again (terminated, for a child that is not resumable and has done its one job) with
// the outcome and who ran it recorded, and the outcome goes to the parent when deliver says
// so. It returns the run's outcome and error as they finally are.
func (rs *run) settle(ctx context.Context, info *store.Thread, deliver bool, out *Outcome, err error) (*Outcome, error) {
	idle := context.WithoutCancel(ctx)
	terminate := false
	if rs.spawn != nil && !info.Resumable && out != nil && out.Status == RunFinished && err == nil {
		// Unless children of its own still work in the background: their results would reach
		// a thread that no longer runs. It stays idle until they have reported, and answers
		// again then.
		terminate, err = rs.noLiveChildren(idle)
	}
	_, serr := rs.th.Update(idle, func(t *store.Thread) error {
		t.Status = store.StatusIdle
		t.StepCount = rs.steps
		if out == nil {
			return nil
		}
		if terminate {
			t.Status = store.StatusTerminated
		}
		st := ReadState(t)
		st.Outcome, st.RanBy = out, rs.agentName
		t.Tags = slices.DeleteFunc(t.Tags, func(tag string) bool { return tag == WaitingTag })
		if out.Status == RunPaused {
			t.Tags = append(t.Tags, WaitingTag) // indexed: what an inbox of waiting calls lists
		}
		return writeState(t, st)
	})
	if err == nil && serr != nil {
		out, err = nil, serr
	}
	r := rs.r
	if err != nil {
		r.events.emit(Event{Type: EventFailed, ThreadID: rs.th.ID(), Step: rs.steps, Err: err})
	}
	if deliver && err == nil {
		r.deliver(idle, rs, out, nil)
	} else if deliver && r.Background == nil && !errors.Is(err, context.Canceled) {
		r.deliver(idle, rs, nil, err) // no one tries again in this process: report the failure now
	}
	return out, err
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

// ReportFailure queues to a child's parent that the child's run failed for good (A4
// implicit communication): what jobs does when River gives up on a child's run.
func (r *Runner) ReportFailure(ctx context.Context, th *thread.Thread, a *Agent, runErr error) {
	info, err := th.Refresh(ctx)
	if err != nil {
		return
	}
	rs := &run{r: r, th: th, spawn: ReadState(&info).Spawn, agentName: a.Name}
	if rs.hist, err = th.History(ctx); err != nil {
		return
	}
	r.deliver(ctx, rs, nil, runErr)
}

// pendingIn returns the calls of hist that have no result in hist, in order. They come from the
// same read as the history, so the two cannot disagree: read apart, a write landing between
// them made a resumed run see a turn's calls in its history but not among the pending ones.
func pendingIn(hist []*store.Message) []quiver.Call {
	answered := map[string]bool{}
	for _, m := range hist {
		if m.Role == store.RoleTool {
			answered[m.ToolCallID] = true
		}
	}
	var out []quiver.Call
	for _, m := range hist {
		for _, c := range m.ToolCalls {
			if !answered[c.ID] {
				out = append(out, quiver.Call{ID: c.ID, Name: c.Name, Args: thread.CallArgs(c.Args), Reasoning: c.Reasoning})
			}
		}
	}
	return out
}

func (rs *run) loop(ctx context.Context) (*Outcome, error) {
	steps := 0 // this run's
	for {
		paused, stopTool, err := rs.runPending(ctx)
		if err != nil {
			return nil, err
		}
		if paused != nil {
			return rs.finish(RunPaused, paused.Reason, paused)
		}
		if stopTool {
			return rs.finish(RunFinished, ReasonStopTool, nil)
		}
		// Messages queued for this step (a child's result, a message sent meanwhile) join the
		// history first, and call for a step even after an answer without calls. Looking is
		// a read; taking them is a write only when there are some.
		took, err := rs.takeQueued(ctx)
		if err != nil {
			return nil, err
		}
		if last := rs.hist[len(rs.hist)-1]; !took && last.Role == store.RoleAssistant && len(last.ToolCalls) == 0 {
			output := rs.outputOf(last)
			switch {
			case output != nil && rs.prompt.Stop.onOutput():
				return rs.finish(RunFinished, ReasonOutput, nil)
			case rs.prompt.Stop.noCalls():
				return rs.finish(RunFinished, ReasonNoCalls, nil)
			}
		}
		if steps >= rs.prompt.Stop.maxSteps() {
			return rs.finish(RunFinished, ReasonMaxSteps, nil)
		}
		if err := rs.refreshLifecycle(ctx); err != nil {
			return nil, err
		}
		if err := rs.step(ctx); err != nil {
			return nil, err
		}
		steps++
	}
}

// takeQueued moves the thread's queued messages into its history and says whether there were
// any.
func (rs *run) takeQueued(ctx context.Context) (bool, error) {
	queued, err := rs.th.Queued(ctx)
	if err != nil || len(queued) == 0 {
		return false, err
	}
	moved, err := rs.th.TakeQueued(ctx)
	if err != nil {
		return false, err
	}
	rs.hist = append(rs.hist, moved...)
	return len(moved) > 0, nil
}

// refreshLifecycle offers subagent_create and subagent_message again when whether they apply
// changed since the tools were rendered (a child was started, one reached its cap or ended).
func (rs *run) refreshLifecycle(ctx context.Context) error {
	if !hasResumable(rs.prompt) {
		return nil
	}
	ns, err := rs.r.nested(rs.prompt)
	if err != nil || ns.create == nil {
		return err
	}
	canCreate, canMessage, err := rs.lifecycleNow(ctx, ns.resumable)
	if err != nil || rs.lifecycle == (lifecycleTools{create: canCreate, message: canMessage}) {
		return err
	}
	return rs.r.prepareInto(ctx, rs, rs.agent, true)
}

func hasResumable(p *Prompt) bool {
	return slices.ContainsFunc(p.Subagents, func(s Subagent) bool { return s.Resumable != nil })
}

// switchAgent goes on with the agent a handoff gave the thread to: its prompt, tools, policy
// and model from the next step, with the history as it is.
func (rs *run) switchAgent(ctx context.Context, a *Agent) error {
	rs.handoffTo = nil
	if err := a.Check(); err != nil {
		return err
	}
	if err := rs.r.prepareInto(ctx, rs, a, true); err != nil {
		return err
	}
	return rs.startImmediate(ctx)
}

// runPending runs the calls that have no result, in order, each result persisted before the
// next call starts. It stops at the first call that must wait.
func (rs *run) runPending(ctx context.Context) (paused *Pending, stopTool bool, err error) {
	th := rs.th
	ctx = context.WithValue(ctx, runKey{}, rs)
	for len(rs.pending) > 0 {
		c := rs.pending[0]
		if rs.handedOver(c) {
			// The handoff this call made is recorded (a process died before its result was):
			// its result says so, and the rest of the turn is the old agent's.
			if err := rs.recordOnly(ctx, c, quiver.Text(fmt.Sprintf("The conversation is handed over to %s, who continues from here.", rs.agentName))); err != nil {
				return nil, false, err
			}
			if err := rs.cutTurn(ctx); err != nil {
				return nil, false, err
			}
			continue
		}
		p, err := rs.mustWait(ctx, c)
		if err != nil || p != nil {
			return p, false, err
		}
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		call := c
		rs.r.events.emit(Event{Type: EventToolCall, ThreadID: th.ID(), Step: rs.steps, Call: &call})
		hctx := quiver.WithExecution(thread.NewContext(ctx, th), quiver.Execution{StepCount: rs.steps, Side: th.Info().CurrentSide})
		res, err := rs.d.Dispatch(hctx, c)
		switch {
		case errors.Is(err, store.ErrResultExists):
			// Another process stored this call's result first: it is done; read the history
			// again to have that result.
			if rs.hist, err = th.History(ctx); err != nil {
				return nil, false, err
			}
		case err != nil:
			return nil, false, err
		default:
			rs.r.events.emit(Event{Type: EventToolResult, ThreadID: th.ID(), Step: rs.steps, Call: &call, Result: res})
		}
		rs.pending = rs.pending[1:]
		if rs.handoffTo != nil {
			if err := rs.switchAgent(ctx, rs.handoffTo); err != nil {
				return nil, false, err
			}
			// The rest of the turn was asked for by the agent that handed over: run under
			// the new agent's policy, it could call what the old one may not.
			if err := rs.cutTurn(ctx); err != nil {
				return nil, false, err
			}
			continue // the stop tools were the agent's that handed over
		}
		if slices.ContainsFunc(rs.prompt.Stop.Tools, func(p string) bool { return globMatch(p, c.Name) }) {
			stopTool = true
		}
		if err := ctx.Err(); err != nil {
			return nil, false, err // cancelled while the tool ran: stop here, resumable
		}
	}
	return nil, stopTool, nil
}

// handedOver says whether c is a handoff to the agent that has the thread already: the run
// was resumed after the handoff was recorded and before its call's result was.
func (rs *run) handedOver(c quiver.Call) bool {
	if c.Name != rs.agentName {
		return false
	}
	if _, ok := rs.d.Registry.Lookup(c.Name); ok {
		return false // a tool of the agent's own that has its name
	}
	info := rs.th.Info()
	return ReadState(&info).Agent == rs.agentName
}

// cutTurn answers the calls left of a turn whose agent handed the thread over: they are not
// run.
func (rs *run) cutTurn(ctx context.Context) error {
	for len(rs.pending) > 0 {
		c := rs.pending[0]
		res := quiver.Errorf(quiver.CodeRejected, "call %s was not run: the conversation was handed over to %s before it; "+
			"%s decides what to do now.", c.Name, rs.agentName, rs.agentName)
		if err := rs.recordOnly(ctx, c, res); err != nil {
			return err
		}
	}
	return nil
}

// recordOnly stores c's result without running it and takes c off the pending calls.
func (rs *run) recordOnly(ctx context.Context, c quiver.Call, res *quiver.Result) error {
	m, err := rs.th.Record(ctx, &c, res)
	switch {
	case errors.Is(err, store.ErrResultExists):
		if rs.hist, err = rs.th.History(ctx); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		rs.hist = append(rs.hist, m)
		call := c
		rs.r.events.emit(Event{Type: EventToolResult, ThreadID: rs.th.ID(), Step: rs.steps, Call: &call, Result: res})
	}
	rs.pending = rs.pending[1:]
	return nil
}

// finish builds the outcome from the thread as it now is.
func (rs *run) finish(status RunStatus, reason Reason, p *Pending) (*Outcome, error) {
	out := &Outcome{ThreadID: rs.th.ID(), Status: status, Reason: reason, Pending: p, Steps: rs.steps}
	for i := len(rs.hist) - 1; i >= 0; i-- {
		if m := rs.hist[i]; m.Role == store.RoleAssistant {
			if output := rs.outputOf(m); output != nil {
				out.Output = output
			} else {
				out.Text = m.Content
			}
			break
		}
	}
	ev := EventFinished
	if status == RunPaused {
		ev = EventPaused
	}
	rs.r.events.emit(Event{Type: ev, ThreadID: rs.th.ID(), Step: out.Steps, Outcome: out})
	return out, nil
}

// outputOf returns the structured output an assistant message carries, or nil: in composed
// mode the message's content is the output document.
func (rs *run) outputOf(m *store.Message) json.RawMessage {
	if rs.prompt.Output == nil || m.Content == "" {
		return nil
	}
	raw := json.RawMessage(m.Content)
	if !json.Valid(raw) || string(raw) == "null" {
		return nil
	}
	return raw
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
