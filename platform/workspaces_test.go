package platform_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

// A workspace whose stored tools cannot be read (its store failing, as on a node started while
// its database restarts) gives the runner an error, which a background run is tried again on,
// rather than the shared tools alone, with which a prompt naming a stored tool failed for good
// as "names unknown tools". Once the store answers, the stored tools are there.
func TestUnreadStoredToolsAreAnErrorForRuns(t *testing.T) {
	ctx := context.Background()
	st, path := openSQLiteMember(t)
	p, err := platform.New(platform.Config{Store: st, Registry: &quiver.Registry{}, Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	member := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", KeyID: "key_m", Role: store.KeyRoleMember}
	_, err = p.CreateTool(ctx, member, platform.NewTool{Name: "pick_color", Description: "Asks the user for a color.",
		Target: store.TargetClient, InputSchema: []byte(`{"type":"object"}`)})
	must(t, err)
	// A second node of the database: it has not read the workspace's tools yet.
	p, err = platform.New(platform.Config{Store: st, Registry: &quiver.Registry{}, Logger: slog.New(slog.DiscardHandler)})
	must(t, err)

	// Another process of the same file breaks the store under this one: its tools table goes.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	must(t, err)
	t.Cleanup(func() { db.Close() })
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	exec(`ALTER TABLE tools RENAME TO tools_away`)
	reg, err := p.Runner().Registries(ctx, "wsp_a")
	if err == nil || reg != nil || !strings.Contains(err.Error(), "wsp_a") {
		t.Fatalf("the tools of a workspace its store cannot read: %v, %v; want an error naming it", reg, err)
	}
	exec(`ALTER TABLE tools_away RENAME TO tools`)
	reg, err = p.Runner().Registries(ctx, "wsp_a")
	if err != nil || reg == nil {
		t.Fatalf("the tools once the store answers: %v, %v", reg, err)
	}
	if _, ok := reg.Lookup("pick_color"); !ok {
		t.Error("the stored tool is not in the workspace's tools once the store answers")
	}
}

// openSQLiteMember opens a SQLite store in the test's directory (closed by the test), with
// workspace wsp_a and its member usr_m, and returns it with its file's path.
func openSQLiteMember(t *testing.T) (*sqlite.Store, string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	st, err := sqlite.Open(path)
	must(t, err)
	t.Cleanup(func() { st.Close() })
	must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_a", Name: "a"}))
	must(t, st.CreateUser(ctx, &store.User{ID: "usr_m", Email: "m@example.com"}))
	must(t, st.AddMember(ctx, &store.Membership{WorkspaceID: "wsp_a", UserID: "usr_m", Role: store.MemberRoleMember}))
	return st, path
}

// A change to one stored tool builds that tool again and reuses the others as they were built:
// building every tool on every change made the thousandth tool of a workspace take a second to
// create. A changed record, and a new default version of the function a tool runs, each build
// the tool again, and the tool then runs what changed.
func TestReloadBuildsOnlyChangedTools(t *testing.T) {
	ctx := context.Background()
	st, _ := openSQLiteMember(t)
	p, err := platform.New(platform.Config{Store: st, Registry: &quiver.Registry{}, Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	member := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", KeyID: "key_m", Role: store.KeyRoleMember}
	fn, err := p.CreateFunction(ctx, member, "answer")
	must(t, err)
	v1, err := p.CreateFunctionVersion(ctx, member, fn.ID, platform.NewVersion{Code: "export default () => 1"})
	must(t, err)
	_, err = p.SetDefaultVersion(ctx, member, fn.ID, v1.ID)
	must(t, err)
	_, err = p.CreateTool(ctx, member, platform.NewTool{Name: "answer", Description: "Answers.", Target: store.TargetServer,
		FunctionID: fn.ID, InputSchema: []byte(`{"type":"object"}`)})
	must(t, err)
	pick, err := p.CreateTool(ctx, member, platform.NewTool{Name: "pick_color", Description: "Asks the user for a color.",
		Target: store.TargetClient, InputSchema: []byte(`{"type":"object"}`)})
	must(t, err)
	reg := p.Workspace(ctx, "wsp_a").Registry()
	lookup := func(name string) *quiver.Tool {
		t.Helper()
		tool, ok := reg.Lookup(name)
		if !ok {
			t.Fatalf("no tool %s in the workspace", name)
		}
		return tool
	}
	call := func() string {
		t.Helper()
		r, err := (&quiver.Dispatcher{Registry: reg}).Dispatch(ctx, quiver.Call{ID: "call_1", Name: "answer", Args: []byte(`{}`)})
		must(t, err)
		return string(r.Value)
	}
	answer, color := lookup("answer"), lookup("pick_color")
	if got := call(); got != "1" {
		t.Fatalf("answer: %s, want 1", got)
	}

	_, err = p.CreateTool(ctx, member, platform.NewTool{Name: "pick_size", Description: "Asks the user for a size.", Target: store.TargetClient, InputSchema: []byte(`{"type":"object"}`)})
	must(t, err)
	lookup("pick_size")
	if lookup("answer") != answer || lookup("pick_color") != color {
		t.Error("creating a tool built the unchanged tools again")
	}

	desc := "Asks the user for a colour."
	_, err = p.UpdateTool(ctx, member, pick.ID, platform.ToolChange{Description: platform.Optional[string]{Set: true, Value: desc}})
	must(t, err)
	if got := lookup("pick_color"); got == color || got.Description() != desc {
		t.Errorf("the changed tool: the same build (%v) or its old description %q", got == color, got.Description())
	}
	if lookup("answer") != answer {
		t.Error("changing another tool built this one again")
	}

	v2, err := p.CreateFunctionVersion(ctx, member, fn.ID, platform.NewVersion{Code: "export default () => 2"})
	must(t, err)
	_, err = p.SetDefaultVersion(ctx, member, fn.ID, v2.ID)
	must(t, err)
	if got := call(); got != "2" {
		t.Errorf("answer after its function's new default version: %s, want 2", got)
	}
}

// A tool another node made a moment ago is one a run's prompt may name: a node's copy of a
// workspace's tools follows the store within a second, so before a run fails for good on a
// tool its prompt names that the copy lacks, the store is asked again. Node B read the
// workspace's tools, node A then makes one, and B's run of a prompt naming it finds it.
func TestPromptFindsAToolAnotherNodeJustMade(t *testing.T) {
	ctx := context.Background()
	st, _ := openSQLiteMember(t)
	a, err := platform.New(platform.Config{Store: st, Registry: &quiver.Registry{}, Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	b, err := platform.New(platform.Config{Store: st, Registry: &quiver.Registry{}, Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	if _, err := b.Runner().Registries(ctx, "wsp_a"); err != nil {
		t.Fatal(err)
	}
	member := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", KeyID: "key_m", Role: store.KeyRoleMember}
	_, err = a.CreateTool(ctx, member, platform.NewTool{Name: "pick_color", Description: "Asks the user for a color.",
		Target: store.TargetClient, InputSchema: []byte(`{"type":"object"}`)})
	must(t, err)
	th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_a", UserID: "usr_m"})
	must(t, err)
	picker := &agent.Agent{Name: "picker", Prompt: &agent.Prompt{Name: "picker", Tools: []string{"pick_color"}}}
	if _, err := b.Runner().Waiting(ctx, th, picker); err != nil {
		t.Fatalf("node B, on a prompt naming the tool node A just made: %v", err)
	}
	unknown := &agent.Agent{Name: "lost", Prompt: &agent.Prompt{Name: "lost", Tools: []string{"no_such_tool"}}}
	if _, err := b.Runner().Waiting(ctx, th, unknown); !errors.Is(err, agent.ErrDefinition) {
		t.Errorf("a prompt naming a tool no node made: %v, want agent.ErrDefinition", err)
	}
}
