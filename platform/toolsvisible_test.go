package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/store"
)

// TestStoredToolRecordsFollowEntitlements: a stored tool's record is listed, read, changed and
// deleted only by an actor who may call the tool: a member bound to a toolset sees its
// toolset's, a member a deny rule names all but those it denies, an admin no rule names every
// one, deleted and unbuildable ones too. A record the workspace does not serve is decided by
// its name whatever annotations it may have: an allow list of read-only tools does not show
// one, nor does a deny of read-only tools. Any other record is not found, in the words of a
// missing tool, and is left unchanged; a page's cursor never holds a hidden tool's position.
func TestStoredToolRecordsFollowEntitlements(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, bst backendtest.Store) {
		ctx := context.Background()
		st := bst.(store.Backend)
		adminAndMember(t, st)
		shared := &quiver.Registry{}
		must(t, shared.Register(quiver.Func("echo", "Echoes.", func(context.Context, struct{}) (string, error) { return "", nil })))
		p, err := platform.New(platform.Config{Store: st, Registry: shared})
		must(t, err)
		admin := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_a", KeyID: "key_a", Role: store.KeyRoleAdmin}
		bound := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", KeyID: "key_b", Role: store.KeyRoleMember, Toolsets: []string{"support"}}
		denied := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", KeyID: "key_d", Role: store.KeyRoleMember}
		reader := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", KeyID: "key_r", Role: store.KeyRoleMember}
		writer := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", KeyID: "key_w", Role: store.KeyRoleMember}
		operator := platform.Actor{WorkspaceID: "wsp_a", Operator: true}

		ids := map[string]string{}
		client := func(name, annotations string) {
			doc := `{"type":"object","description":"The ` + name + ` tool."` + annotations + `}`
			tl, err := p.CreateTool(ctx, admin, platform.NewTool{Name: name, Target: store.TargetClient, InputSchema: json.RawMessage(doc)})
			must(t, err)
			ids[name] = tl.ID
		}
		client("support_lookup", `,"annotations":{"readOnlyHint":true}`)
		client("support_refund", "")
		client("billing_charge", "")
		client("notes", "")
		// A tool whose input schema no longer compiles (stored before a check, say): its
		// record is kept, the workspace does not serve it.
		in := &store.Schema{WorkspaceID: "wsp_a", Content: json.RawMessage(
			`{"type":"object","description":"Broken.","annotations":{"readOnlyHint":true},"properties":{"n":{"type":"nope"}}}`)}
		out := &store.Schema{WorkspaceID: "wsp_a", Content: json.RawMessage(`true`)}
		must(t, st.CreateSchema(ctx, in))
		must(t, st.CreateSchema(ctx, out))
		broken := &store.Tool{WorkspaceID: "wsp_a", Name: "support_broken", Target: store.TargetClient, InputSchemaID: in.ID, OutputSchemaID: out.ID, Enabled: true}
		must(t, st.CreateTool(ctx, broken))
		ids["support_broken"] = broken.ID
		p.ToolsChanged(ctx, "wsp_a")
		client("support_gone", "")
		client("billing_gone", "")
		for _, name := range []string{"support_gone", "billing_gone"} {
			_, err := p.DeleteTool(ctx, admin, ids[name], "")
			must(t, err)
		}
		if _, ok := p.Workspace(ctx, "wsp_a").Registry().Lookup("support_broken"); ok {
			t.Fatal("the broken tool is served: the test needs one that is not")
		}

		_, err = p.SetEntitlements(ctx, admin, entitle.Document{
			Toolsets: []entitle.Toolset{{Name: "support", Include: []entitle.Selector{{Tools: []string{"support_*"}}}}},
			Rules: []entitle.Rule{
				{Who: entitle.Who{Key: "key_d"}, Selector: entitle.Selector{Tools: []string{"billing_*"}}, Access: quiver.AccessDeny},
				{Who: entitle.Who{Key: "key_r"}, Selector: entitle.Selector{When: quiver.Hints{ReadOnly: quiver.Hint(true)}}, Access: quiver.AccessAllow},
				{Who: entitle.Who{Key: "key_w"}, Selector: entitle.Selector{When: quiver.Hints{ReadOnly: quiver.Hint(true)}}, Access: quiver.AccessDeny},
			},
		}, 0)
		must(t, err)

		all := []string{"support_lookup", "support_refund", "billing_charge", "notes", "support_broken", "support_gone", "billing_gone"}
		for _, c := range []struct {
			who  string
			a    platform.Actor
			want []string
		}{
			{"the operator", operator, all},
			{"an admin no rule names", admin, all},
			{"a member bound to support", bound, []string{"support_lookup", "support_refund", "support_broken", "support_gone"}},
			{"a member denied billing", denied, []string{"support_lookup", "support_refund", "notes", "support_broken", "support_gone"}},
			{"a member allowed the read-only tools", reader, []string{"support_lookup"}},
			// MCP's defaults would read the unserved ones as not read-only: they may be.
			{"a member denied the read-only tools", writer, []string{"support_refund", "billing_charge", "notes"}},
		} {
			t.Run(c.who, func(t *testing.T) {
				if got := listAll(t, p, c.a, c.want); !slices.Equal(got, c.want) {
					t.Errorf("listed %v, want %v", got, c.want)
				}
				_, missing := p.Tool(ctx, c.a, "tol_nope")
				for _, name := range all {
					id := ids[name]
					got, err := p.Tool(ctx, c.a, id)
					if slices.Contains(c.want, name) {
						if err != nil || got.ID != id {
							t.Errorf("get %s: %v", name, err)
						}
						continue
					}
					sameAsMissing(t, "get "+name, err, missing, id)
					_, err = p.UpdateTool(ctx, c.a, id, platform.ToolChange{Description: platform.Optional[string]{Set: true, Value: "Changed."}})
					sameAsMissing(t, "change "+name, err, missing, id)
					_, err = p.DeleteTool(ctx, c.a, id, "")
					sameAsMissing(t, "delete "+name, err, missing, id)
					if after, err := p.Tool(ctx, admin, id); err != nil || after.Description != "" || (after.DeletedAt != nil) != strings.HasSuffix(name, "_gone") {
						t.Errorf("%s after a refused change and delete: %+v %v", name, after, err)
					}
				}
			})
		}
		// What the actor may see it may change.
		changed, err := p.UpdateTool(ctx, bound, ids["support_refund"], platform.ToolChange{Description: platform.Optional[string]{Set: true, Value: "Refunds."}})
		if err != nil || changed.Description != "Refunds." {
			t.Errorf("the bound member changing its toolset's tool: %+v %v", changed, err)
		}
	})
}

