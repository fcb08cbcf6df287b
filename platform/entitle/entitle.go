// Package entitle decides which of a workspace's tools a caller may see and call: its
// entitlements. A workspace's Document holds rules that name who (an API key, a key's role,
// a user, a token's claim, an agent, the toolset a request came through) and which tools (by
// name or pattern, source, annotations, or toolset), with allow or deny, and toolsets: named
// sets of tools, which a key may be bound to and which are served at their own MCP address.
//
// How a call is decided, for a caller (a Subject) and a tool:
//
//  1. A deny rule that matches both denies it: deny always wins.
//  2. A caller bound to toolsets (a key's binding, the address the request came through) may
//     call only the tools in them.
//  3. An allow rule that matches both allows it.
//  4. An allow rule that names the caller but not this tool makes an allow list: the caller
//     may call only the tools such rules allow ("who: {role: viewer}, when: {readOnlyHint:
//     true}, access: allow" leaves viewers the read-only tools alone).
//  5. Otherwise the document's default decides: allow (every tool, as without entitlements)
//     unless it says deny.
//
// A call an agent run makes is decided for the run's caller and for each agent of its chain
// (a sub-agent's parent first), and must be allowed for every one: a run is limited to the
// intersection of its user's entitlements and its agents', a sub-agent's to its parent's.
//
// A Document is compiled once, when it changes (Compile); a decision reads what was compiled
// for the tool (memoised per tool, tools being immutable) and the rules indexed by who they
// name, so that it costs a few map reads however many rules the workspace has.
package entitle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/quiverhq/quiver"
)

// Document is a workspace's entitlements.
type Document struct {
	// Default is what a tool no rule decides gets: allow (the default) or deny.
	Default quiver.Access `json:"default,omitempty" yaml:"default,omitempty"`
	// Rules, each allowing or denying tools to callers; deny wins whatever their order.
	Rules []Rule `json:"rules,omitempty" yaml:"rules,omitempty"`
	// Toolsets are named sets of tools: a key may be bound to them, a rule may select their
	// tools or name the callers who come through their address (/mcp/{toolset}).
	Toolsets []Toolset `json:"toolsets,omitempty" yaml:"toolsets,omitempty"`
}

// Who selects callers: a rule applies to a caller when every field it sets matches (none set:
// every caller).
type Who struct {
	// Key is an API key's id (key_...).
	Key string `json:"key,omitempty" yaml:"key,omitempty"`
	// Role is a key's or token's role in the workspace: admin, member or viewer (exactly that
	// role: a rule for viewers does not apply to members).
	Role string `json:"role,omitempty" yaml:"role,omitempty"`
	// User is a user's id (usr_...).
	User string `json:"user,omitempty" yaml:"user,omitempty"`
	// Claim and Value select an access token's callers by a claim, as the sign-in rules do: the
	// claim (a dotted path for a nested one, as "realm_access.roles") is Value, or an array or
	// a space-separated scope holding it.
	Claim string `json:"claim,omitempty" yaml:"claim,omitempty"`
	// Value is what the claim must be, or what an array or a space-separated scope in it must
	// hold.
	Value string `json:"value,omitempty" yaml:"value,omitempty"`
	// Agent is the name or path.Match pattern of an agent or prompt whose run makes the call.
	Agent string `json:"agent,omitempty" yaml:"agent,omitempty"`
	// Toolset names the callers that come through the toolset's address (/mcp/{toolset}).
	Toolset string `json:"toolset,omitempty" yaml:"toolset,omitempty"`
}

// IsZero reports whether w selects every caller.
func (w Who) IsZero() bool { return w == Who{} }

// Selector selects tools: a tool matches when every field set matches (none set: every tool).
type Selector struct {
	// Tools are names or path.Match patterns ("payments.*").
	Tools []string `json:"tools,omitempty" yaml:"tools,omitempty"`
	// Source is a path.Match pattern over where a tool came from ("openapi:payments", "mcp:*",
	// "stored", "go"): see quiver.Spec.Source.
	Source string `json:"source,omitempty" yaml:"source,omitempty"`
	// When selects by the annotations the tool was made with: {readOnlyHint: true},
	// {destructiveHint: true}, read as MCP reads them (see quiver.Hints).
	When quiver.Hints `json:"when,omitzero" yaml:"when,omitempty"`
	// Toolset selects the tools of a toolset (a rule's selector only).
	Toolset string `json:"toolset,omitempty" yaml:"toolset,omitempty"`
}

