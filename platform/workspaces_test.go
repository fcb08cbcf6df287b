package platform_test

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
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
