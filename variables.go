package quiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/schema"
)

// VariableType says how a variable's value is treated.
type VariableType string

// Variable types.
const (
	// VarText values may be shown and logged.
	VarText VariableType = "text"
	// VarSecret values are encrypted at rest, never sent to a model, and masked in everything a
	// tool returns.
	VarSecret VariableType = "secret"
)

// Variable declares a thread variable a tool or prompt needs.
type Variable struct {
	Name     string       `json:"name"`
	Type     VariableType `json:"type"`
	Required bool         `json:"required"`
	// Scoped variables are not inherited from a parent thread; they flow down from the thread
	// where they are set to its descendants.
	Scoped      bool   `json:"scoped,omitempty"`
	Description string `json:"description"`
}

func checkVariables(vars []Variable) error {
	seen := map[string]bool{}
	for i := range vars {
		v := &vars[i]
		if v.Name == "" {
			return fmt.Errorf("variable %d has no name", i)
		}
		if seen[v.Name] {
			return fmt.Errorf("variable %q is declared twice", v.Name)
		}
		seen[v.Name] = true
		switch v.Type {
		case "":
			v.Type = VarText
		case VarText, VarSecret:
		default:
			return fmt.Errorf("variable %q: type %q is neither text nor secret", v.Name, v.Type)
		}
	}
	return nil
}

// Variables is a list of declarations that also reads the older "tenvs" form: a JSON
// Schema object whose properties are the variables and whose required list marks the required
// ones, as in {"type":"object","properties":{"vectorStoreId":{"type":"string",
// "description":"..."}},"required":["vectorStoreId"]}. A property with "format": "password" or
// "x-secret": true is a secret.
type Variables []Variable

// UnmarshalJSON accepts a list of declarations or a tenvs object schema.
func (vs *Variables) UnmarshalJSON(data []byte) error {
	trimmed := strings.TrimSpace(string(data))
	if strings.HasPrefix(trimmed, "[") {
		var list []Variable
		if err := json.Unmarshal(data, &list); err != nil {
			return fmt.Errorf("variables: %w", err)
		}
		*vs = list
		return checkVariables(*vs)
	}
	var s schema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("tenvs: %w", err)
	}
	list, err := VariablesFromTenvs(&s)
	if err != nil {
		return err
	}
	*vs = list
	return nil
}

// VariablesFromTenvs converts a tenvs object schema into variable declarations, in the
// schema's property order.
func VariablesFromTenvs(s *schema.Schema) ([]Variable, error) {
	if s.Type != "object" && s.Properties == nil {
		return nil, errors.New("tenvs: must be an object schema with properties")
	}
	names := s.PropertyOrder
	if len(names) == 0 {
		for n := range s.Properties {
			names = append(names, n)
		}
		slices.Sort(names)
	}
	var out []Variable
	for _, n := range names {
		p := s.Properties[n]
		if p == nil {
			continue
		}
		v := Variable{Name: n, Type: VarText, Required: slices.Contains(s.Required, n), Description: p.Description}
		if secret, _ := p.Extra["x-secret"].(bool); secret || p.Format == "password" {
			v.Type = VarSecret
		}
		if scoped, _ := p.Extra["x-scoped"].(bool); scoped {
			v.Scoped = true
		}
		out = append(out, v)
	}
	return out, checkVariables(out)
}

// Layer is one place a variable value can come from.
type Layer string

// Layers, in resolution order: the first that has a value wins.
const (
	LayerThread   Layer = "thread"
	LayerAgent    Layer = "agent"
	LayerPrompt   Layer = "prompt"
	LayerUser     Layer = "user"
	LayerInstance Layer = "instance"
)

// ResolutionOrder lists the layers in the order a [Layered] resolver consults them.
var ResolutionOrder = []Layer{LayerThread, LayerAgent, LayerPrompt, LayerUser, LayerInstance}

// VariableResolver finds the value of a declared variable for the caller in scope.
type VariableResolver interface {
	// ResolveVariable returns the value and true, or false if no layer sets it. An error means
	// the lookup itself failed (a store is down), not that the variable is missing.
	ResolveVariable(ctx context.Context, scope Scope, v Variable) (string, bool, error)
}

// VariableSource is one layer of values.
type VariableSource interface {
	LookupVariable(ctx context.Context, scope Scope, name string) (string, bool, error)
}

// Vars is a fixed set of values, usable as a layer.
type Vars map[string]string

// LookupVariable implements VariableSource.
func (m Vars) LookupVariable(_ context.Context, _ Scope, name string) (string, bool, error) {
	v, ok := m[name]
	return v, ok, nil
}

// ResolveVariable implements VariableResolver, so a fixed set of values can serve as the
// Dispatcher's resolver directly.
func (m Vars) ResolveVariable(ctx context.Context, scope Scope, v Variable) (string, bool, error) {
	return m.LookupVariable(ctx, scope, v.Name)
}

