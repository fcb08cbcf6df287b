package quiver

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Registry holds tools by name, and the activities that execute schema-only tools. The zero
// value is an empty registry ready to use; it is safe for concurrent use, and tools may be
// added and removed while calls are dispatched (tools from a database or a remote MCP server).
type Registry struct {
	// Logger receives warnings about tool names that do not follow the convention. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Base, when set, holds tools this registry shares with others: a registry per tenant
	// over the server's common tools, say. Lookup and Tools see Base's tools beside this
	// registry's own, which win on a clash of names; activities fall back to Base's too.
	// Register checks names against this registry's own tools only.
	Base *Registry

	governance atomic.Pointer[Governance]

	mu         sync.RWMutex
	tools      map[string]*Tool
	activities map[string]ToolFunc
	explainers []*explainer
}

// explainer is one function registered with Explain; a pointer, so that its remove finds it.
type explainer struct{ why func(name string) error }

// Default is the registry tools register into at import time: a package that defines a
// tool calls [MustRegister] in an init function, and a program gets the tool by importing the
// package, even blank.
var Default = &Registry{}

// Register adds tools to the Default registry.
func Register(tools ...*Tool) error { return Default.Register(tools...) }

// MustRegister adds tools to the Default registry and panics on error; for init functions.
func MustRegister(tools ...*Tool) {
	if err := Default.Register(tools...); err != nil {
		panic(err)
	}
}

var (
	providerSafeName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	snakeCase        = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
)

// MaxNameBytes is the longest tool name accepted, in bytes of UTF-8: a bound on hostile input
// (a name goes into logs, prompts, URLs and the database), far above any convention. A name
// longer than a provider allows (64 characters for OpenAI, Anthropic and Gemini, 128 for MCP)
// is offered to it mapped; see [NameRule].
const MaxNameBytes = 512

// NameRule is the rule every tool name follows; [CheckName] and [Registry.Register] refuse a
// name that does not. It only keeps out hostile input: a name that does not follow the
// convention is warned about, not rejected, since its owner may not choose it. So a name with
// spaces, punctuation, slashes or letters of any script is accepted with a warning, and a
// provider that would reject it (OpenAI, Anthropic and Gemini take 1 to 64 characters of
// [a-zA-Z0-9_-] and a few more, MCP 1 to 128) is offered a mapped name that its calls map
// back from (schema.Render, schema.ToolSet.Inbound).
const NameRule = `a tool name is 1 to 512 bytes of UTF-8 text, not only whitespace, without control characters; ` +
	`by convention it is snake_case of 1 to 64 characters of [a-zA-Z0-9_-] (search_knowledge_base), and any other name is accepted with a warning`

// CheckName returns an error that says what is wrong and states [NameRule] when name does
// not follow it: a name that is empty or only whitespace, longer than [MaxNameBytes], not
// valid UTF-8, or that holds a control character (Unicode category Cc: newlines, escapes and
// the like, which would forge log lines and prompt text). Any other name is valid; one that
// is not snake_case of 1 to 64 [a-zA-Z0-9_-] characters is accepted with a warning (see
// [NameWarning]).
func CheckName(name string) error {
	var why string
	ctrl := -1
	if len(name) <= MaxNameBytes {
		ctrl = strings.IndexFunc(name, unicode.IsControl)
	}
	switch {
	case name == "":
		why = "it is empty"
	case len(name) > MaxNameBytes:
		why = fmt.Sprintf("it is %d bytes long, over the bound of %d bytes", len(name), MaxNameBytes)
	case !utf8.ValidString(name):
		why = "it is not valid UTF-8"
	case ctrl >= 0:
		r, _ := utf8.DecodeRuneInString(name[ctrl:])
		why = fmt.Sprintf("it holds the control character %U, which would forge log lines and prompt text", r)
	case strings.TrimSpace(name) == "":
		why = "it is only whitespace"
	default:
		return nil
	}
	return fmt.Errorf("the tool name %q is refused: %s (%s)", truncateName(name), why, NameRule)
}

