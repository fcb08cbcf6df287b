package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/store/vars"
)

// openStore returns a store held in memory, for the tests that are not about persistence.
func openStore(t *testing.T) *memstore.Store {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	return st
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// storeClientTool stores an enabled client tool called name in the workspace.
func storeClientTool(t *testing.T, st store.Backend, ws, name string) {
	t.Helper()
	ctx := context.Background()
	in := &store.Schema{WorkspaceID: ws, Content: json.RawMessage(`{"type":"object","description":"Opens a file.","properties":{"path":{"type":"string"}}}`)}
	out := &store.Schema{WorkspaceID: ws, Content: json.RawMessage(`true`)}
	must(t, st.CreateSchema(ctx, in))
	must(t, st.CreateSchema(ctx, out))
	must(t, st.CreateTool(ctx, &store.Tool{WorkspaceID: ws, Name: name, Target: store.TargetClient,
		InputSchemaID: in.ID, OutputSchemaID: out.ID, Enabled: true}))
}

func names(reg *quiver.Registry) []string {
	var out []string
	for _, t := range reg.Tools() {
		out = append(out, t.Name())
	}
	return out
}

// Each workspace calls its stored tools over the shared ones, and no other workspace's; a
// change made through the platform is seen at the next use, with a new generation for those
// who tell clients.
func TestWorkspacesCallTheirOwnStoredTools(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	for _, ws := range []string{"wsp_a", "wsp_b"} {
		must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: ws, Name: ws}))
	}
	shared := &quiver.Registry{}
	must(t, shared.Register(quiver.Func("echo", "Echoes its text.", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	})))
	p, err := platform.New(platform.Config{Store: st, Registry: shared})
	must(t, err)

	a := p.Workspace(ctx, "wsp_a")
	if got := names(a.Registry()); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("a workspace without stored tools calls %v, want the shared echo", got)
	}
	before := a.Generation()
	storeClientTool(t, st, "wsp_a", "open_file")
	p.ToolsChanged(ctx, "wsp_a")
	if got := names(p.Workspace(ctx, "wsp_a").Registry()); !slices.Equal(got, []string{"echo", "open_file"}) {
		t.Errorf("after a stored tool: %v, want echo and open_file", got)
	}
	if a.Generation() == before {
		t.Error("the generation did not change with the workspace's tools")
	}
	if p.Workspace(ctx, "wsp_a") != a {
		t.Error("a workspace's tools are a new registry at each use")
	}
	if got := names(p.Workspace(ctx, "wsp_b").Registry()); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("another workspace calls %v: it sees wsp_a's stored tool", got)
	}
	// A run on a workspace's thread gets that workspace's tools.
	reg, err := p.Runner().Registries(ctx, "wsp_a")
	must(t, err)
	if reg != a.Registry() {
		t.Error("the runner does not run with the workspace's registry")
	}
}

// Agents are named from the catalog, and an unknown name says which there are.
func TestAgentLookup(t *testing.T) {
	st := openStore(t)
	helper := &agent.Agent{Name: "helper", Prompt: &agent.Prompt{Name: "helper"}}
	cases := []struct {
		name    string
		catalog *agent.Catalog
		ask     string
		want    string // in the error; "" for none
	}{
		{"an agent of the catalog", &agent.Catalog{Agents: map[string]*agent.Agent{"helper": helper}}, "helper", ""},
		{"an unknown agent", &agent.Catalog{Agents: map[string]*agent.Agent{"helper": helper}}, "nobody", `no agent "nobody" in ./agents (agents: [helper])`},
		{"no catalog", nil, "helper", `no agent "helper": this server has no agents`},
		{"a prompt is no agent", &agent.Catalog{Prompts: map[string]*agent.Prompt{"critic": {Name: "critic", ExposeAsTool: true}}}, "critic", `no agent "critic"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := platform.New(platform.Config{Store: st, Catalog: c.catalog, CatalogDir: "./agents"})
			must(t, err)
			a, err := p.Agent(context.Background(), c.ask)
			switch {
			case c.want == "" && (err != nil || a != helper):
				t.Errorf("Agent(%q) = %v, %v; want helper", c.ask, a, err)
			case c.want != "" && (!errors.Is(err, platform.ErrNoAgent) || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Agent(%q): %v; want ErrNoAgent saying %q", c.ask, err, c.want)
			}
		})
	}
}

// A thread for an agent is refused, and nothing stored, when a variable the agent requires has
// no value; with the value set, it is created.
func TestCreateThreadChecksRequiredVariables(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_a", Name: "a"}))
	key, _, err := secret.GenerateKey()
	must(t, err)
	resolver := vars.New(st, secret.NewKeyring(key))
	p, err := platform.New(platform.Config{Store: st, Resolver: resolver})
	must(t, err)
	ag := &agent.Agent{Name: "booker", Prompt: &agent.Prompt{Name: "booker",
		Variables: []quiver.Variable{{Name: "REGION", Type: quiver.VarText, Required: true}}}}

	th := &store.Thread{WorkspaceID: "wsp_a", AgentID: "booker"}
	var missing *quiver.MissingVariablesError
	if err := p.CreateThread(ctx, th, ag); !errors.As(err, &missing) || missing.Missing[0].Name != "REGION" {
		t.Fatalf("CreateThread without REGION: %v, want it missing", err)
	}
	if threads, _, err := st.Threads(ctx, "wsp_a", store.ThreadFilter{}); err != nil || len(threads) != 0 {
		t.Fatalf("a refused thread was stored: %v %v", threads, err)
	}
	must(t, resolver.Set(ctx, "wsp_a", quiver.LayerInstance, "", vars.Value{Name: "REGION", Value: "eu"}))
	must(t, p.CreateThread(ctx, th, ag))
	if th.ID == "" {
		t.Error("the created thread has no id")
	}
	// A thread of no agent needs no variables.
	must(t, p.CreateThread(ctx, &store.Thread{WorkspaceID: "wsp_a"}, nil))
}

// The background runs start once, with the platform's runner.
func TestStartJobsOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "q.db")
	st, err := sqlite.Open(path)
	must(t, err)
	t.Cleanup(func() { st.Close() })
	p, err := platform.New(platform.Config{Store: st, Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	if p.Jobs() != nil {
		t.Fatal("jobs before StartJobs")
	}
	var got jobs.Config
	start := func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) {
		got = c
		return jobs.StartSQLite(ctx, path, c)
	}
	must(t, p.StartJobs(ctx, start))
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	if got.Runner != p.Runner() || got.Agents == nil || got.Entities == nil {
		t.Errorf("the jobs were started with %+v, want the platform's runner, agents and entities", got)
	}
	if p.Jobs() == nil {
		t.Error("no jobs after StartJobs")
	}
	if err := p.StartJobs(ctx, start); err == nil {
		t.Error("the background runs started twice")
	}
}
