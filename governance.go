package quiver

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiverhq/quiver/schema"
)

// Where a tool came from, as Spec.Source names it: a kind, then for the kinds that come in
// named sets, a colon and the set's name ("openapi:payments", "mcp:github"). Rules select
// tools by source with path.Match patterns over it ("openapi:*").
const (
	SourceGo      = "go"      // a Go function (the empty Source means this too)
	SourceSchema  = "schema"  // a JSON-schema tool of a registry file
	SourceStored  = "stored"  // a tool a workspace stores (a JavaScript function or a client tool)
	SourceOpenAPI = "openapi" // an operation of an OpenAPI document: "openapi:NAME"
	SourceMCP     = "mcp"     // a tool of a remote MCP server: "mcp:NAME"
	SourceA2A     = "a2a"     // an agent of another platform over A2A: "a2a:NAME"
	SourcePrompt  = "prompt"  // a prompt offered as a tool, or an agent: "prompt:NAME"
)

// Access is what a rule says of calling the tools it matches.
type Access string

// Accesses. Deny always wins: a tool any rule denies is neither offered nor callable,
// whatever another rule allows. Allow makes an allow list: once a layer of rules allows
// some tools, only those are permitted by it.
const (
	AccessAllow Access = "allow"
	AccessDeny  Access = "deny"
)

// Hints selects tools by their annotations, read as MCP reads them: a hint a tool leaves out
// has MCP's default (not read-only, destructive, not idempotent, open world), and a read-only
// tool is neither destructive nor anything but idempotent, since those hints only mean
// something for a tool that changes its environment. A rule matches the annotations a tool
// was made with, not those rules give it, so that no rule can slip a tool past another.
type Hints struct {
	// ReadOnly, when set, selects the tools that do not change their environment (true) or
	// those that may (false). A tool that leaves the hint out is not read-only.
	ReadOnly *bool `json:"readOnlyHint,omitempty" yaml:"readOnlyHint,omitempty"`
	// Destructive, when set, selects the tools that may destroy or overwrite (true) or those
	// that only add or read (false). A tool that leaves the hint out is destructive unless it
	// is read-only.
	Destructive *bool `json:"destructiveHint,omitempty" yaml:"destructiveHint,omitempty"`
	// Idempotent, when set, selects the tools that a second call with the same arguments
	// leaves unchanged (true) or those it may change again (false). A tool that leaves the
	// hint out is idempotent only if it is read-only.
	Idempotent *bool `json:"idempotentHint,omitempty" yaml:"idempotentHint,omitempty"`
	// OpenWorld, when set, selects the tools that reach an open world of outside entities, as
	// a web search does (true), or a closed domain, as a memory does (false). A tool that
	// leaves the hint out is open-world.
	OpenWorld *bool `json:"openWorldHint,omitempty" yaml:"openWorldHint,omitempty"`
}

// matches reports whether a's hints, with MCP's defaults, are those h asks for.
func (h Hints) matches(a Annotations) bool {
	readOnly := hintOr(a.ReadOnlyHint, false)
	destructive := !readOnly && hintOr(a.DestructiveHint, true)
	idempotent := readOnly || hintOr(a.IdempotentHint, false)
	openWorld := hintOr(a.OpenWorldHint, true)
	return wants(h.ReadOnly, readOnly) && wants(h.Destructive, destructive) &&
		wants(h.Idempotent, idempotent) && wants(h.OpenWorld, openWorld)
}

func (h Hints) isZero() bool {
	return h.ReadOnly == nil && h.Destructive == nil && h.Idempotent == nil && h.OpenWorld == nil
}

func hintOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

func wants(want *bool, have bool) bool { return want == nil || *want == have }

// Duration is a time.Duration written as Go writes one ("30s", "2m") in JSON and YAML.
type Duration time.Duration

// MarshalText writes the duration as "30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a duration such as "30s" or "2m".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration like 30s or 2m", b)
	}
	*d = Duration(v)
	return nil
}

