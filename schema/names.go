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
)

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
// conforms, and keeps both directions. The mapping depends on the set of names alone, never on
// their order, so the same tool set maps the same way in every process and a resumed run sees
// the names it saw before:
//
//  1. a name the provider accepts is its own provider name;
//  2. another name is sanitized (characters the provider rejects become _, a name too long is
//     cut and given a hash of the whole name); it takes that form when no other name of the
//     set sanitizes to it and no name of step 1 is it;
//  3. the names left (several sanitizing alike, or to a name of step 1) each get a suffix
//     derived from the name alone, in sorted order, with a counter in the hashed text for the
//     rare (or contrived) collision of suffixes.
//
// Every provider name is distinct, so a call maps back to exactly one tool.
func mapNames(rule nameRule, names []string) (map[string]string, map[string]string, error) {
	out := make(map[string]string, len(names)) // canonical -> provider
	back := make(map[string]string, len(names))
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			return nil, nil, fmt.Errorf("schema: duplicate tool name %q", n)
		}
		seen[n] = true
	}
	// Names that already conform keep them; others must not collide with those.
	for _, n := range names {
		if rule.valid(n) {
			out[n], back[n] = n, n
		}
	}
	sanitized := map[string][]string{}
	for _, n := range names {
		if _, done := out[n]; !done {
			m := sanitize(rule, n, "")
			sanitized[m] = append(sanitized[m], n)
		}
	}
	var rest []string
	for m, ns := range sanitized {
		if _, taken := back[m]; len(ns) == 1 && !taken {
			out[ns[0]], back[m] = m, ns[0]
			continue
		}
		rest = append(rest, ns...)
	}
	slices.Sort(rest)
	for _, n := range rest {
		m := sanitize(rule, n, nameSuffix(n, 0))
		for i := 1; ; i++ {
			if _, taken := back[m]; !taken {
				break
			}
			m = sanitize(rule, n, nameSuffix(n, i))
		}
		out[n], back[m] = m, n
	}
	return out, back, nil
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
		ok := rule.allowed(c)
		if i == 0 && rule.firstAllow != nil && !rule.firstAllow(c) {
			if ok {
				b.WriteByte('_') // keep the character, put an allowed one before it
			} else {
				ok = false
			}
		}
		if ok {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" {
		s = "_"
	}
	if suffix == "" && len(s) > rule.max {
		suffix = fmt.Sprintf("%08x", hash(name))
	}
	if suffix != "" {
		keep := rule.max - len(suffix) - 1
		if len(s) > keep {
			s = s[:keep]
		}
		s += "_" + suffix
	}
	return s
}

func hash(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}
