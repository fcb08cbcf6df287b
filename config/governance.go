package config

import (
	"fmt"

	"github.com/quiverhq/quiver"
)

// Rules returns the operator's governance rules the file sets, in the order they apply: the
// governance block's, then each source's (OpenAPI documents, remote MCP servers, A2A agents,
// in the file's order), a source's requires_confirmation first, then its own governance list
// with the source filled in. A source's rule that names another source is an error, and so is
// any rule quiver.NewGovernance refuses; errors name the entry and the rule (from 1).
func (f *File) Rules() ([]quiver.Rule, error) {
	out := append([]quiver.Rule(nil), f.Governance...)
	if _, err := quiver.NewGovernance(out, nil); err != nil {
		return nil, err
	}
	given := providerNames{}
	for i, r := range out {
		_ = given.add(r, fmt.Sprintf("governance rule %d", i+1)) // NewGovernance refused a collision among these
	}
	type scoped struct {
		where, source string
		confirm       bool
		rules         []quiver.Rule
	}
	var sources []scoped
	for i, c := range f.OpenAPI {
		sources = append(sources, scoped{fmt.Sprintf("openapi[%d] (%s)", i, c.Name), quiver.SourceOpenAPI + ":" + c.Name, c.RequiresConfirmation, c.Governance})
	}
	for i, c := range f.MCP.Servers {
		sources = append(sources, scoped{fmt.Sprintf("mcp.servers[%d] (%s)", i, c.Name), quiver.SourceMCP + ":" + c.Name, c.RequiresConfirmation, c.Governance})
	}
	for i, c := range f.A2A.Agents {
		// An A2A agent's requires_confirmation is its tool's own (a2a.Remote): no rule needed.
		sources = append(sources, scoped{fmt.Sprintf("a2a.agents[%d] (%s)", i, c.Name), quiver.SourceA2A + ":" + c.Name, false, c.Governance})
	}
	for _, s := range sources {
		if s.confirm {
			out = append(out, quiver.Rule{Source: s.source, RequiresConfirmation: quiver.Hint(true)})
		}
		for j, r := range s.rules {
			switch r.Source {
			case "":
				r.Source = s.source
			case s.source:
			default:
				return nil, fmt.Errorf("%s: governance rule %d: source %q is another source's; a source's rules govern its own tools (%s)", s.where, j+1, r.Source, s.source)
			}
			if err := r.Check(); err != nil {
				return nil, fmt.Errorf("%s: governance rule %d: %w", s.where, j+1, err)
			}
			if err := given.add(r, fmt.Sprintf("%s: governance rule %d", s.where, j+1)); err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// providerNames are the provider names the file's rules give, each with the tool it is given
// to and where: two tools given one name, by rules of any entries, are an error naming both.
type providerNames map[string][2]string // provider name -> {tool, where}

func (p providerNames) add(r quiver.Rule, where string) error {
	if r.ProviderName == "" {
		return nil
	}
	if first, ok := p[r.ProviderName]; ok && first[0] != r.Tools[0] {
		return fmt.Errorf("%s: provider_name %q is given to %q by %s already: give each tool its own", where, r.ProviderName, first[0], first[1])
	}
	if _, ok := p[r.ProviderName]; !ok {
		p[r.ProviderName] = [2]string{r.Tools[0], where}
	}
	return nil
}
