package platform

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/store"
)

// Change is one difference between two fleet configurations: what quiver apply's dry run lists,
// and what a node whose files differ from the fleet's names.
type Change struct {
	// Op is "added", "changed" or "removed".
	Op string
	// Kind is what changed: "agent", "prompt", "openapi" (a document), "mcp server",
	// "a2a agent", or a block of the configuration file ("governance").
	Kind string
	// Name is the agent's, prompt's or source's name; "" for a block.
	Name string
}

// The ops of a Change.
const (
	Added   = "added"
	Changed = "changed"
	Removed = "removed"
)

func (c Change) String() string {
	if c.Name == "" {
		return c.Kind + " " + c.Op
	}
	return c.Kind + " " + c.Name + " " + c.Op
}

// Diff lists what differs from one configuration to the next (nil from: none before), in the
// order agents, prompts, OpenAPI documents, MCP servers, A2A agents, other blocks; by name
// within each.
func Diff(from, to *Configuration) []Change {
	if from == nil {
		from = &Configuration{}
	}
	var out []Change
	out = append(out, diffNamed("agent", from.definitions("agent"), to.definitions("agent"))...)
	out = append(out, diffNamed("prompt", from.definitions("prompt"), to.definitions("prompt"))...)
	out = append(out, diffNamed("openapi", from.openAPIEntries(), to.openAPIEntries())...)
	out = append(out, diffNamed("mcp server", from.fileEntries(mcpEntries), to.fileEntries(mcpEntries))...)
	out = append(out, diffNamed("a2a agent", from.fileEntries(a2aEntries), to.fileEntries(a2aEntries))...)
	for _, c := range diffNamed("", from.blocks(), to.blocks()) {
		out = append(out, Change{Op: c.Op, Kind: c.Name})
	}
	return out
}

// diffNamed compares two sets of things of one kind, each by name as a comparable text.
func diffNamed(kind string, from, to map[string]string) []Change {
	var out []Change
	for name, v := range to {
		switch was, ok := from[name]; {
		case !ok:
			out = append(out, Change{Op: Added, Kind: kind, Name: name})
		case was != v:
			out = append(out, Change{Op: Changed, Kind: kind, Name: name})
		}
	}
	for name := range from {
		if _, ok := to[name]; !ok {
			out = append(out, Change{Op: Removed, Kind: kind, Name: name})
		}
	}
	slices.SortFunc(out, func(a, b Change) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

func (c *Configuration) definitions(kind string) map[string]string {
	out := map[string]string{}
	for _, d := range c.Definitions {
		if d.Kind == kind {
			out[d.Name] = string(d.JSON)
		}
	}
	return out
}

// openAPIEntries are the OpenAPI entries by name, each as its YAML and its document's digest:
// a document read again with other content is a change though its entry is not.
func (c *Configuration) openAPIEntries() map[string]string {
	out := map[string]string{}
	if c.File == nil {
		return out
	}
	for _, e := range c.File.OpenAPI {
		y, _ := config.Entry(e)
		out[e.Name] = string(y) + store.FleetDigest(c.Documents[e.Name])
	}
	return out
}

func mcpEntries(f *config.File) map[string]any {
	out := map[string]any{}
	for _, s := range f.MCP.Servers {
		out[s.Name] = s
	}
	return out
}

func a2aEntries(f *config.File) map[string]any {
	out := map[string]any{}
	for _, a := range f.A2A.Agents {
		out[a.Name] = a
	}
	return out
}

// fileEntries are the entries of the file that of picks, by name, each as its YAML.
func (c *Configuration) fileEntries(of func(*config.File) map[string]any) map[string]string {
	out := map[string]string{}
	if c.File == nil {
		return out
	}
	for name, e := range of(c.File) {
		y, _ := config.Entry(e)
		out[name] = string(y)
	}
	return out
}

// blocks are the file's blocks other than the lists of sources (governance, and any a later
// version adds), each as its YAML.
func (c *Configuration) blocks() map[string]string {
	out := map[string]string{}
	if c.File == nil {
		return out
	}
	shared, err := c.File.Shared()
	if err != nil || len(shared) == 0 {
		return out
	}
	var doc map[string]any
	if err := yaml.Unmarshal(shared, &doc); err != nil {
		return out
	}
	for key, v := range doc {
		switch key {
		case "mcp", "openapi", "a2a":
			continue
		}
		y, _ := yaml.Marshal(v)
		out[key] = string(y)
	}
	return out
}

// Describe says what c holds, for quiver apply: "2 agents, 1 prompt, 1 OpenAPI document".
func (c *Configuration) Describe() string {
	count := func(n int, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %ss", n, one)
	}
	var parts []string
	if c.Parts&PartAgents != 0 {
		parts = append(parts, count(len(c.definitionNames("agent")), "agent"), count(len(c.definitionNames("prompt")), "prompt"))
	}
	if c.Parts&PartFile != 0 && c.File != nil {
		parts = append(parts, count(len(c.File.OpenAPI), "OpenAPI document"), count(len(c.File.MCP.Servers), "MCP server"),
			count(len(c.File.A2A.Agents), "A2A agent"), count(len(c.File.Governance), "governance rule"))
		if e := c.File.Entitlements; e != nil {
			parts = append(parts, count(len(e.Rules), "entitlement rule"), count(len(e.Toolsets), "toolset"))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	out := parts[0]
	for _, p := range parts[1:] {
		out += ", " + p
	}
	return out
}
