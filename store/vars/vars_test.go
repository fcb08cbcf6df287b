package vars_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/store/vars"
)

// fullStore is what both backends are.
type fullStore interface {
	store.Store
	store.Variables
}

const ws = "wsp_vars"

// backend opens a fresh store of one kind.
type backend struct {
	name string
	open func(t *testing.T) fullStore
}

// backends are SQLite always, and PostgreSQL when QUIVER_TEST_POSTGRES names a server (as in
// store/postgres's tests; CI sets it).
func backends(t *testing.T) []backend {
	out := []backend{{"sqlite", func(t *testing.T) fullStore { s, _ := openSQLite(t); return s }}}
	if dsn := os.Getenv("QUIVER_TEST_POSTGRES"); dsn != "" {
		out = append(out, backend{"postgres", func(t *testing.T) fullStore { return openPostgres(t, dsn) }})
	} else if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but QUIVER_TEST_POSTGRES is not set")
	}
	return out
}

func openSQLite(t *testing.T) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "quiver.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func openPostgres(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	ctx := context.Background()
	schema := "quiver_vars_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	s, err := postgres.Open(ctx, dsn, postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// each runs fn against every backend.
func each(t *testing.T, fn func(t *testing.T, s fullStore)) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) { fn(t, b.open(t)) })
	}
}

func newKeyring(t *testing.T) *secret.Keyring {
	t.Helper()
	k, _, err := secret.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return secret.NewKeyring(k)
}

var ctx = context.Background()

// tree is root -> child -> grand, plus sibling under root.
type tree struct{ root, child, grand, sibling *store.Thread }

func newTree(t *testing.T, s store.Store) tree {
	t.Helper()
	mk := func(parent *store.Thread) *store.Thread {
		th := &store.Thread{WorkspaceID: ws, AgentID: "agent_1", UserID: "usr_1"}
		if parent != nil {
			th.ParentID = parent.ID
		}
		if err := s.CreateThread(ctx, th); err != nil {
			t.Fatal(err)
		}
		return th
	}
	var tr tree
	tr.root = mk(nil)
	tr.child = mk(tr.root)
	tr.grand = mk(tr.child)
	tr.sibling = mk(tr.root)
	return tr
}

func set(t *testing.T, r *vars.Resolver, layer quiver.Layer, owner string, values ...vars.Value) {
	t.Helper()
	if err := r.Set(ctx, ws, layer, owner, values...); err != nil {
		t.Fatalf("Set %s %s: %v", layer, owner, err)
	}
}

func scopeOf(th *store.Thread) quiver.Scope {
	return quiver.Scope{WorkspaceID: th.WorkspaceID, ThreadID: th.ID, AgentID: th.AgentID, UserID: th.UserID}
}

// resolve returns the value of decl on thread th, or "<missing>".
func resolve(t *testing.T, r *vars.Resolver, c context.Context, scope quiver.Scope, decl quiver.Variable) string {
	t.Helper()
	v, ok, err := r.ResolveVariable(c, scope, decl)
	if err != nil {
		t.Fatalf("ResolveVariable %s: %v", decl.Name, err)
	}
	if !ok {
		return "<missing>"
	}
	return v
}

