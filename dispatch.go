package quiver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiverhq/quiver/internal/genai"
)

// Call is one invocation of a tool: by a model, a person, an API client or code.
type Call struct {
	// ID identifies the call (the provider's tool-call id, for a model's call).
	ID string `json:"id,omitempty"`
	// Name is the tool's registered name.
	Name string `json:"name"`
	// Args is the JSON object of arguments. Empty or null means no arguments. After decoding
	// it holds the arguments the handler receives: defaults applied, meta-fields removed.
	Args json.RawMessage `json:"args,omitempty"`
	// Reasoning is the model's _reasoningForCall: stored with the call, never passed on.
	Reasoning string `json:"reasoning,omitempty"`
	// Output is the model's _output, the result of a latent tool.
	Output json.RawMessage `json:"output,omitempty"`
	// Meta holds the other meta-fields of the call (_outputPath, _instance, _delegate, ...).
	Meta map[string]json.RawMessage `json:"meta,omitempty"`
	// Approved records that a person already approved this call, so the confirmation gate lets
	// it through (a resumed run carries the persisted decision here). It is never read from
	// JSON: a client must not be able to approve its own call.
	Approved bool `json:"-"`
	// NoRecord runs the call through the whole pipeline without recording the result.
	NoRecord bool `json:"-"`

	tool          *Tool
	entitled      func(*Tool) bool // what the caller may call; nil: nothing restricts them
	vars          map[string]string
	secrets       []*masker
	outputChecked bool // a latent tool's _output was already checked against the output schema
	notStarted    bool // the context ended before the tool started: nothing to record
	// exec is what ExecutionFrom gives the handler: the call's id and attempt (see callExecution).
	exec Execution
	// The stateful meta-fields, parsed from Meta (see meta.go).
	outputPath *OutputPath
	instance   string
	delegation *Delegation
	resultCut  bool // the result was cut to MaxResultBytes: it is not written to state
}

// reset clears what a dispatch learns of a call, so that a Call value given again starts
// afresh, and copies its Meta: meta-fields are added to it, and the caller's map stays as it
// was.
func (c *Call) reset() {
	c.tool, c.vars, c.secrets, c.outputChecked, c.notStarted = nil, nil, nil, false, false
	c.outputPath, c.instance, c.delegation, c.resultCut = nil, "", nil, false
	c.exec = Execution{}
	if c.Meta != nil {
		c.Meta = maps.Clone(c.Meta)
	}
}

// Tool returns the tool the call resolved to, or nil before lookup (and for unknown names).
func (c *Call) Tool() *Tool { return c.tool }

// Handler runs a call and always returns a result: every failure is an error result.
type Handler func(ctx context.Context, call *Call) *Result

// Middleware wraps a handler; see [Dispatcher.Middleware] for where in the pipeline it runs.
type Middleware func(Handler) Handler

// Hooks observe and shape execution. Each may be nil.
type Hooks struct {
	// BeforeCall runs once the call is validated and confirmed, just before its variables are
	// resolved and it executes, so it sees the arguments that will run (edited ones included);
	// an error rejects the call with that error as its result.
	BeforeCall func(ctx context.Context, call *Call) error
	// AfterSuccess and AfterFailure see every result, secrets already masked.
	AfterSuccess func(ctx context.Context, call *Call, r *Result)
	AfterFailure func(ctx context.Context, call *Call, r *Result)
	// BeforeStore runs before a result is recorded; it may return a rewritten result, or false
	// (or a nil result) to keep the result out of history. The caller still receives the
	// result, and the call is still answered in history, by a placeholder that says its result
	// was withheld: a call left without a result would be run again by a resumed run, and
	// every provider rejects a conversation with an unanswered call.
	BeforeStore func(ctx context.Context, call *Call, r *Result) (*Result, bool)
}

// Recorder persists results. The store packages implement it; the dispatcher calls it for
// every call not marked NoRecord, after BeforeStore, except a call whose context ended before
// its tool started (nothing ran, so nothing is lost, and whoever owns the call runs it later).
// The context it gets keeps the caller's values but not its cancellation (see
// Dispatcher.RecordTimeout), so a call cancelled while it ran still ends with a stored result.
type Recorder interface {
	RecordResult(ctx context.Context, call *Call, r *Result) error
}

