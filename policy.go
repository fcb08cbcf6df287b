package quiver

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Policy decides which tools an agent may see and call. Its effective set is the tools
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
	// Parents are the policies this one is restricted by: a tool must be permitted by
	// every one of them too. Within adds to it; it is kept when the policy is stored.
	Parents []Policy `json:"parents,omitempty"`
}

// Within returns p restricted by parent as well: a tool is permitted only if p and parent
// (with parent's own parents) permit it, so a sub-agent never has more than the agent that
// spawned it, however deep the chain.
func (p Policy) Within(parent Policy) Policy {
	p.Parents = append(slices.Clone(p.Parents), parent)
	return p
}

// Permits reports whether t is in p's effective set, and if not, why.
func (p *Policy) Permits(t *Tool) (bool, string) {
	if t.spec.Disabled {
		return false, "it is disabled"
	}
	if t.denied != "" {
		return false, t.denied
	}
	return p.permits(t.spec.Name)
}

func (p *Policy) permits(name string) (bool, string) {
	if ok, why := p.permitsName(name); !ok {
		return false, why
	}
	for i := range p.Parents {
		if ok, why := p.Parents[i].permits(name); !ok {
			return false, "the parent agent's policy does not permit it (" + why + ")"
		}
	}
	return true, ""
}

func (p *Policy) permitsName(name string) (bool, string) {
	// A malformed pattern fails closed: it denies when listed in Deny and permits nothing
	// when listed in Bound or Allow.
	if p.Bound != nil && !matchAny(p.Bound, name, false) {
		return false, "it is not bound to this agent"
	}
	if matchAny(p.Deny, name, true) {
		return false, "it is on the deny list"
	}
	if len(p.Allow) > 0 && !matchAny(p.Allow, name, false) {
		return false, "it is not on the allow list"
	}
	return true, ""
}

// matchAny reports whether name matches one of patterns. Names are flat: a "/" in a name (a
// remote tool's, say) is an ordinary character, so that "*" matches it too and a deny list
// cannot be slipped past.
func matchAny(patterns []string, name string, onBadPattern bool) bool {
	flat := strings.ReplaceAll(name, "/", "\x00")
	for _, pat := range patterns {
		if pat == name {
			return true
		}
		ok, err := path.Match(strings.ReplaceAll(pat, "/", "\x00"), flat)
		if err != nil {
			ok = onBadPattern
		}
		if ok {
			return true
		}
	}
	return false
}

// Validate checks that every pattern, parents' included, is well-formed. A Dispatcher with an
// invalid policy refuses every call.
func (p *Policy) Validate() error {
	for _, list := range [][]string{p.Bound, p.Allow, p.Deny} {
		for _, pat := range list {
			if _, err := path.Match(pat, ""); err != nil {
				return fmt.Errorf("quiver: policy: bad pattern %q: %v", pat, err)
			}
		}
	}
	for i := range p.Parents {
		if err := p.Parents[i].Validate(); err != nil {
			return err
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
