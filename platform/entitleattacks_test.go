package platform_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

// Attacks on entitlements at the workspace's dispatcher, which every door calls through, and
// at its MCP server: a key bound to a toolset calling outside it, case and Unicode variants of
// a hidden name, a name MCP serves mapped, a hidden tool probed through its errors and through
// tools/call of names never listed, and a token whose claims change between requests.
func TestEntitlementAttacks(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	must(t, err)
	t.Cleanup(func() { st.Close() })
	must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_a", Name: "a"}))
	ran := map[string]int{}
	tool := func(name string) *quiver.Tool {
		return quiver.Func(name, "Does "+name+".", func(context.Context, struct{}) (string, error) { ran[name]++; return "ran " + name, nil })
	}
	shared := &quiver.Registry{}
	// "look up: refunds?" is a name MCP rejects: it is served mapped.
	must(t, shared.Register(tool("lookup_order"), tool("refund_payment"), tool("delete_repository"), tool("look up: refunds?")))
	p, err := platform.New(platform.Config{Store: st, Registry: shared})
	must(t, err)
	admin := platform.Actor{WorkspaceID: "wsp_a", Role: store.KeyRoleAdmin, KeyID: "key_admin"}
	_, err = p.SetEntitlements(ctx, admin, entitle.Document{
		Toolsets: []entitle.Toolset{{Name: "support", Include: []entitle.Selector{{Tools: []string{"lookup_order"}}}}},
		Rules: []entitle.Rule{
			{Who: entitle.Who{Claim: "groups", Value: "contractors"}, Selector: entitle.Selector{Tools: []string{"refund_payment", "delete_*", "look up*"}}, Access: quiver.AccessDeny},
		},
	}, 0)
	must(t, err)
	d := p.Workspace(ctx, "wsp_a").Dispatcher()

	bound := platform.Actor{WorkspaceID: "wsp_a", Role: store.KeyRoleAdmin, KeyID: "key_bound", Toolsets: []string{"support"}}
	contractor := platform.Actor{WorkspaceID: "wsp_a", Role: store.KeyRoleMember, UserID: "usr_c", Who: "token", Claims: map[string]any{"groups": []any{"contractors"}}}
	staff := contractor
	staff.Claims = map[string]any{"groups": []any{"staff"}}
	call := func(a platform.Actor, name string) *quiver.Result {
		r, err := d.Call(platform.WithActor(ctx, a), name, nil)
		must(t, err)
		return r
	}
	refusal := func(r *quiver.Result, name string) string {
		return strings.Replace(r.Error, fmt.Sprintf("%q", name), "NAME", 1)
	}
	want := refusal(call(bound, "no_such_tool"), "no_such_tool")
	for _, c := range []struct {
		who  platform.Actor
		name string
	}{
		{bound, "refund_payment"}, {bound, "delete_repository"}, {bound, "look up: refunds?"},
		{bound, "Lookup_Order"}, {bound, "LOOKUP_ORDER"}, {bound, "lookup_order "}, {bound, "lookup\u200border"}, {bound, "ｌookup_order"},
		{contractor, "refund_payment"}, {contractor, "Refund_Payment"}, {contractor, "refund_payment\x00"}, {contractor, "look up: refunds?"},
	} {
		r := call(c.who, c.name)
		if r.Code != quiver.CodeNotEntitled {
			t.Errorf("%s calling %q: %s %q, want not_entitled", c.who.KeyID+c.who.UserID, c.name, r.Code, r.Error)
			continue
		}
		if c.who.KeyID == "key_bound" && refusal(r, c.name) != want {
			t.Errorf("%q is refused as %q, a missing tool as %q: the two can be told apart", c.name, r.Error, want)
		}
		for _, hidden := range []string{"refund_payment", "delete_repository", "look up"} {
			if c.who.KeyID == "key_bound" && !strings.Contains(c.name, hidden) && strings.Contains(r.Error, hidden) {
				t.Errorf("the refusal of %q names the hidden %s: %q", c.name, hidden, r.Error)
			}
		}
	}
	if r := call(bound, "lookup_order"); r.IsError() {
		t.Errorf("the bound key's own tool: %+v", r)
	}
	// A token whose claims change between requests is decided by each request's claims.
	if r := call(staff, "refund_payment"); r.IsError() {
		t.Errorf("the same user as staff: %+v", r)
	}
	if r := call(contractor, "refund_payment"); r.Code != quiver.CodeNotEntitled {
		t.Errorf("the same user a contractor again: %+v", r)
	}
	if ran["refund_payment"] != 1 || ran["delete_repository"] != 0 || ran["look up: refunds?"] != 0 {
		t.Errorf("tools ran %v: only staff's refund should have", ran)
	}

	// Over MCP: the list shows the caller's tools alone, and a served (mapped) name, listed to
	// another caller or guessed, reaches nothing hidden.
	srv := mcp.NewServer(d, nil)
	t.Cleanup(srv.Close)
	session := func(a platform.Actor) *sdk.ClientSession {
		st, ct := sdk.NewInMemoryTransports()
		_, err := srv.Connect(platform.WithActor(ctx, a), st)
		must(t, err)
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "probe", Version: "1"}, nil).Connect(ctx, ct, nil)
		must(t, err)
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	names := func(cs *sdk.ClientSession) []string {
		res, err := cs.ListTools(ctx, nil)
		must(t, err)
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	all := names(session(admin))
	if len(all) != 4 {
		t.Fatalf("the admin is listed %v", all)
	}
	mapped := ""
	for _, n := range all {
		if strings.HasPrefix(n, "look") && n != "lookup_order" {
			mapped = n
		}
	}
	cs := session(contractor)
	if got := strings.Join(names(cs), ","); got != "lookup_order" {
		t.Errorf("the contractor is listed %s", got)
	}
	for _, name := range []string{mapped, "refund_payment", "delete_repository", "never_listed"} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name})
		must(t, err)
		if !res.IsError || !strings.Contains(textOf(res), "not_entitled") && !strings.Contains(textOf(res), "is available to this caller") {
			t.Errorf("the contractor's MCP call of %q: %+v", name, res)
		}
	}
	if ran["look up: refunds?"] != 0 || ran["delete_repository"] != 0 {
		t.Errorf("a hidden tool ran over MCP: %v", ran)
	}
}

