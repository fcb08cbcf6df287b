package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

func testWorkspaces(t *testing.T, s store.Entities) {
	w := &store.Workspace{Name: "Acme Corp"}
	mustOK(t, "CreateWorkspace", s.CreateWorkspace(ctx, w))
	if !strings.HasPrefix(w.ID, store.PrefixWorkspace+"_") || w.RetentionTier != store.DefaultRetentionTier || w.CreatedAt.IsZero() ||
		!w.UpdatedAt.Equal(w.CreatedAt) {
		t.Fatalf("CreateWorkspace did not fill id, tier and times: %+v", w)
	}
	got, err := s.Workspace(ctx, w.ID)
	mustOK(t, "Workspace", err)
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("Workspace = %+v, want %+v", got, w)
	}
	_, err = s.Workspace(ctx, "wsp_missing")
	wantErr(t, "missing workspace", err, store.ErrNotFound)
	for _, tc := range []struct {
		name string
		w    store.Workspace
		want error
	}{
		{"no name", store.Workspace{}, store.ErrInvalid},
		{"blank name", store.Workspace{Name: "  "}, store.ErrInvalid},
		{"control character", store.Workspace{Name: "a\x01b"}, store.ErrInvalid},
		{"long name", store.Workspace{Name: strings.Repeat("n", store.MaxNameLen+1)}, store.ErrInvalid},
		{"unknown tier", store.Workspace{Name: "x", RetentionTier: "forever"}, store.ErrInvalid},
		{"runtime user before members", store.Workspace{Name: "x", DefaultRuntimeUserID: "usr_1"}, store.ErrInvalid},
		{"taken id", store.Workspace{Name: "x", ID: w.ID}, store.ErrConflict},
		{"every tier: short", store.Workspace{Name: "x", RetentionTier: store.RetentionShort}, nil},
		{"every tier: none", store.Workspace{Name: "x", RetentionTier: store.RetentionNone}, nil},
	} {
		wantErr(t, "CreateWorkspace "+tc.name, s.CreateWorkspace(ctx, &tc.w), tc.want)
	}

	admin, member, outsider := newUser(t, s, "admin"), newUser(t, s, "member"), newUser(t, s, "outsider")
	addMember(t, s, w.ID, admin.ID, store.MemberRoleAdmin)
	addMember(t, s, w.ID, member.ID, store.MemberRoleMember)
	for _, tc := range []struct {
		name   string
		caller string
		fn     func(*store.Workspace) error
		want   error
	}{
		{"rename by a member", member.ID, func(w *store.Workspace) error { w.Name = "Acme"; return nil }, nil},
		{"tier", member.ID, func(w *store.Workspace) error { w.RetentionTier = store.RetentionLong; return nil }, nil},
		{"bad tier", admin.ID, func(w *store.Workspace) error { w.RetentionTier = "x"; return nil }, store.ErrInvalid},
		{"id", admin.ID, func(w *store.Workspace) error { w.ID = "wsp_other"; return nil }, store.ErrInvalid},
		{"created at", admin.ID, func(w *store.Workspace) error { w.CreatedAt = w.CreatedAt.Add(time.Hour); return nil }, store.ErrInvalid},
		{"runtime user by a member", member.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = member.ID; return nil }, store.ErrForbidden},
		{"runtime user by nobody", "", func(w *store.Workspace) error { w.DefaultRuntimeUserID = member.ID; return nil }, store.ErrForbidden},
		{"runtime user by an outsider", outsider.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = outsider.ID; return nil }, store.ErrForbidden},
		{"runtime user not a member", admin.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = outsider.ID; return nil }, store.ErrInvalid},
		{"runtime user no such user", admin.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = "usr_missing"; return nil }, store.ErrInvalid},
		{"fn fails", admin.ID, func(w *store.Workspace) error { w.Name = "lost"; return errSentinel }, errSentinel},
		{"runtime user by an admin", admin.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = member.ID; return nil }, nil},
		{"clearing it by a member", member.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = ""; return nil }, store.ErrForbidden},
	} {
		_, err := s.UpdateWorkspace(ctx, w.ID, tc.caller, tc.fn)
		wantErr(t, "UpdateWorkspace "+tc.name, err, tc.want)
	}
	got, err = s.Workspace(ctx, w.ID)
	mustOK(t, "Workspace", err)
	if got.Name != "Acme" || got.RetentionTier != store.RetentionLong || got.DefaultRuntimeUserID != member.ID || got.UpdatedAt.Before(w.UpdatedAt) {
		t.Fatalf("after updates: %+v", got)
	}
	_, err = s.UpdateWorkspace(ctx, "wsp_missing", admin.ID, func(*store.Workspace) error { return nil })
	wantErr(t, "UpdateWorkspace missing", err, store.ErrNotFound)
}

