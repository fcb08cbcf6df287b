package platform_test

import (
	"context"
	"testing"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
)

// Who may read and write the values of each layer, without HTTP: any key reads, members
// write, a user's values are the user's own or an admin's; secrets need the resolver's key.
func TestVariableRules(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_a", Name: "a"}))
	for _, u := range []struct{ id, email string }{{"usr_m", "m@example.com"}, {"usr_o", "o@example.com"}} {
		must(t, st.CreateUser(ctx, &store.User{ID: u.id, Email: u.email}))
		must(t, st.AddMember(ctx, &store.Membership{WorkspaceID: "wsp_a", UserID: u.id, Role: store.MemberRoleMember}))
	}
	th := &store.Thread{WorkspaceID: "wsp_a"}
	must(t, st.CreateThread(ctx, th))
	catalog := &agent.Catalog{Agents: map[string]*agent.Agent{"helper": {Name: "helper", Prompt: &agent.Prompt{Name: "helper"}}}}
	noKeys, err := platform.New(platform.Config{Store: st, Catalog: catalog})
	must(t, err)
	key, _, err := secret.GenerateKey()
	must(t, err)
	p, err := platform.New(platform.Config{Store: st, Catalog: catalog, Resolver: vars.New(st, secret.NewKeyring(key))})
	must(t, err)
	member := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", Role: store.KeyRoleMember, KeyID: "key_m"}
	viewer := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", Role: store.KeyRoleViewer, KeyID: "key_v"}
	thread := platform.Owner{Layer: store.LayerThread, ID: th.ID}
	helper := platform.Owner{Layer: store.LayerAgent, ID: "helper"}

	_, err = p.SetVariable(ctx, viewer, thread, platform.NewValue{Name: "REGION", Value: "eu"})
	refusal(t, "a viewer setting", err, platform.Forbidden, "")
	_, err = p.SetVariable(ctx, member, platform.Owner{Layer: store.LayerThread, ID: "thr_nope"}, platform.NewValue{Name: "REGION", Value: "eu"})
	refusal(t, "an unknown thread", err, platform.NotFound, "")
	_, err = p.SetVariable(ctx, member, platform.Owner{Layer: store.LayerAgent, ID: "nobody"}, platform.NewValue{Name: "REGION", Value: "eu"})
	refusal(t, "an agent the platform does not run", err, platform.NotFound, "agent")
	_, err = p.SetVariable(ctx, member, helper, platform.NewValue{Name: "REGION", Value: "eu", Scoped: true})
	refusal(t, "a scoped value on an agent", err, platform.Invalid, "scoped")
	_, err = p.SetVariable(ctx, member, platform.Owner{Layer: store.LayerUser, ID: "usr_o"}, platform.NewValue{Name: "REGION", Value: "eu"})
	refusal(t, "a member setting another member's value", err, platform.Forbidden, "")
	_, err = noKeys.SetVariable(ctx, member, thread, platform.NewValue{Name: "TOKEN", Value: "s3cret", Secret: true})
	refusal(t, "a secret without a key", err, platform.Unavailable, "")
	err = p.DeleteVariable(ctx, member, thread, "REGION")
	refusal(t, "removing a value never set", err, platform.NotFound, "name")

	for _, o := range []platform.Owner{thread, helper, {Layer: store.LayerUser, ID: "usr_m"}} {
		v, err := p.SetVariable(ctx, member, o, platform.NewValue{Name: "TOKEN", Value: "s3cret", Secret: true})
		if err != nil || !v.Secret || v.Value == "s3cret" {
			t.Fatalf("%s %s: set %+v, %v; want a sealed secret", o.Layer, o.ID, v, err)
		}
		list, err := p.Variables(ctx, viewer, o)
		if err != nil || len(list) != 1 || list[0].Name != "TOKEN" {
			t.Errorf("%s %s: a viewer reads %v, %v", o.Layer, o.ID, list, err)
		}
		must(t, p.DeleteVariable(ctx, member, o, "TOKEN"))
	}
}
