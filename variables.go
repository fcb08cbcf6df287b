package quiver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/schema"
)

// VariableType says how a variable's value is treated.
type VariableType string

// Variable types (V1).
const (
	// VarText values may be shown and logged.
	VarText VariableType = "text"
	// VarSecret values are encrypted at rest, never sent to a model, and masked in everything a
	// tool returns.
	VarSecret VariableType = "secret"
)

// Variable declares a thread variable a tool or prompt needs (V1).
type Variable struct {
	Name     string       `json:"name"`
	Type     VariableType `json:"type"`
	Required bool         `json:"required"`
	// Scoped variables are not inherited from a parent thread; they flow down from the thread
	// where they are set to its descendants (V5).
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

// Variables is a list of declarations that also reads the older "tenvs" form (V6): a JSON
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

// VariablesFromTenvs converts a tenvs object schema (V6) into variable declarations, in the
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

// Layers, in resolution order (V2): the first that has a value wins.
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

// Layered resolves variables through the documented order (V2): thread, agent, prompt, user,
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

// MissingVariablesError names the required variables that did not resolve.
type MissingVariablesError struct {
	Missing []Variable
}

// Error names every missing variable and says where to set it.
func (e *MissingVariablesError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, v := range e.Missing {
		parts[i] = v.Name
		if v.Description != "" {
			parts[i] += " (" + v.Description + ")"
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
// required ones are missing, a *MissingVariablesError naming all of them (V3).
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

// mask is the text that replaces a secret value.
const mask = "[REDACTED]"

// redact replaces every secret value in everything r carries that could reach a model, a log
// or a person (R4): text, structured value, error, stack, problems, content and attachment
// metadata. Longer secrets are replaced first so one secret containing another is fully masked.
func redact(r *Result, secrets []string) {
	if len(secrets) == 0 {
		return
	}
	repl := secretReplacer(secrets)
	r.Text = repl.Replace(r.Text)
	r.Error = repl.Replace(r.Error)
	r.Stack = repl.Replace(r.Stack)
	if c := Code(repl.Replace(string(r.Code))); c != r.Code {
		r.Code = CodeToolError // a code is an identifier, not a place for a masked secret
	}
	if len(r.Value) > 0 {
		r.Value = redactJSON(r.Value, repl)
	}
	// The slices may be shared with the handler (a *Result it keeps): write into copies.
	r.Problems = slices.Clone(r.Problems)
	for i := range r.Problems {
		p := &r.Problems[i]
		p.Pointer, p.Message = repl.Replace(p.Pointer), repl.Replace(p.Message)
	}
	r.Content = slices.Clone(r.Content)
	for i := range r.Content {
		c := &r.Content[i]
		c.Text, c.URI, c.MimeType = repl.Replace(c.Text), repl.Replace(c.URI), repl.Replace(c.MimeType)
		c.Data = redactBase64(c.Data, secrets)
	}
	r.Attachments = slices.Clone(r.Attachments)
	for i := range r.Attachments {
		a := &r.Attachments[i]
		a.Name, a.Description, a.Path = repl.Replace(a.Name), repl.Replace(a.Description), repl.Replace(a.Path)
		a.ID, a.Type, a.MimeType = repl.Replace(a.ID), repl.Replace(a.Type), repl.Replace(a.MimeType)
		a.Data = redactBase64(a.Data, secrets)
	}
}

// redactBase64 masks secrets inside base64 data (a file a tool returns may embed one).
func redactBase64(data string, secrets []string) string {
	if data == "" {
		return data
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return data // invalid data is refused by checkResult before it gets here
	}
	masked := raw
	for _, s := range secrets {
		if s != "" && bytes.Contains(masked, []byte(s)) {
			masked = bytes.ReplaceAll(masked, []byte(s), []byte(mask))
		}
	}
	if len(masked) == len(raw) && bytes.Equal(masked, raw) {
		return data
	}
	return base64.StdEncoding.EncodeToString(masked)
}

// redactJSON masks secrets in a JSON value. Inside JSON a secret may be written with any
// escapes, and replacing text could break the value's syntax, so the value is decoded and the
// secrets are replaced in its strings, keys and numbers (a number holding a secret becomes a
// string). A value without secrets is returned as it was.
func redactJSON(raw json.RawMessage, repl *strings.Replacer) json.RawMessage {
	v, err := schema.Decode(raw)
	if err != nil {
		// Not JSON (results are checked before they get here): mask it as text.
		return json.RawMessage(repl.Replace(string(raw)))
	}
	v, changed := redactValue(v, repl)
	if !changed {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`"` + mask + `"`)
	}
	return b
}

func redactValue(v any, repl *strings.Replacer) (any, bool) {
	switch x := v.(type) {
	case string:
		s := repl.Replace(x)
		return s, s != x
	case json.Number:
		if s := repl.Replace(string(x)); s != string(x) {
			return s, true
		}
	case []any:
		changed := false
		for i, e := range x {
			var c bool
			x[i], c = redactValue(e, repl)
			changed = changed || c
		}
		return x, changed
	case map[string]any:
		out := make(map[string]any, len(x))
		changed := false
		for k, e := range x {
			e, c := redactValue(e, repl)
			mk := repl.Replace(k)
			out[mk] = e
			changed = changed || c || mk != k
		}
		return out, changed
	}
	return v, false
}

func secretReplacer(secrets []string) *strings.Replacer {
	var forms []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		forms = append(forms, s)
		if b, err := json.Marshal(s); err == nil {
			if esc := string(b[1 : len(b)-1]); esc != s {
				forms = append(forms, esc)
			}
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, mask)
	}
	return strings.NewReplacer(pairs...)
}
