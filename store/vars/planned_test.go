package vars_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/vars"
)

// ResolvePlanned resolves on threads not created yet exactly as on the same threads stored:
// their own values first, an ancestor's ordinary value not inherited by a scoped declaration,
// a scoped one flowing down, the nearest planned thread's agent layer; nothing is written.
func TestResolvePlanned(t *testing.T) {
	each(t, func(t *testing.T, s fullStore) {
		ctx := context.Background()
		r := vars.New(s, newKeyring(t))
		root := &store.Thread{WorkspaceID: ws, UserID: "usr_1"}
		if err := s.CreateThread(ctx, root); err != nil {
			t.Fatal(err)
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(r.Set(ctx, ws, quiver.LayerThread, root.ID, vars.Value{Name: "ORD", Value: "root"}, vars.Value{Name: "SC", Value: "root-scoped", Scoped: true}))
		must(r.Set(ctx, ws, quiver.LayerAgent, "agent_x", vars.Value{Name: "AG", Value: "x"}))
		must(r.Set(ctx, ws, quiver.LayerUser, "usr_1", vars.Value{Name: "USR", Value: "u"}))
		must(r.Set(ctx, ws, quiver.LayerInstance, "", vars.Value{Name: "INST", Value: "i"}))
		before, _, err := s.Threads(ctx, ws, store.ThreadFilter{})
		must(err)

		parent := quiver.PlannedThread{AgentID: "agent_x", Values: []quiver.VariableValue{{Name: "NEW", Value: "p"},
			{Name: "P_ORD", Value: "p-ordinary"}, {Name: "P_SC", Value: "p-scoped", Scoped: true},
			{Name: "P_SECRET", Value: "p-s3cret", Secret: true}}}
		child := quiver.PlannedThread{AgentID: "agent_y"}
		under := quiver.Scope{WorkspaceID: ws, UserID: "usr_1", ThreadID: root.ID}
		const missing = "<missing>"
		for _, c := range []struct {
			name  string
			scope quiver.Scope
			plan  []quiver.PlannedThread
			decl  quiver.Variable
			want  string // missing, or the value
			err   bool
		}{
			{name: "its own value", scope: under, plan: []quiver.PlannedThread{parent}, decl: quiver.Variable{Name: "NEW"}, want: "p"},
			{name: "its own value, declared scoped", scope: under, plan: []quiver.PlannedThread{parent}, decl: quiver.Variable{Name: "P_ORD", Scoped: true}, want: "p-ordinary"},
			{name: "a stored parent's ordinary value", scope: under, plan: []quiver.PlannedThread{parent}, decl: quiver.Variable{Name: "ORD"}, want: "root"},
			{name: "not for a scoped declaration", scope: under, plan: []quiver.PlannedThread{parent}, decl: quiver.Variable{Name: "ORD", Scoped: true}, want: missing},
			{name: "a stored parent's scoped value flows down", scope: under, plan: []quiver.PlannedThread{parent}, decl: quiver.Variable{Name: "SC", Scoped: true}, want: "root-scoped"},
			{name: "the planned thread's agent", scope: under, plan: []quiver.PlannedThread{parent}, decl: quiver.Variable{Name: "AG"}, want: "x"},
			{name: "the user", scope: under, plan: []quiver.PlannedThread{parent}, decl: quiver.Variable{Name: "USR"}, want: "u"},
			{name: "a planned parent's ordinary value", scope: under, plan: []quiver.PlannedThread{child, parent}, decl: quiver.Variable{Name: "P_ORD"}, want: "p-ordinary"},
			{name: "not for a scoped declaration of the child", scope: under, plan: []quiver.PlannedThread{child, parent}, decl: quiver.Variable{Name: "P_ORD", Scoped: true}, want: missing},
			{name: "a planned parent's scoped value flows down", scope: under, plan: []quiver.PlannedThread{child, parent}, decl: quiver.Variable{Name: "P_SC", Scoped: true}, want: "p-scoped"},
			{name: "the child's agent, not the parent's", scope: under, plan: []quiver.PlannedThread{child, parent}, decl: quiver.Variable{Name: "AG"}, want: missing},
			{name: "through both to the stored root", scope: under, plan: []quiver.PlannedThread{child, parent}, decl: quiver.Variable{Name: "SC", Scoped: true}, want: "root-scoped"},
			{name: "the instance", scope: under, plan: []quiver.PlannedThread{child, parent}, decl: quiver.Variable{Name: "INST"}, want: "i"},
			{name: "a planned secret opens for a secret", scope: under, plan: []quiver.PlannedThread{parent}, decl: quiver.Variable{Name: "P_SECRET", Type: quiver.VarSecret}, want: "p-s3cret"},
			{name: "a planned secret is no text", scope: under, plan: []quiver.PlannedThread{parent}, decl: quiver.Variable{Name: "P_SECRET", Type: quiver.VarText}, err: true},
			{name: "a root to be", scope: quiver.Scope{WorkspaceID: ws}, plan: []quiver.PlannedThread{parent}, decl: quiver.Variable{Name: "ORD"}, want: missing},
			{name: "no plan: the scope as it is", scope: quiver.Scope{WorkspaceID: ws, ThreadID: root.ID}, decl: quiver.Variable{Name: "ORD", Scoped: true}, want: "root"},
			{name: "a bad value is refused", scope: under, plan: []quiver.PlannedThread{{Values: []quiver.VariableValue{{Name: ""}}}}, decl: quiver.Variable{Name: "X"}, err: true},
		} {
			t.Run(c.name, func(t *testing.T) {
				c.decl.Required = true
				values, err := r.ResolvePlanned(ctx, c.scope, c.plan, []quiver.Variable{c.decl})
				var m *quiver.MissingVariablesError
				switch {
				case c.err:
					if err == nil || errors.As(err, &m) {
						t.Fatalf("got %v, %v; want an error", values, err)
					}
				case c.want == missing:
					if !errors.As(err, &m) || len(m.Missing) != 1 || m.Missing[0].Name != c.decl.Name {
						t.Fatalf("got %v, %v; want %s missing", values, err, c.decl.Name)
					}
				default:
					if err != nil || values[c.decl.Name] != c.want {
						t.Fatalf("got %v, %v; want %q", values, err, c.want)
					}
				}
			})
		}
		// Values are checked even when nothing is declared: creating would refuse them.
		if _, err := r.ResolvePlanned(ctx, under, []quiver.PlannedThread{{Values: []quiver.VariableValue{{Name: "BAD\x01"}}}}, nil); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("a bad value with nothing declared: %v, want store.ErrInvalid", err)
		}
		after, _, err := s.Threads(ctx, ws, store.ThreadFilter{})
		must(err)
		if len(after) != len(before) {
			t.Errorf("resolving on planned threads created %d", len(after)-len(before))
		}
		for i := range 2 {
			if vs, err := s.Variables(ctx, ws, store.LayerThread, "planned:"+strconv.Itoa(i)); err != nil || len(vs) > 0 {
				t.Errorf("planned values were stored: %+v %v", vs, err)
			}
		}
	})
}