// truncateName is name cut for an error message, whole up to 64 bytes.
func truncateName(s string) string {
	if len(s) <= 72 {
		return s
	}
	i := 64
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

// Register adds tools. A name already registered, or that [CheckName] refuses (empty, only
// whitespace, over [MaxNameBytes], not UTF-8, or holding control characters), is an error and
// nothing is added. Any other name is added; one that does not follow the convention
// ([NameWarning]) with a warning in the registry's log (at debug level for imported tools,
// whose names are not their importer's to choose), and mapped safely for providers that
// reject it.
func (r *Registry) Register(tools ...*Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools == nil {
		r.tools = map[string]*Tool{}
	}
	return r.add(tools)
}

// Replace makes tools the registry's own tools in one step, under the rules of Register:
// calls dispatched meanwhile find the old set or the new one, never a mix or a gap (tools
// reloaded from a database). On error the registry is unchanged.
func (r *Registry) Replace(tools ...*Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.tools
	r.tools = map[string]*Tool{}
	if err := r.add(tools); err != nil {
		r.tools = old
		return err
	}
	return nil
}

// add adds tools to r.tools, which it holds locked: all or, on error, none.
func (r *Registry) add(tools []*Tool) error {
	batch := map[string]bool{}
	for _, t := range tools {
		if t == nil {
			return fmt.Errorf("quiver: register: nil tool")
		}
		if !t.ready {
			return fmt.Errorf("quiver: register: a tool must be built by NewTool, NewFunc, Func or ParseSchemaTool")
		}
		n := t.Name()
		if err := CheckName(n); err != nil {
			return fmt.Errorf("quiver: register: %w", err)
		}
		if _, dup := r.tools[n]; dup || batch[n] {
			return fmt.Errorf("quiver: register: a tool named %q is already registered", n)
		}
		batch[n] = true
	}
	for _, t := range tools {
		n := t.Name()
		r.tools[n] = t
		if msg := NameWarning(n); msg != "" {
			level := slog.LevelWarn
			if t.spec.Imported {
				level = slog.LevelDebug
			}
			r.logger().Log(context.Background(), level, "quiver: tool name does not follow the naming convention", "tool", n, "problem", msg)
		}
	}
	return nil
}

// NameWarning says how a tool name departs from the naming convention (snake_case
// of 1 to 64 characters of [a-zA-Z0-9_-]), or "" if it follows it. Such a name is valid (see
// [NameRule]); [Registry.Register] logs this warning, and `quiver tools add` prints it.
func NameWarning(name string) string {
	switch {
	case !providerSafeName.MatchString(name):
		return "use 1 to 64 characters of [a-zA-Z0-9_-]; providers that reject it will see a mapped name"
	case !snakeCase.MatchString(name):
		return "use snake_case, like search_knowledge_base"
	}
	return ""
}

func (r *Registry) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// Unregister removes the named tool and reports whether it was there.
func (r *Registry) Unregister(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.tools[name]
	delete(r.tools, name)
	return ok
}

// Lookup returns the named tool: this registry's own, else Base's, as its governance makes
// it.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	r.mu.RLock()
	t, ok := r.tools[name]
	r.mu.RUnlock()
	if !ok && r.Base != nil {
		t, ok = r.Base.Lookup(name)
	}
	if ok {
		t = r.governance.Load().Govern(t)
	}
	return t, ok
}

// SetGovernance makes g (nil: none) govern every tool the registry offers, its own and
// Base's alike, from the next Lookup or Tools on: a change of rules takes effect without
// building the tools again. Base's own governance, if any, applies first.
func (r *Registry) SetGovernance(g *Governance) { r.governance.Store(g) }

// Governance returns the registry's governance, nil when it has none.
func (r *Registry) Governance() *Governance { return r.governance.Load() }

// Explain registers why tools the registry does not hold may be missing for now, for error
// results that must say more than "unknown tool": why(name) returns nil for a name it knows
// nothing of, else the reason the tool cannot be called (a [ToolError] sets its code). An
// importer of a remote server's tools registers one, so that a call to a tool of a remote that
// is down says that the remote is down, and why. remove takes it out again.
func (r *Registry) Explain(why func(name string) error) (remove func()) {
	e := &explainer{why: why}
	r.mu.Lock()
	r.explainers = append(r.explainers, e)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.explainers = slices.DeleteFunc(r.explainers, func(x *explainer) bool { return x == e })
	}
}

