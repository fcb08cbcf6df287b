// Package quiver defines tools once and governs, validates, executes and records every call to
// them, whoever asks: a model in an agent loop, an MCP or HTTP client, or Go code.
//
// A [Tool] is a [Spec] (name, description, schemas, variables, confirmation, timeout) plus the
// code that runs it. [Func] builds one from a typed Go function, inferring its schema once;
// [ParseSchemaTool] builds one from a pure JSON Schema, executed by an activity or latently by
// the model. Tools live in a [Registry]; a [Dispatcher] runs every call through one middleware
// pipeline: policy, lookup, decoding and validation, confirmation, variables, execution with
// timeout and panic recovery, output check, secret masking, hooks and recording.
package quiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver/schema"
)

// Target says where a tool runs.
type Target string

// Tool targets.
const (
	// TargetServer tools run in the runtime (the default).
	TargetServer Target = "server"
	// TargetClient tools run in the client: the run pauses until the client posts the result.
	TargetClient Target = "client"
)

// Example is a sample call (arguments and optionally the result), shown to the model to steer
// how it calls the tool.
type Example struct {
	Args   json.RawMessage `json:"args"`
	Result json.RawMessage `json:"result,omitempty"`
}

// Spec is the declarative part of a tool: everything but the code.
type Spec struct {
	// Name is the name the model sees, unique in a registry (snake_case, 1 to 64 characters of
	// [a-zA-Z0-9_-] by convention; other names are accepted with a warning).
	Name string
	// Description says what the tool does, when to use it and what it returns. Required.
	Description string
	// InputSchema describes the arguments; its root must be an object schema. Nil means the
	// tool takes no arguments (the model is offered an empty object).
	InputSchema *schema.Schema
	// OutputSchema, when set, is the contract a structured result is checked against.
	OutputSchema *schema.Schema
	Examples     []Example
	// Variables are the thread variables the tool needs; only these reach its handler.
	Variables []Variable
	Target    Target
	// RequiresConfirmation makes the dispatcher ask a person before the tool runs.
	RequiresConfirmation bool
	// Timeout bounds one execution; zero means the dispatcher's default.
	Timeout time.Duration
	// Disabled hides the tool from models and refuses calls to it.
	Disabled bool
	// Activity names the code that executes a schema-only tool. Empty means the activity
	// registered under the tool's name, if any; with neither the tool is latent.
	Activity string
	// Imported marks a tool whose name comes from elsewhere (a remote MCP server's): its owner
	// cannot rename it, so a name that departs from the convention is logged at debug level,
	// not warned about (providers see the mapped name either way).
	Imported bool
	// MetaFields are the stateful meta-fields a call of this tool may carry:
	// schema.OutputPathField, schema.InstanceField, schema.DelegateField. The model is offered
	// them as optional properties, and the dispatcher takes them out of the arguments; a call
	// naming one the tool (or the dispatcher) does not enable is refused.
	MetaFields []string
	// Annotations are hints about what the tool does (read-only, destructive, idempotent,
	// open world, a title), served to MCP clients and listed by the API: see [Annotations].
	// Its pointers are shared and must not be modified.
	Annotations Annotations
	// RunAs names the user the tool's code runs as, when not the caller: a stored tool's
	// runtime user (its own, else its workspace's default). Its variables resolve for that
	// user (Scope.UserID becomes RunAs for their resolution, and for nothing else: policy,
	// confirmation, the scope the handler reads and the record stay the caller's), and its
	// results' Meta name both, as caller_user_id and runtime_user_id. Empty: the caller.
	RunAs string
	// Source says where the tool came from, for governance rules that select by it: one of
	// the Source kinds, with the set's name for those that come in sets ("openapi:payments",
	// "mcp:github"). Empty means a Go function (SourceGo). The code that makes tools from a
	// source sets it; nothing else branches on it.
	Source string
	// Connections are the providers the tool acts as its caller at (UserToken), with the scopes
	// it needs: a call by a person who has not connected one waits for them to (an agent run
	// pauses, waiting_for_authorization) instead of failing when the tool asks.
	Connections []ConnectionNeed
	// OutputAdvisory makes OutputSchema another party's description of what the tool returns
	// (an OpenAPI document's of a service's answer) rather than a contract: a structured result
	// that does not match it is passed through, with what differs in the result's Meta under
	// "output_warning", where it would otherwise be an error. The service answered; the
	// description is at fault. Such a schema (without Examples to check) is compiled at the
	// first result it checks rather than by NewTool, and one that cannot be compiled is said
	// in the same warning.
	OutputAdvisory bool
}