// DecisionAction is what a person decided about a call that needs confirmation.
type DecisionAction string

// Confirmation decisions.
const (
	Approve DecisionAction = "approve"
	// Edit approves the call with edited arguments, which are validated again. Meta-fields
	// the edited arguments name replace the call's (null drops one, as for _outputPath);
	// those they leave out are kept.
	Edit DecisionAction = "edit"
	// Deny refuses the call; it never runs, and the model gets an error result with the message.
	Deny DecisionAction = "deny"
	// Pause defers the decision: the call returns CodeConfirmationRequired and the caller
	// (the agent loop) persists the pause and resumes with the decision later.
	Pause DecisionAction = "pause"
)

// Decision is the answer to a confirmation request.
type Decision struct {
	Action  DecisionAction  `json:"action"`
	Args    json.RawMessage `json:"args,omitempty"`    // Edit only
	Message string          `json:"message,omitempty"` // Deny: told to the model
	// Who decided and when: the call's result keeps them (see DecisionRecord), so that a
	// thread's readers learn who let a call run, or refused it. A Confirmer that knows no one
	// leaves them empty.
	UserID string `json:"user_id,omitempty"`
	// KeyID is the API key the person decided with; AccessToken says they decided with an
	// access token of UserID's instead. Neither: a door that authenticates no one.
	KeyID       string    `json:"key_id,omitempty"`
	AccessToken bool      `json:"access_token,omitempty"`
	DecidedAt   time.Time `json:"decided_at,omitzero"`
}

// Confirmer asks for a decision on a call to a tool that requires confirmation.
type Confirmer func(ctx context.Context, call *Call) (Decision, error)

