package entitle

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/quiverhq/quiver"
)

// Subject is a caller as the rules see it.
type Subject struct {
	Key  string // the API key's id; "" for an access token
	User string
	Role string // admin, member or viewer
	// Claims are an access token's claims; nil for a key.
	Claims map[string]any
	// Agents are the agents whose run makes the call, the outermost first (a sub-agent's
	// parent before it); none for a call a caller makes itself.
	Agents []string
	// Toolset is the toolset whose address the request came through ("" for the workspace's).
	Toolset string
	// Toolsets are those the caller's key is bound to; none: not bound.
	Toolsets []string
}

// Set is a compiled Document: immutable, safe for concurrent use.
type Set struct {
	doc        Document
	allowByDef bool
	rules      []compiled
	toolsets   map[string][]quiver.Rule // a toolset's selectors
	allows     bucket                   // every allow rule, by who it names: who has an allow list
	// The rules and toolsets that can select a tool, by what they select it by, so that a
	// tool's entry reads those alone: rules naming tools exactly (byName), rules selecting a
	// toolset's tools and nothing more (bySet), toolsets naming their tools exactly; the rest
	// are tried on every tool.
	byName, bySet map[string][]int32
	scanRules     []int32
	setsByName    map[string][]string
	scanSets      []string
	// entries memoises what was compiled for each tool (a *quiver.Tool names one version of
	// one tool); dropped whole past entriesCap, so tools replaced over time do not pile up.
	entries sync.Map
	size    atomic.Int64
}

// compiled is a rule ready to match.
type compiled struct {
	who    Who
	sel    quiver.Rule
	set    string // the toolset it selects the tools of; "" for none
	access quiver.Access
}

const entriesCap = 1 << 14

// Compile checks d and returns its Set. The Set keeps its own copy of d.
func Compile(d *Document) (*Set, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	s := &Set{doc: clone(d), allowByDef: d.Default != quiver.AccessDeny, toolsets: make(map[string][]quiver.Rule, len(d.Toolsets))}
	s.byName, s.bySet, s.setsByName = map[string][]int32{}, map[string][]int32{}, map[string][]string{}
	for _, ts := range s.doc.Toolsets {
		sels := make([]quiver.Rule, len(ts.Include))
		names := []string{}
		for i := range ts.Include {
			sels[i] = ts.Include[i].rule()
			if names != nil && exact(&ts.Include[i]) {
				names = append(names, ts.Include[i].Tools...)
			} else {
				names = nil
			}
		}
		s.toolsets[ts.Name] = sels
		if names == nil {
			s.scanSets = append(s.scanSets, ts.Name)
		}
		for _, n := range names {
			if l := s.setsByName[n]; len(l) == 0 || l[len(l)-1] != ts.Name {
				s.setsByName[n] = append(l, ts.Name)
			}
		}
	}
	s.rules = make([]compiled, len(s.doc.Rules))
	for i := range s.doc.Rules {
		r := &s.doc.Rules[i]
		s.rules[i] = compiled{who: r.Who, sel: r.Selector.rule(), set: r.Toolset, access: r.Access}
		if r.Access == quiver.AccessAllow {
			s.allows.add(int32(i), &r.Who)
		}
		switch {
		case exact(&r.Selector):
			for _, n := range r.Tools {
				if l := s.byName[n]; len(l) == 0 || l[len(l)-1] != int32(i) {
					s.byName[n] = append(l, int32(i))
				}
			}
		case r.Toolset != "":
			s.bySet[r.Toolset] = append(s.bySet[r.Toolset], int32(i))
		default:
			s.scanRules = append(s.scanRules, int32(i))
		}
	}
	return s, nil
}

// exact reports whether sel selects tools by exact names alone (and perhaps more, which the
// entry checks): no tool but those it names can match it.
func exact(sel *Selector) bool {
	if len(sel.Tools) == 0 {
		return false
	}
	for _, p := range sel.Tools {
		if strings.ContainsAny(p, `*?[\/`) {
			return false
		}
	}
	return true
}

// Document returns a copy of the document s was compiled from.
func (s *Set) Document() Document { return clone(&s.doc) }

// Restricts reports whether s can refuse anything: it has rules or toolsets, or denies by
// default. A caller no rule restricts is answered as without entitlements.
func (s *Set) Restricts() bool {
	return s != nil && (len(s.rules) > 0 || len(s.toolsets) > 0 || !s.allowByDef)
}

// Allows reports whether sub may see and call t.
func (s *Set) Allows(sub *Subject, t *quiver.Tool) bool {
	if s == nil {
		return true
	}
	e := s.entry(t)
	if !s.inToolsets(sub, e) {
		return false
	}
	if len(sub.Agents) == 0 {
		return s.decide(sub, "", e).allowed
	}
	for _, a := range sub.Agents {
		if !s.decide(sub, a, e).allowed {
			return false
		}
	}
	return true
}