func TestResolutionOrder(t *testing.T) {
	each(t, func(t *testing.T, s fullStore) {
		r := vars.New(s, newKeyring(t))
		tr := newTree(t, s)
		c := quiver.WithPrompt(ctx, "triage")
		scope := scopeOf(tr.child)
		layers := []struct {
			layer quiver.Layer
			owner string
		}{
			{quiver.LayerThread, tr.child.ID},
			{quiver.LayerAgent, "agent_1"},
			{quiver.LayerPrompt, "triage"},
			{quiver.LayerUser, "usr_1"},
			{quiver.LayerInstance, ""},
		}
		if got := slices.Collect(func(yield func(quiver.Layer) bool) {
			for _, l := range layers {
				if !yield(l.layer) {
					return
				}
			}
		}); !slices.Equal(got, quiver.ResolutionOrder) {
			t.Fatalf("the test's order %v is not quiver.ResolutionOrder %v", got, quiver.ResolutionOrder)
		}
		for _, l := range layers {
			set(t, r, l.layer, l.owner, vars.Value{Name: "X", Value: "from " + string(l.layer)},
				vars.Value{Name: "S", Value: "secret from " + string(l.layer), Secret: true})
		}
		// Values of other owners never count.
		set(t, r, quiver.LayerAgent, "agent_2", vars.Value{Name: "X", Value: "other agent"})
		set(t, r, quiver.LayerPrompt, "other", vars.Value{Name: "X", Value: "other prompt"})
		set(t, r, quiver.LayerUser, "usr_2", vars.Value{Name: "X", Value: "other user"})
		set(t, r, quiver.LayerThread, tr.sibling.ID, vars.Value{Name: "X", Value: "sibling"})

		text := quiver.Variable{Name: "X", Type: quiver.VarText}
		sec := quiver.Variable{Name: "S", Type: quiver.VarSecret}
		for i, l := range layers {
			if got := resolve(t, r, c, scope, text); got != "from "+string(l.layer) {
				t.Errorf("with layers %v set: X = %q, want from %s", quiver.ResolutionOrder[i:], got, l.layer)
			}
			if got := resolve(t, r, c, scope, sec); got != "secret from "+string(l.layer) {
				t.Errorf("with layers %v set: S = %q", quiver.ResolutionOrder[i:], got)
			}
			for _, n := range []string{"X", "S"} {
				if err := r.Delete(ctx, ws, l.layer, l.owner, n); err != nil {
					t.Fatal(err)
				}
			}
		}
		if got := resolve(t, r, c, scope, text); got != "<missing>" {
			t.Errorf("with no layer set: X = %q", got)
		}
		// Without WithPrompt there is no prompt layer.
		set(t, r, quiver.LayerPrompt, "triage", vars.Value{Name: "P", Value: "p"})
		if got := resolve(t, r, ctx, scope, quiver.Variable{Name: "P"}); got != "<missing>" {
			t.Errorf("prompt value without a prompt in the context: %q", got)
		}
		if got := resolve(t, r, c, scope, quiver.Variable{Name: "P"}); got != "p" {
			t.Errorf("prompt value: %q", got)
		}
	})
}

func TestAgentAndUserComeFromTheThread(t *testing.T) {
	each(t, func(t *testing.T, s fullStore) {
		r := vars.New(s, newKeyring(t))
		th := &store.Thread{WorkspaceID: ws, AgentID: "agent_7", UserID: "usr_7"}
		if err := s.CreateThread(ctx, th); err != nil {
			t.Fatal(err)
		}
		set(t, r, quiver.LayerAgent, "agent_7", vars.Value{Name: "A", Value: "agent"})
		set(t, r, quiver.LayerUser, "usr_7", vars.Value{Name: "U", Value: "user"})
		set(t, r, quiver.LayerUser, "usr_8", vars.Value{Name: "U", Value: "scope user"})
		scope := quiver.Scope{WorkspaceID: ws, ThreadID: th.ID}
		if got := resolve(t, r, ctx, scope, quiver.Variable{Name: "A"}); got != "agent" {
			t.Errorf("A = %q", got)
		}
		if got := resolve(t, r, ctx, scope, quiver.Variable{Name: "U"}); got != "user" {
			t.Errorf("U = %q", got)
		}
		scope.UserID = "usr_8" // the scope wins over the thread
		if got := resolve(t, r, ctx, scope, quiver.Variable{Name: "U"}); got != "scope user" {
			t.Errorf("U with the scope's user = %q", got)
		}
		// A scope without a workspace, or naming a thread the workspace lacks, is an error.
		if _, _, err := r.ResolveVariable(ctx, quiver.Scope{ThreadID: th.ID}, quiver.Variable{Name: "A"}); err == nil {
			t.Error("no workspace: no error")
		}
		for _, sc := range []quiver.Scope{{WorkspaceID: "wsp_other", ThreadID: th.ID}, {WorkspaceID: "wsp_other", ThreadID: th.ID, AgentID: "a", UserID: "u"}} {
			if _, _, err := r.ResolveVariable(ctx, sc, quiver.Variable{Name: "A"}); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("thread of another workspace (%+v): %v, want ErrNotFound", sc, err)
			}
		}
	})
}

