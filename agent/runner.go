package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// server.Server.WorkspaceRegistry).
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

	events events
	busy   busySet
}

// RunStatus is how a run ended.
type RunStatus string

// Run statuses.
const (
	RunFinished RunStatus = "finished" // a stop rule holds
	RunPaused   RunStatus = "paused"   // a call waits for a decision or a client's result
)

// Stop and pause reasons, in Outcome.Reason.
const (
	ReasonNoCalls      = "no_calls"
	ReasonOutput       = "output"
	ReasonStopTool     = "stop_tool"
	ReasonMaxSteps     = "max_steps"
	ReasonConfirmation = "confirmation"
	ReasonClientTool   = "client_tool"
)

// Outcome is where a run stopped.
type Outcome struct {
	ThreadID string    `json:"thread_id"`
	Status   RunStatus `json:"status"`
	Reason   string    `json:"reason"`
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
	Reason string      `json:"reason"` // confirmation or client_tool
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
func (r *Runner) Run(ctx context.Context, th *thread.Thread, a *Agent, message string) (*Outcome, error) {
	return r.run(ctx, th, a, message)
}

// Resume continues the run on the thread: after a decision, a client's result, or a crash.
func (r *Runner) Resume(ctx context.Context, th *thread.Thread, a *Agent) (*Outcome, error) {
	return r.run(ctx, th, a, "")
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
	return th.RecordResult(ctx, &p.Call, res)
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
	r        *Runner
	th       *thread.Thread
	prompt   *Prompt
	d        *quiver.Dispatcher
	policy   quiver.Policy
	model    model.Model
	tools    *schema.ToolSet // tool-calling mode
	composed *schema.Schema  // composed {calls, output} mode
	system   string
	tracer   trace.Tracer // nil: no spans
	meters   *meters      // nil: no metrics

	// The thread as this run knows it: read once when the run starts, then kept up to date
	// with what the run writes (a Runner runs a thread once at a time), so a step reads
	// nothing back. steps counts the thread's model turns.
	hist      []*store.Message
	pending   []quiver.Call
	decisions map[string]*store.Decision // read when a call first needs one
	steps     int
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

type decisionsKey struct{}

// prepare gathers what a run needs; withModel opens the model too.
func (r *Runner) prepare(ctx context.Context, th *thread.Thread, a *Agent, withModel bool) (*run, error) {
	if r.Store == nil {
		return nil, errors.New("agent: Runner.Store is not set")
	}
	reg := r.Registry
	if r.Registries != nil {
		var err error
		if reg, err = r.Registries(ctx, th.WorkspaceID()); err != nil {
			return nil, fmt.Errorf("agent: the tools of workspace %s: %w", th.WorkspaceID(), err)
		}
	}
	if reg == nil {
		reg = quiver.Default
	}
	p := a.Prompt
	if err := p.CheckTools(reg); err != nil {
		return nil, err
	}
	rs := &run{r: r, th: th, prompt: p, policy: p.policy(), tracer: genai.Tracer(r.TracerProvider), meters: newMeters(r.MeterProvider)}
	rs.d = &quiver.Dispatcher{Registry: reg, Policy: rs.policy, Resolver: r.Resolver, Hooks: r.Hooks,
		Middleware: r.Middleware, Recorder: recorder{rs}, Timeout: r.Timeout, Grace: r.Grace,
		TracerProvider: r.TracerProvider, TraceContent: r.TraceContent, MeterProvider: r.MeterProvider,
		// A call reaches the confirmation gate only with a persisted decision (see mustWait).
		Confirm: func(ctx context.Context, c *quiver.Call) (quiver.Decision, error) {
			if rs, ok := ctx.Value(decisionsKey{}).(*run); ok {
				if dec := rs.decisions[c.ID]; dec != nil {
					return quiver.Decision{Action: quiver.DecisionAction(dec.Action), Args: dec.Args, Message: dec.Message}, nil
				}
			}
			return quiver.Decision{Action: quiver.Pause}, nil
		}}
	if !withModel {
		return rs, nil
	}
	m, err := r.openModel(p)
	if err != nil {
		return nil, err
	}
	rs.model = m
	tools := rs.d.Tools()
	rs.system = p.System
	if ex := quiver.RenderExamples(tools); ex != "" {
		rs.system += "\n\n" + ex
	}
	if p.Output != nil {
		if rs.composed, err = rs.d.Compose(p.Output); err != nil {
			return nil, fmt.Errorf("agent: prompt %s: composing the output schema: %w", p.Name, err)
		}
		rs.system += "\n\n" + composedInstructions
		return rs, nil
	}
	dialect := m.Dialect()
	if p.Strict && dialect == schema.OpenAI {
		dialect = schema.OpenAIStrict
	}
	schemas := quiver.ToolSchemas(reg, tools)
	for i := range schemas {
		schemas[i].Reasoning = p.ReasoningForCall
	}
	if rs.tools, err = schema.Render(dialect, schemas); err != nil {
		return nil, fmt.Errorf("agent: prompt %s: rendering tools for %s: %w", p.Name, m.Name(), err)
	}
	return rs, nil
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

func (r *Runner) run(ctx context.Context, th *thread.Thread, a *Agent, message string) (out *Outcome, err error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	if !r.busy.acquire(th.ID()) {
		return nil, ErrBusy
	}
	defer r.busy.release(th.ID())
	rs, err := r.prepare(ctx, th, a, true)
	if err != nil {
		return nil, err
	}
	ctx = quiver.WithDoor(ctx, quiver.DoorAgent)
	if rs.tracer != nil {
		var span trace.Span
		ctx, span = rs.tracer.Start(ctx, genai.OpInvokeAgent+" "+a.Name, trace.WithAttributes(
			genai.Operation.String(genai.OpInvokeAgent), genai.AgentName.String(a.Name), genai.ConversationID.String(th.ID())))
		defer func() { endRunSpan(span, out, err) }()
	}
	if rs.meters != nil {
		rs.meters.run(ctx, a.Name, "started")
		defer func() {
			switch {
			case err != nil:
				rs.meters.run(ctx, a.Name, "failed")
			case out != nil:
				rs.meters.run(ctx, a.Name, string(out.Status))
			}
		}()
	}
	info, err := th.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	if info.Status == store.StatusTerminated {
		return nil, fmt.Errorf("agent: thread %s is terminated: %w", th.ID(), store.ErrInvalid)
	}
	if rs.hist, err = th.History(ctx); err != nil {
		return nil, err
	}
	pending := pendingIn(rs.hist)
	rs.pending = pending
	for _, m := range rs.hist {
		if m.Role == store.RoleAssistant {
			rs.steps++ // the step count is the model turns stored, even after a crash
		}
	}
	if message != "" {
		if len(pending) > 0 {
			return nil, fmt.Errorf("%w: %d call(s) without a result; decide or submit results, then Resume", ErrPaused, len(pending))
		}
		m, err := th.AppendUser(ctx, message)
		if err != nil {
			return nil, err
		}
		rs.hist = append(rs.hist, m)
	} else if len(pending) > 0 {
		r.events.emit(Event{Type: EventResumed, ThreadID: th.ID(), Step: rs.steps})
	}
	if len(rs.hist) == 0 {
		return nil, ErrEmptyThread
	}
	if _, err := th.SetStatus(ctx, store.StatusRunning); err != nil {
		return nil, err
	}
	defer func() {
		// The thread is idle again whatever happened, even when ctx was cancelled.
		idle := context.WithoutCancel(ctx)
		_, serr := th.Update(idle, func(t *store.Thread) error {
			t.Status = store.StatusIdle
			t.StepCount = rs.steps
			if out != nil {
				t.State, _ = json.Marshal(out)
			}
			return nil
		})
		if err == nil && serr != nil {
			out, err = nil, serr
		}
		if err != nil {
			r.events.emit(Event{Type: EventFailed, ThreadID: th.ID(), Step: rs.steps, Err: err})
		}
	}()
	return rs.loop(ctx)
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
	th := rs.th
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
		if last := rs.hist[len(rs.hist)-1]; last.Role == store.RoleAssistant && len(last.ToolCalls) == 0 {
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
		// Messages queued for this step (a child's result, a message sent meanwhile) join the
		// history first. Looking is a read; taking them is a write only when there are some.
		queued, err := th.Queued(ctx)
		if err != nil {
			return nil, err
		}
		if len(queued) > 0 {
			moved, err := th.TakeQueued(ctx)
			if err != nil {
				return nil, err
			}
			rs.hist = append(rs.hist, moved...)
		}
		if err := rs.step(ctx); err != nil {
			return nil, err
		}
		steps++
	}
}

// runPending runs the calls that have no result, in order, each result persisted before the
// next call starts. It stops at the first call that must wait.
func (rs *run) runPending(ctx context.Context) (paused *Pending, stopTool bool, err error) {
	th := rs.th
	ctx = context.WithValue(ctx, decisionsKey{}, rs)
	for len(rs.pending) > 0 {
		c := rs.pending[0]
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
		if slices.ContainsFunc(rs.prompt.Stop.Tools, func(p string) bool { return globMatch(p, c.Name) }) {
			stopTool = true
		}
		if err := ctx.Err(); err != nil {
			return nil, false, err // cancelled while the tool ran: stop here, resumable
		}
	}
	return nil, stopTool, nil
}

// finish builds the outcome from the thread as it now is.
func (rs *run) finish(status RunStatus, reason string, p *Pending) (*Outcome, error) {
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
		span.SetAttributes(attribute.String("quiver.run.status", string(out.Status)), attribute.String("quiver.run.reason", out.Reason),
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