// listAll lists every stored tool the actor may see, deleted ones included, two a page, and
// checks that no page's cursor holds the position of a tool outside visible.
func listAll(t *testing.T, p *platform.Platform, a platform.Actor, visible []string) []string {
	t.Helper()
	var got []string
	names := map[string]string{}
	q := platform.ToolQuery{Limit: 2, Deleted: store.DeletedInclude}
	for range 20 {
		page, err := p.ListTools(context.Background(), a, q)
		must(t, err)
		for _, tl := range page.Tools {
			got = append(got, tl.Name)
			names[tl.ID] = tl.Name
		}
		if page.NextCursor == "" {
			return got
		}
		f := store.ToolFilter{WorkspaceID: a.WorkspaceID, Deleted: store.DeletedInclude, Cursor: page.NextCursor}
		c, _, err := f.DecodeCursor()
		if err != nil || !slices.Contains(visible, names[c.ID]) {
			t.Fatalf("a cursor at %q (%v): not a tool listed to the actor", c.ID, err)
		}
		q.Cursor = page.NextCursor
	}
	t.Fatal("the listing does not end")
	return nil
}

// sameAsMissing checks that err refuses the tool id as missing is refused for tol_nope.
func sameAsMissing(t *testing.T, what string, err, missing error, id string) {
	t.Helper()
	var e, m *platform.Error
	if !errors.As(err, &e) || !errors.As(missing, &m) {
		t.Errorf("%s: %v, want the refusal of a missing tool (%v)", what, err, missing)
		return
	}
	if e.Kind != platform.NotFound || e.Field != m.Field || strings.ReplaceAll(e.Error(), id, "tol_nope") != m.Error() ||
		strings.ReplaceAll(e.Detail, id, "tol_nope") != m.Detail {
		t.Errorf("%s: %q (%s), a missing tool: %q (%s)", what, e.Error(), e.Kind, m.Error(), m.Kind)
	}
}

// adminAndMember makes workspace wsp_a with an admin, usr_a, and a member, usr_m.
func adminAndMember(t *testing.T, st store.Backend) {
	t.Helper()
	ctx := context.Background()
	must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_a", Name: "a"}))
	for _, u := range []struct {
		id   string
		role store.MemberRole
	}{{"usr_a", store.MemberRoleAdmin}, {"usr_m", store.MemberRoleMember}} {
		must(t, st.CreateUser(ctx, &store.User{ID: u.id, Email: u.id + "@example.com"}))
		must(t, st.AddMember(ctx, &store.Membership{WorkspaceID: "wsp_a", UserID: u.id, Role: u.role}))
	}
}
