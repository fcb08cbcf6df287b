package platform_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// sourced is a Go tool standing for a tool of another source (the governance sees only
// Spec.Source and the annotations, whoever made the tool).
func sourced(t *testing.T, name, source string, hints quiver.Annotations) *quiver.Tool {
	t.Helper()
	tool, err := quiver.NewTool(quiver.Spec{Name: name, Description: "The tool " + name + ".", Source: source, Annotations: hints},
		func(context.Context, json.RawMessage) (any, error) { return "ran", nil })
	must(t, err)
	return tool
}

// governedState is how a workspace's registry offers a tool: whether it is permitted and
// whether its calls wait for a person.
func governedState(p *platform.Platform, ws, name string) (permitted, confirm bool) {
	tool, ok := p.Workspace(context.Background(), ws).Registry().Lookup(name)
	if !ok {
		return false, false
	}
	permitted, _ = (&quiver.Policy{}).Permits(tool)
	return permitted, tool.Spec().RequiresConfirmation
}

// TestGovernanceAcrossSourcesAndNodes: the operator's rules and a workspace's govern tools of
// every source alike; a workspace's rules set through one node govern the other node's calls
// within a second; only an admin sets them, from the version they read.
func TestGovernanceAcrossSourcesAndNodes(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, bst backendtest.Store) {
		ctx := context.Background()
		st := bst.(store.Backend)
		must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_a", Name: "a"}))
		must(t, st.CreateUser(ctx, &store.User{ID: "usr_a", Email: "a@example.com"}))
		must(t, st.AddMember(ctx, &store.Membership{WorkspaceID: "wsp_a", UserID: "usr_a", Role: store.MemberRoleAdmin}))
		storeClientTool(t, st, "wsp_a", "open_file")
		yes, no := quiver.Hint(true), quiver.Hint(false)
		shared := &quiver.Registry{}
		must(t, shared.Register(
			sourced(t, "payments.createRefund", "openapi:payments", quiver.Annotations{ReadOnlyHint: no}),
			sourced(t, "payments.listRefunds", "openapi:payments", quiver.Annotations{ReadOnlyHint: yes}),
			sourced(t, "github.delete_repository", "mcp:github", quiver.Annotations{DestructiveHint: yes}),
			sourced(t, "weather", "a2a:weather", quiver.Annotations{ReadOnlyHint: yes}),
		))
		operator := []quiver.Rule{{Source: "openapi:*", When: quiver.Hints{ReadOnly: no}, RequiresConfirmation: yes}}
		nodeA, err := platform.New(platform.Config{Store: st, Registry: shared, Governance: operator})
		must(t, err)
		nodeB, err := platform.New(platform.Config{Store: st, Registry: shared, Governance: operator})
		must(t, err)

		want := map[string][2]bool{ // permitted, confirm
			"payments.createRefund": {true, true}, "payments.listRefunds": {true, false},
			"github.delete_repository": {true, false}, "weather": {true, false}, "open_file": {true, false},
		}
		for name, w := range want {
			if p, c := governedState(nodeB, "wsp_a", name); p != w[0] || c != w[1] {
				t.Errorf("before the workspace's rules, %s: permitted %v, confirm %v; want %v", name, p, c, w)
			}
		}
		d := &quiver.Dispatcher{Registry: nodeB.Workspace(ctx, "wsp_a").Registry()}
		if r, _ := d.Dispatch(ctx, quiver.Call{ID: "c1", Name: "payments.createRefund", Args: json.RawMessage(`{}`)}); r.Code != quiver.CodeConfirmationRequired {
			t.Errorf("an OpenAPI write under the operator's rule: %+v, want %s", r, quiver.CodeConfirmationRequired)
		}

		admin := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_a", KeyID: "key_a", Role: store.KeyRoleAdmin}
		member := admin
		member.Role, member.KeyID = store.KeyRoleMember, "key_m"
		rules := []quiver.Rule{
			{Source: "mcp:*", When: quiver.Hints{Destructive: yes}, Access: quiver.AccessDeny},
			{Tools: []string{"open_file", "weather"}, RequiresConfirmation: yes},
		}
		_, err = nodeA.SetWorkspaceRules(ctx, member, rules, 0)
		refusal(t, "a member setting rules", err, platform.Forbidden, "")
		_, err = nodeA.SetWorkspaceRules(ctx, admin, []quiver.Rule{{RequiresConfirmation: no}}, 0)
		refusal(t, "a workspace lifting confirmations", err, platform.Invalid, "rules[0]")
		set, err := nodeA.SetWorkspaceRules(ctx, admin, rules, 0)
		must(t, err)
		if set.Version != 1 || len(set.Operator) != 1 || len(set.Workspace) != 2 || set.UpdatedBy != "usr_a" {
			t.Fatalf("rules as set: %+v", set)
		}
		_, err = nodeA.SetWorkspaceRules(ctx, admin, nil, 0)
		refusal(t, "a change from a version that is not the latest", err, platform.Conflict, "version")

		// Node B learns of them by the store's stamp, at its next look (at most a second on).
		start := time.Now()
		for {
			if p, _ := governedState(nodeB, "wsp_a", "github.delete_repository"); !p {
				break
			}
			if time.Since(start) > 3*time.Second {
				t.Fatal("node B still permits the denied tool 3 s after the rules were set on node A")
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("the other node applied the rules after %v", time.Since(start).Round(time.Millisecond))
		want["github.delete_repository"] = [2]bool{false, false}
		want["open_file"], want["weather"] = [2]bool{true, true}, [2]bool{true, true}
		for name, w := range want {
			if p, c := governedState(nodeB, "wsp_a", name); p != w[0] || c != w[1] {
				t.Errorf("with the workspace's rules, %s: permitted %v, confirm %v; want %v", name, p, c, w)
			}
		}
		d = &quiver.Dispatcher{Registry: nodeB.Workspace(ctx, "wsp_a").Registry()}
		r, _ := d.Dispatch(ctx, quiver.Call{ID: "c2", Name: "github.delete_repository", Args: json.RawMessage(`{}`)})
		if r.Code != quiver.CodePolicyDenied {
			t.Errorf("a denied remote tool: %+v, want %s", r, quiver.CodePolicyDenied)
		}

		// The operator's rules change for every workspace at once.
		must(t, nodeB.SetOperatorRules(ctx, nil))
		if _, c := governedState(nodeB, "wsp_a", "payments.createRefund"); c {
			t.Error("the operator's rule still holds after it was removed")
		}
		if err := nodeB.SetOperatorRules(ctx, []quiver.Rule{{Access: "maybe"}}); err == nil {
			t.Error("a bad operator rule was taken")
		}
	})
}