// ToolFunc is the code behind a tool: it receives the validated arguments (with defaults
// applied and meta-fields removed) and returns a value the dispatcher normalises into a
// [Result]. See [Dispatcher] for how values and errors become results.
type ToolFunc func(ctx context.Context, args json.RawMessage) (any, error)

// Tool is a Spec with compiled schemas and, unless it is schema-only, the function that runs
// it. A Tool is immutable and safe for concurrent use.
type Tool struct {
	spec Spec
	// input and output are the schemas with their compiled forms, kept from NewTool or
	// compiled at their first use (see lazySchema); nil when the tool takes no arguments,
	// declares no output.
	input  *lazySchema
	output *lazySchema
	// outputTrusted means the output schema was inferred from a Go type and constrains nothing
	// the type does not already guarantee, so checking each result would only cost time.
	outputTrusted bool
	fn            ToolFunc
	// params summarises the arguments for error messages: "city (string, required), days".
	params string
	ready  bool // built by init: a zero Tool cannot be registered
	// denied is why a Governance refuses the tool ("" when none does): every Policy
	// refuses it with this reason.
	denied string
	// made is the tool as its source made it, for a governed tool (nil otherwise): rules
	// apply to it, so that governing a governed tool again changes nothing.
	made *Tool
	// providerName is the name a Governance gives the tool for model providers ("" when
	// none does): see Rule.ProviderName.
	providerName string
}

// NewTool checks spec, compiles its schemas and returns the tool. fn may be nil for a
// schema-only tool, executed by an activity or latently (see [Registry.RegisterActivity]).
// Schemas over the bounds of package schema (schema.MaxSchemaNodes, ...) are refused.
func NewTool(spec Spec, fn ToolFunc) (*Tool, error) {
	return NewToolContext(context.Background(), spec, fn)
}

