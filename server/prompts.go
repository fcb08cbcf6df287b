package server

import (
	"cmp"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/mcp"
)

// catalogPrompts are the catalog's prompts that other prompts may call as tools (expose_as_tool:
// true), sorted by name, as every workspace's MCP server serves them: each with its
// definition's system text (never resolved: no variable's value leaves the server) and its
// argument schema.
func catalogPrompts(c *agent.Catalog) []mcp.Prompt {
	if c == nil {
		return nil
	}
	var out []mcp.Prompt
	for name, p := range c.Prompts {
		if p == nil || !p.ExposeAsTool {
			continue
		}
		out = append(out, mcp.Prompt{Name: cmp.Or(p.Name, name), Description: p.Description, System: p.System, Args: p.Args})
	}
	slices.SortFunc(out, func(a, b mcp.Prompt) int { return strings.Compare(a.Name, b.Name) })
	return out
}