func TestInheritanceDownAThreeLevelTree(t *testing.T) {
	each(t, func(t *testing.T, s fullStore) {
		r := vars.New(s, newKeyring(t))
		tr := newTree(t, s)
		set(t, r, quiver.LayerThread, tr.root.ID, vars.Value{Name: "REGION", Value: "root"},
			vars.Value{Name: "ONLY_ROOT", Value: "r"}, vars.Value{Name: "KEY", Value: "root key", Secret: true})
		set(t, r, quiver.LayerThread, tr.child.ID, vars.Value{Name: "REGION", Value: "child"})
		set(t, r, quiver.LayerThread, tr.grand.ID, vars.Value{Name: "OWN", Value: "g"})
		set(t, r, quiver.LayerAgent, "agent_1", vars.Value{Name: "REGION", Value: "agent"}, vars.Value{Name: "OWN", Value: "agent"})
		text := func(n string) quiver.Variable { return quiver.Variable{Name: n, Type: quiver.VarText} }
		tests := []struct {
			on   *store.Thread
			decl quiver.Variable
			want string
		}{
			{tr.grand, text("REGION"), "child"}, // the nearest ancestor wins
			{tr.child, text("REGION"), "child"},
			{tr.root, text("REGION"), "root"},
			{tr.sibling, text("REGION"), "root"}, // a sibling's ancestry skips child
			{tr.grand, text("ONLY_ROOT"), "r"},   // two levels up
			{tr.grand, quiver.Variable{Name: "KEY", Type: quiver.VarSecret}, "root key"},
			{tr.grand, text("OWN"), "g"},
			{tr.child, text("OWN"), "agent"}, // values never flow up
			{tr.root, text("OWN"), "agent"},
		}
		for _, tt := range tests {
			if got := resolve(t, r, ctx, scopeOf(tt.on), tt.decl); got != tt.want {
				t.Errorf("%s on %s: %q, want %q", tt.decl.Name, name(tr, tt.on), got, tt.want)
			}
		}
	})
}

func name(tr tree, th *store.Thread) string {
	switch th {
	case tr.root:
		return "root"
	case tr.child:
		return "child"
	case tr.grand:
		return "grand"
	case tr.sibling:
		return "sibling"
	}
	return th.ID
}