// NewToolContext is NewTool for a tool made on behalf of a request (a tool a member stores, an
// OpenAPI document or a remote's tools imported): compiling its schemas stops, with ctx's
// error, when ctx ends.
func NewToolContext(ctx context.Context, spec Spec, fn ToolFunc) (*Tool, error) {
	t := &Tool{spec: spec, fn: fn}
	if err := t.init(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Tool) init(ctx context.Context) error {
	s := &t.spec
	// The tool owns its spec: later changes to the caller's schemas or slices must not make
	// what is rendered differ from what is validated.
	s.InputSchema = s.InputSchema.CloneSchemas()
	s.OutputSchema = s.OutputSchema.CloneSchemas()
	s.Examples = slices.Clone(s.Examples)
	s.Variables = slices.Clone(s.Variables)
	s.Annotations = s.Annotations.Clone()
	if s.Name == "" {
		return errors.New("quiver: tool name is empty")
	}
	if s.Description == "" {
		return fmt.Errorf("quiver: tool %q: description is empty; say what it does, when to use it and what it returns", s.Name)
	}
	switch s.Target {
	case "":
		s.Target = TargetServer
	case TargetServer, TargetClient:
	default:
		return fmt.Errorf("quiver: tool %q: target %q is neither server nor client", s.Name, s.Target)
	}
	t.params = paramSummary(s.InputSchema)
	if s.Timeout < 0 {
		return fmt.Errorf("quiver: tool %q: negative timeout %s", s.Name, s.Timeout)
	}
	if err := checkVariables(s.Variables); err != nil {
		return fmt.Errorf("quiver: tool %q: %w", s.Name, err)
	}
	s.MetaFields = slices.Clone(s.MetaFields)
	if err := CheckMetaFields(s.MetaFields); err != nil {
		return fmt.Errorf("quiver: tool %q: %w", s.Name, err)
	}
	// The compiled schemas check the examples; whether the tool keeps them, see lazySchema.
	var in, out *schema.Compiled
	if root := s.InputSchema; root != nil {
		if root.Type != "object" && !slices.Equal(root.Types, []string{"object"}) {
			return fmt.Errorf("quiver: tool %q: the input schema's root must have type \"object\", got %s", s.Name, typeText(root))
		}
		for name := range root.Properties {
			if strings.HasPrefix(name, "_") {
				return fmt.Errorf("quiver: tool %q: argument %q starts with an underscore, which marks a call's meta-fields (_reasoningForCall, _output, ...); rename it", s.Name, name)
			}
		}
		c, err := schema.CompileContext(ctx, s.InputSchema)
		if err != nil {
			return fmt.Errorf("quiver: tool %q: input schema: %w", s.Name, err)
		}
		in = c
		t.input = newLazySchema(ctx, s.InputSchema, c)
	}
	if s.OutputSchema != nil && (!s.OutputAdvisory || len(s.Examples) > 0) {
		c, err := schema.CompileContext(ctx, s.OutputSchema)
		if err != nil {
			return fmt.Errorf("quiver: tool %q: output schema: %w", s.Name, err)
		}
		out = c
		t.output = newLazySchema(ctx, s.OutputSchema, c)
	} else if s.OutputSchema != nil {
		t.output = &lazySchema{s: s.OutputSchema}
	}
	for i, ex := range s.Examples {
		if err := checkExample(ex, in, out); err != nil {
			return fmt.Errorf("quiver: tool %q: example %d: %w", s.Name, i, err)
		}
	}
	t.ready = true
	return nil
}

func typeText(s *schema.Schema) string {
	if s.Type != "" {
		return fmt.Sprintf("%q", s.Type)
	}
	if len(s.Types) > 0 {
		return fmt.Sprintf("%q", s.Types)
	}
	return "no type"
}

// checkExample checks ex against the tool's compiled schemas (nil for none).
func checkExample(ex Example, in, out *schema.Compiled) error {
	args := ex.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	v, err := schema.Decode(args)
	if err != nil {
		return fmt.Errorf("args: %w", err)
	}
	if in != nil {
		if err := in.Validate(v); err != nil {
			return fmt.Errorf("args: %w", err)
		}
	}
	if len(ex.Result) > 0 {
		r, err := schema.Decode(ex.Result)
		if err != nil {
			return fmt.Errorf("result: %w", err)
		}
		if out != nil {
			if err := out.Validate(r); err != nil {
				return fmt.Errorf("result: %w", err)
			}
		}
	}
	return nil
}

// Spec returns a copy of the tool's spec. Its schemas are shared and must not be modified.
func (t *Tool) Spec() Spec {
	s := t.spec
	s.Examples = slices.Clone(s.Examples)
	s.Variables = slices.Clone(s.Variables)
	return s
}

// CompiledInput returns the input schema compiled, nil for a tool that takes no arguments: checks
// of arguments outside the dispatcher (a person editing a call, a console trying a tool) use it
// rather than compiling the schema on every request (a schema compiled per call would cost
// every call). It is the one NewTool compiled, or, for a tool made with
// WithSchemasCompiledOnUse, the one its first use compiled (the dispatcher's or this one's),
// kept from then on. It is shared and safe for concurrent use.
func (t *Tool) CompiledInput() *schema.Compiled {
	c, _ := t.inputSchema()
	return c
}

// CompiledOutput returns the output schema compiled, nil for a tool that declares none, as
// CompiledInput does the input schema; also nil for an advisory output schema
// (Spec.OutputAdvisory) that cannot be compiled.
func (t *Tool) CompiledOutput() *schema.Compiled {
	c, _ := t.outputSchema()
	return c
}

// Name returns the tool's name.
func (t *Tool) Name() string { return t.spec.Name }

// ProviderName returns the name model providers are offered the tool under, as governance
// rules give it (see Rule.ProviderName); "" when none does: they are offered its name, mapped
// where a provider rejects it.
func (t *Tool) ProviderName() string { return t.providerName }

// Description returns the tool's description.
func (t *Tool) Description() string { return t.spec.Description }

// SchemaOnly reports whether the tool has no code of its own: an activity or the model
// executes it.
func (t *Tool) SchemaOnly() bool { return t.fn == nil }

// As returns the same tool offered under another name and description: schemas and code
// are shared, only what the model sees changes.
func (t *Tool) As(name, description string) (*Tool, error) {
	c := *t
	c.made, c.denied, c.providerName = nil, "", "" // a new tool: rules govern it by its new name
	if c.fn == nil && c.spec.Activity == "" {
		// A schema-only tool bound to the activity registered under its name keeps that binding.
		c.spec.Activity = t.spec.Name
	}
	c.spec.Name, c.spec.Description = name, description
	if name == "" {
		return nil, errors.New("quiver: tool name is empty")
	}
	if description == "" {
		return nil, fmt.Errorf("quiver: tool %q: description is empty", name)
	}
	return &c, nil
}

// RunningAs returns the same tool running as userID ("" for the caller): see Spec.RunAs.
// Schemas and code are shared.
func (t *Tool) RunningAs(userID string) *Tool {
	c := *t
	c.made, c.denied, c.providerName = nil, "", ""
	c.spec.RunAs = userID
	return &c
}

// Option adjusts the spec of a tool built by [Func].
type Option func(*Spec)

// WithInputSchema replaces the inferred argument schema by a hand-written one.
func WithInputSchema(s *schema.Schema) Option { return func(sp *Spec) { sp.InputSchema = s } }

// WithOutputSchema replaces the inferred output schema by a hand-written one.
func WithOutputSchema(s *schema.Schema) Option { return func(sp *Spec) { sp.OutputSchema = s } }

// WithExamples adds examples.
func WithExamples(ex ...Example) Option {
	return func(sp *Spec) { sp.Examples = append(sp.Examples, ex...) }
}

// WithVariables declares variables the tool needs.
func WithVariables(v ...Variable) Option {
	return func(sp *Spec) { sp.Variables = append(sp.Variables, v...) }
}

// WithTimeout bounds one execution of the tool.
func WithTimeout(d time.Duration) Option { return func(sp *Spec) { sp.Timeout = d } }

// WithConfirmation makes every call wait for a person's approval.
func WithConfirmation() Option { return func(sp *Spec) { sp.RequiresConfirmation = true } }

// ConnectionNeed is a provider a tool acts as its caller at, and the scopes it needs there.
type ConnectionNeed struct {
	// Provider names the workspace's provider (see platform/connect).
	Provider string `json:"provider" yaml:"provider"`
	// Scopes are those the caller's connection must have been granted.
	Scopes []string `json:"scopes,omitempty" yaml:"scopes,omitempty"`
}

// WithConnection declares that the tool acts as its caller at provider with the scopes (see
// Spec.Connections and UserToken).
func WithConnection(provider string, scopes ...string) Option {
	return func(sp *Spec) {
		sp.Connections = append(sp.Connections, ConnectionNeed{Provider: provider, Scopes: scopes})
	}
}

// WithMetaFields enables stateful meta-fields on the tool (schema.OutputPathField,
// schema.InstanceField, schema.DelegateField); see Spec.MetaFields.
func WithMetaFields(fields ...string) Option {
	return func(sp *Spec) { sp.MetaFields = append(sp.MetaFields, fields...) }
}

// WithTarget sets where the tool runs.
func WithTarget(t Target) Option { return func(sp *Spec) { sp.Target = t } }

// Func returns a tool backed by a typed Go function, like [NewFunc], and panics on a definition
// error, which is a programming error found at start-up (the way regexp.MustCompile is used).
func Func[In, Out any](name, description string, fn func(context.Context, In) (Out, error), opts ...Option) *Tool {
	t, err := NewFunc(name, description, fn, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

// NewFunc returns a tool backed by fn. The argument schema is inferred once from In
// (see [schema.InferType] for the struct tags); a struct without fields, such as struct{},
// means the tool takes no arguments. When Out is a struct, map or slice its schema becomes the
// output schema. Options may replace either schema by a hand-written one.
//
// fn receives the validated arguments, decoded into In, and a context carrying the caller's
// [Scope], the [Execution] state, the tool's variables ([Var]) and cancellation. Its result is
// normalised into a [Result]: a string is text, a *Result is used as is, any other value is its
// JSON encoding; a non-nil error is an error result.
func NewFunc[In, Out any](name, description string, fn func(context.Context, In) (Out, error), opts ...Option) (*Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("quiver: tool %q: nil function", name)
	}
	spec := Spec{Name: name, Description: description}
	for _, o := range opts {
		o(&spec)
	}
	in := reflect.TypeFor[In]()
	var guard *keyGuard
	if spec.InputSchema != nil && guardNeeded(in, spec.InputSchema) {
		guard = newKeyGuard(in)
	}
	if spec.InputSchema == nil && !noArgs(in) {
		s, err := schema.InferType(in)
		if err != nil {
			return nil, fmt.Errorf("quiver: tool %q: %w", name, err)
		}
		if s.Type != "object" {
			return nil, fmt.Errorf("quiver: tool %q: arguments must be a struct (or a map with string keys), got %s", name, in)
		}
		spec.InputSchema = s
	}
	guaranteed := false
	if out := reflect.TypeFor[Out](); spec.OutputSchema == nil && structured(out) {
		s, ok, err := schema.InferOutputType(out)
		if err != nil {
			return nil, fmt.Errorf("quiver: tool %q: output: %w", name, err)
		}
		spec.OutputSchema, guaranteed = s, ok
	}
	t := &Tool{spec: spec}
	takesArgs := !noArgs(in)
	t.fn = func(ctx context.Context, args json.RawMessage) (any, error) {
		var v In
		if len(args) > 0 && takesArgs {
			if guard != nil {
				decoded, err := schema.Decode(args)
				if err == nil {
					err = guard.check(decoded, "")
				}
				if err != nil {
					return nil, Fail(CodeInvalidArguments, "invalid arguments: %v", err)
				}
			}
			if err := json.Unmarshal(args, &v); err != nil {
				return nil, Fail(CodeInvalidArguments, "arguments do not fit the tool's Go type: %v", err)
			}
		}
		out, err := fn(ctx, v)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	if err := t.init(context.Background()); err != nil {
		return nil, err
	}
	t.outputTrusted = guaranteed
	return t, nil
}

// noArgs reports whether t carries no arguments: a struct without exported fields.
func noArgs(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	for _, f := range reflect.VisibleFields(t) {
		if f.IsExported() && f.Tag.Get("json") != "-" {
			return false
		}
	}
	return true
}

// structured reports whether values of t are JSON objects or arrays, which get an output schema.
func structured(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[Result]() || t == reflect.TypeFor[json.RawMessage]() || t == reflect.TypeFor[Content]() {
		return false
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return !noArgs(t)
	case reflect.Slice, reflect.Array:
		return t.Elem().Kind() != reflect.Uint8 && t != reflect.TypeFor[[]Content]()
	}
	return false
}

// paramSummary describes the top-level arguments of an input schema in a line, for errors that
// must tell the model what the tool takes without repeating what it sent.
func paramSummary(s *schema.Schema) string {
	if s == nil || len(s.Properties) == 0 {
		return "no properties (the tool takes no arguments)"
	}
	names := slices.Clone(s.PropertyOrder)
	for n := range s.Properties {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names[len(s.PropertyOrder):])
	parts := make([]string, 0, len(names))
	for _, n := range names {
		p := s.Properties[n]
		if p == nil {
			continue
		}
		desc := p.Type
		if desc == "" {
			desc = strings.Join(p.Types, " or ")
		}
		if slices.Contains(s.Required, n) {
			if desc != "" {
				desc += ", "
			}
			desc += "required"
		}
		if desc != "" {
			n += " (" + desc + ")"
		}
		parts = append(parts, n)
	}
	return "these properties: " + strings.Join(parts, ", ")
}
