package quiver

import (
	"fmt"
	"path"
	"strings"
)

// Policy decides which tools an agent may see and call (P1-P4). Its effective set is the tools
// bound to it, that are enabled, that Allow permits (an empty Allow permits all), minus Deny:
// deny always wins. Entries are tool names or path.Match patterns such as "github.*".
//
// The zero Policy binds every registered tool and permits every enabled one.
type Policy struct {
	// Bound lists the tools given to the agent; nil binds every tool in the registry, an empty
	// list none (so it is encoded even when empty: null and [] differ).
	Bound []string `json:"bound"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`

	parent *Policy
}

// Within returns p restricted by parent (P2): a tool is permitted only if both permit it, so a
// sub-agent never has more than the agent that spawned it.
func (p Policy) Within(parent Policy) Policy {
	pp := parent
	p.parent = &pp
	return p
}

// Permits reports whether t is in p's effective set, and if not, why.
func (p *Policy) Permits(t *Tool) (bool, string) {
	if t.spec.Disabled {
		return false, "it is disabled"
	}
	for q := p; q != nil; q = q.parent {
		if ok, why := q.permitsName(t.spec.Name); !ok {
			if q != p {
				why = "the parent agent's policy does not permit it (" + why + ")"
			}
			return false, why
		}
	}
	return true, ""
}

func (p *Policy) permitsName(name string) (bool, string) {
	if p.Bound != nil && !matchAny(p.Bound, name) {
		return false, "it is not bound to this agent"
	}
	if matchAny(p.Deny, name) {
		return false, "it is on the deny list"
	}
	if len(p.Allow) > 0 && !matchAny(p.Allow, name) {
		return false, "it is not on the allow list"
	}
	return true, ""
}

// matchAny reports whether name matches one of patterns. Names are flat: a "/" in a name (a
// remote tool's, say) is an ordinary character, so that "*" matches it too and a deny list
// cannot be slipped past.
func matchAny(patterns []string, name string) bool {
	flat := strings.ReplaceAll(name, "/", "\x00")
	for _, pat := range patterns {
		if pat == name {
			return true
		}
		if ok, err := path.Match(strings.ReplaceAll(pat, "/", "\x00"), flat); err == nil && ok {
			return true
		}
	}
	return false
}

// Validate checks that every pattern is well-formed.
func (p *Policy) Validate() error {
	for _, list := range [][]string{p.Bound, p.Allow, p.Deny} {
		for _, pat := range list {
			if _, err := path.Match(pat, ""); err != nil {
				return fmt.Errorf("quiver: policy: bad pattern %q: %v", pat, err)
			}
		}
	}
	return nil
}

// Effective returns the tools of r that p permits, sorted by name.
func (p *Policy) Effective(r *Registry) []*Tool {
	all := r.Tools()
	out := all[:0]
	for _, t := range all {
		if ok, _ := p.Permits(t); ok {
			out = append(out, t)
		}
	}
	return out
}