func TestScopedVariables(t *testing.T) {
	type val struct {
		on     string // root, child, grand, sibling, agent
		value  string
		scoped bool
	}
	tests := []struct {
		name   string
		values []val
		scoped bool              // the declaration
		want   map[string]string // thread -> value
	}{
		{"an ordinary value is not inherited by a scoped declaration",
			[]val{{"root", "a", false}}, true,
			map[string]string{"root": "a", "child": "<missing>", "grand": "<missing>", "sibling": "<missing>"}},
		{"but it is by an ordinary declaration",
			[]val{{"root", "a", false}}, false,
			map[string]string{"root": "a", "child": "a", "grand": "a", "sibling": "a"}},
		{"a value provided as scoped on a child flows down its subtree only",
			[]val{{"root", "a", false}, {"child", "b", true}}, true,
			map[string]string{"root": "a", "child": "b", "grand": "b", "sibling": "<missing>"}},
		{"a value provided as scoped on the root flows down the whole tree",
			[]val{{"root", "a", true}}, true,
			map[string]string{"root": "a", "child": "a", "grand": "a", "sibling": "a"}},
		{"a nearer scoped value wins over a farther one",
			[]val{{"root", "a", true}, {"child", "b", true}}, true,
			map[string]string{"root": "a", "child": "b", "grand": "b", "sibling": "a"}},
		{"a thread's own ordinary value counts for itself only",
			[]val{{"child", "b", false}}, true,
			map[string]string{"root": "<missing>", "child": "b", "grand": "<missing>", "sibling": "<missing>"}},
		{"an ordinary value in between is skipped, the scoped one above flows down",
			[]val{{"root", "a", true}, {"child", "b", false}}, true,
			map[string]string{"root": "a", "child": "b", "grand": "a", "sibling": "a"}},
		{"a scoped value flows down to ordinary declarations too",
			[]val{{"child", "b", true}}, false,
			map[string]string{"root": "<missing>", "child": "b", "grand": "b", "sibling": "<missing>"}},
		{"the other layers still apply to scoped declarations",
			[]val{{"root", "a", false}, {"agent", "default", false}}, true,
			map[string]string{"root": "a", "child": "default", "grand": "default", "sibling": "default"}},
	}
	each(t, func(t *testing.T, s fullStore) {
		r := vars.New(s, newKeyring(t))
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tr := newTree(t, s)
				agent := "agent_" + tr.root.ID // an agent of this case only
				threads := map[string]*store.Thread{"root": tr.root, "child": tr.child, "grand": tr.grand, "sibling": tr.sibling}
				for _, v := range tt.values {
					if v.on == "agent" {
						set(t, r, quiver.LayerAgent, agent, vars.Value{Name: "REPO", Value: v.value})
						continue
					}
					set(t, r, quiver.LayerThread, threads[v.on].ID, vars.Value{Name: "REPO", Value: v.value, Scoped: v.scoped})
				}
				decl := quiver.Variable{Name: "REPO", Type: quiver.VarText, Scoped: tt.scoped}
				for on, want := range tt.want {
					scope := scopeOf(threads[on])
					scope.AgentID = agent
					if got := resolve(t, r, ctx, scope, decl); got != want {
						t.Errorf("on %s: %q, want %q", on, got, want)
					}
				}
			})
		}
		// Only thread values can be scoped.
		err := r.Set(ctx, ws, quiver.LayerAgent, "agent_1", vars.Value{Name: "REPO", Value: "x", Scoped: true})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("a scoped agent value: %v, want ErrInvalid", err)
		}
	})
}