// Layered resolves variables through the documented order: thread, agent, prompt, user,
// instance; the first layer that has a value wins. Nil layers are skipped.
type Layered struct {
	Thread, Agent, Prompt, User, Instance VariableSource
}

// ResolveVariable implements VariableResolver.
func (l Layered) ResolveVariable(ctx context.Context, scope Scope, v Variable) (string, bool, error) {
	for _, src := range []VariableSource{l.Thread, l.Agent, l.Prompt, l.User, l.Instance} {
		if src == nil {
			continue
		}
		val, ok, err := src.LookupVariable(ctx, scope, v.Name)
		if err != nil {
			return "", false, err
		}
		if ok {
			return val, true, nil
		}
	}
	return "", false, nil
}

// MissingVariablesError names the required variables that did not resolve. It carries names
// and descriptions only, never a value: it is shown to people and sent over the API.
type MissingVariablesError struct {
	Missing []Variable
	// RequiredBy says, by variable name, what requires each missing variable ("prompt NAME",
	// "tool NAME", "sub-agent NAME"), for a check that gathers the declarations of several
	// places, as creating a thread for an agent does (agent.Runner.CreateThread): the person
	// who reads the error learns what to configure, not only its name. nil when one list of
	// declarations was checked.
	RequiredBy map[string][]string
}

// Error names every missing variable and says where to set it.
func (e *MissingVariablesError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, v := range e.Missing {
		parts[i] = v.Name
		var notes []string
		if v.Description != "" {
			notes = append(notes, v.Description)
		}
		if by := e.RequiredBy[v.Name]; len(by) > 0 {
			notes = append(notes, "required by "+strings.Join(by, ", "))
		}
		if len(notes) > 0 {
			parts[i] += " (" + strings.Join(notes, "; ") + ")"
		}
	}
	return fmt.Sprintf("required variable%s not set: %s; set %s on the thread, agent, prompt, user or instance",
		plural(len(parts)), strings.Join(parts, ", "), them(len(parts)))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// ResolveVariables resolves every declared variable; it returns the values found and, when
// required ones are missing, a *MissingVariablesError naming all of them.
func ResolveVariables(ctx context.Context, r VariableResolver, scope Scope, decls []Variable) (map[string]string, error) {
	values := make(map[string]string, len(decls))
	var missing []Variable
	for _, v := range decls {
		var val string
		var ok bool
		if r != nil {
			var err error
			val, ok, err = r.ResolveVariable(ctx, scope, v)
			if err != nil {
				return nil, fmt.Errorf("resolving variable %s: %w", v.Name, err)
			}
		}
		if ok {
			values[v.Name] = val
		} else if v.Required {
			missing = append(missing, v)
		}
	}
	if missing != nil {
		return values, &MissingVariablesError{Missing: missing}
	}
	return values, nil
}

// PlannedThread is a thread about to be created, as a [PlanResolver] sees it before it exists:
// the agent whose layer it reads and the values it is to be created with.
type PlannedThread struct {
	AgentID string
	Values  []VariableValue
}

// PlanResolver is a VariableResolver that can also resolve on threads not created yet, so that
// a thread whose required variables are missing is refused before anything is written, and the
// children its first run starts at once are checked before they exist (store/vars' Resolver
// is one).
type PlanResolver interface {
	VariableResolver
	// ResolvePlanned resolves decls on plan[0], to be created as a child of plan[1], and so on;
	// the last is to be created under scope.ThreadID (an existing thread, or "" for a root).
	// scope names the workspace and the user; the prompt layer is the context's (WithPrompt).
	// With no plan it resolves on scope as it is. It returns the values found and, when
	// required ones are missing, a *MissingVariablesError naming all of them.
	ResolvePlanned(ctx context.Context, scope Scope, plan []PlannedThread, decls []Variable) (map[string]string, error)
}

// VariableValue is a value to set on a layer's owner (see store/vars).
type VariableValue struct {
	// Name is the variable's name.
	Name string
	// Value is the plaintext value.
	Value string
	// Secret values are sealed before they are stored.
	Secret bool
	// Scoped marks a thread value provided as scoped: it flows down to the thread's descendants
	// even for declarations that are scoped. Only thread values can be scoped.
	Scoped bool
}

type promptKey struct{}

// WithPrompt returns a context naming the prompt whose values form the prompt layer (the
// prompt being run). Scope has no prompt, hence the context.
func WithPrompt(ctx context.Context, prompt string) context.Context {
	return context.WithValue(ctx, promptKey{}, prompt)
}

// PromptFrom returns the prompt named by WithPrompt, or "".
func PromptFrom(ctx context.Context) string {
	p, _ := ctx.Value(promptKey{}).(string)
	return p
}