// Rule allows or denies the tools Selector selects to the callers Who names.
type Rule struct {
	// Who selects the callers the rule applies to (none set: every caller).
	Who      Who `json:"who,omitzero" yaml:"who,omitempty"`
	Selector `yaml:",inline"`
	// Access is allow or deny.
	Access quiver.Access `json:"access" yaml:"access"`
	// Description says why the rule is there; explain shows it.
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
}

// Toolset is a named set of tools: those any of Include selects.
type Toolset struct {
	// Name names the toolset: 1 to 64 characters of a-z, A-Z, 0-9, _ and -. The toolset is
	// served at /mcp/NAME, and a key may be bound to it.
	Name string `json:"name" yaml:"name"`
	// Description says what the toolset holds; it is shown where toolsets are listed.
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	// Include are the toolset's selectors: it holds every tool any of them selects.
	Include []Selector `json:"include" yaml:"include"`
}

// Limits of a Document.
const (
	MaxRules    = 10000 // rules a workspace
	MaxToolsets = 1000  // toolsets a workspace
	MaxPatterns = 1000  // tool patterns a selector, selectors a toolset
	MaxText     = 1024  // bytes of a rule's who values, patterns and descriptions
)

// toolsetName is what a toolset's name may be: it is a path segment (/mcp/{toolset}).
var toolsetName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// CheckToolsetName reports a toolset name that is not 1 to 64 characters of [a-zA-Z0-9_-].
func CheckToolsetName(name string) error {
	if !toolsetName.MatchString(name) {
		return fmt.Errorf("the toolset name %q is not 1 to 64 characters of a-z, A-Z, 0-9, _ and -", truncate(name, 80))
	}
	return nil
}

// FieldError is a Document that does not check: Field says where ("rules[3].tools[0]").
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Decode reads a Document from JSON, refusing fields it does not know (a misspelt predicate
// such as "readOnly" would otherwise select every tool), and checks it.
func Decode(data []byte) (*Document, error) {
	return DecodeChecked[Document](data, "an entitlements document")
}

// DecodeChecked reads a document of a workspace (what names it in the error) from JSON as
// Decode reads one: strictly, one value, checked.
func DecodeChecked[D any, P interface {
	*D
	Check() error
}](data []byte, what string) (*D, error) {
	var d D
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, &FieldError{Field: "document", Message: "not " + what + ": " + err.Error()}
	}
	if dec.More() {
		return nil, &FieldError{Field: "document", Message: "holds more than one JSON value"}
	}
	if err := P(&d).Check(); err != nil {
		return nil, err
	}
	return &d, nil
}