func TestUpdatesAreVisibleToActiveDescendants(t *testing.T) {
	each(t, func(t *testing.T, s fullStore) {
		r := vars.New(s, newKeyring(t))
		tr := newTree(t, s)
		// A tool running on the grandchild, through the dispatcher, as a run would.
		var seen []string
		tool := quiver.Func("read_env", "Reads the environment.", func(ctx context.Context, _ struct{}) (string, error) {
			region, _ := quiver.Var(ctx, "REGION")
			repo, _ := quiver.Var(ctx, "REPO")
			key, _ := quiver.Var(ctx, "KEY")
			seen = append(seen, region+"|"+repo+"|"+key)
			return "ok", nil
		}, quiver.WithVariables(
			quiver.Variable{Name: "REGION", Required: true},
			quiver.Variable{Name: "REPO", Scoped: true, Required: true},
			quiver.Variable{Name: "KEY", Type: quiver.VarSecret, Required: true},
		))
		reg := &quiver.Registry{}
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
		d := &quiver.Dispatcher{Registry: reg, Resolver: r}
		call := func() *quiver.Result {
			t.Helper()
			res, err := d.Dispatch(quiver.WithScope(ctx, scopeOf(tr.grand)), quiver.Call{Name: "read_env"})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		set(t, r, quiver.LayerThread, tr.root.ID, vars.Value{Name: "REGION", Value: "eu"}, vars.Value{Name: "KEY", Value: "k1", Secret: true})
		set(t, r, quiver.LayerThread, tr.child.ID, vars.Value{Name: "REPO", Value: "repo-a", Scoped: true})
		if res := call(); res.IsError() {
			t.Fatalf("first call: %s %s", res.Code, res.Error)
		}
		// The root's and the child's values change while the grandchild is active.
		set(t, r, quiver.LayerThread, tr.root.ID, vars.Value{Name: "REGION", Value: "us"}, vars.Value{Name: "KEY", Value: "k2", Secret: true})
		set(t, r, quiver.LayerThread, tr.child.ID, vars.Value{Name: "REPO", Value: "repo-b", Scoped: true})
		call()
		// Removing the scoped value makes the call fail, naming what is missing.
		if err := r.Delete(ctx, ws, quiver.LayerThread, tr.child.ID, "REPO"); err != nil {
			t.Fatal(err)
		}
		res := call()
		if res.Code != quiver.CodeMissingVariable || !strings.Contains(res.Error, "REPO") {
			t.Errorf("after deleting REPO: %s %q", res.Code, res.Error)
		}
		want := []string{"eu|repo-a|k1", "us|repo-b|k2"}
		if !slices.Equal(seen, want) {
			t.Errorf("the tool saw %q, want %q", seen, want)
		}
	})
}

func TestRequiredMissingAreAllNamed(t *testing.T) {
	each(t, func(t *testing.T, s fullStore) {
		r := vars.New(s, newKeyring(t))
		tr := newTree(t, s)
		set(t, r, quiver.LayerThread, tr.root.ID, vars.Value{Name: "HAVE", Value: "x"}, vars.Value{Name: "ROOT_ONLY", Value: "r"})
		decls := []quiver.Variable{
			{Name: "NEED_1", Required: true, Description: "first"},
			{Name: "HAVE", Required: true},
			{Name: "OPTIONAL"},
			{Name: "NEED_2", Type: quiver.VarSecret, Required: true},
			{Name: "ROOT_ONLY", Scoped: true, Required: true}, // not inherited: missing on the child
		}
		err := r.CheckRequired(ctx, scopeOf(tr.child), decls)
		var missing *quiver.MissingVariablesError
		if !errors.As(err, &missing) {
			t.Fatalf("CheckRequired: %v, want *quiver.MissingVariablesError", err)
		}
		var names []string
		for _, v := range missing.Missing {
			names = append(names, v.Name)
		}
		if !slices.Equal(names, []string{"NEED_1", "NEED_2", "ROOT_ONLY"}) {
			t.Errorf("missing %q", names)
		}
		for _, n := range names {
			if !strings.Contains(err.Error(), n) {
				t.Errorf("the error does not name %s: %v", n, err)
			}
		}
		if err := r.CheckRequired(ctx, scopeOf(tr.root), decls[1:2]); err != nil {
			t.Errorf("all present: %v", err)
		}

		// Creating a thread whose required variables do not resolve fails, naming them all,
		// and creates nothing.
		th := &store.Thread{WorkspaceID: ws, ParentID: tr.child.ID, AgentID: "agent_1", UserID: "usr_1"}
		err = r.CreateThread(ctx, th, decls, vars.Value{Name: "NEED_1", Value: "given"})
		if !errors.As(err, &missing) || len(missing.Missing) != 2 || missing.Missing[0].Name != "NEED_2" || missing.Missing[1].Name != "ROOT_ONLY" {
			t.Fatalf("CreateThread with missing variables: %v", err)
		}
		kids, err := s.Children(ctx, ws, tr.child.ID)
		if err != nil || len(kids) != 1 || kids[0].ID != tr.grand.ID {
			t.Fatalf("a thread was created anyway: %v, %v", kids, err)
		}
		if _, err := s.Thread(ctx, ws, th.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the refused thread exists: %v", err)
		}
		// With the values given (one secret, one scoped), it is created with them.
		err = r.CreateThread(ctx, th, decls,
			vars.Value{Name: "NEED_1", Value: "given"},
			vars.Value{Name: "NEED_2", Value: "s3cret-given", Secret: true},
			vars.Value{Name: "ROOT_ONLY", Value: "mine"}) // declared scoped: stored as scoped
		if err != nil {
			t.Fatalf("CreateThread: %v", err)
		}
		if list, _ := r.List(ctx, ws, quiver.LayerThread, th.ID); len(list) != 3 || list[2].Name != "ROOT_ONLY" || !list[2].Scoped {
			t.Errorf("the new thread's values: %+v", list)
		}
		// So it flows down to the new thread's own children.
		kid := &store.Thread{WorkspaceID: ws, ParentID: th.ID}
		if err := r.CreateThread(ctx, kid, decls[4:]); err != nil {
			t.Errorf("a child of the new thread: %v", err)
		}
		values, err := r.Resolve(ctx, scopeOf(th), decls)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"NEED_1": "given", "HAVE": "x", "NEED_2": "s3cret-given", "ROOT_ONLY": "mine"}
		if len(values) != len(want) {
			t.Errorf("values %v, want %v", values, want)
		}
		for k, v := range want {
			if values[k] != v {
				t.Errorf("%s = %q, want %q", k, values[k], v)
			}
		}
		// The parent must be of the workspace.
		bad := &store.Thread{WorkspaceID: "wsp_other", ParentID: tr.child.ID}
		if err := r.CreateThread(ctx, bad, nil); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("parent of another workspace: %v", err)
		}
	})
}

