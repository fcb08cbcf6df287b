package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/store"
)

// TestFunctionsFollowEntitlements: a function that backs stored tools is listed, read, given
// versions, a default, or named by a tool only by an actor who may see one of its tools: a
// member bound to a toolset sees the functions of its toolset's tools, a member a deny rule
// names all but those backing only denied tools, an admin no rule names every one. A function
// backing no tool is everyone's; one backing a deleted tool is decided by that tool; one whose
// only visible tool is past the first page of its tools is still visible. Any other is not
// found in the words of a missing function, for every operation, and is left unchanged; saving
// a tool in one step under a hidden tool's name is refused as a name taken.
func TestFunctionsFollowEntitlements(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, bst backendtest.Store) {
		ctx := context.Background()
		st := bst.(store.Backend)
		adminAndMember(t, st)
		p, err := platform.New(platform.Config{Store: st, Registry: &quiver.Registry{}})
		must(t, err)
		admin := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_a", KeyID: "key_a", Role: store.KeyRoleAdmin}
		bound := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", KeyID: "key_b", Role: store.KeyRoleMember, Toolsets: []string{"support"}}
		denied := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", KeyID: "key_d", Role: store.KeyRoleMember}

		fns, versions, tools := map[string]*store.Function{}, map[string]string{}, map[string]*store.Tool{}
		function := func(name string, backs ...string) {
			f, err := p.CreateFunction(ctx, admin, name)
			must(t, err)
			v, err := p.CreateFunctionVersion(ctx, admin, f.ID, platform.NewVersion{Code: "export default () => 1"})
			must(t, err)
			fns[name], versions[name] = f, v.ID
			for _, tool := range backs {
				tl, err := p.CreateTool(ctx, admin, platform.NewTool{Name: tool, Target: store.TargetServer, FunctionID: f.ID,
					InputSchema: json.RawMessage(`{"type":"object","description":"The ` + tool + ` tool."}`)})
				must(t, err)
				tools[tool] = tl
			}
		}
		function("support_fn", "support_refund")
		function("billing_fn", "billing_charge")
		function("notes_fn", "notes")
		function("shared_fn", "billing_lookup", "support_lookup")
		function("free_fn")
		function("gone_fn", "billing_gone")
		_, err = p.DeleteTool(ctx, admin, tools["billing_gone"].ID, "")
		must(t, err)
		// A function with more tools than a page of them, the one a bound member may see last.
		function("bulk_fn")
		in := &store.Schema{WorkspaceID: "wsp_a", Content: json.RawMessage(`{"type":"object","description":"Bulk."}`)}
		out := &store.Schema{WorkspaceID: "wsp_a", Content: json.RawMessage(`true`)}
		must(t, st.CreateSchema(ctx, in))
		must(t, st.CreateSchema(ctx, out))
		for i := range store.MaxListLimit + 1 {
			name := fmt.Sprintf("billing_bulk_%03d", i)
			if i == store.MaxListLimit {
				name = "support_bulk"
			}
			must(t, st.CreateTool(ctx, &store.Tool{WorkspaceID: "wsp_a", Name: name, Target: store.TargetServer, FunctionID: fns["bulk_fn"].ID,
				InputSchemaID: in.ID, OutputSchemaID: out.ID, Enabled: true, CreatedBy: "usr_a"}))
		}
		p.ToolsChanged(ctx, "wsp_a")

		_, err = p.SetEntitlements(ctx, admin, entitle.Document{
			Toolsets: []entitle.Toolset{{Name: "support", Include: []entitle.Selector{{Tools: []string{"support_*"}}}}},
			Rules:    []entitle.Rule{{Who: entitle.Who{Key: "key_d"}, Selector: entitle.Selector{Tools: []string{"billing_*"}}, Access: quiver.AccessDeny}},
		}, 0)
		must(t, err)

		all := []string{"support_fn", "billing_fn", "notes_fn", "shared_fn", "free_fn", "gone_fn", "bulk_fn"}
		for _, c := range []struct {
			who  string
			a    platform.Actor
			want []string
		}{
			{"an admin no rule names", admin, all},
			{"a member bound to support", bound, []string{"support_fn", "shared_fn", "free_fn", "bulk_fn"}},
			{"a member denied billing", denied, []string{"support_fn", "notes_fn", "shared_fn", "free_fn", "bulk_fn"}},
		} {
			t.Run(c.who, func(t *testing.T) {
				listed, err := p.Functions(ctx, c.a)
				must(t, err)
				var got []string
				for _, f := range listed {
					got = append(got, f.Name)
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("listed %v, want %v", got, c.want)
				}
				nope := store.PrefixFunction + "_nope"
				for _, name := range all {
					id := fns[name]
					if slices.Contains(c.want, name) {
						if f, err := p.Function(ctx, c.a, id.ID); err != nil || f.ID != id.ID {
							t.Errorf("get %s: %v", name, err)
						}
						if vs, err := p.FunctionVersions(ctx, c.a, id.ID); err != nil || len(vs) == 0 {
							t.Errorf("versions of %s: %v %v", name, vs, err)
						}
						continue
					}
					_, missing := p.Function(ctx, c.a, nope)
					_, err := p.Function(ctx, c.a, id.ID)
					sameAsMissingFunction(t, "get "+name, err, missing, id.ID, nope)
					_, missing = p.FunctionVersions(ctx, c.a, nope)
					_, err = p.FunctionVersions(ctx, c.a, id.ID)
					sameAsMissingFunction(t, "versions of "+name, err, missing, id.ID, nope)
					newVersion := platform.NewVersion{Code: "export default () => 2"}
					_, missing = p.CreateFunctionVersion(ctx, c.a, nope, newVersion)
					_, err = p.CreateFunctionVersion(ctx, c.a, id.ID, newVersion)
					sameAsMissingFunction(t, "a new version of "+name, err, missing, id.ID, nope)
					_, missing = p.SetDefaultVersion(ctx, c.a, nope, versions[name])
					_, err = p.SetDefaultVersion(ctx, c.a, id.ID, versions[name])
					sameAsMissingFunction(t, "the default version of "+name, err, missing, id.ID, nope)
					// Nor may a tool the actor sees be made to run it, or name it when created.
					newTool := func(fn string) platform.NewTool {
						return platform.NewTool{Name: "support_new", Target: store.TargetServer, FunctionID: fn,
							InputSchema: json.RawMessage(`{"type":"object","description":"New."}`)}
					}
					_, missing = p.CreateTool(ctx, c.a, newTool(nope))
					_, err = p.CreateTool(ctx, c.a, newTool(id.ID))
					sameAsMissingFunction(t, "a new tool running "+name, err, missing, id.ID, nope)
					change := func(fn string) platform.ToolChange {
						return platform.ToolChange{FunctionID: platform.Optional[string]{Set: true, Value: fn}}
					}
					_, missing = p.UpdateTool(ctx, c.a, tools["support_refund"].ID, change(nope))
					_, err = p.UpdateTool(ctx, c.a, tools["support_refund"].ID, change(id.ID))
					sameAsMissingFunction(t, "support_refund made to run "+name, err, missing, id.ID, nope)

					vs, err := p.FunctionVersions(ctx, admin, id.ID)
					if err != nil || len(vs) != 1 {
						t.Errorf("%s's versions after the refusals: %v %v", name, vs, err)
					}
				}
				if tl, err := p.Tool(ctx, admin, tools["support_refund"].ID); err != nil || tl.FunctionID != fns["support_fn"].ID {
					t.Errorf("support_refund after the refusals: %+v %v", tl, err)
				}
				if page, err := p.ListTools(ctx, admin, platform.ToolQuery{Name: "support_new", Limit: 1}); err != nil || len(page.Tools) != 0 {
					t.Errorf("a refused tool was stored: %+v %v", page, err)
				}
			})
		}
		// Saving a tool in one step under a hidden tool's name is refused as creating one of
		// that name is, before its function is given a version.
		_, saved := p.SaveFunctionTool(ctx, bound, jsfunc.Definition{Name: "billing_charge", Description: "Charges.", Code: "export default () => 4"})
		_, created := p.CreateTool(ctx, bound, platform.NewTool{Name: "billing_charge", Target: store.TargetClient,
			InputSchema: json.RawMessage(`{"type":"object","description":"Charges."}`)})
		var se, ce *platform.Error
		if !errors.As(saved, &se) || !errors.As(created, &ce) || se.Kind != platform.Conflict || se.Field != "name" || se.Error() != ce.Error() {
			t.Errorf("saving a tool under a hidden tool's name: %v, creating one: %v", saved, created)
		}
		if vs, err := p.FunctionVersions(ctx, admin, fns["billing_fn"].ID); err != nil || len(vs) != 1 {
			t.Errorf("billing_fn's versions after the refused save: %v %v", vs, err)
		}
		// What the actor may see it may change, and point its tools at.
		v, err := p.CreateFunctionVersion(ctx, bound, fns["shared_fn"].ID, platform.NewVersion{Code: "export default () => 3"})
		must(t, err)
		if f, err := p.SetDefaultVersion(ctx, bound, fns["shared_fn"].ID, v.ID); err != nil || f.DefaultVersionID != v.ID {
			t.Errorf("the bound member setting the default of a function it sees: %+v %v", f, err)
		}
		if tl, err := p.UpdateTool(ctx, bound, tools["support_refund"].ID, platform.ToolChange{
			FunctionID: platform.Optional[string]{Set: true, Value: fns["free_fn"].ID}}); err != nil || tl.FunctionID != fns["free_fn"].ID {
			t.Errorf("the bound member pointing its tool at a function that backs none: %+v %v", tl, err)
		}
	})
}

// sameAsMissingFunction checks that err refuses the function id as missing is refused for
// nope, a function that does not exist.
func sameAsMissingFunction(t *testing.T, what string, err, missing error, id, nope string) {
	t.Helper()
	var e, m *platform.Error
	if !errors.As(err, &e) || !errors.As(missing, &m) {
		t.Errorf("%s: %v, want the refusal of a missing function (%v)", what, err, missing)
		return
	}
	if e.Kind != platform.NotFound || m.Kind != platform.NotFound || e.Field != m.Field ||
		strings.ReplaceAll(e.Error(), id, nope) != m.Error() || strings.ReplaceAll(e.Detail, id, nope) != m.Detail {
		t.Errorf("%s: %q (%s, field %q), a missing function: %q (%s, field %q)", what, e.Error(), e.Kind, e.Field, m.Error(), m.Kind, m.Field)
	}
}
