package platform_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// writeConfigDir writes a configuration directory: files by path under it.
func writeConfigDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, name)
		must(t, os.MkdirAll(filepath.Dir(path), 0o700))
		must(t, os.WriteFile(path, []byte(body), 0o600))
	}
	return dir
}

func readConfiguration(t *testing.T, path string) *platform.Configuration {
	t.Helper()
	c, err := platform.ReadConfiguration(context.Background(), path)
	must(t, err)
	return c
}

func newFleetPlatform(t *testing.T, st store.Backend) *platform.Platform {
	t.Helper()
	p, err := platform.New(platform.Config{Store: st, Registry: &quiver.Registry{}})
	must(t, err)
	return p
}

func changes(cs []platform.Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}

var operator = platform.Operator("wsp_local", "")

// Two platforms on one store: what one applies (agents, prompts, an OpenAPI document read
// from a relative path) the other serves once it loads the version, its tools built from the
// stored document with the file gone; applying the same again is unchanged, a dry run writes
// nothing, and a removed agent is no longer found.
func TestApplyConfigurationReachesEveryNode(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_a", Name: "a"}))
	a, b := newFleetPlatform(t, st), newFleetPlatform(t, st)
	dir := writeConfigDir(t, map[string]string{
		"quiver.yaml":           "openapi:\n  - name: svc\n    document: docs/svc.json\ngovernance:\n  - tools: [svc.*]\n    timeout: 1m\n",
		"docs/svc.json":         string(openAPIDoc("listItems")),
		"agents/triage.yaml":    "name: triage\nsystem: Sort it.\ntools: [svc.listItems, summarize]\n",
		"agents/summarize.yaml": "kind: prompt\nname: summarize\nsystem: Summarize.\nexpose_as_tool: true\n",
	})
	files := readConfiguration(t, dir)
	if files.Parts != platform.AllParts {
		t.Fatalf("parts %v, want the file and the agents", files.Parts)
	}

	dry, err := a.ApplyConfiguration(ctx, operator, files, platform.ApplyOptions{DryRun: true})
	must(t, err)
	want := []string{"agent triage added", "prompt summarize added", "openapi svc added", "governance added"}
	if !slices.Equal(changes(dry.Changes), want) || dry.From != 0 || dry.Version != 1 {
		t.Fatalf("dry run: %+v %v, want %v from 0 to 1", dry, changes(dry.Changes), want)
	}
	if v, _, _ := st.FleetConfigVersion(ctx); v != 0 {
		t.Fatalf("a dry run stored version %d", v)
	}

	applied, err := a.ApplyConfiguration(ctx, operator, files, platform.ApplyOptions{AppliedBy: "test"})
	must(t, err)
	must(t, a.LoadConfiguration(ctx))
	if applied.Version != 1 || a.ConfigurationVersion() != 1 {
		t.Fatalf("applied %+v; a serves %d", applied, a.ConfigurationVersion())
	}
	must(t, os.RemoveAll(filepath.Join(dir, "docs"))) // no node needs the file any more

	must(t, b.LoadConfiguration(ctx))
	if _, err := b.Agent(ctx, "triage"); err != nil {
		t.Fatalf("b's agent: %v", err)
	}
	if _, ok := b.Workspace(ctx, "wsp_a").Registry().Lookup("svc.listItems"); !ok {
		t.Fatalf("b's workspace tools %v lack the document's", names(b.Workspace(ctx, "wsp_a").Registry()))
	}

	again, err := a.ApplyConfiguration(ctx, operator, readConfiguration(t, filepath.Join(dir, "agents")), platform.ApplyOptions{})
	must(t, err)
	if !again.Unchanged() || again.Version != 1 {
		t.Fatalf("applying the agents again: %+v, want unchanged at version 1", again)
	}

	// The agents directory alone replaces the agents and keeps the document.
	must(t, os.Remove(filepath.Join(dir, "agents", "triage.yaml")))
	removed, err := a.ApplyConfiguration(ctx, operator, readConfiguration(t, filepath.Join(dir, "agents")), platform.ApplyOptions{})
	must(t, err)
	if !slices.Equal(changes(removed.Changes), []string{"agent triage removed"}) || removed.Version != 2 {
		t.Fatalf("removing triage: %+v %v", removed, changes(removed.Changes))
	}
	must(t, b.LoadConfiguration(ctx))
	if _, err := b.Agent(ctx, "triage"); !errors.Is(err, platform.ErrNoAgent) || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("b's removed agent: %v, want ErrNoAgent naming version 2", err)
	}
	if _, ok := b.Workspace(ctx, "wsp_a").Registry().Lookup("svc.listItems"); !ok {
		t.Fatal("the document's tools went with the agents")
	}
	hist, err := st.FleetConfigHistory(ctx, 10)
	if err != nil || len(hist) != 2 || hist[1].AppliedBy != "test" {
		t.Fatalf("history: %+v %v", hist, err)
	}
}

