package quiver

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sync"
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
	validName        = regexp.MustCompile(`^[a-zA-Z0-9_-]+([./][a-zA-Z0-9_-]+)*$`)
)

// MaxNameLength is the longest tool name accepted: MCP's limit, the widest of the providers'.
const MaxNameLength = 128

// NameRule is the rule every tool name follows; [CheckName] and [Registry.Register] refuse a
// name that does not. It admits the names of imported tools (everything.echo) and namespaced
// ones (github/create_issue), and keeps out what looks like a path (../x, /x, .x, a//b) and
// characters no provider accepts.
const NameRule = `a tool name is 1 to 128 characters: words of letters, digits, "_" and "-", joined by single "." or "/" ` +
	`(get_weather, everything.echo, github/create_issue); it cannot start or end with "." or "/", nor hold "..", "//" or other characters`

// CheckName returns an error that states [NameRule] when name does not follow it. A name that
// follows it but not the convention (snake_case, 1 to 64 characters of [a-zA-Z0-9_-]) is
// valid: Register accepts it with a warning.
func CheckName(name string) error {
	if len(name) > MaxNameLength || !validName.MatchString(name) {
		return fmt.Errorf("the tool name %q is refused: %s", truncateName(name), NameRule)
	}
	return nil
}

func truncateName(s string) string {
	if len(s) <= MaxNameLength+8 {
		return s
	}
	return s[:MaxNameLength] + "..."
}

// Register adds tools. A name already registered, or that does not follow [NameRule], is an
// error and nothing is added; a name that follows the rule but is not snake_case of 1 to
// 64 [a-zA-Z0-9_-] characters is added with a warning, and mapped safely for providers
// that reject it.
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
		if msg := nameWarning(n); msg != "" {
			level := slog.LevelWarn
			if t.spec.Imported {
				level = slog.LevelDebug
			}
			r.logger().Log(context.Background(), level, "quiver: tool name does not follow the naming convention", "tool", n, "problem", msg)
		}
	}
	return nil
}

// nameWarning says how name departs from the convention, or "" if it does not.
func nameWarning(name string) string {
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

// Lookup returns the named tool: this registry's own, else Base's.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	r.mu.RLock()
	t, ok := r.tools[name]
	r.mu.RUnlock()
	if !ok && r.Base != nil {
		return r.Base.Lookup(name)
	}
	return t, ok
}

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
