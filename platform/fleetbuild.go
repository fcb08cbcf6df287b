package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/a2a"
	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/openapi"
	"github.com/quiverhq/quiver/store"
)

// The tools a fleet's configuration gives every workspace are built here, the same way for
// every command: quiver serve and mcp stdio (each version they serve), quiver run, call and
// tools (the version or files they read), quiver apply (to check a version before storing it).
// A source's tools are built again only when its entry or document changed: a new version that
// changes an agent leaves every tool as it was, and runs under way call the same tools.

// builtSource is the tools of one OpenAPI document or A2A agent, and what they were built from.
type builtSource struct {
	from  string // the entry's YAML (and the document's digest): the same, the same tools
	tools []*quiver.Tool
}

// SharedTools are the tools a configuration's OpenAPI documents and A2A agents make (remote
// MCP servers' are imported apart, as their servers connect).
type SharedTools struct {
	Tools []*quiver.Tool
	// Skipped are the operations of the documents that make no tool, and why.
	Skipped []SkippedOperation
	// Broken says which sources make no tools, and why; the others' are served.
	Broken error
	built  map[string]builtSource
}

// SkippedOperation is an operation of an OpenAPI document that makes no tool, and why.
type SkippedOperation struct {
	Source string // the document's name in the configuration
	openapi.Skipped
}

// BuildSharedTools builds the tools of c's OpenAPI documents and A2A agents. A tool named as
// one of base's (the built-in tools) is refused, naming its source. An A2A agent whose card
// cannot be read still gets its tool, which reads the card at each call until it can (a
// partner that is down does not keep the rest from serving); logger hears of it.
func BuildSharedTools(ctx context.Context, c *Configuration, base *quiver.Registry, logger *slog.Logger) *SharedTools {
	return buildShared(ctx, c, base, nil, logger)
}

func buildShared(ctx context.Context, c *Configuration, base *quiver.Registry, prev map[string]builtSource, logger *slog.Logger) *SharedTools {
	out := &SharedTools{built: map[string]builtSource{}}
	if c == nil || c.File == nil {
		return out
	}
	if logger == nil {
		logger = slog.Default()
	}
	taken := map[string]string{} // tool name: its source
	var errs []error
	add := func(source string, b builtSource) {
		for _, t := range b.tools {
			if _, builtIn := base.Lookup(t.Name()); builtIn {
				errs = append(errs, fmt.Errorf("%s: tool %s: a built-in tool has the name", source, t.Name()))
				return
			}
			if other, dup := taken[t.Name()]; dup {
				errs = append(errs, fmt.Errorf("%s: tool %s: %s has a tool of that name", source, t.Name(), other))
				return
			}
		}
		for _, t := range b.tools {
			taken[t.Name()] = source
		}
		out.Tools = append(out.Tools, b.tools...)
		out.built[source] = b
	}
	for _, e := range c.File.OpenAPI {
		source := "openapi " + e.Name
		b, skipped, err := openAPISource(ctx, e, c.Documents[e.Name], prev[source])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", source, err))
			continue
		}
		for _, sk := range skipped {
			out.Skipped = append(out.Skipped, SkippedOperation{Source: e.Name, Skipped: sk})
		}
		add(source, b)
	}
	remotes, err := c.File.A2ARemotes()
	if err != nil {
		errs = append(errs, err)
	}
	for i, r := range remotes {
		source := "a2a " + r.Name
		b, err := a2aSource(ctx, c.File.A2A.Agents[i], r, prev[source], logger)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", source, err))
			continue
		}
		add(source, b)
	}
	out.Broken = errors.Join(errs...)
	return out
}

// openAPISource builds an OpenAPI document's tools, unless prev was built from the same.
func openAPISource(ctx context.Context, e config.OpenAPI, doc []byte, prev builtSource) (builtSource, []openapi.Skipped, error) {
	entry, err := config.Entry(e)
	if err != nil {
		return builtSource{}, nil, err
	}
	from := string(entry) + store.FleetDigest(doc)
	if prev.from == from && prev.tools != nil {
		return prev, nil, nil
	}
	if doc == nil {
		return builtSource{}, nil, errors.New("its document is missing")
	}
	// The configuration's documents are the operator's: their tools reach any address
	// (Config.OpenAPIInternal bounds only the documents workspaces import).
	im, err := openapi.Tools(ctx, e.Source(doc))
	if err != nil {
		return builtSource{}, nil, err
	}
	return builtSource{from: from, tools: im.Tools}, im.Skipped, nil
}

// a2aSource builds an A2A agent's tool, unless prev was built from the same entry.
func a2aSource(ctx context.Context, e config.A2AAgent, r a2a.Remote, prev builtSource, logger *slog.Logger) (builtSource, error) {
	entry, err := config.Entry(e)
	if err != nil {
		return builtSource{}, err
	}
	if prev.from == string(entry) && prev.tools != nil {
		return prev, nil
	}
	t, err := a2a.Tool(ctx, r)
	if err != nil {
		logger.WarnContext(ctx, "platform: an A2A agent's card cannot be read; its tool tries again at each call", "a2a_agent", r.Name, "err", err)
		if t, err = a2a.Lazy(r, err); err != nil {
			return builtSource{}, err
		}
	}
	return builtSource{from: string(entry), tools: []*quiver.Tool{t}}, nil
}

// checkConfiguration checks that c would serve: its agents load, its sources make tools
// (without reaching any A2A agent or MCP server: their entries are checked), its rules hold.
// The OpenAPI documents' tools it builds (reusing prev's for the sources that did not change)
// are returned, so that serving c does not build them again: a large document's take seconds.
func checkConfiguration(ctx context.Context, c *Configuration, base *quiver.Registry, where string, prev map[string]builtSource) (
	map[string]builtSource, error) {
	if _, err := catalogOf(c, where); err != nil {
		return nil, err
	}
	if c.File == nil {
		return nil, nil
	}
	if _, err := c.File.Remotes(); err != nil {
		return nil, err
	}
	if _, err := c.File.Rules(); err != nil {
		return nil, err
	}
	offline := *c
	f := *c.File
	f.A2A.Agents = nil // checked by A2ARemotes; their cards are each node's to read
	offline.File = &f
	if _, err := c.File.A2ARemotes(); err != nil {
		return nil, err
	}
	built := buildShared(ctx, &offline, base, prev, nil)
	return built.built, built.Broken
}