// Dispatcher runs calls through one pipeline, whoever makes them:
//
//	policy -> lookup -> decode and validate (defaults, meta-fields) -> stateful meta-fields
//	(_outputPath, _instance, _delegate: parsed, enabled, possible here) -> confirmation gate
//	-> BeforeCall hook -> variables -> Middleware -> execute (or delegate; timeout,
//	cancellation, panic recovery) -> output check -> secret masking -> result limit
//	(MaxResultBytes) -> AfterSuccess/AfterFailure hooks -> BeforeStore hook -> Recorder (with
//	the output's state write, in one transaction)
//
// Configure a Dispatcher by setting its fields before the first call, as with http.Server; it
// is safe for concurrent use after that and must not be changed.
type Dispatcher struct {
	// Registry holds the tools; nil means Default.
	Registry *Registry
	// Policy restricts which tools may be called.
	Policy Policy
	// Resolver supplies the values of declared variables; nil resolves none.
	Resolver VariableResolver
	// Confirm is asked about calls to tools that require confirmation; nil leaves such calls
	// paused with CodeConfirmationRequired.
	Confirm Confirmer
	Hooks   Hooks
	// Middleware wraps execution, innermost last: it sees calls that are permitted, validated,
	// confirmed and have their variables, and results before masking.
	Middleware []Middleware
	// Recorder persists results. A StateRecorder also lets calls use _outputPath and
	// _instance; with another Recorder (or none) such calls are refused before they run.
	Recorder Recorder
	// MetaFields are the stateful meta-fields (schema.OutputPathField, InstanceField,
	// DelegateField) every tool accepts here, besides those a tool's Spec.MetaFields enables:
	// how an agent enables them for all its tools.
	MetaFields []string
	// Entitled, when set, is asked at each call for what its caller is entitled to (a
	// platform's rules of who may see and call which tool): the function it returns says
	// whether the caller may call a tool; nil when nothing restricts the caller. A tool it
	// refuses is answered with CodeNotEntitled before anything else of the call is looked at,
	// and so is a name no tool has, in the same words; the tools an error lists are those it
	// allows, and ToolsFor lists those alone.
	Entitled func(ctx context.Context) func(*Tool) bool
	// Admit, when set, is asked at each call of a tool the caller may call whether it may run
	// now (a platform's limits on how often and how many at once): a refusal is answered in
	// the call's stead, before its arguments are read, and is recorded like every result;
	// otherwise done is called once the call has ended.
	Admit func(ctx context.Context, t *Tool) (done func(), refusal *Result)
	// Observe, when set, is told of every call once it has ended and its result is recorded:
	// the call (Call.Tool is nil for a name no tool the caller may call has), the result, and
	// how long the call took in the dispatcher. A platform meters usage with it; it must not
	// block.
	Observe func(ctx context.Context, c *Call, r *Result, took time.Duration)
	// Delegator runs calls that name _delegate; nil refuses them before they run.
	Delegator Delegator
	// Timeout bounds a tool that sets no timeout of its own; zero means no bound.
	Timeout time.Duration
	// ToolWait bounds how long a call waits for its tool while the tool's source connects
	// (see [ToolPending]): a remote MCP server reconnecting after a restart, say. Zero means
	// DefaultToolWait; negative, no wait.
	ToolWait time.Duration
	// Grace is how long a cancelled or timed-out handler gets to return before it is abandoned
	// and its result recorded as cancelled; zero means 2 seconds.
	Grace time.Duration
	// MaxArgsBytes caps the size of a call's arguments; zero means 1 MiB.
	MaxArgsBytes int
	// MaxResultBytes caps the size of a result, all its parts together (text, error, stack,
	// structured value, problems, content, attachment data); zero means 1 MiB. It applies to
	// every tool, after secret masking, so that what is cut was masked whole; over it, text
	// is cut with a marker saying how much, and what cannot be cut is left out with a note
	// (see DefaultMaxResultBytes).
	MaxResultBytes int
	// RecordTimeout bounds recording a result when the caller's context can end; zero means
	// 10 seconds. The record does not share the caller's cancellation: a run cancelled while
	// its tool ran must still store what the tool did, or a resume would run it again.
	RecordTimeout time.Duration
	// TracerProvider makes a span for every call, named and described as OpenTelemetry's
	// GenAI conventions say ("execute_tool NAME", with the tool's name, the call's id, and
	// error.type and an error status for an error result); nil means the global provider
	// (otel.SetTracerProvider) as set at the first call. Without one, calls make no spans and
	// pay nothing for them.
	TracerProvider trace.TracerProvider
	// TraceContent also records each call's arguments and result on its span, secrets masked.
	// Off by default: they may hold personal data.
	TraceContent bool
	// MeterProvider records a histogram of call durations, quiver.tool.call.duration in
	// seconds, by tool (gen_ai.tool.name), door (quiver.door: see WithDoor), status
	// (quiver.call.status) and error code (error.type): calls, errors and latency per tool and
	// per door. nil means the global provider (otel.SetMeterProvider) as set at the first
	// call; without one, calls record nothing and read no clock for it.
	MeterProvider metric.MeterProvider

	once      sync.Once
	tracer    trace.Tracer
	durations metric.Float64Histogram // nil: no metrics
	handler   Handler
	policyErr error // a malformed policy refuses every call rather than guess
}

// DefaultToolWait is how long a call waits for a tool whose source is connecting: the time a
// remote MCP server gets to connect at start-up (mcp.ImportOptions.ConnectTimeout's default).
const DefaultToolWait = 30 * time.Second

const (
	defaultGrace         = 2 * time.Second
	defaultMaxArgsBytes  = 1 << 20
	defaultRecordTimeout = 10 * time.Second
)

func (d *Dispatcher) registry() *Registry {
	if d.Registry != nil {
		return d.Registry
	}
	return Default
}

func (d *Dispatcher) build() {
	d.tracer = genai.Tracer(d.TracerProvider)
	if m := genai.Meter(d.MeterProvider); m != nil {
		// A meter that cannot make the instrument (a bad name: a bug) leaves metrics off.
		d.durations, _ = m.Float64Histogram(genai.MetricToolCallDuration, metric.WithUnit("s"),
			metric.WithDescription("Duration of tool calls, by tool, door, status and error code."),
			metric.WithExplicitBucketBoundaries(genai.DurationBuckets...))
	}
	d.policyErr = d.Policy.Validate()
	h := d.execute
	h = d.checkOutput(h)
	for i := len(d.Middleware) - 1; i >= 0; i-- {
		h = d.Middleware[i](h)
	}
	h = d.resolveVariables(h)
	h = d.beforeCall(h)
	h = d.confirm(h)
	h = d.checkMeta(h)
	h = d.decode(h)
	h = d.lookupAndPolicy(h)
	h = d.mask(h)
	h = d.limitResult(h)
	d.handler = h
}