func TestListNeverShowsSecrets(t *testing.T) {
	each(t, func(t *testing.T, s fullStore) {
		r := vars.New(s, newKeyring(t))
		set(t, r, quiver.LayerInstance, "", vars.Value{Name: "KEY", Value: "plaintext-key", Secret: true}, vars.Value{Name: "URL", Value: "https://x"})
		list, err := r.List(ctx, ws, quiver.LayerInstance, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Name != "KEY" || list[0].Value != "" || !list[0].Secret || list[1].Value != "https://x" {
			t.Errorf("List: %+v", list)
		}
		raw, err := s.Variables(ctx, ws, store.LayerInstance, "")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(raw[0].Value, "plaintext") || !strings.HasPrefix(raw[0].Value, "qv1.") {
			t.Errorf("the store lists %q", raw[0].Value)
		}
	})
}

// TestSecretNeverInTheDatabaseFile sets secrets through every way in, resolves them, then
// scans the SQLite database file and its write-ahead log for their plaintext.
func TestSecretNeverInTheDatabaseFile(t *testing.T) {
	s, path := openSQLite(t)
	r := vars.New(s, newKeyring(t))
	tr := newTree(t, s)
	secrets := []string{"SECRET-4f1a9c-sk-live", "PASSWORD-77e2b0-hunter2", "TOKEN-c0ffee-during-creation"}
	const visible = "VISIBLE-TEXT-9d8e7f" // a text value: it must be found, proving the scan works
	set(t, r, quiver.LayerThread, tr.child.ID, vars.Value{Name: "API_KEY", Value: secrets[0], Secret: true},
		vars.Value{Name: "NOTE", Value: visible})
	set(t, r, quiver.LayerUser, "usr_1", vars.Value{Name: "PASSWORD", Value: secrets[1], Secret: true})
	decls := []quiver.Variable{{Name: "TOKEN", Type: quiver.VarSecret, Required: true}}
	th := &store.Thread{WorkspaceID: ws, ParentID: tr.root.ID}
	if err := r.CreateThread(ctx, th, decls, vars.Value{Name: "TOKEN", Value: secrets[2], Secret: true}); err != nil {
		t.Fatal(err)
	}
	// Replace one, so an old row version exists too.
	set(t, r, quiver.LayerThread, tr.child.ID, vars.Value{Name: "API_KEY", Value: secrets[0], Secret: true})
	for _, c := range []struct {
		on   *store.Thread
		decl string
		want string
	}{{tr.grand, "API_KEY", secrets[0]}, {tr.grand, "PASSWORD", secrets[1]}, {th, "TOKEN", secrets[2]}} {
		if got := resolve(t, r, ctx, scopeOf(c.on), quiver.Variable{Name: c.decl, Type: quiver.VarSecret}); got != c.want {
			t.Fatalf("%s = %q", c.decl, got)
		}
	}

	scan := func(stage string) {
		files, _ := filepath.Glob(path + "*") // quiver.db, quiver.db-wal, quiver.db-shm
		var sawWAL, sawVisible bool
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(f, "-wal") && len(b) > 0 {
				sawWAL = true
			}
			for _, sec := range secrets {
				if bytes.Contains(b, []byte(sec)) {
					t.Errorf("%s: %s holds the plaintext of a secret (%s)", stage, filepath.Base(f), sec)
				}
			}
			sawVisible = sawVisible || bytes.Contains(b, []byte(visible))
		}
		if !sawVisible {
			t.Errorf("%s: the text value is in none of %v: the scan does not see the data", stage, files)
		}
		t.Logf("%s: scanned %d files (write-ahead log with data: %v)", stage, len(files), sawWAL)
	}
	scan("open (data in the write-ahead log)")
	if err := s.Close(); err != nil { // checkpoints the log into the database file
		t.Fatal(err)
	}
	scan("closed (data in the database file)")
}