var errSentinel = errors.New("fn refused")

func testUsers(t *testing.T, s store.Entities) {
	u := &store.User{Email: " Ada@Example.com", Name: "Ada"}
	mustOK(t, "CreateUser", s.CreateUser(ctx, u))
	if !strings.HasPrefix(u.ID, store.PrefixUser+"_") || u.CreatedAt.IsZero() || u.Email != "Ada@Example.com" {
		t.Fatalf("CreateUser: %+v", u)
	}
	for _, id := range []string{u.ID} {
		got, err := s.User(ctx, id)
		mustOK(t, "User", err)
		if !reflect.DeepEqual(got, u) {
			t.Fatalf("User = %+v, want %+v", got, u)
		}
	}
	for _, email := range []string{"ada@example.com", "ADA@EXAMPLE.COM", " Ada@Example.com "} {
		got, err := s.UserByEmail(ctx, email)
		mustOK(t, "UserByEmail "+email, err)
		if got.ID != u.ID {
			t.Fatalf("UserByEmail(%q) = %s", email, got.ID)
		}
	}
	_, err := s.UserByEmail(ctx, "bob@example.com")
	wantErr(t, "UserByEmail missing", err, store.ErrNotFound)
	_, err = s.User(ctx, "usr_missing")
	wantErr(t, "User missing", err, store.ErrNotFound)
	for _, tc := range []struct {
		u    store.User
		want error
	}{
		{store.User{Email: "ada@EXAMPLE.com"}, store.ErrConflict},
		{store.User{Email: ""}, store.ErrInvalid},
		{store.User{Email: "ada"}, store.ErrInvalid},
		{store.User{Email: "@example.com"}, store.ErrInvalid},
		{store.User{Email: "a b@example.com"}, store.ErrInvalid},
		{store.User{Email: "bob@example.com", ID: u.ID}, store.ErrConflict},
		{store.User{Email: "bob@example.com"}, nil},
	} {
		wantErr(t, fmt.Sprintf("CreateUser %+v", tc.u), s.CreateUser(ctx, &tc.u), tc.want)
	}
}

