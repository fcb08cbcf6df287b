package platform_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// Issue 46: provider_name is the operator's to set. The operator's rule renames the tool every
// workspace's models are offered; a rule that could give the name to several tools stops the
// platform, or the operator's change, naming the rule; a workspace's rule that sets it is
// refused with the rule's index (a rename is not a tightening), and nothing is stored.
func TestGovernanceProviderNameIsTheOperators(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, bst backendtest.Store) {
		ctx := context.Background()
		st := bst.(store.Backend)
		must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_a", Name: "a"}))
		must(t, st.CreateUser(ctx, &store.User{ID: "usr_a", Email: "a@example.com"}))
		must(t, st.AddMember(ctx, &store.Membership{WorkspaceID: "wsp_a", UserID: "usr_a", Role: store.MemberRoleAdmin}))
		shared := &quiver.Registry{}
		must(t, shared.Register(sourced(t, "payments.createRefund", "openapi:payments", quiver.Annotations{})))
		rename := func(tool, name string) quiver.Rule { return quiver.Rule{Tools: []string{tool}, ProviderName: name} }

		for _, c := range []struct {
			name     string
			operator []quiver.Rule
			wantErr  string
		}{
			{"a pattern", []quiver.Rule{rename("payments.*", "refund")},
				`platform: governance rule 1: provider_name "refund" needs one tool named exactly, not the pattern "payments.*"`},
			{"a name a provider rejects", []quiver.Rule{{Timeout: quiver.Duration(time.Second)}, rename("payments.createRefund", "payments.refund")},
				`platform: governance rule 2: provider_name "payments.refund" is not a name every model provider accepts`},
			{"one name for two tools", []quiver.Rule{rename("payments.createRefund", "refund"), rename("payments.listRefunds", "refund")},
				`platform: governance rule 2: provider_name "refund" is given to "payments.createRefund" by rule 1 already`},
		} {
			_, err := platform.New(platform.Config{Store: st, Registry: shared, Governance: c.operator})
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: platform.New: %v; want it to say %q", c.name, err, c.wantErr)
			}
		}

		p, err := platform.New(platform.Config{Store: st, Registry: shared,
			Governance: []quiver.Rule{rename("payments.createRefund", "issue_refund")}})
		must(t, err)
		tool, ok := p.Workspace(ctx, "wsp_a").Registry().Lookup("payments.createRefund")
		if !ok || tool.ProviderName() != "issue_refund" {
			t.Fatalf("the operator's rename: %v, %q; want the tool offered to models as issue_refund", ok, tool.ProviderName())
		}
		if err := p.SetOperatorRules(ctx, []quiver.Rule{rename("payments.createRefund", "refund"), rename("weather", "refund")}); err == nil {
			t.Error("the operator's change giving one name to two tools was taken")
		}
		if tool, _ := p.Workspace(ctx, "wsp_a").Registry().Lookup("payments.createRefund"); tool.ProviderName() != "issue_refund" {
			t.Errorf("after a refused change the tool is offered as %q; want the rules in force kept", tool.ProviderName())
		}

		admin := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_a", KeyID: "key_a", Role: store.KeyRoleAdmin}
		_, err = p.SetWorkspaceRules(ctx, admin, []quiver.Rule{{Source: "mcp:*", Access: quiver.AccessDeny}, rename("payments.createRefund", "refund")}, 0)
		refusal(t, "a workspace renaming a tool", err, platform.Invalid, "rules[1]")
		if want := `rules[1]: a workspace's rule may not set provider_name ("refund"): a rename is not a tightening`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %v; want it to say %q", err, want)
		}
		if g, err := p.Governance(ctx, admin); err != nil || g.Version != 0 || len(g.Workspace) != 0 {
			t.Errorf("after the refusal the workspace's rules are %+v, %v; want none stored", g, err)
		}
	})
}