// Dispatch runs call through the pipeline and returns its result, which is an error result for
// every failure of the call itself. The error is non-nil only when the runtime failed: the
// Recorder could not persist the result (which is still returned).
//
// A call whose context is over before its tool starts returns a cancelled (or timed-out)
// result and is not recorded; once the tool has started, its result is recorded whatever
// happens to the context, so every call either left no trace or has exactly one result.
func (d *Dispatcher) Dispatch(ctx context.Context, call Call) (*Result, error) {
	d.once.Do(d.build)
	c := &call
	if d.tracer == nil && d.durations == nil && d.Observe == nil {
		return d.dispatch(ctx, c)
	}
	var start time.Time
	if d.durations != nil || d.Observe != nil {
		start = time.Now()
	}
	var span trace.Span
	if d.tracer != nil {
		ctx, span = d.tracer.Start(ctx, genai.OpExecuteTool)
	}
	r, err := d.dispatch(ctx, c)
	if span != nil {
		// The span's name and attributes are set only when it records (a sampler may drop it).
		if span.IsRecording() {
			d.describe(span, c, r)
		}
		span.End()
	}
	if d.durations != nil {
		attrs := []attribute.KeyValue{genai.ToolName.String(d.metricName(c)), genai.Door.String(string(DoorFrom(ctx))), genai.CallStatus.String(string(r.Status))}
		if r.IsError() {
			attrs = append(attrs, genai.ErrorType.String(string(r.Code)))
		}
		d.durations.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attrs...))
	}
	if d.Observe != nil {
		d.Observe(ctx, c, r, time.Since(start))
	}
	return r, err
}

// UnknownToolName is the tool name a call's metrics carry when no tool has the name it called:
// a label takes the registry's names alone, so that callers inventing names cannot make a
// series each (Prometheus keeps every label value it is given).
const UnknownToolName = "(unknown)"

// metricName is c's tool name as its metrics label it.
func (d *Dispatcher) metricName(c *Call) string {
	if c.tool != nil {
		return c.Name
	}
	if _, ok := d.registry().Lookup(c.Name); ok {
		return c.Name
	}
	return UnknownToolName
}

// describe sets what a call's span says about the call and its result.
func (d *Dispatcher) describe(span trace.Span, c *Call, r *Result) {
	span.SetName(genai.OpExecuteTool + " " + c.Name)
	attrs := []attribute.KeyValue{genai.Operation.String(genai.OpExecuteTool), genai.ToolName.String(c.Name),
		genai.ToolType.String("function")}
	if c.ID != "" {
		attrs = append(attrs, genai.ToolCallID.String(c.ID))
	}
	if d.TraceContent {
		args := c.Args
		if m := secretReplacer(c.secrets); m != nil && len(args) > 0 {
			args = redactJSON(args, m)
		}
		attrs = append(attrs, genai.ToolArguments.String(string(args)))
		if b, err := json.Marshal(r); err == nil {
			attrs = append(attrs, genai.ToolResult.String(string(b)))
		}
	}
	if r.IsError() {
		attrs = append(attrs, genai.ErrorType.String(string(r.Code)))
		span.SetStatus(codes.Error, r.Error)
	}
	span.SetAttributes(attrs...)
}