func testMemberships(t *testing.T, s store.Entities) {
	w := &store.Workspace{Name: "w"}
	mustOK(t, "CreateWorkspace", s.CreateWorkspace(ctx, w))
	a, b, c := newUser(t, s, "a"), newUser(t, s, "b"), newUser(t, s, "c")
	for _, tc := range []struct {
		name string
		m    store.Membership
		want error
	}{
		{"admin", store.Membership{WorkspaceID: w.ID, UserID: a.ID, Role: store.MemberRoleAdmin}, nil},
		{"member", store.Membership{WorkspaceID: w.ID, UserID: b.ID, Role: store.MemberRoleMember}, nil},
		{"twice", store.Membership{WorkspaceID: w.ID, UserID: b.ID, Role: store.MemberRoleAdmin}, store.ErrConflict},
		{"unknown role", store.Membership{WorkspaceID: w.ID, UserID: c.ID, Role: "owner"}, store.ErrInvalid},
		{"no role", store.Membership{WorkspaceID: w.ID, UserID: c.ID}, store.ErrInvalid},
		{"no workspace", store.Membership{WorkspaceID: "wsp_missing", UserID: c.ID, Role: store.MemberRoleMember}, store.ErrNotFound},
		{"no user", store.Membership{WorkspaceID: w.ID, UserID: "usr_missing", Role: store.MemberRoleMember}, store.ErrNotFound},
	} {
		wantErr(t, "AddMember "+tc.name, s.AddMember(ctx, &tc.m), tc.want)
	}
	m, err := s.Member(ctx, w.ID, a.ID)
	mustOK(t, "Member", err)
	if m.Role != store.MemberRoleAdmin || m.CreatedAt.IsZero() {
		t.Fatalf("Member = %+v", m)
	}
	_, err = s.Member(ctx, w.ID, c.ID)
	wantErr(t, "Member of a non-member", err, store.ErrNotFound)
	ms, err := s.Members(ctx, w.ID)
	mustOK(t, "Members", err)
	if len(ms) != 2 || ms[0].UserID != a.ID || ms[1].UserID != b.ID {
		t.Fatalf("Members = %+v", ms)
	}

	wantErr(t, "demote the last admin", s.SetMemberRole(ctx, w.ID, a.ID, store.MemberRoleMember), store.ErrInvalid)
	wantErr(t, "remove the last admin", s.RemoveMember(ctx, w.ID, a.ID), store.ErrInvalid)
	wantErr(t, "SetMemberRole unknown role", s.SetMemberRole(ctx, w.ID, b.ID, "owner"), store.ErrInvalid)
	wantErr(t, "SetMemberRole non-member", s.SetMemberRole(ctx, w.ID, c.ID, store.MemberRoleAdmin), store.ErrNotFound)
	wantErr(t, "RemoveMember non-member", s.RemoveMember(ctx, w.ID, c.ID), store.ErrNotFound)
	mustOK(t, "promote b", s.SetMemberRole(ctx, w.ID, b.ID, store.MemberRoleAdmin))
	mustOK(t, "demote a, no longer the last admin", s.SetMemberRole(ctx, w.ID, a.ID, store.MemberRoleMember))
	if m, err := s.Member(ctx, w.ID, a.ID); err != nil || m.Role != store.MemberRoleMember {
		t.Fatalf("after demotion: %+v, %v", m, err)
	}

	// The default runtime user and a tool's runtime user can be removed: a person's removal
	// is not held up by the tools that run as them (the runtime refuses to run those). The
	// records keep naming them until an admin names another member.
	addMember(t, s, w.ID, c.ID, store.MemberRoleMember)
	_, err = s.UpdateWorkspace(ctx, w.ID, b.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = c.ID; return nil })
	mustOK(t, "set default runtime user", err)
	in := &store.Schema{WorkspaceID: w.ID, Content: json.RawMessage(`{}`)}
	mustOK(t, "CreateSchema", s.CreateSchema(ctx, in))
	tool := &store.Tool{WorkspaceID: w.ID, Name: "ask", Target: store.TargetClient, InputSchemaID: in.ID, OutputSchemaID: in.ID,
		CreatedBy: b.ID, RuntimeUserID: c.ID}
	mustOK(t, "CreateTool with runtime user", s.CreateTool(ctx, tool))
	mustOK(t, "remove the default runtime user, a tool's runtime user", s.RemoveMember(ctx, w.ID, c.ID))
	_, err = s.Member(ctx, w.ID, c.ID)
	wantErr(t, "Member after removal", err, store.ErrNotFound)
	ms, _ = s.Members(ctx, w.ID)
	if len(ms) != 2 {
		t.Fatalf("Members after removal: %+v", ms)
	}
	if got, err := s.Workspace(ctx, w.ID); err != nil || got.DefaultRuntimeUserID != c.ID {
		t.Fatalf("the workspace after its default runtime user's removal: %+v, %v", got, err)
	}
	// Other changes keep the former member named; naming them again is refused.
	got, err := s.UpdateTool(ctx, w.ID, tool.ID, b.ID, func(t *store.Tool) error { t.Description = "still c's"; return nil })
	mustOK(t, "UpdateTool of a former member's tool", err)
	if got.RuntimeUserID != c.ID {
		t.Fatalf("the tool after its runtime user's removal: %+v", got)
	}
	_, err = s.UpdateWorkspace(ctx, w.ID, b.ID, func(w *store.Workspace) error { w.Name = "renamed"; return nil })
	mustOK(t, "rename a workspace whose default runtime user left", err)
	_, err = s.UpdateTool(ctx, w.ID, tool.ID, b.ID, func(t *store.Tool) error { t.RuntimeUserID = ""; return nil })
	mustOK(t, "clear the runtime user", err)
	_, err = s.UpdateTool(ctx, w.ID, tool.ID, b.ID, func(t *store.Tool) error { t.RuntimeUserID = c.ID; return nil })
	wantErr(t, "name a former member as runtime user again", err, store.ErrInvalid)
	_, err = s.UpdateWorkspace(ctx, w.ID, b.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = ""; return nil })
	mustOK(t, "clear default runtime user", err)
	_, err = s.UpdateWorkspace(ctx, w.ID, b.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = c.ID; return nil })
	wantErr(t, "name a former member as default runtime user again", err, store.ErrInvalid)
}

