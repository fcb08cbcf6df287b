package platform_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// The rules of workspaces, members and keys hold without HTTP: who may do what, and each
// refusal's kind and input.
func TestAccessRules(t *testing.T) {
	w := newToolWorld(t)
	ctx := context.Background()
	past := time.Now().Add(-time.Hour)

	_, err := w.p.Keys(ctx, w.member)
	refusal(t, "a member listing keys", err, platform.Forbidden, "")
	_, _, err = w.p.CreateKey(ctx, w.admin, platform.NewKey{UserID: "usr_m", Role: store.KeyRoleAdmin, Name: "k"})
	refusal(t, "an admin key for a member", err, platform.Invalid, "role")
	_, _, err = w.p.CreateKey(ctx, w.admin, platform.NewKey{UserID: "usr_x", Role: store.KeyRoleViewer, Name: "k"})
	refusal(t, "a key for a user who is no member", err, platform.Invalid, "user_id")
	_, _, err = w.p.CreateKey(ctx, w.admin, platform.NewKey{Role: store.KeyRoleViewer, Name: "k", ExpiresAt: &past})
	refusal(t, "a key that expired already", err, platform.Invalid, "expires_at")
	_, err = w.p.RevokeKey(ctx, w.admin, "usr_m")
	refusal(t, "revoking an id of another kind", err, platform.Invalid, "id")

	k, secret, err := w.p.CreateKey(ctx, w.admin, platform.NewKey{UserID: "usr_m", Role: store.KeyRoleViewer, Name: "reader"})
	must(t, err)
	if !strings.HasPrefix(secret, platform.APIKeyPrefix) || len(secret) != platform.APIKeyLength || k.UserID != "usr_m" {
		t.Errorf("key %+v, secret of %d characters", k, len(secret))
	}
	if ks, err := w.p.Keys(ctx, w.admin); err != nil || len(ks) != 1 {
		t.Errorf("keys: %v %v", ks, err)
	}

	_, _, _, err = w.p.CreateWorkspace(ctx, w.admin, "second", "")
	refusal(t, "a tenant's admin making a workspace", err, platform.Forbidden, "")
	operator := w.admin
	operator.Operator = true
	ws, first, secret, err := w.p.CreateWorkspace(ctx, operator, "second", "")
	must(t, err)
	if first.WorkspaceID != ws.ID || first.Role != store.KeyRoleAdmin || secret == "" || ws.RetentionTier != store.DefaultRetentionTier {
		t.Errorf("workspace %+v, first key %+v", ws, first)
	}
	_, err = w.p.WorkspaceRecord(ctx, w.admin, ws.ID)
	refusal(t, "another workspace", err, platform.NotFound, "")
	name := "renamed"
	_, err = w.p.UpdateWorkspace(ctx, w.member, "wsp_a", platform.WorkspaceChange{Name: &name})
	refusal(t, "a member renaming the workspace", err, platform.Forbidden, "")
	_, err = w.p.UpdateWorkspace(ctx, w.admin, "wsp_a", platform.WorkspaceChange{DefaultRuntimeUserID: platform.Optional[string]{Set: true, Value: "usr_x"}})
	refusal(t, "a default runtime user who is no member", err, platform.Invalid, "default_runtime_user_id")

	_, err = w.p.AddMember(ctx, w.admin, "not an email", "", "")
	refusal(t, "a member without an email", err, platform.Invalid, "email")
	_, err = w.p.AddMember(ctx, w.member, "n@example.com", "", "")
	refusal(t, "a member adding a member", err, platform.Forbidden, "")
	m, err := w.p.AddMember(ctx, w.admin, "N@Example.com", "New", "")
	must(t, err)
	if m.Role != store.MemberRoleMember || m.User.Name != "New" {
		t.Errorf("added %+v %+v", m.Membership, m.User)
	}
	err = w.p.RemoveMember(ctx, w.admin, "usr_nobody")
	refusal(t, "removing no member", err, platform.NotFound, "")
	_, err = w.p.SetMemberRole(ctx, w.admin, "usr_a", store.MemberRoleMember)
	if err == nil {
		t.Error("the last admin became a member")
	}
	if ms, err := w.p.Members(ctx, w.viewer); err != nil || len(ms) != 3 {
		t.Errorf("members: %v %v", ms, err)
	}
}
