package platform_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store/sqlite"
)

// openFileTool is a client tool: a run that calls it pauses until a client gives its result.
func openFileTool(t *testing.T) *quiver.Tool {
	t.Helper()
	open, err := quiver.NewTool(quiver.Spec{Name: "open_file", Description: "Opens a file on the user's machine.", Target: quiver.TargetClient,
		InputSchema: &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"path": {Type: "string"}}}}, nil)
	must(t, err)
	return open
}

// runPlatform is a platform on a new SQLite database at path that runs agents in the
// background: the shared tools, the agents, and the models openModel opens (an error for any
// other spec).
func runPlatform(t *testing.T, path string, tools []*quiver.Tool, agents map[string]*agent.Agent, openModel func(spec string) (model.Model, bool)) (*platform.Platform, *sqlite.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(path)
	must(t, err)
	t.Cleanup(func() { st.Close() })
	shared := &quiver.Registry{}
	must(t, shared.Register(tools...))
	p, err := platform.New(platform.Config{Store: st, Registry: shared, Logger: slog.New(slog.DiscardHandler),
		Catalog: &agent.Catalog{Agents: agents},
		OpenModel: func(spec string) (model.Model, error) {
			if m, ok := openModel(spec); ok {
				return m, nil
			}
			return nil, fmt.Errorf("no model %s", spec)
		}})
	must(t, err)
	must(t, p.StartJobs(ctx, func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) { return jobs.StartSQLite(ctx, path, c) }))
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return p, st
}