// Decision says whether a subject may call a tool, and what decided it.
type Decision struct {
	Allowed bool `json:"allowed"`
	// Rule is the index of the rule that decided (from 0); -1 when no rule did (the default,
	// a toolset binding).
	Rule int `json:"rule"`
	// Agent is the agent of the subject's chain the decision was made for ("" for none).
	Agent string `json:"agent,omitempty"`
	// Reason says what decided, in words.
	Reason string `json:"reason"`
}

// Explain decides as Allows does and says what decided: the refusal of the first agent of the
// chain that is refused, or, allowed, the decision for the last.
func (s *Set) Explain(sub *Subject, t *quiver.Tool) Decision {
	if s == nil {
		return Decision{Allowed: true, Rule: -1, Reason: "the workspace has no entitlements: every tool is allowed"}
	}
	e := s.entry(t)
	if why := s.toolsetRefusal(sub, e); why != "" {
		return Decision{Rule: -1, Reason: why}
	}
	agents := sub.Agents
	if len(agents) == 0 {
		agents = []string{""}
	}
	var d decision
	for _, a := range agents {
		if d = s.decide(sub, a, e); !d.allowed {
			break
		}
	}
	return d.explain(s)
}

// decision is one evaluation's outcome: rule is -1 for the default, or an allow list's refusal.
type decision struct {
	allowed   bool
	rule      int32
	agent     string
	allowList bool // refused: the caller has an allow list that leaves the tool out
}

func (d decision) explain(s *Set) Decision {
	out := Decision{Allowed: d.allowed, Rule: int(d.rule), Agent: d.agent}
	switch {
	case d.rule >= 0:
		r := &s.doc.Rules[d.rule]
		out.Reason = fmt.Sprintf("rules[%d] %ss it", d.rule, r.Access)
		if r.Description != "" {
			out.Reason += " (" + r.Description + ")"
		}
	case d.allowList:
		out.Reason = "rules allow this caller some tools, and no rule allows it this one"
	case d.allowed:
		out.Reason = "no rule decides it, and the workspace allows by default"
	default:
		out.Reason = "no rule allows it, and the workspace denies by default"
	}
	if d.agent != "" {
		out.Reason += ", for agent " + d.agent
	}
	return out
}

// decide evaluates the rules for sub as agent's run (agent "": the caller's own call).
func (s *Set) decide(sub *Subject, agent string, e *entry) decision {
	if r := e.deny.first(s, sub, agent); r >= 0 {
		return decision{rule: r, agent: agent}
	}
	if r := e.allow.first(s, sub, agent); r >= 0 {
		return decision{allowed: true, rule: r, agent: agent}
	}
	if s.allows.first(s, sub, agent) >= 0 {
		return decision{rule: -1, agent: agent, allowList: true}
	}
	return decision{allowed: s.allowByDef, rule: -1, agent: agent}
}

// inToolsets reports whether the toolsets sub is bound to hold the tool e is of.
func (s *Set) inToolsets(sub *Subject, e *entry) bool {
	return s.toolsetRefusal(sub, e) == ""
}

func (s *Set) toolsetRefusal(sub *Subject, e *entry) string {
	if sub.Toolset != "" && !slices.Contains(e.toolsets, sub.Toolset) {
		return "it is not in the toolset " + sub.Toolset + " the request came through"
	}
	if len(sub.Toolsets) > 0 && !slices.ContainsFunc(sub.Toolsets, func(ts string) bool { return slices.Contains(e.toolsets, ts) }) {
		return "it is in none of the toolsets the key is bound to"
	}
	return ""
}

// Claims returns the claims of claims that some rule reads (by a rule's claim name, or the
// first part of its dotted path), nil when none does: what a run needs to keep of its
// caller's token, and no more.
func (s *Set) Claims(claims map[string]any) map[string]any {
	if s == nil || len(claims) == 0 {
		return nil
	}
	var out map[string]any
	for i := range s.rules {
		name := s.rules[i].who.Claim
		if name == "" {
			continue
		}
		for _, k := range []string{name, strings.SplitN(name, ".", 2)[0]} {
			if v, ok := claims[k]; ok {
				if out == nil {
					out = map[string]any{}
				}
				out[k] = v
			}
		}
	}
	return out
}

// InToolset reports whether t is in the toolset named (false for no such toolset).
func (s *Set) InToolset(name string, t *quiver.Tool) bool {
	return s != nil && slices.Contains(s.entry(t).toolsets, name)
}

// HasToolset reports whether the document defines the toolset named.
func (s *Set) HasToolset(name string) bool {
	if s == nil {
		return false
	}
	_, ok := s.toolsets[name]
	return ok
}