// A node watching the version serves a change within the interval, without being asked.
func TestWatchConfiguration(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	a, b := newFleetPlatform(t, st), newFleetPlatform(t, st)
	stop := b.WatchConfiguration(ctx, 20*time.Millisecond)
	defer stop()
	dir := writeConfigDir(t, map[string]string{"forecaster.yaml": "name: forecaster\nsystem: Sunny.\n"})
	start := time.Now()
	_, err := a.ApplyConfiguration(ctx, operator, readConfiguration(t, dir), platform.ApplyOptions{})
	must(t, err)
	for b.ConfigurationVersion() != 1 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("b did not serve version 1 within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("served by the other node after %v", time.Since(start))
	if _, ok := b.Catalog().Agent("forecaster"); !ok {
		t.Fatal("b serves version 1 without its agent")
	}
}

// A node started with files: the first applies them; one started with others says what
// differs and serves the fleet's; one without files serves the fleet's. Only the operator
// applies, and a configuration that would not serve is refused whole.
func TestAdoptConfiguration(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	first := writeConfigDir(t, map[string]string{"a.yaml": "name: alpha\nsystem: A.\n"})
	other := writeConfigDir(t, map[string]string{"b.yaml": "name: beta\nsystem: B.\n"})

	// A door that does not apply its files serves them where the database has none.
	n0 := newFleetPlatform(t, st)
	ad, err := n0.ServeConfiguration(ctx, readConfiguration(t, first))
	must(t, err)
	if _, err := n0.Agent(ctx, "alpha"); err != nil || ad.Version != 0 {
		t.Fatalf("files served without storing: %+v %v", ad, err)
	}
	if v, _, _ := st.FleetConfigVersion(ctx); v != 0 {
		t.Fatalf("ServeConfiguration stored version %d", v)
	}

	n1 := newFleetPlatform(t, st)
	ad, err = n1.AdoptConfiguration(ctx, readConfiguration(t, first), "node 1")
	must(t, err)
	if !ad.Applied || ad.Version != 1 || len(ad.Differs) != 0 {
		t.Fatalf("the first node: %+v", ad)
	}
	n2 := newFleetPlatform(t, st)
	ad, err = n2.AdoptConfiguration(ctx, readConfiguration(t, other), "node 2")
	must(t, err)
	if ad.Applied || ad.Version != 1 || !slices.Equal(changes(ad.Differs), []string{"agent alpha removed", "agent beta added"}) {
		t.Fatalf("a node with other files: %+v %v", ad, changes(ad.Differs))
	}
	if _, err := n2.Agent(ctx, "alpha"); err != nil {
		t.Fatalf("the node with other files serves the fleet's agents: %v", err)
	}
	n3 := newFleetPlatform(t, st)
	if ad, err = n3.AdoptConfiguration(ctx, nil, "node 3"); err != nil || ad.Version != 1 || n3.Catalog() == nil {
		t.Fatalf("a node without files: %+v %v", ad, err)
	}

	member := platform.Actor{WorkspaceID: "wsp_local", KeyID: "key_1", Role: store.KeyRoleAdmin}
	_, err = n1.ApplyConfiguration(ctx, member, readConfiguration(t, other), platform.ApplyOptions{})
	refusal(t, "a workspace admin applies", err, platform.Forbidden, "")
	broken := writeConfigDir(t, map[string]string{"c.yaml": "name: gamma\nprompt: missing\n"})
	if _, err := platform.ReadConfiguration(ctx, broken); err == nil {
		t.Fatal("an agent naming a prompt not defined was read")
	}
	clash := writeConfigDir(t, map[string]string{"quiver.yaml": "openapi:\n  - name: svc\n    document: svc.json\n",
		"svc.json": string(openAPIDoc("listItems"))})
	reg := &quiver.Registry{}
	must(t, reg.Register(mustTool(t, "svc.listItems")))
	n4, err := platform.New(platform.Config{Store: st, Registry: reg})
	must(t, err)
	_, err = n4.ApplyConfiguration(ctx, operator, readConfiguration(t, clash), platform.ApplyOptions{})
	refusal(t, "a source's tool named as a built-in tool", err, platform.Invalid, "")
	if v, _, _ := st.FleetConfigVersion(ctx); v != 1 {
		t.Fatalf("version %d after refusals, want 1", v)
	}
}
