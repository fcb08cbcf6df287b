package schema

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
)

// nameRule is one provider's rule for tool names.
type nameRule struct {
	max        int
	allowed    func(r rune) bool
	firstAllow func(r rune) bool // nil: the first character follows allowed
}

func asciiWord(r rune) bool {
	return r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
}

var (
	// OpenAI and Anthropic: ^[a-zA-Z0-9_-]{1,64}$.
	ruleOpenAI = nameRule{max: 64, allowed: asciiWord}
	// Gemini: starts with a letter or underscore; then letters, digits, _ . : -; at most 64.
	ruleGemini = nameRule{max: 64,
		allowed: func(r rune) bool { return asciiWord(r) || r == '.' || r == ':' },
		firstAllow: func(r rune) bool {
			return r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		}}
	// MCP (2025-11-25): 1 to 128 characters of A-Z a-z 0-9 _ - .
	ruleMCP = nameRule{max: 128, allowed: func(r rune) bool { return asciiWord(r) || r == '.' }}
	// Every model provider's at once (OpenAI's and Anthropic's characters, Gemini's first
	// character): a name given for them all (CheckProviderName) must satisfy it.
	ruleEveryModel = nameRule{max: 64, allowed: asciiWord, firstAllow: ruleGemini.firstAllow}
)

// CheckProviderName reports a name that not every model provider Quiver renders tools for
// (OpenAI, Anthropic, Gemini, OpenAI-compatible servers) accepts as a tool's name as given:
// the name a governance rule gives a tool for them (ToolSchema.ProviderName) must be one.
func CheckProviderName(name string) error {
	if ruleEveryModel.valid(name) {
		return nil
	}
	return fmt.Errorf("%q is not a name every model provider accepts: give 1 to 64 characters of letters "+
		"(a-z, A-Z), digits, _ and -, starting with a letter or _", name)
}

func (r nameRule) valid(name string) bool {
	if name == "" || len(name) > r.max {
		return false
	}
	for i, c := range name {
		ok := r.allowed(c)
		if i == 0 && r.firstAllow != nil {
			ok = r.firstAllow(c)
		}
		if !ok {
			return false
		}
	}
	return true
}

// mapNames gives each canonical name a name the provider accepts, unchanged where it already
// conforms, and keeps both directions. The mapping depends on the set of names (and the
// preferred names) alone, never on their order, so the same tool set maps the same way in
// every process and a resumed run sees the names it saw before:
//
//  0. a name preferred holds a provider name for (keyed by canonical name: the name governance
//     gives a tool) is offered under it, as given; a preferred name the provider rejects, or
//     that another tool would be offered under (a preferred name, its own name or its
//     sanitized form) is an error, never a silent rename;
//  1. a name the provider accepts is its own provider name;
//  2. another name is sanitized (characters the provider rejects become _, a name too long is
//     cut and given a hash of the whole name); it takes that form when no other name of the
//     set sanitizes to it and no name of step 1 is it;
//  3. the names left (several sanitizing alike, or to a name of step 1) each get a suffix
//     derived from the name alone, in sorted order, with a counter in the hashed text for the
//     rare (or contrived) collision of suffixes.
//
// Every provider name is distinct, so a call maps back to exactly one tool.
func mapNames(rule nameRule, names []string, preferred map[string]string) (map[string]string, map[string]string, error) {
	if err := checkDistinct(names); err != nil {
		return nil, nil, err
	}
	m := nameMap{rule: rule, out: make(map[string]string, len(names)), back: make(map[string]string, len(names))}
	if err := m.setPreferred(names, preferred); err != nil {
		return nil, nil, err
	}
	// Names that already conform keep them; others must not collide with those.
	for _, n := range names {
		if _, done := m.out[n]; !done && rule.valid(n) {
			m.set(n, n)
		}
	}
	rest := m.setSanitized(names)
	slices.Sort(rest)
	for _, n := range rest {
		m.set(n, m.suffixed(n))
	}
	return m.out, m.back, nil
}

func checkDistinct(names []string) error {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			return fmt.Errorf("schema: duplicate tool name %q", n)
		}
		seen[n] = true
	}
	return nil
}