func testRuntimeUser(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	other := newFixture(t, s, "other")
	member2 := newUser(t, s, "member2")
	addMember(t, s, f.ws.ID, member2.ID, store.MemberRoleMember)
	tool := f.create(t, f.serverTool("search"))

	set := func(u string) func(*store.Tool) error {
		return func(t *store.Tool) error { t.RuntimeUserID = u; return nil }
	}
	for _, tc := range []struct {
		name, caller string
		fn           func(*store.Tool) error
		want         error
	}{
		{"by a member", f.member.ID, set(member2.ID), store.ErrForbidden},
		{"by nobody", "", set(member2.ID), store.ErrForbidden},
		{"by an outsider", f.outsider.ID, set(member2.ID), store.ErrForbidden},
		{"by an admin of another workspace", other.admin.ID, set(member2.ID), store.ErrForbidden},
		{"to an outsider", f.admin.ID, set(f.outsider.ID), store.ErrInvalid},
		{"to a member of another workspace", f.admin.ID, set(other.member.ID), store.ErrInvalid},
		{"to no such user", f.admin.ID, set("usr_missing"), store.ErrInvalid},
		{"by an admin, to a member", f.admin.ID, set(member2.ID), nil},
		{"other fields by a member", f.member.ID, func(t *store.Tool) error { t.Enabled = false; return nil }, nil},
		{"cleared by a member", f.member.ID, set(""), store.ErrForbidden},
		{"changed by a member", f.member.ID, set(f.member.ID), store.ErrForbidden},
		{"to the admin, by the admin", f.admin.ID, set(f.admin.ID), nil},
		{"cleared by an admin", f.admin.ID, set(""), nil},
	} {
		_, err := s.UpdateTool(ctx, f.ws.ID, tool.ID, tc.caller, tc.fn)
		wantErr(t, "set runtime user "+tc.name, err, tc.want)
		if err != nil {
			t.Logf("%s: %v", tc.name, err)
		}
	}
	got, _ := s.Tool(ctx, f.ws.ID, tool.ID)
	if got.RuntimeUserID != "" || got.Enabled {
		t.Fatalf("after the updates: %+v", got)
	}

	// At creation, the creator is the one setting it.
	for _, tc := range []struct {
		name, creator, runtime string
		want                   error
	}{
		{"by a member", f.member.ID, member2.ID, store.ErrForbidden},
		{"without a creator", "", member2.ID, store.ErrForbidden},
		{"to an outsider", f.admin.ID, f.outsider.ID, store.ErrInvalid},
		{"by an admin, to a member", f.admin.ID, member2.ID, nil},
	} {
		tool := f.serverTool("create_" + strings.ReplaceAll(tc.name, " ", "_"))
		tool.CreatedBy, tool.RuntimeUserID = tc.creator, tc.runtime
		wantErr(t, "CreateTool runtime user "+tc.name, s.CreateTool(ctx, tool), tc.want)
	}
}
