package platform_test

import (
	"context"
	"testing"

	"github.com/quiverhq/quiver/internal/schemastat"
	"github.com/quiverhq/quiver/platform"
)

// TestFleetBuildsADocumentOnce: a node whose files become the fleet's first version, and an
// operator's apply that adds a document, build the document's tools once: the check before
// storing the version builds them, and serving it takes them (a large document's cost seconds,
// which a node's start paid twice: GitHub Enterprise Server's 964 tools).
func TestFleetBuildsADocumentOnce(t *testing.T) {
	ctx := context.Background()
	dir := writeConfigDir(t, map[string]string{
		"quiver.yaml":   "openapi:\n  - name: svc\n    document: docs/svc.json\n",
		"docs/svc.json": string(openAPIDoc("listItems")),
	})
	other := writeConfigDir(t, map[string]string{
		"quiver.yaml":   "openapi:\n  - name: inv\n    document: docs/inv.json\n",
		"docs/inv.json": string(openAPIDoc("countItems")),
	})
	for _, tc := range []struct {
		name  string
		serve func(p *platform.Platform) error
		tool  string
	}{
		{"a node's files at its start", func(p *platform.Platform) error {
			_, err := p.AdoptConfiguration(ctx, readConfiguration(t, dir), "node 1")
			return err
		}, "svc.listItems"},
		{"an operator's apply", func(p *platform.Platform) error {
			if _, err := p.ApplyConfiguration(ctx, operator, readConfiguration(t, other), platform.ApplyOptions{}); err != nil {
				return err
			}
			return p.LoadConfiguration(ctx)
		}, "inv.countItems"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFleetPlatform(t, openStore(t))
			before := schemastat.Compilations.Load()
			must(t, tc.serve(p))
			// The operation's tool compiles one schema (its input; the document gives no output).
			if n := schemastat.Compilations.Load() - before; n != 1 {
				t.Errorf("%d schemas compiled, want 1: the tools were built more than once", n)
			}
			if _, ok := p.Workspace(ctx, "wsp_a").Registry().Lookup(tc.tool); !ok {
				t.Errorf("%s is not served", tc.tool)
			}
		})
	}
}