// Rule governs the tools it matches, whatever their source: a Go function, a stored
// JavaScript tool, an OpenAPI operation, a remote MCP tool, an A2A agent or a prompt take the
// same settings. A rule matches a tool when every selector it sets matches (none set: every
// tool).
type Rule struct {
	// Tools are names or path.Match patterns ("payments.*"); empty matches any name.
	Tools []string `json:"tools,omitempty" yaml:"tools,omitempty"`
	// Source is a path.Match pattern over the tool's Spec.Source ("openapi:payments",
	// "mcp:*", "stored"); empty matches any source, "go" a tool with no source.
	Source string `json:"source,omitempty" yaml:"source,omitempty"`
	// When selects by annotations: {destructiveHint: true}, {readOnlyHint: false}.
	When Hints `json:"when,omitzero" yaml:"when,omitempty"`

	// RequiresConfirmation, when set, makes every call wait for a person's decision (true)
	// or not (false).
	RequiresConfirmation *bool `json:"requires_confirmation,omitempty" yaml:"requires_confirmation,omitempty"`
	// Timeout, when positive, bounds one execution.
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// Annotations set the hints and title they hold (clients and people read them; rules
	// select by the tool's own).
	Annotations Annotations `json:"annotations,omitzero" yaml:"annotations,omitempty"`
	// Access allows or denies calling the tools (see [AccessAllow] and [AccessDeny]).
	Access Access `json:"access,omitempty" yaml:"access,omitempty"`
	// ProviderName, when set, is the name model providers (OpenAI, Anthropic, Gemini,
	// OpenAI-compatible servers) are offered the tool under: an agent's run offers it as
	// given and runs the tool when the model calls it, recording the call under the tool's
	// own name. The rule must select one tool by its exact name (Tools holds one name, no
	// pattern), and the name must be one every provider accepts ([schema.CheckProviderName]).
	// Operator's rules only. MCP clients, calls over the API and the composed {calls, output}
	// mode name the tool by its own name.
	ProviderName string `json:"provider_name,omitempty" yaml:"provider_name,omitempty"`
}

// Check reports a rule that sets nothing, or a pattern or value that is not valid.
func (r *Rule) Check() error {
	for _, p := range append(append([]string(nil), r.Tools...), r.Source) {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("the pattern %q is malformed (path.Match syntax: *, ?, [a-z])", p)
		}
	}
	switch {
	case r.Access != "" && r.Access != AccessAllow && r.Access != AccessDeny:
		return fmt.Errorf("access %q is neither allow nor deny", r.Access)
	case r.Timeout < 0:
		return fmt.Errorf("timeout %s is negative", time.Duration(r.Timeout))
	case r.RequiresConfirmation == nil && r.Timeout == 0 && r.Annotations.IsZero() && r.Access == "" && r.ProviderName == "":
		return errors.New("it sets nothing: give requires_confirmation, timeout, annotations, access or provider_name")
	}
	return r.checkProviderName()
}