func (d *Dispatcher) dispatch(ctx context.Context, c *Call) (*Result, error) {
	c.reset()
	if parent := CallFrom(ctx); parent != nil {
		// A call made from inside a tool must not reveal what the calling tool may not.
		c.secrets = slices.Clone(parent.secrets)
	}
	var r *Result
	if d.policyErr != nil {
		r = Errorf(CodePolicyDenied, "no tool can run: the dispatcher's policy is invalid: %v", d.policyErr)
	} else if ctx.Err() != nil {
		r = notStarted(ctx, c)
	} else {
		c.exec = callExecution(ctx, c)
		r = d.handler(&callContext{Context: ctx, call: c}, c)
	}
	if r.IsError() {
		if d.Hooks.AfterFailure != nil {
			d.Hooks.AfterFailure(ctx, c, r)
		}
	} else if d.Hooks.AfterSuccess != nil {
		d.Hooks.AfterSuccess(ctx, c, r)
	}
	if c.NoRecord || d.Recorder == nil || c.notStarted {
		return r, nil
	}
	if r.Code == CodeCancelled && handedBack(ctx) {
		return r, nil // the run goes on elsewhere, and runs the call again there
	}
	stored, keep := r, true
	if d.Hooks.BeforeStore != nil {
		stored, keep = d.Hooks.BeforeStore(ctx, c, r)
		if stored == nil {
			keep = false
		}
	}
	if !keep {
		stored = withheld(c, r)
		// What is withheld from history is not written to state either: the placeholder is
		// no output, and writing the real one would keep what the hook held back.
		c.outputPath = nil
	}
	rctx, cancel := d.recordContext(ctx)
	defer cancel()
	refused, err := d.record(rctx, c, stored)
	if err != nil {
		return r, fmt.Errorf("quiver: recording the result of %s: %w", c.Name, err)
	}
	if refused != nil {
		// The state did not take the output: what was stored, and what the caller gets, is
		// the error result that says why.
		return refused, nil
	}
	return r, nil
}

// recordContext is the context a result is recorded with: ctx's values without its
// cancellation, bounded by RecordTimeout. A context that can never end is used as it is (a
// detached one would cost allocations on every call for nothing).
func (d *Dispatcher) recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		return ctx, func() {}
	}
	timeout := d.RecordTimeout
	if timeout <= 0 {
		timeout = defaultRecordTimeout
	}
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}

// withheld is what history keeps of a result a BeforeStore hook dropped: an answer to the
// call that says the result was withheld, with the result's status and code (identifiers, not
// content) and nothing else of it.
func withheld(c *Call, r *Result) *Result {
	msg := fmt.Sprintf("the result of %s was withheld from the conversation history", c.Name)
	if r.IsError() {
		return &Result{Status: StatusError, Code: r.Code, Error: msg}
	}
	return &Result{Status: StatusSuccess, Text: msg}
}

// Call dispatches a call to name with args given as any JSON-encodable value (or
// json.RawMessage), for code invoking tools.
func (d *Dispatcher) Call(ctx context.Context, name string, args any) (*Result, error) {
	raw, ok := args.(json.RawMessage)
	if !ok && args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return Errorf(CodeInvalidArguments, "arguments for %s cannot be encoded as JSON: %v", name, err), nil
		}
		raw = b
	}
	return d.Dispatch(ctx, Call{Name: name, Args: raw})
}

// Tools returns the tools the dispatcher's policy permits, sorted by name.
func (d *Dispatcher) Tools() []*Tool { return d.Policy.Effective(d.registry()) }

// ToolsFor returns the tools the dispatcher's policy permits and ctx's caller is entitled to
// (see Entitled), sorted by name: what a door offers that caller.
func (d *Dispatcher) ToolsFor(ctx context.Context) []*Tool {
	return Entitled(d.Tools(), d.entitledFor(ctx))
}

// entitledFor is what ctx's caller is entitled to; nil when nothing restricts them.
func (d *Dispatcher) entitledFor(ctx context.Context) func(*Tool) bool {
	if d.Entitled == nil {
		return nil
	}
	return d.Entitled(ctx)
}

// Entitled returns the tools allowed allows, in a new slice; tools itself when allowed is nil.
func Entitled(tools []*Tool, allowed func(*Tool) bool) []*Tool {
	if allowed == nil {
		return tools
	}
	out := make([]*Tool, 0, len(tools))
	for _, t := range tools {
		if allowed(t) {
			out = append(out, t)
		}
	}
	return out
}