func textOf(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// An admin who came with a key or a token is decided by the rules like anyone (the server's
// own workspace's admins too, whom the server marks as its operators); only the operator at a
// door that authenticates no one is not, unless it asked for a toolset.
func TestAdminsAreDecidedByTheRules(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	must(t, err)
	t.Cleanup(func() { st.Close() })
	must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_a", Name: "a"}))
	shared := &quiver.Registry{}
	must(t, shared.Register(quiver.Func("delete_repository", "Deletes.", func(context.Context, struct{}) (string, error) { return "gone", nil })))
	p, err := platform.New(platform.Config{Store: st, Registry: shared})
	must(t, err)
	_, err = p.SetEntitlements(ctx, platform.Operator("wsp_a", ""), entitle.Document{
		Toolsets: []entitle.Toolset{{Name: "none", Include: []entitle.Selector{{Tools: []string{"nothing"}}}}},
		Rules:    []entitle.Rule{{Who: entitle.Who{Role: "admin"}, Selector: entitle.Selector{Tools: []string{"delete_*"}}, Access: quiver.AccessDeny}},
	}, 0)
	must(t, err)
	d := p.Workspace(ctx, "wsp_a").Dispatcher()
	keyAdmin := platform.Actor{WorkspaceID: "wsp_a", Role: store.KeyRoleAdmin, KeyID: "key_admin", Operator: true}
	tokenAdmin := platform.Actor{WorkspaceID: "wsp_a", Role: store.KeyRoleAdmin, UserID: "usr_a", Who: "the access token of user usr_a", Operator: true}
	local := platform.Operator("wsp_a", "")
	localAtToolset := local
	localAtToolset.Toolset = "none"
	for _, c := range []struct {
		name string
		a    platform.Actor
		want quiver.Code
	}{
		{"an admin's key", keyAdmin, quiver.CodeNotEntitled},
		{"an admin's token", tokenAdmin, quiver.CodeNotEntitled},
		{"the operator at a door without authentication", local, ""},
		{"the same at a toolset's address", localAtToolset, quiver.CodeNotEntitled},
	} {
		r, err := d.Call(platform.WithActor(ctx, c.a), "delete_repository", nil)
		must(t, err)
		if r.Code != c.want {
			t.Errorf("%s: %s %q, want %q", c.name, r.Code, r.Error, c.want)
		}
	}
}

// Explain's subject is read within bounds, and a part it cannot read is refused naming it.
func TestExplainSubjectsRefused(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	must(t, err)
	t.Cleanup(func() { st.Close() })
	p, err := platform.New(platform.Config{Store: st, Registry: &quiver.Registry{}})
	must(t, err)
	for _, c := range []struct {
		name, spec, field string
	}{
		{"too long", "role:member," + strings.Repeat("agent:a,", 600), "subject"},
		{"too many parts", strings.TrimSuffix(strings.Repeat("agent:a,", 65), ","), "subject"},
		{"no kind", "member", "subject[0]"},
		{"an unknown kind", "role:member,group:x", "subject[1]"},
		{"a bad role", "role:owner", "subject[0]"},
		{"a claim without a value", "claim:groups", "subject[0]"},
		{"a toolset name with a slash", "toolset:a/b", "subject[0]"},
		{"a key of no one", "key:key_nobody", "subject[0]"},
	} {
		_, err := p.ParseSubject(ctx, "wsp_a", c.spec)
		var e *platform.Error
		if !errors.As(err, &e) || e.Field != c.field {
			t.Errorf("%s: %v, want a refusal naming %s", c.name, err, c.field)
		}
	}
	a, err := p.ParseSubject(ctx, "wsp_a", "role:member,claim:groups=support,agent:triage,agent:helper,toolset:support")
	must(t, err)
	if a.Role != store.KeyRoleMember || a.Toolset != "support" || strings.Join(a.Agents, ",") != "triage,helper" || a.Claims["groups"] == nil {
		t.Errorf("a good subject: %+v", a)
	}
}