// checkProviderName reports a provider_name that is not a name every model provider accepts,
// or that the rule could give to more than one tool: it must name exactly one, without a
// pattern, or two tools would be offered under one name.
func (r *Rule) checkProviderName() error {
	if r.ProviderName == "" {
		return nil
	}
	if err := schema.CheckProviderName(r.ProviderName); err != nil {
		return fmt.Errorf("provider_name %w", err)
	}
	switch {
	case len(r.Tools) == 0:
		return fmt.Errorf("provider_name %q needs one tool named exactly: give tools: [NAME]", r.ProviderName)
	case len(r.Tools) > 1:
		return fmt.Errorf("provider_name %q needs one tool named exactly, not %d (%s)", r.ProviderName, len(r.Tools), strings.Join(r.Tools, ", "))
	case strings.ContainsAny(r.Tools[0], `*?[\`):
		return fmt.Errorf("provider_name %q needs one tool named exactly, not the pattern %q", r.ProviderName, r.Tools[0])
	}
	return nil
}

// Selects reports whether the rule's selectors (Tools, Source, When) select t as its source
// made it, whatever settings rules have given it since: what every layer of rules selects
// tools by, a platform's entitlements included, so that no rule can move a tool out of
// another's reach.
func (r *Rule) Selects(t *Tool) bool {
	if t.made != nil {
		t = t.made
	}
	return r.matches(&t.spec)
}

// matches reports whether the rule selects t (as t was made: spec is its own).
func (r *Rule) matches(spec *Spec) bool {
	if len(r.Tools) > 0 && !matchAny(r.Tools, spec.Name, false) {
		return false
	}
	if r.Source != "" {
		src := spec.Source
		if src == "" {
			src = SourceGo
		}
		if ok, _ := path.Match(r.Source, src); !ok && r.Source != src {
			return false
		}
	}
	return r.When.isZero() || r.When.matches(spec.Annotations)
}

// Governance is the rules a platform sets on the tools it serves, in two layers: the
// operator's (the fleet's configuration), which may set anything, then a workspace's, which
// may only tighten what the first layer left: require confirmation, shorten a timeout, deny or
// narrow what is allowed. Within a layer later rules win over earlier ones. Set it on a
// [Registry] (SetGovernance): every door reads tools there, so every door sees the governed
// tools and the dispatcher enforces them. A Governance is immutable and safe for concurrent
// use; make a new one to change the rules.
type Governance struct {
	operator, workspace []Rule
	// governed memoises each tool as governed (*Tool to *Tool), by the tool made by its
	// source (tools are immutable, so a pointer names one version of one tool): every call's
	// lookup reads it, without a lock. It is dropped whole when it outgrows governedCap: tools
	// replaced over time must not pile up in it.
	governed sync.Map
	size     atomic.Int64
}

// governedCap bounds the memo of governed tools.
const governedCap = 1 << 14

// NewGovernance checks the rules of both layers and returns their governance. An error names
// the layer and the rule (from 1) and what is wrong.
func NewGovernance(operator, workspace []Rule) (*Governance, error) {
	for i := range operator {
		if err := operator[i].Check(); err != nil {
			return nil, fmt.Errorf("governance rule %d: %w", i+1, err)
		}
	}
	for i := range workspace {
		if err := checkTightening(&workspace[i]); err != nil {
			return nil, fmt.Errorf("workspace governance rule %d: %w", i+1, err)
		}
	}
	if err := checkProviderNames(operator); err != nil {
		return nil, err
	}
	return &Governance{operator: clone(operator), workspace: clone(workspace)}, nil
}

// checkProviderNames refuses rules that give one provider name to two tools: the providers
// would be offered two tools under one name. (A provider name that is another tool's own name
// shows only when the tools are rendered for a provider, which refuses it then.)
func checkProviderNames(rules []Rule) error {
	given := map[string]int{} // provider name -> index of the first rule giving it
	for i := range rules {
		r := &rules[i]
		if r.ProviderName == "" {
			continue
		}
		first, ok := given[r.ProviderName]
		if !ok {
			given[r.ProviderName] = i
			continue
		}
		if other := rules[first].Tools[0]; other != r.Tools[0] {
			return fmt.Errorf("governance rule %d: provider_name %q is given to %q by rule %d already: give each tool its own",
				i+1, r.ProviderName, other, first+1)
		}
	}
	return nil
}

// checkTightening is check, and refuses what a workspace's rule may not do: lift a
// confirmation, set annotations (which the operator's rules may select tools by) or give a
// provider name. A rename is not a tightening: it changes what every model of the workspace
// is offered and could take a name the operator's rules give another tool, so the operator's
// configuration alone sets it.
func checkTightening(r *Rule) error {
	if err := r.Check(); err != nil {
		return err
	}
	switch {
	case r.RequiresConfirmation != nil && !*r.RequiresConfirmation:
		return errors.New("a workspace's rule may require confirmation, not lift it (requires_confirmation: false)")
	case !r.Annotations.IsZero():
		return errors.New("a workspace's rule may not set annotations; the operator's configuration does")
	case r.ProviderName != "":
		return fmt.Errorf("a workspace's rule may not set provider_name (%q): a rename is not a tightening; the operator's configuration does", r.ProviderName)
	}
	return nil
}

func clone(rules []Rule) []Rule {
	out := make([]Rule, len(rules))
	for i, r := range rules {
		r.Tools = append([]string(nil), r.Tools...)
		r.Annotations = r.Annotations.Clone()
		out[i] = r
	}
	return out
}

// Rules returns copies of the operator's and the workspace's rules.
func (g *Governance) Rules() (operator, workspace []Rule) {
	return clone(g.operator), clone(g.workspace)
}

// Govern returns t as the rules make it: the same tool, schemas and code, with the settings
// of the rules that match it. A tool they deny is returned refused by every policy (see
// [Policy.Permits]), with the reason.
func (g *Governance) Govern(t *Tool) *Tool {
	if g == nil || t == nil || (len(g.operator) == 0 && len(g.workspace) == 0) {
		return t
	}
	if t.made != nil {
		t = t.made
	}
	if out, ok := g.governed.Load(t); ok {
		return out.(*Tool)
	}
	out := g.apply(t)
	if g.size.Add(1) > governedCap {
		g.governed.Clear()
		g.size.Store(0)
	}
	g.governed.Store(t, out)
	return out
}

func (g *Governance) apply(t *Tool) *Tool {
	c := *t
	c.made = t
	own := &t.spec
	denied, changed := layer(g.operator, own, &c.spec, false)
	why, tightened := layer(g.workspace, own, &c.spec, true)
	c.denied = cmp.Or(denied, why)
	c.providerName = providerName(g.operator, own)
	if !changed && !tightened && c.denied == "" {
		return t
	}
	return &c
}

// providerName is the provider name the last of rules that matches own and gives one gives
// it ("" when none does). Only the operator's rules give one (see checkTightening).
func providerName(rules []Rule, own *Spec) string {
	name := ""
	for i := range rules {
		if r := &rules[i]; r.ProviderName != "" && r.matches(own) {
			name = r.ProviderName
		}
	}
	return name
}

// layer applies the rules of one layer that match own (the tool as made) to spec, and
// returns why the layer refuses the tool ("" when it permits it) and whether a rule matched.
// tighten keeps the settings from loosening what spec already holds.
func layer(rules []Rule, own, spec *Spec, tighten bool) (denied string, matched bool) {
	allowList, allowed := false, false
	for i := range rules {
		r := &rules[i]
		if r.Access == AccessAllow {
			allowList = true
		}
		if !r.matches(own) {
			continue
		}
		matched = true
		switch r.Access {
		case AccessDeny:
			denied = fmt.Sprintf("governance rule %d denies it", i+1)
		case AccessAllow:
			allowed = true
		}
		applyRule(r, spec, tighten)
	}
	if denied == "" && allowList && !allowed {
		denied = "no governance rule allows it"
	}
	if denied != "" && tighten {
		denied = "the workspace's " + denied
	}
	return denied, matched
}

// applyRule writes a matching rule's settings into spec.
func applyRule(r *Rule, spec *Spec, tighten bool) {
	if r.RequiresConfirmation != nil {
		spec.RequiresConfirmation = *r.RequiresConfirmation || (tighten && spec.RequiresConfirmation)
	}
	if d := time.Duration(r.Timeout); d > 0 && (!tighten || spec.Timeout == 0 || d < spec.Timeout) {
		spec.Timeout = d
	}
	if !r.Annotations.IsZero() {
		spec.Annotations = overlay(spec.Annotations, r.Annotations)
	}
}

// overlay is a with the hints and title b sets.
func overlay(a, b Annotations) Annotations {
	out := a.Clone()
	if b.Title != "" {
		out.Title = b.Title
	}
	for _, p := range []struct{ dst, src **bool }{
		{&out.ReadOnlyHint, &b.ReadOnlyHint}, {&out.DestructiveHint, &b.DestructiveHint},
		{&out.IdempotentHint, &b.IdempotentHint}, {&out.OpenWorldHint, &b.OpenWorldHint},
	} {
		if *p.src != nil {
			*p.dst = Hint(**p.src)
		}
	}
	return out
}

// SourceKind returns the kind of a Spec.Source ("openapi" of "openapi:payments"), "go" for
// the empty source.
func SourceKind(source string) string {
	if source == "" {
		return SourceGo
	}
	kind, _, _ := strings.Cut(source, ":")
	return kind
}