// entry is what was compiled for one tool: the rules that select it, indexed by who they name,
// and the toolsets that hold it.
type entry struct {
	deny, allow bucket
	toolsets    []string
}

func (s *Set) entry(t *quiver.Tool) *entry {
	if e, ok := s.entries.Load(t); ok {
		return e.(*entry)
	}
	e := &entry{}
	for _, name := range append(slices.Clone(s.setsByName[t.Name()]), s.scanSets...) {
		sels := s.toolsets[name]
		for i := range sels {
			if sels[i].Selects(t) && !slices.Contains(e.toolsets, name) {
				e.toolsets = append(e.toolsets, name)
				break
			}
		}
	}
	slices.Sort(e.toolsets)
	candidates := append(slices.Clone(s.byName[t.Name()]), s.scanRules...)
	for _, ts := range e.toolsets {
		candidates = append(candidates, s.bySet[ts]...)
	}
	slices.Sort(candidates)
	for _, i := range slices.Compact(candidates) {
		r := &s.rules[i]
		if !r.selects(t, e.toolsets) {
			continue
		}
		if r.access == quiver.AccessDeny {
			e.deny.add(i, &r.who)
		} else {
			e.allow.add(i, &r.who)
		}
	}
	if s.size.Add(1) > entriesCap {
		s.entries.Clear()
		s.size.Store(0)
	}
	s.entries.Store(t, e)
	return e
}

func (r *compiled) selects(t *quiver.Tool, toolsets []string) bool {
	if r.set != "" && !slices.Contains(toolsets, r.set) {
		return false
	}
	return r.sel.Selects(t)
}

// matches reports whether w names sub, in agent's run.
func (w *Who) matches(sub *Subject, agent string) bool {
	switch {
	case w.Key != "" && w.Key != sub.Key,
		w.User != "" && w.User != sub.User,
		w.Role != "" && w.Role != sub.Role,
		w.Toolset != "" && w.Toolset != sub.Toolset:
		return false
	case w.Agent != "":
		if agent == "" {
			return false
		}
		if ok, _ := path.Match(w.Agent, agent); !ok && w.Agent != agent {
			return false
		}
	}
	return w.Claim == "" || ClaimHolds(sub.Claims, w.Claim, w.Value)
}

// bucket indexes rules by the most selective part of who they name, so that finding the rules
// that name a caller reads a few maps rather than every rule. Each list is in rule order.
type bucket struct {
	byKey, byUser, byToolset, byRole map[string][]int32
	rest                             []int32 // rules naming none of those: claims, agents, everyone
}

func (b *bucket) add(i int32, w *Who) {
	put := func(m *map[string][]int32, k string) {
		if *m == nil {
			*m = map[string][]int32{}
		}
		(*m)[k] = append((*m)[k], i)
	}
	switch {
	case w.Key != "":
		put(&b.byKey, w.Key)
	case w.User != "":
		put(&b.byUser, w.User)
	case w.Toolset != "":
		put(&b.byToolset, w.Toolset)
	case w.Role != "":
		put(&b.byRole, w.Role)
	default:
		b.rest = append(b.rest, i)
	}
}

// first returns the lowest index of a rule in b that names sub in agent's run, -1 for none.
func (b *bucket) first(s *Set, sub *Subject, agent string) int32 {
	best := int32(-1)
	scan := func(list []int32) {
		for _, i := range list {
			if best >= 0 && i > best {
				return
			}
			if s.rules[i].who.matches(sub, agent) {
				best = i
				return
			}
		}
	}
	if sub.Key != "" {
		scan(b.byKey[sub.Key])
	}
	if sub.User != "" {
		scan(b.byUser[sub.User])
	}
	if sub.Toolset != "" {
		scan(b.byToolset[sub.Toolset])
	}
	if sub.Role != "" {
		scan(b.byRole[sub.Role])
	}
	scan(b.rest)
	return best
}

func clone(d *Document) Document {
	out := Document{Default: d.Default, Rules: slices.Clone(d.Rules), Toolsets: slices.Clone(d.Toolsets)}
	for i := range out.Rules {
		out.Rules[i].Tools = slices.Clone(out.Rules[i].Tools)
	}
	for i := range out.Toolsets {
		inc := slices.Clone(out.Toolsets[i].Include)
		for j := range inc {
			inc[j].Tools = slices.Clone(inc[j].Tools)
		}
		out.Toolsets[i].Include = inc
	}
	return out
}

// Matches reports whether w names sub: every field it sets matches, its agent pattern any
// agent of sub's run.
func (w *Who) Matches(sub *Subject) bool {
	if w.Agent == "" {
		return w.matches(sub, "")
	}
	for _, a := range sub.Agents {
		if w.matches(sub, a) {
			return true
		}
	}
	return false
}