func TestWrongKeyCannotOpen(t *testing.T) {
	each(t, func(t *testing.T, s fullStore) {
		right := vars.New(s, newKeyring(t))
		tr := newTree(t, s)
		set(t, right, quiver.LayerThread, tr.root.ID, vars.Value{Name: "KEY", Value: "the secret", Secret: true})
		decl := quiver.Variable{Name: "KEY", Type: quiver.VarSecret}
		wrong := vars.New(s, newKeyring(t))
		_, _, err := wrong.ResolveVariable(ctx, scopeOf(tr.grand), decl)
		if !errors.Is(err, secret.ErrDecrypt) {
			t.Errorf("a wrong key: %v, want secret.ErrDecrypt", err)
		}
		if err != nil && strings.Contains(err.Error(), "the secret") {
			t.Errorf("the error shows the secret: %v", err)
		}
		if got := resolve(t, right, ctx, scopeOf(tr.grand), decl); got != "the secret" {
			t.Errorf("the right key: %q", got)
		}
		noKeys := &vars.Resolver{Threads: s, Values: s}
		if _, _, err := noKeys.ResolveVariable(ctx, scopeOf(tr.grand), decl); err == nil {
			t.Error("no keyring: no error")
		}
		if err := noKeys.Set(ctx, ws, quiver.LayerInstance, "", vars.Value{Name: "K", Value: "v", Secret: true}); err == nil {
			t.Error("sealing without a keyring: no error")
		}
	})
}

// TestSealedValueIsBoundToItsPlace copies a sealed value into other rows with the store's own
// API: none of them opens.
func TestSealedValueIsBoundToItsPlace(t *testing.T) {
	each(t, func(t *testing.T, s fullStore) {
		r := vars.New(s, newKeyring(t))
		tr := newTree(t, s)
		other := &store.Thread{WorkspaceID: "wsp_other", AgentID: "agent_1", UserID: "usr_1"}
		if err := s.CreateThread(ctx, other); err != nil {
			t.Fatal(err)
		}
		set(t, r, quiver.LayerThread, tr.root.ID, vars.Value{Name: "KEY", Value: "bound secret", Secret: true})
		stored, err := s.Variables(ctx, ws, store.LayerThread, tr.root.ID)
		if err != nil || len(stored) != 1 {
			t.Fatal(stored, err)
		}
		sealed := stored[0].Value
		decl := func(n string) quiver.Variable { return quiver.Variable{Name: n, Type: quiver.VarSecret} }
		tests := []struct {
			name      string
			workspace string
			layer     store.VariableLayer
			owner     string
			vname     string
			scope     quiver.Scope
		}{
			{"another name", ws, store.LayerThread, tr.root.ID, "KEY2", scopeOf(tr.root)},
			{"another thread", ws, store.LayerThread, tr.sibling.ID, "KEY", scopeOf(tr.sibling)},
			{"another layer", ws, store.LayerAgent, "agent_1", "KEY", quiver.Scope{WorkspaceID: ws, AgentID: "agent_1"}},
			{"another workspace", "wsp_other", store.LayerThread, other.ID, "KEY", scopeOf(other)},
			{"the instance", ws, store.LayerInstance, "", "KEY", quiver.Scope{WorkspaceID: ws}},
		}
		for _, tt := range tests {
			if err := s.SetVariable(ctx, tt.workspace, tt.layer, tt.owner, tt.vname, sealed, true, false); err != nil {
				t.Fatal(err)
			}
			_, _, err := r.ResolveVariable(ctx, tt.scope, decl(tt.vname))
			if !errors.Is(err, secret.ErrDecrypt) {
				t.Errorf("%s: %v, want secret.ErrDecrypt", tt.name, err)
			}
		}
		if got := resolve(t, r, ctx, scopeOf(tr.root), decl("KEY")); got != "bound secret" {
			t.Errorf("in its place: %q", got)
		}
	})
}