// nameMap is mapNames's mapping in both directions, as it is built.
type nameMap struct {
	rule      nameRule
	out, back map[string]string // canonical -> provider, provider -> canonical
}

func (m nameMap) set(canonical, provider string) {
	m.out[canonical], m.back[provider] = provider, canonical
}

// setPreferred gives the names preferred holds a provider name for that name (step 0 of
// mapNames), and refuses a preferred name the provider rejects or that collides with another
// tool's, preferred or its own (as given or sanitized). The names are taken in sorted order,
// so that the error, if any, is the same whatever the order of the tools.
func (m nameMap) setPreferred(names []string, preferred map[string]string) error {
	if len(preferred) == 0 {
		return nil
	}
	sorted := slices.Sorted(slices.Values(names))
	for _, n := range sorted {
		p, ok := preferred[n]
		if !ok {
			continue
		}
		if !m.rule.valid(p) {
			return fmt.Errorf("schema: tool %q: the provider name %q is not a name this provider accepts", n, p)
		}
		if other, dup := m.back[p]; dup {
			return fmt.Errorf("schema: tools %q and %q are both given the provider name %q: give each its own", other, n, p)
		}
		m.set(n, p)
	}
	for _, n := range sorted {
		if _, done := m.out[n]; done {
			continue
		}
		own := n
		if !m.rule.valid(n) {
			own = sanitize(m.rule, n, "")
		}
		if other, clash := m.back[own]; clash {
			return fmt.Errorf("schema: the provider name %q given to tool %q collides with tool %q, offered as %q: "+
				"give %q another provider name", own, other, n, own, other)
		}
	}
	return nil
}

func (m nameMap) taken(provider string) bool {
	_, ok := m.back[provider]
	return ok
}

// setSanitized gives the names not mapped yet their sanitized form where no other name takes
// it, and returns the names left.
func (m nameMap) setSanitized(names []string) []string {
	sanitized := map[string][]string{}
	for _, n := range names {
		if _, done := m.out[n]; !done {
			s := sanitize(m.rule, n, "")
			sanitized[s] = append(sanitized[s], n)
		}
	}
	var rest []string
	for s, ns := range sanitized {
		if len(ns) == 1 && !m.taken(s) {
			m.set(ns[0], s)
			continue
		}
		rest = append(rest, ns...)
	}
	return rest
}

// suffixed is the first of n's suffixed forms no name takes yet.
func (m nameMap) suffixed(n string) string {
	s := sanitize(m.rule, n, nameSuffix(n, 0))
	for i := 1; m.taken(s); i++ {
		s = sanitize(m.rule, n, nameSuffix(n, i))
	}
	return s
}

// nameSuffix is the i-th suffix that tells name from others that sanitize alike: 8 hex digits
// of a hash of the name (and of i, after the first).
func nameSuffix(name string, i int) string {
	if i > 0 {
		name = fmt.Sprintf("%s\x00%d", name, i)
	}
	return fmt.Sprintf("%08x", hash("suffix\x00"+name))
}

func sanitize(rule nameRule, name, suffix string) string {
	var b strings.Builder
	for i, c := range name {
		if i == 0 && rule.needsLead(c) {
			b.WriteByte('_') // keep the character, put an allowed one before it
		}
		b.WriteRune(rule.orUnderscore(c))
	}
	s := b.String()
	if s == "" {
		s = "_"
	}
	if suffix == "" && len(s) > rule.max {
		suffix = fmt.Sprintf("%08x", hash(name))
	}
	if suffix == "" {
		return s
	}
	keep := rule.max - len(suffix) - 1
	if len(s) > keep {
		s = s[:keep]
	}
	return s + "_" + suffix
}

// needsLead reports whether c, as a name's first character, needs an allowed one before it:
// it is allowed, but not first.
func (r nameRule) needsLead(c rune) bool {
	return r.firstAllow != nil && !r.firstAllow(c) && r.allowed(c)
}

func (r nameRule) orUnderscore(c rune) rune {
	if r.allowed(c) {
		return c
	}
	return '_'
}

func hash(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}