// Check reports the first part of d that is malformed or over a limit, naming it. Names of
// tools, toolsets, keys and users that do not exist are not errors (tools come and go): see
// Warnings.
func (d *Document) Check() error {
	switch {
	case d.Default != "" && d.Default != quiver.AccessAllow && d.Default != quiver.AccessDeny:
		return &FieldError{"default", fmt.Sprintf("%q is neither allow nor deny", truncate(string(d.Default), 80))}
	case len(d.Rules) > MaxRules:
		return &FieldError{"rules", fmt.Sprintf("%d rules are over the %d a workspace may have", len(d.Rules), MaxRules)}
	case len(d.Toolsets) > MaxToolsets:
		return &FieldError{"toolsets", fmt.Sprintf("%d toolsets are over the %d a workspace may have", len(d.Toolsets), MaxToolsets)}
	}
	seen := make(map[string]bool, len(d.Toolsets))
	for i := range d.Toolsets {
		ts := &d.Toolsets[i]
		field := fmt.Sprintf("toolsets[%d]", i)
		if err := CheckToolsetName(ts.Name); err != nil {
			return &FieldError{field + ".name", err.Error()}
		}
		if seen[ts.Name] {
			return &FieldError{field + ".name", fmt.Sprintf("the toolset %q is defined twice", ts.Name)}
		}
		seen[ts.Name] = true
		if err := ts.check(field); err != nil {
			return err
		}
	}
	for i := range d.Rules {
		if err := d.Rules[i].check(fmt.Sprintf("rules[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

func (ts *Toolset) check(field string) error {
	switch {
	case len(ts.Description) > MaxText:
		return &FieldError{field + ".description", fmt.Sprintf("over %d bytes", MaxText)}
	case len(ts.Include) == 0:
		return &FieldError{field + ".include", "a toolset needs at least one selector of its tools"}
	case len(ts.Include) > MaxPatterns:
		return &FieldError{field + ".include", fmt.Sprintf("%d selectors are over the %d a toolset may have", len(ts.Include), MaxPatterns)}
	}
	for j := range ts.Include {
		sel := &ts.Include[j]
		f := fmt.Sprintf("%s.include[%d]", field, j)
		if sel.Toolset != "" {
			return &FieldError{f + ".toolset", "a toolset is made of tools, not of other toolsets"}
		}
		if sel.isZero() {
			return &FieldError{f, "selects every tool: give tools, source or when (or tools: [\"*\"] to mean it)"}
		}
		if err := sel.check(f); err != nil {
			return err
		}
	}
	return nil
}

func (r *Rule) check(field string) error {
	if r.Access != quiver.AccessAllow && r.Access != quiver.AccessDeny {
		return &FieldError{field + ".access", fmt.Sprintf("%q is neither allow nor deny", truncate(string(r.Access), 80))}
	}
	if len(r.Description) > MaxText {
		return &FieldError{field + ".description", fmt.Sprintf("over %d bytes", MaxText)}
	}
	if err := r.Who.check(field + ".who"); err != nil {
		return err
	}
	if r.Toolset != "" {
		if err := CheckToolsetName(r.Toolset); err != nil {
			return &FieldError{field + ".toolset", err.Error()}
		}
	}
	return r.Selector.check(field)
}

func (w *Who) check(field string) error {
	for _, f := range []struct{ name, v string }{{"key", w.Key}, {"role", w.Role}, {"user", w.User}, {"claim", w.Claim},
		{"value", w.Value}, {"agent", w.Agent}, {"toolset", w.Toolset}} {
		if len(f.v) > MaxText {
			return &FieldError{field + "." + f.name, fmt.Sprintf("over %d bytes", MaxText)}
		}
	}
	switch {
	case w.Role != "" && w.Role != "admin" && w.Role != "member" && w.Role != "viewer":
		return &FieldError{field + ".role", fmt.Sprintf("%q is none of admin, member, viewer", truncate(w.Role, 80))}
	case (w.Claim == "") != (w.Value == ""):
		return &FieldError{field, "claim and value go together: a claim and the value it must hold"}
	case w.Toolset != "" && CheckToolsetName(w.Toolset) != nil:
		return &FieldError{field + ".toolset", CheckToolsetName(w.Toolset).Error()}
	}
	if _, err := path.Match(w.Agent, ""); err != nil {
		return &FieldError{field + ".agent", fmt.Sprintf("the pattern %q is malformed (path.Match syntax: *, ?, [a-z])", truncate(w.Agent, 80))}
	}
	return nil
}

func (s *Selector) isZero() bool {
	return len(s.Tools) == 0 && s.Source == "" && s.When == (quiver.Hints{}) && s.Toolset == ""
}

func (s *Selector) check(field string) error {
	if len(s.Tools) > MaxPatterns {
		return &FieldError{field + ".tools", fmt.Sprintf("%d patterns are over the %d a selector may have", len(s.Tools), MaxPatterns)}
	}
	for i, p := range s.Tools {
		if err := checkPattern(p); err != nil {
			return &FieldError{fmt.Sprintf("%s.tools[%d]", field, i), err.Error()}
		}
	}
	if s.Source != "" {
		if err := checkPattern(s.Source); err != nil {
			return &FieldError{field + ".source", err.Error()}
		}
	}
	return nil
}

func checkPattern(p string) error {
	switch {
	case p == "":
		return errors.New("is empty: give a name or a pattern")
	case len(p) > MaxText:
		return fmt.Errorf("over %d bytes", MaxText)
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("the pattern %q is malformed (path.Match syntax: *, ?, [a-z])", truncate(p, 80))
	}
	return nil
}

// rule is the quiver.Rule that selects what s selects but its toolset.
func (s *Selector) rule() quiver.Rule {
	return quiver.Rule{Tools: s.Tools, Source: s.Source, When: s.When}
}

func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// CheckWho reports the first part of w that is malformed or over a limit, naming it under
// field: for other documents that select callers as rules do (a workspace's limits).
func CheckWho(w *Who, field string) error { return w.check(field) }

// CheckSelector reports the first part of s that is malformed or over a limit, naming it
// under field (its toolset is not checked: only rules select by toolset).
func CheckSelector(s *Selector, field string) error { return s.check(field) }

// Rule is the quiver.Rule that selects what s selects but its toolset.
func (s *Selector) Rule() quiver.Rule { return s.rule() }