func TestSecretDeclaredAsTextIsRefused(t *testing.T) {
	s, _ := openSQLite(t)
	r := vars.New(s, newKeyring(t))
	set(t, r, quiver.LayerInstance, "", vars.Value{Name: "KEY", Value: "do not show", Secret: true})
	_, _, err := r.ResolveVariable(ctx, quiver.Scope{WorkspaceID: ws}, quiver.Variable{Name: "KEY", Type: quiver.VarText})
	if err == nil || strings.Contains(err.Error(), "do not show") {
		t.Errorf("a secret resolved for a text declaration: %v", err)
	}
	// The other way round is fine: the dispatcher masks it.
	set(t, r, quiver.LayerInstance, "", vars.Value{Name: "PLAIN", Value: "p"})
	if got := resolve(t, r, ctx, quiver.Scope{WorkspaceID: ws}, quiver.Variable{Name: "PLAIN", Type: quiver.VarSecret}); got != "p" {
		t.Errorf("PLAIN = %q", got)
	}
}

func TestSetRefuses(t *testing.T) {
	s, _ := openSQLite(t)
	r := vars.New(s, newKeyring(t))
	tests := []struct {
		name   string
		layer  quiver.Layer
		owner  string
		values []vars.Value
	}{
		{"too large", quiver.LayerInstance, "", []vars.Value{{Name: "A", Value: strings.Repeat("x", vars.MaxValueBytes+1)}}},
		{"too large secret", quiver.LayerInstance, "", []vars.Value{{Name: "A", Value: strings.Repeat("x", vars.MaxValueBytes+1), Secret: true}}},
		{"twice", quiver.LayerInstance, "", []vars.Value{{Name: "A", Value: "1"}, {Name: "A", Value: "2"}}},
		{"no name", quiver.LayerInstance, "", []vars.Value{{Value: "1"}}},
		{"scoped user value", quiver.LayerUser, "usr_1", []vars.Value{{Name: "A", Value: "1", Scoped: true}}},
		{"unknown layer", "team", "t", []vars.Value{{Name: "A", Value: "1"}}},
	}
	for _, tt := range tests {
		if err := r.Set(ctx, ws, tt.layer, tt.owner, tt.values...); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tt.name, err)
		}
	}
	if list, _ := r.List(ctx, ws, quiver.LayerInstance, ""); len(list) != 0 {
		t.Errorf("refused values were stored: %+v", list)
	}
}

func TestWhere(t *testing.T) {
	tests := []struct {
		ws    string
		layer store.VariableLayer
		owner string
		name  string
		want  string
	}{
		{"wsp_1", store.LayerThread, "thr_2", "API_KEY", "variable:wsp_1:thread:thr_2:API_KEY"},
		{"wsp_1", store.LayerInstance, "", "API_KEY", "variable:wsp_1:instance::API_KEY"},
		{"wsp_1", store.LayerPrompt, "a:b", "c", "variable:wsp_1:prompt:a%3Ab:c"},
		{"wsp_1", store.LayerPrompt, "a", "b:c", "variable:wsp_1:prompt:a:b%3Ac"},
		{"wsp_1", store.LayerPrompt, "50%", "x", "variable:wsp_1:prompt:50%25:x"},
	}
	for _, tt := range tests {
		if got := vars.Where(tt.ws, tt.layer, tt.owner, tt.name); got != tt.want {
			t.Errorf("Where(%q, %q, %q, %q) = %q, want %q", tt.ws, tt.layer, tt.owner, tt.name, got, tt.want)
		}
	}
}

func TestResolveMissingOptionalIsNotAnError(t *testing.T) {
	s, _ := openSQLite(t)
	r := vars.New(s, newKeyring(t))
	values, err := r.Resolve(ctx, quiver.Scope{WorkspaceID: ws}, []quiver.Variable{{Name: "X"}})
	if err != nil || len(values) != 0 {
		t.Errorf("Resolve: %v, %v", values, err)
	}
	values, err = r.Resolve(ctx, quiver.Scope{WorkspaceID: ws}, nil)
	if err != nil || len(values) != 0 {
		t.Errorf("Resolve with no declarations: %v, %v", values, err)
	}
}