// ToolPending is what an Explain function returns for a tool that is missing while its source
// connects (a remote MCP server starting or reconnecting): its tools are registered once it
// has. A [Dispatcher] waits for Ready to close, at most its ToolWait and within the call's
// deadline, and looks the tool up again, so that a call made while the source reconnects
// (a run resumed as the server restarts, say) runs once it is there rather than failing; a
// call still without its tool after the wait gets Err.
type ToolPending struct {
	// Err is why the tool cannot be called now, as for any other explanation.
	Err error
	// Ready closes when the source's connection attempt ends, connected or not.
	Ready <-chan struct{}
}

func (e *ToolPending) Error() string { return e.Err.Error() }
func (e *ToolPending) Unwrap() error { return e.Err }

// Missing says why the named tool, which the registry does not hold, cannot be called: the
// first reason an Explain function gives, this registry's before Base's; nil when none knows
// the name.
func (r *Registry) Missing(name string) error {
	r.mu.RLock()
	es := slices.Clone(r.explainers)
	r.mu.RUnlock()
	for _, e := range es {
		if err := e.why(name); err != nil {
			return err
		}
	}
	if r.Base != nil {
		return r.Base.Missing(name)
	}
	return nil
}

// Tools returns every tool, Base's included, sorted by name.
func (r *Registry) Tools() []*Tool {
	var base []*Tool
	if r.Base != nil {
		base = r.Base.Tools()
	}
	r.mu.RLock()
	out := make([]*Tool, 0, len(r.tools)+len(base))
	for _, t := range r.tools {
		out = append(out, t)
	}
	for _, t := range base {
		if _, own := r.tools[t.Name()]; !own {
			out = append(out, t)
		}
	}
	r.mu.RUnlock()
	if g := r.governance.Load(); g != nil {
		for i, t := range out {
			out[i] = g.Govern(t)
		}
	}
	slices.SortFunc(out, func(a, b *Tool) int {
		switch {
		case a.Name() < b.Name():
			return -1
		case a.Name() > b.Name():
			return 1
		}
		return 0
	})
	return out
}

// RegisterActivity binds code to schema-only tools: a tool whose Spec.Activity is name,
// or a tool named name with no activity of its own, is executed by fn. A duplicate name is an
// error.
func (r *Registry) RegisterActivity(name string, fn ToolFunc) error {
	if name == "" || fn == nil {
		return fmt.Errorf("quiver: register activity: name and function are required")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.activities == nil {
		r.activities = map[string]ToolFunc{}
	}
	if _, dup := r.activities[name]; dup {
		return fmt.Errorf("quiver: register activity: %q is already registered", name)
	}
	r.activities[name] = fn
	return nil
}

// activity returns the code that executes t: its own function, else the activity its
// spec names, else the activity registered under its name; nil means t is latent. A tool that
// names an activity is never latent: if neither that activity nor one under the tool's name
// is registered, that is an error, so that a model cannot invent the result of code that was
// meant to run.
func (r *Registry) activity(t *Tool) (ToolFunc, error) {
	if t.fn != nil {
		return t.fn, nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if t.spec.Activity != "" {
		if fn := r.activities[t.spec.Activity]; fn != nil {
			return fn, nil
		}
	}
	if fn := r.activities[t.spec.Name]; fn != nil {
		return fn, nil
	}
	if r.Base != nil {
		return r.Base.activity(t)
	}
	if t.spec.Activity != "" {
		return nil, fmt.Errorf("its activity %q is not registered", t.spec.Activity)
	}
	return nil, nil
}

// Latent reports whether the model itself executes t: it has no code, names no activity, and
// no activity is registered under its name. A latent tool's result is the _output the model
// supplies with the call.
func (r *Registry) Latent(t *Tool) bool {
	fn, err := r.activity(t)
	return fn == nil && err == nil
}
