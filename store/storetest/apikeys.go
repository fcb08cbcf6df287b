package storetest

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

// APIKeysStore is a store with entities and API keys.
type APIKeysStore interface {
	store.Entities
	store.APIKeys
}

// RunAPIKeys runs the conformance tests of store.APIKeys against fresh stores from open.
func RunAPIKeys(t *testing.T, open func(t *testing.T) APIKeysStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s APIKeysStore)
	}{
		{"CreateWithinTheUsersRole", testKeyCreate},
		{"RefusesBadKeys", testKeyRefusals},
		{"FoundByHashWithTheUsersRoleNow", testKeyByHash},
		{"ListedAndRevokedInTheirWorkspaceOnly", testKeyListRevoke},
		{"TouchNeverMovesBack", testKeyTouch},
		{"BoundToToolsets", testKeyToolsets},
		{"RefusesBadToolsets", testKeyToolsetRefusals},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

func keyHash() []byte {
	h := make([]byte, store.APIKeyHashSize)
	rand.Read(h)
	return h
}

// keyFixture is a workspace with an admin and a member, and a user outside it.
func keyFixture(t *testing.T, s APIKeysStore) (ws *store.Workspace, admin, member, outsider *store.User) {
	t.Helper()
	ws = &store.Workspace{Name: "keys"}
	mustOK(t, "CreateWorkspace", s.CreateWorkspace(ctx, ws))
	admin, member, outsider = newUser(t, s, "admin"), newUser(t, s, "member"), newUser(t, s, "outsider")
	addMember(t, s, ws.ID, admin.ID, store.MemberRoleAdmin)
	addMember(t, s, ws.ID, member.ID, store.MemberRoleMember)
	return ws, admin, member, outsider
}

func newKey(ws, user string, role store.KeyRole) *store.APIKey {
	return &store.APIKey{WorkspaceID: ws, UserID: user, Name: "ci " + string(role), Role: role, Prefix: "qvk_Ab12", Hash: keyHash()}
}

func testKeyCreate(t *testing.T, s APIKeysStore) {
	ws, admin, member, outsider := keyFixture(t, s)
	tests := []struct {
		name string
		user string
		role store.KeyRole
		want error
	}{
		{"an admin's admin key", admin.ID, store.KeyRoleAdmin, nil},
		{"an admin's viewer key", admin.ID, store.KeyRoleViewer, nil},
		{"a member's member key", member.ID, store.KeyRoleMember, nil},
		{"a member's viewer key", member.ID, store.KeyRoleViewer, nil},
		{"a member's admin key", member.ID, store.KeyRoleAdmin, store.ErrForbidden},
		{"an outsider's key", outsider.ID, store.KeyRoleViewer, store.ErrForbidden},
		{"an unknown user's key", "usr_missing", store.KeyRoleViewer, store.ErrForbidden},
	}
	for _, tt := range tests {
		k := newKey(ws.ID, tt.user, tt.role)
		err := s.CreateAPIKey(ctx, k)
		wantErr(t, tt.name, err, tt.want)
		if tt.want == nil && (k.ID == "" || k.CreatedAt.IsZero()) {
			t.Errorf("%s: id %q, created %v", tt.name, k.ID, k.CreatedAt)
		}
	}
	keys, err := s.APIKeys(ctx, ws.ID)
	mustOK(t, "APIKeys", err)
	if len(keys) != 4 {
		t.Errorf("%d keys stored, want the 4 allowed", len(keys))
	}
}

func testKeyRefusals(t *testing.T, s APIKeysStore) {
	ws, admin, _, _ := keyFixture(t, s)
	past := time.Now().Add(-time.Minute)
	tests := []struct {
		name   string
		change func(k *store.APIKey)
		want   error
	}{
		{"no role", func(k *store.APIKey) { k.Role = "" }, store.ErrInvalid},
		{"an unknown role", func(k *store.APIKey) { k.Role = "owner" }, store.ErrInvalid},
		{"no name", func(k *store.APIKey) { k.Name = "" }, store.ErrInvalid},
		{"a name of 101 characters", func(k *store.APIKey) { k.Name = string(make([]byte, 101)) }, store.ErrInvalid},
		{"a short hash", func(k *store.APIKey) { k.Hash = k.Hash[:16] }, store.ErrInvalid},
		{"no prefix", func(k *store.APIKey) { k.Prefix = "" }, store.ErrInvalid},
		{"expired already", func(k *store.APIKey) { k.ExpiresAt = &past }, store.ErrInvalid},
		{"no workspace", func(k *store.APIKey) { k.WorkspaceID = "" }, store.ErrInvalid},
		{"an unknown workspace", func(k *store.APIKey) { k.WorkspaceID = "wsp_missing" }, store.ErrForbidden},
	}
	for _, tt := range tests {
		k := newKey(ws.ID, admin.ID, store.KeyRoleAdmin)
		tt.change(k)
		wantErr(t, tt.name, s.CreateAPIKey(ctx, k), tt.want)
	}
	k := newKey(ws.ID, admin.ID, store.KeyRoleAdmin)
	mustOK(t, "CreateAPIKey", s.CreateAPIKey(ctx, k))
	again := newKey(ws.ID, admin.ID, store.KeyRoleViewer)
	again.Hash = k.Hash
	wantErr(t, "the same hash again", s.CreateAPIKey(ctx, again), store.ErrConflict)
	keys, err := s.APIKeys(ctx, ws.ID)
	mustOK(t, "APIKeys", err)
	if len(keys) != 1 {
		t.Errorf("%d keys stored after the refusals, want 1", len(keys))
	}
}

func testKeyByHash(t *testing.T, s APIKeysStore) {
	ws, admin, _, _ := keyFixture(t, s)
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	k := newKey(ws.ID, admin.ID, store.KeyRoleAdmin)
	k.ExpiresAt = &later
	mustOK(t, "CreateAPIKey", s.CreateAPIKey(ctx, k))
	got, role, err := s.APIKeyByHash(ctx, k.Hash)
	mustOK(t, "APIKeyByHash", err)
	if got.ID != k.ID || got.UserID != admin.ID || got.Role != store.KeyRoleAdmin || role != store.MemberRoleAdmin ||
		got.ExpiresAt == nil || !got.ExpiresAt.Equal(later) || string(got.Hash) != string(k.Hash) {
		t.Fatalf("APIKeyByHash: %+v as %s, want the key made (expiring %v) as admin", got, role, later)
	}
	if eff := got.Role.Effective(role); eff != store.KeyRoleAdmin {
		t.Errorf("effective role %q, want admin", eff)
	}
	// The user is demoted: the admin key may do what a member may, no more.
	other := newUser(t, s, "second-admin")
	addMember(t, s, ws.ID, other.ID, store.MemberRoleAdmin)
	mustOK(t, "SetMemberRole", s.SetMemberRole(ctx, ws.ID, admin.ID, store.MemberRoleMember))
	got, role, err = s.APIKeyByHash(ctx, k.Hash)
	mustOK(t, "APIKeyByHash", err)
	if eff := got.Role.Effective(role); role != store.MemberRoleMember || eff != store.KeyRoleMember {
		t.Errorf("after the demotion: role %q, effective %q; want member, member", role, eff)
	}
	// The user leaves the workspace: the key does nothing.
	mustOK(t, "RemoveMember", s.RemoveMember(ctx, ws.ID, admin.ID))
	got, role, err = s.APIKeyByHash(ctx, k.Hash)
	mustOK(t, "APIKeyByHash", err)
	if eff := got.Role.Effective(role); role != "" || eff != "" {
		t.Errorf("after the user left: role %q, effective %q; want none", role, eff)
	}
	_, _, err = s.APIKeyByHash(ctx, keyHash())
	wantErr(t, "an unknown hash", err, store.ErrNotFound)
}

func testKeyListRevoke(t *testing.T, s APIKeysStore) {
	ws, admin, member, _ := keyFixture(t, s)
	otherWS, otherAdmin, _, _ := keyFixture(t, s)
	first, second := newKey(ws.ID, admin.ID, store.KeyRoleAdmin), newKey(ws.ID, member.ID, store.KeyRoleViewer)
	mustOK(t, "CreateAPIKey", s.CreateAPIKey(ctx, first))
	mustOK(t, "CreateAPIKey", s.CreateAPIKey(ctx, second))
	foreign := newKey(otherWS.ID, otherAdmin.ID, store.KeyRoleAdmin)
	mustOK(t, "CreateAPIKey", s.CreateAPIKey(ctx, foreign))
	keys, err := s.APIKeys(ctx, ws.ID)
	mustOK(t, "APIKeys", err)
	if len(keys) != 2 || keys[0].ID != second.ID || keys[1].ID != first.ID {
		t.Fatalf("APIKeys: %d keys, want the workspace's two, newest first", len(keys))
	}
	_, err = s.RevokeAPIKey(ctx, ws.ID, foreign.ID)
	wantErr(t, "revoking another workspace's key", err, store.ErrNotFound)
	if got, _, _ := s.APIKeyByHash(ctx, foreign.Hash); got.RevokedAt != nil {
		t.Error("another workspace's key was revoked")
	}
	revoked, err := s.RevokeAPIKey(ctx, ws.ID, first.ID)
	mustOK(t, "RevokeAPIKey", err)
	if revoked.RevokedAt == nil || revoked.Usable(time.Now()) {
		t.Fatalf("revoked key: %+v", revoked)
	}
	again, err := s.RevokeAPIKey(ctx, ws.ID, first.ID)
	mustOK(t, "RevokeAPIKey again", err)
	if !again.RevokedAt.Equal(*revoked.RevokedAt) {
		t.Errorf("revoking again moved the time from %v to %v", revoked.RevokedAt, again.RevokedAt)
	}
	got, _, err := s.APIKeyByHash(ctx, first.Hash)
	mustOK(t, "APIKeyByHash", err)
	if got.Usable(time.Now()) {
		t.Error("a revoked key is usable")
	}
	_, err = s.RevokeAPIKey(ctx, ws.ID, "key_missing")
	wantErr(t, "revoking an unknown key", err, store.ErrNotFound)
}

func testKeyTouch(t *testing.T, s APIKeysStore) {
	ws, admin, _, _ := keyFixture(t, s)
	k := newKey(ws.ID, admin.ID, store.KeyRoleMember)
	mustOK(t, "CreateAPIKey", s.CreateAPIKey(ctx, k))
	at := time.Now().UTC().Truncate(time.Microsecond)
	mustOK(t, "TouchAPIKey", s.TouchAPIKey(ctx, k.ID, at))
	mustOK(t, "TouchAPIKey earlier", s.TouchAPIKey(ctx, k.ID, at.Add(-time.Hour)))
	got, _, err := s.APIKeyByHash(ctx, k.Hash)
	mustOK(t, "APIKeyByHash", err)
	if got.LastUsedAt == nil || !got.LastUsedAt.Equal(at) {
		t.Errorf("last used %v, want %v (an earlier use does not move it back)", got.LastUsedAt, at)
	}
	wantErr(t, "touching an unknown key", s.TouchAPIKey(ctx, "key_missing", at), store.ErrNotFound)
}
