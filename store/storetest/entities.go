package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

// OpenEntities returns a fresh, empty entity store that the test owns (and closes through
// t.Cleanup).
type OpenEntities func(t *testing.T) store.Entities

// RunEntities runs the conformance tests of store.Entities against stores returned by
// open:
//
//	func TestEntities(t *testing.T) {
//		storetest.RunEntities(t, func(t *testing.T) store.Entities { return openTemp(t) })
//	}
func RunEntities(t *testing.T, open OpenEntities) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Entities)
	}{
		{"Workspaces", testWorkspaces},
		{"Users", testUsers},
		{"Memberships", testMemberships},
		{"Schemas", testSchemas},
		{"FunctionsAndVersions", testFunctions},
		{"ToolRules", testToolRules},
		{"ToolRoundTrip", testToolRoundTrip},
		{"ToolJSON", testToolJSON},
		{"SystemTools", testSystemTools},
		{"UpdateTool", testUpdateTool},
		{"RuntimeUser", testRuntimeUser},
		{"Pinning", testPinning},
		{"SoftDelete", testSoftDelete},
		{"PurgeWithInjectedClock", testPurge},
		{"ToolsStamp", testToolsStamp},
		{"ListingFilters", testListing},
		{"ListingArguments", testListingArguments},
		{"WorkspaceIsolation", testEntityIsolation},
		{"ConcurrentSameName", testConcurrentSameName},
		{"ConcurrentVersions", testConcurrentVersions},
		{"ConcurrentMembership", testConcurrentMembership},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

// fixture is a workspace with an admin, a member, an outsider (a user of the store who is not
// a member), two schemas and a function with one version.
type fixture struct {
	s                       store.Entities
	ws                      *store.Workspace
	admin, member, outsider *store.User
	in, out                 *store.Schema
	fn                      *store.Function
	v1                      *store.FunctionVersion
}

func mustOK(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantErr fails unless err is kind (nil: no error).
func wantErr(t *testing.T, what string, err, kind error) {
	t.Helper()
	switch {
	case kind == nil && err != nil:
		t.Fatalf("%s: %v, want no error", what, err)
	case kind != nil && !errors.Is(err, kind):
		t.Fatalf("%s: %v, want %v", what, err, kind)
	}
}

func newUser(t *testing.T, s store.Entities, name string) *store.User {
	t.Helper()
	u := &store.User{Email: name + "." + store.NewID("x") + "@example.com", Name: name}
	mustOK(t, "CreateUser", s.CreateUser(ctx, u))
	return u
}

func addMember(t *testing.T, s store.Entities, ws, user string, role store.MemberRole) {
	t.Helper()
	mustOK(t, "AddMember", s.AddMember(ctx, &store.Membership{WorkspaceID: ws, UserID: user, Role: role}))
}

func newFixture(t *testing.T, s store.Entities, name string) *fixture {
	t.Helper()
	f := &fixture{s: s, ws: &store.Workspace{Name: name}}
	mustOK(t, "CreateWorkspace", s.CreateWorkspace(ctx, f.ws))
	f.admin, f.member, f.outsider = newUser(t, s, "admin"), newUser(t, s, "member"), newUser(t, s, "outsider")
	addMember(t, s, f.ws.ID, f.admin.ID, store.MemberRoleAdmin)
	addMember(t, s, f.ws.ID, f.member.ID, store.MemberRoleMember)
	f.in = &store.Schema{WorkspaceID: f.ws.ID, Content: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
	f.out = &store.Schema{WorkspaceID: f.ws.ID, Content: json.RawMessage(`{"type":"object"}`)}
	mustOK(t, "CreateSchema", s.CreateSchema(ctx, f.in))
	mustOK(t, "CreateSchema", s.CreateSchema(ctx, f.out))
	f.fn = &store.Function{WorkspaceID: f.ws.ID, Name: "search"}
	mustOK(t, "CreateFunction", s.CreateFunction(ctx, f.fn))
	f.v1 = &store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: f.fn.ID, Code: "export default () => 1",
		InputSchemaID: f.in.ID, OutputSchemaID: f.out.ID}
	mustOK(t, "CreateFunctionVersion", s.CreateFunctionVersion(ctx, f.v1))
	return f
}

// serverTool returns a valid, unsaved server tool of the fixture's workspace.
func (f *fixture) serverTool(name string) *store.Tool {
	return &store.Tool{WorkspaceID: f.ws.ID, Name: name, Description: "finds things", Target: store.TargetServer,
		FunctionID: f.fn.ID, InputSchemaID: f.in.ID, OutputSchemaID: f.out.ID, Enabled: true, CreatedBy: f.member.ID}
}

// clientTool returns a valid, unsaved client tool of the fixture's workspace.
func (f *fixture) clientTool(name string) *store.Tool {
	return &store.Tool{WorkspaceID: f.ws.ID, Name: name, Target: store.TargetClient, InputSchemaID: f.in.ID,
		OutputSchemaID: f.out.ID, Enabled: true, CreatedBy: f.member.ID}
}

func (f *fixture) create(t *testing.T, tool *store.Tool) *store.Tool {
	t.Helper()
	mustOK(t, "CreateTool "+tool.Name, f.s.CreateTool(ctx, tool))
	return tool
}

// canonical is the tool's JSON with every JSON value re-encoded, to compare tools whose
// examples differ only in spacing.
func canonical(t *testing.T, tool *store.Tool) string {
	t.Helper()
	b, err := json.Marshal(tool)
	mustOK(t, "marshal tool", err)
	var v any
	mustOK(t, "unmarshal tool", json.Unmarshal(b, &v))
	b, _ = json.Marshal(v)
	return string(b)
}

func sameTool(t *testing.T, what string, got, want *store.Tool) {
	t.Helper()
	if g, w := canonical(t, got), canonical(t, want); g != w {
		t.Fatalf("%s:\n got  %s\n want %s", what, g, w)
	}
}

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

	// The default runtime user and a tool's runtime user stay members.
	addMember(t, s, w.ID, c.ID, store.MemberRoleMember)
	_, err = s.UpdateWorkspace(ctx, w.ID, b.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = c.ID; return nil })
	mustOK(t, "set default runtime user", err)
	wantErr(t, "remove the default runtime user", s.RemoveMember(ctx, w.ID, c.ID), store.ErrInvalid)
	_, err = s.UpdateWorkspace(ctx, w.ID, b.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = ""; return nil })
	mustOK(t, "clear default runtime user", err)

	in := &store.Schema{WorkspaceID: w.ID, Content: json.RawMessage(`{}`)}
	mustOK(t, "CreateSchema", s.CreateSchema(ctx, in))
	tool := &store.Tool{WorkspaceID: w.ID, Name: "ask", Target: store.TargetClient, InputSchemaID: in.ID, OutputSchemaID: in.ID,
		CreatedBy: b.ID, RuntimeUserID: c.ID}
	mustOK(t, "CreateTool with runtime user", s.CreateTool(ctx, tool))
	wantErr(t, "remove a tool's runtime user", s.RemoveMember(ctx, w.ID, c.ID), store.ErrInvalid)
	_, err = s.DeleteTool(ctx, w.ID, tool.ID, "")
	mustOK(t, "DeleteTool", err)
	mustOK(t, "remove once the tool is deleted", s.RemoveMember(ctx, w.ID, c.ID))
	_, err = s.Member(ctx, w.ID, c.ID)
	wantErr(t, "Member after removal", err, store.ErrNotFound)
	ms, _ = s.Members(ctx, w.ID)
	if len(ms) != 2 {
		t.Fatalf("Members after removal: %+v", ms)
	}
}

func testSchemas(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	if !strings.HasPrefix(f.in.ID, store.PrefixSchema+"_") || f.in.CreatedAt.IsZero() {
		t.Fatalf("CreateSchema: %+v", f.in)
	}
	got, err := s.Schema(ctx, f.ws.ID, f.in.ID)
	mustOK(t, "Schema", err)
	var a, b any
	json.Unmarshal(got.Content, &a)
	json.Unmarshal(f.in.Content, &b)
	if got.ID != f.in.ID || got.WorkspaceID != f.ws.ID || !reflect.DeepEqual(a, b) || !got.CreatedAt.Equal(f.in.CreatedAt) {
		t.Fatalf("Schema = %+v, want %+v", got, f.in)
	}
	for _, tc := range []struct {
		content string
		ws      string
		want    error
	}{
		{`{}`, f.ws.ID, nil},
		{`true`, f.ws.ID, nil},
		{`false`, "", nil},
		{`not json`, f.ws.ID, store.ErrInvalid},
		{``, f.ws.ID, store.ErrInvalid},
		{`"string"`, f.ws.ID, store.ErrInvalid},
		{`[1]`, f.ws.ID, store.ErrInvalid},
		{`12`, f.ws.ID, store.ErrInvalid},
		{`null`, f.ws.ID, store.ErrInvalid},
		{`{}`, "wsp_missing", store.ErrNotFound},
	} {
		sc := &store.Schema{WorkspaceID: tc.ws, Content: json.RawMessage(tc.content)}
		wantErr(t, "CreateSchema "+tc.content, s.CreateSchema(ctx, sc), tc.want)
	}
	// A system schema is visible from every workspace and from the system scope.
	sys := &store.Schema{Content: json.RawMessage(`{"type":"object"}`)}
	mustOK(t, "CreateSchema system", s.CreateSchema(ctx, sys))
	for _, scope := range []string{"", f.ws.ID, "wsp_any"} {
		if _, err := s.Schema(ctx, scope, sys.ID); err != nil {
			t.Fatalf("system schema from %q: %v", scope, err)
		}
	}
	_, err = s.Schema(ctx, "", f.in.ID)
	wantErr(t, "workspace schema from the system scope", err, store.ErrNotFound)
	_, err = s.Schema(ctx, f.ws.ID, "sch_missing")
	wantErr(t, "missing schema", err, store.ErrNotFound)
}

func testFunctions(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	if !strings.HasPrefix(f.fn.ID, store.PrefixFunction+"_") || !strings.HasPrefix(f.v1.ID, store.PrefixFunctionVersion+"_") {
		t.Fatalf("ids: %s %s", f.fn.ID, f.v1.ID)
	}
	if f.v1.Version != 1 || f.v1.WorkspaceID != f.ws.ID || f.v1.CreatedAt.IsZero() {
		t.Fatalf("first version: %+v", f.v1)
	}
	fn, err := s.Function(ctx, f.ws.ID, f.fn.ID)
	mustOK(t, "Function", err)
	if fn.DefaultVersionID != f.v1.ID || fn.Name != "search" || fn.WorkspaceID != f.ws.ID {
		t.Fatalf("the first version is not the default: %+v", fn)
	}
	for _, tc := range []struct {
		name string
		fn   store.Function
		want error
	}{
		{"same name", store.Function{WorkspaceID: f.ws.ID, Name: "search"}, store.ErrConflict},
		{"no name", store.Function{WorkspaceID: f.ws.ID}, store.ErrInvalid},
		{"space in name", store.Function{WorkspaceID: f.ws.ID, Name: "a b"}, store.ErrInvalid},
		{"with a default", store.Function{WorkspaceID: f.ws.ID, Name: "x", DefaultVersionID: f.v1.ID}, store.ErrInvalid},
		{"no workspace", store.Function{WorkspaceID: "wsp_missing", Name: "x"}, store.ErrNotFound},
		{"taken id", store.Function{WorkspaceID: f.ws.ID, Name: "y", ID: f.fn.ID}, store.ErrConflict},
		{"system function of the same name", store.Function{Name: "search"}, nil},
		{"another", store.Function{WorkspaceID: f.ws.ID, Name: "fetch"}, nil},
	} {
		wantErr(t, "CreateFunction "+tc.name, s.CreateFunction(ctx, &tc.fn), tc.want)
	}
	other := newFixture(t, s, "other")
	mustOK(t, "same name in another workspace", s.CreateFunction(ctx, &store.Function{WorkspaceID: other.ws.ID, Name: "fetch"}))

	v2 := &store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: f.fn.ID, Code: "v2"}
	mustOK(t, "CreateFunctionVersion", s.CreateFunctionVersion(ctx, v2))
	v3 := &store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: f.fn.ID, Code: "v3", InputSchemaID: f.in.ID}
	mustOK(t, "CreateFunctionVersion", s.CreateFunctionVersion(ctx, v3))
	if v2.Version != 2 || v3.Version != 3 {
		t.Fatalf("versions %d, %d; want 2, 3", v2.Version, v3.Version)
	}
	fn, _ = s.Function(ctx, f.ws.ID, f.fn.ID)
	if fn.DefaultVersionID != f.v1.ID {
		t.Fatalf("a later version became the default: %+v", fn)
	}
	vs, err := s.FunctionVersions(ctx, f.ws.ID, f.fn.ID)
	mustOK(t, "FunctionVersions", err)
	if len(vs) != 3 || vs[0].ID != f.v1.ID || vs[1].ID != v2.ID || vs[2].ID != v3.ID {
		t.Fatalf("FunctionVersions = %+v", vs)
	}
	if !reflect.DeepEqual(vs[0], f.v1) || !reflect.DeepEqual(vs[2], v3) {
		t.Fatalf("FunctionVersions round trip:\n got %+v %+v\n want %+v %+v", vs[0], vs[2], f.v1, v3)
	}
	got, err := s.FunctionVersion(ctx, f.ws.ID, v2.ID)
	mustOK(t, "FunctionVersion", err)
	if !reflect.DeepEqual(got, v2) {
		t.Fatalf("FunctionVersion = %+v, want %+v", got, v2)
	}

	updated, err := s.SetDefaultVersion(ctx, f.ws.ID, f.fn.ID, v3.ID)
	mustOK(t, "SetDefaultVersion", err)
	if updated.DefaultVersionID != v3.ID || updated.UpdatedAt.Before(fn.UpdatedAt) {
		t.Fatalf("SetDefaultVersion = %+v", updated)
	}
	fn, _ = s.Function(ctx, f.ws.ID, f.fn.ID)
	if fn.DefaultVersionID != v3.ID {
		t.Fatalf("default after SetDefaultVersion: %+v", fn)
	}
	fetch := &store.Function{WorkspaceID: f.ws.ID, Name: "fetch2"}
	mustOK(t, "CreateFunction", s.CreateFunction(ctx, fetch))
	for _, tc := range []struct {
		name string
		v    store.FunctionVersion
		want error
	}{
		{"no function", store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: "fun_missing"}, store.ErrNotFound},
		{"wrong workspace", store.FunctionVersion{WorkspaceID: other.ws.ID, FunctionID: f.fn.ID}, store.ErrNotFound},
		{"system scope", store.FunctionVersion{FunctionID: f.fn.ID}, store.ErrNotFound},
		{"missing schema", store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: f.fn.ID, InputSchemaID: "sch_missing"}, store.ErrNotFound},
		{"schema of another workspace", store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: f.fn.ID, OutputSchemaID: other.out.ID}, store.ErrNotFound},
		{"taken id", store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: f.fn.ID, ID: v2.ID}, store.ErrConflict},
	} {
		wantErr(t, "CreateFunctionVersion "+tc.name, s.CreateFunctionVersion(ctx, &tc.v), tc.want)
	}
	for _, tc := range []struct {
		name, fn, version string
		want              error
	}{
		{"version of another function", fetch.ID, v2.ID, store.ErrNotFound},
		{"missing version", f.fn.ID, "fnv_missing", store.ErrNotFound},
		{"missing function", "fun_missing", v2.ID, store.ErrNotFound},
	} {
		_, err := s.SetDefaultVersion(ctx, f.ws.ID, tc.fn, tc.version)
		wantErr(t, "SetDefaultVersion "+tc.name, err, tc.want)
	}
	fns, err := s.Functions(ctx, f.ws.ID)
	mustOK(t, "Functions", err)
	names := []string{}
	for _, x := range fns {
		names = append(names, x.Name)
	}
	if !slices.Equal(names, []string{"search", "fetch", "fetch2"}) {
		t.Fatalf("Functions = %v", names)
	}
	sys, err := s.Functions(ctx, "")
	mustOK(t, "system Functions", err)
	if len(sys) != 1 || sys[0].WorkspaceID != "" {
		t.Fatalf("system functions = %+v", sys)
	}
	_, err = s.FunctionVersions(ctx, f.ws.ID, "fun_missing")
	wantErr(t, "FunctionVersions missing", err, store.ErrNotFound)
}

func testToolRules(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	other := newFixture(t, s, "other")
	f.create(t, f.serverTool("taken"))
	fetch := &store.Function{WorkspaceID: f.ws.ID, Name: "fetch"}
	mustOK(t, "CreateFunction", s.CreateFunction(ctx, fetch))
	past := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name string
		edit func(t *store.Tool)
		want error
	}{
		{"valid server tool", func(*store.Tool) {}, nil},
		{"valid client tool", func(t *store.Tool) { t.Target, t.FunctionID = store.TargetClient, "" }, nil},
		{"pinned version", func(t *store.Tool) { t.FunctionVersionID = f.v1.ID }, nil},
		{"no creator", func(t *store.Tool) { t.CreatedBy = "" }, nil},
		{"empty examples", func(t *store.Tool) { t.Examples = []store.ToolExample{} }, nil},
		{"server tool without function", func(t *store.Tool) { t.FunctionID = "" }, store.ErrInvalid},
		{"client tool with function", func(t *store.Tool) { t.Target = store.TargetClient }, store.ErrInvalid},
		{"client tool with version", func(t *store.Tool) { t.Target, t.FunctionID, t.FunctionVersionID = store.TargetClient, "", f.v1.ID }, store.ErrInvalid},
		{"unknown target", func(t *store.Tool) { t.Target = "edge" }, store.ErrInvalid},
		{"no target", func(t *store.Tool) { t.Target = "" }, store.ErrInvalid},
		{"no name", func(t *store.Tool) { t.Name = "" }, store.ErrInvalid},
		{"space in name", func(t *store.Tool) { t.Name = "find it" }, store.ErrInvalid},
		{"newline in name", func(t *store.Tool) { t.Name = "find\n" }, store.ErrInvalid},
		{"long name", func(t *store.Tool) { t.Name = strings.Repeat("x", store.MaxNameLen+1) }, store.ErrInvalid},
		{"no input schema", func(t *store.Tool) { t.InputSchemaID = "" }, store.ErrInvalid},
		{"no output schema", func(t *store.Tool) { t.OutputSchemaID = "" }, store.ErrInvalid},
		{"example args not an object", func(t *store.Tool) { t.Examples = []store.ToolExample{{Args: json.RawMessage(`[1]`)}} }, store.ErrInvalid},
		{"example without args", func(t *store.Tool) { t.Examples = []store.ToolExample{{Result: json.RawMessage(`1`)}} }, store.ErrInvalid},
		{"example result not JSON", func(t *store.Tool) {
			t.Examples = []store.ToolExample{{Args: json.RawMessage(`{}`), Result: json.RawMessage(`{`)}}
		}, store.ErrInvalid},
		{"system tool with a workspace", func(t *store.Tool) { t.System = true }, store.ErrInvalid},
		{"workspace tool without a workspace", func(t *store.Tool) { t.WorkspaceID = "" }, store.ErrInvalid},
		{"deleted", func(t *store.Tool) { t.DeletedAt, t.RetentionTier = &past, store.RetentionShort }, store.ErrInvalid},
		{"tier without deletion", func(t *store.Tool) { t.RetentionTier = store.RetentionShort }, store.ErrInvalid},
		{"missing workspace", func(t *store.Tool) { t.WorkspaceID = "wsp_missing" }, store.ErrNotFound},
		{"missing function", func(t *store.Tool) { t.FunctionID = "fun_missing" }, store.ErrNotFound},
		{"function of another workspace", func(t *store.Tool) { t.FunctionID = other.fn.ID }, store.ErrNotFound},
		{"missing version", func(t *store.Tool) { t.FunctionVersionID = "fnv_missing" }, store.ErrNotFound},
		{"version of another workspace", func(t *store.Tool) { t.FunctionVersionID = other.v1.ID }, store.ErrNotFound},
		{"version of another function", func(t *store.Tool) { t.FunctionID = fetch.ID; t.FunctionVersionID = f.v1.ID }, store.ErrInvalid},
		{"missing schema", func(t *store.Tool) { t.InputSchemaID = "sch_missing" }, store.ErrNotFound},
		{"schema of another workspace", func(t *store.Tool) { t.OutputSchemaID = other.out.ID }, store.ErrNotFound},
		{"taken name", func(t *store.Tool) { t.Name = "taken" }, store.ErrConflict},
		{"creator not a member", func(t *store.Tool) { t.CreatedBy = f.outsider.ID }, store.ErrInvalid},
		{"creator of another workspace", func(t *store.Tool) { t.CreatedBy = other.admin.ID }, store.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := f.serverTool("tool_" + strings.NewReplacer(" ", "_").Replace(tc.name))
			tc.edit(tool)
			err := s.CreateTool(ctx, tool)
			wantErr(t, "CreateTool", err, tc.want)
			if err != nil {
				t.Logf("%s: %v", tc.name, err)
				return
			}
			if !strings.HasPrefix(tool.ID, store.PrefixTool+"_") || tool.CreatedAt.IsZero() || !tool.UpdatedAt.Equal(tool.CreatedAt) {
				t.Fatalf("CreateTool did not fill id and times: %+v", tool)
			}
			got, err := s.Tool(ctx, f.ws.ID, tool.ID)
			mustOK(t, "Tool", err)
			sameTool(t, "read back", got, tool)
		})
	}
	_, err := s.Tool(ctx, f.ws.ID, "tol_missing")
	wantErr(t, "missing tool", err, store.ErrNotFound)
}

func testToolRoundTrip(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	addMember(t, s, f.ws.ID, f.outsider.ID, store.MemberRoleMember)
	tool := &store.Tool{
		ID: "tol_chosen", WorkspaceID: f.ws.ID, Name: "search-docs_v2", Description: "Search the docs.\nUse it first.",
		Target: store.TargetServer, FunctionID: f.fn.ID, FunctionVersionID: f.v1.ID, InputSchemaID: f.in.ID,
		OutputSchemaID: f.out.ID,
		Examples: []store.ToolExample{
			{Args: json.RawMessage(`{"q": "naïve \u00e9", "n": [1, 2.5, null]}`), Result: json.RawMessage(`{"hits": 3}`)},
			{Args: json.RawMessage(`{}`)},
		},
		RequiresConfirmation: true, Enabled: false, CreatedBy: f.admin.ID, RuntimeUserID: f.outsider.ID,
	}
	mustOK(t, "CreateTool", s.CreateTool(ctx, tool))
	if tool.ID != "tol_chosen" {
		t.Fatalf("the chosen id was replaced: %s", tool.ID)
	}
	got, err := s.Tool(ctx, f.ws.ID, tool.ID)
	mustOK(t, "Tool", err)
	sameTool(t, "every field", got, tool)
	if got.Examples[1].Result != nil {
		t.Fatalf("an example without result got one: %s", got.Examples[1].Result)
	}
	wantErr(t, "another tool", s.CreateTool(ctx, f.clientTool("another")), nil)
	dup := f.clientTool("yet_another")
	dup.ID = tool.ID
	wantErr(t, "taken id", s.CreateTool(ctx, dup), store.ErrConflict)

	del, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, store.RetentionLong)
	mustOK(t, "DeleteTool", err)
	got, err = s.Tool(ctx, f.ws.ID, tool.ID)
	mustOK(t, "Tool", err)
	sameTool(t, "deleted", got, del)
	if got.DeletedAt == nil || got.RetentionTier != store.RetentionLong {
		t.Fatalf("deleted tool: %+v", got)
	}
}

func testToolJSON(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	tool := f.create(t, f.clientTool("ask_user"))
	tool.CreatedBy = ""
	b, err := json.Marshal(tool)
	mustOK(t, "Marshal", err)
	var m map[string]any
	mustOK(t, "Unmarshal", json.Unmarshal(b, &m))
	want := []string{"id", "workspace_id", "name", "description", "target", "function_id", "function_version_id", "input_schema_id",
		"output_schema_id", "examples", "requires_confirmation", "enabled", "system", "created_by", "runtime_user_id", "deleted_at",
		"retention_tier", "created_at", "updated_at"}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("JSON fields %v, want seed 004's %v", keys, want)
	}
	for _, k := range []string{"description", "function_id", "function_version_id", "examples", "created_by", "runtime_user_id", "deleted_at", "retention_tier"} {
		if m[k] != nil {
			t.Errorf("%s = %v, want null", k, m[k])
		}
	}
	if m["workspace_id"] != f.ws.ID || m["target"] != "client" || m["enabled"] != true {
		t.Errorf("JSON: %s", b)
	}
	var back store.Tool
	mustOK(t, "Unmarshal tool", json.Unmarshal(b, &back))
	if !reflect.DeepEqual(&back, tool) {
		t.Fatalf("JSON round trip:\n got  %+v\n want %+v", &back, tool)
	}
	del, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, store.RetentionShort)
	mustOK(t, "DeleteTool", err)
	b, _ = json.Marshal(del)
	if !strings.Contains(string(b), `"retention_tier":"short"`) || strings.Contains(string(b), `"deleted_at":null`) {
		t.Fatalf("deleted tool JSON: %s", b)
	}
}

func testSystemTools(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	in := &store.Schema{Content: json.RawMessage(`{"type":"object"}`)}
	mustOK(t, "CreateSchema", s.CreateSchema(ctx, in))
	fn := &store.Function{Name: "builtin"}
	mustOK(t, "CreateFunction", s.CreateFunction(ctx, fn))
	v := &store.FunctionVersion{FunctionID: fn.ID, Code: "x"}
	mustOK(t, "CreateFunctionVersion", s.CreateFunctionVersion(ctx, v))
	sys := &store.Tool{Name: "read_file", Target: store.TargetServer, FunctionID: fn.ID, InputSchemaID: in.ID, OutputSchemaID: in.ID,
		System: true, Enabled: true}
	mustOK(t, "CreateTool system", s.CreateTool(ctx, sys))
	for _, tc := range []struct {
		name string
		edit func(*store.Tool)
		want error
	}{
		{"same name", func(*store.Tool) {}, store.ErrConflict},
		{"with a creator", func(t *store.Tool) { t.Name, t.CreatedBy = "x1", f.admin.ID }, store.ErrInvalid},
		{"with a runtime user", func(t *store.Tool) { t.Name, t.RuntimeUserID = "x2", f.admin.ID }, store.ErrInvalid},
		{"workspace schema", func(t *store.Tool) { t.Name, t.InputSchemaID = "x3", f.in.ID }, store.ErrNotFound},
		{"workspace function", func(t *store.Tool) { t.Name, t.FunctionID = "x4", f.fn.ID }, store.ErrNotFound},
		{"client", func(t *store.Tool) { t.Name, t.Target, t.FunctionID = "x5", store.TargetClient, "" }, nil},
	} {
		tool := sys.Clone()
		tool.ID = ""
		tc.edit(tool)
		wantErr(t, "CreateTool system "+tc.name, s.CreateTool(ctx, tool), tc.want)
	}
	// A workspace tool may share a system tool's name, and use a system schema.
	wt := f.serverTool("read_file")
	wt.InputSchemaID = in.ID
	f.create(t, wt)

	for _, scope := range []string{"", f.ws.ID} {
		got, err := s.Tool(ctx, scope, sys.ID)
		mustOK(t, "system tool from "+scope, err)
		sameTool(t, "system tool", got, sys)
		_, err = s.UpdateTool(ctx, scope, sys.ID, f.admin.ID, func(t *store.Tool) error { t.Enabled = false; return nil })
		wantErr(t, "edit a system tool from "+scope, err, store.ErrForbidden)
		_, err = s.UpdateTool(ctx, scope, sys.ID, f.admin.ID, func(t *store.Tool) error { return nil })
		wantErr(t, "no-op edit of a system tool from "+scope, err, store.ErrForbidden)
		_, err = s.DeleteTool(ctx, scope, sys.ID, store.RetentionShort)
		wantErr(t, "delete a system tool from "+scope, err, store.ErrForbidden)
	}
	got, _ := s.Tool(ctx, "", sys.ID)
	sameTool(t, "system tool after refused edits", got, sys)
	ver, err := s.ResolveToolVersion(ctx, f.ws.ID, sys.ID)
	mustOK(t, "ResolveToolVersion system", err)
	if ver.ID != v.ID {
		t.Fatalf("system tool runs %s, want %s", ver.ID, v.ID)
	}
	_, err = s.Tool(ctx, "", wt.ID)
	wantErr(t, "workspace tool from the system scope", err, store.ErrNotFound)

	page, err := s.ListTools(ctx, store.ToolFilter{Limit: 100})
	mustOK(t, "ListTools system", err)
	if ids := toolIDs(page.Tools); len(ids) != 2 || ids[0] != sys.ID {
		t.Fatalf("system listing = %v", ids)
	}
	page, err = s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 100})
	mustOK(t, "ListTools", err)
	if ids := toolIDs(page.Tools); !slices.Equal(ids, []string{wt.ID}) {
		t.Fatalf("workspace listing = %v", ids)
	}
	page, err = s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, IncludeSystem: true, Limit: 100})
	mustOK(t, "ListTools", err)
	if len(page.Tools) != 3 {
		t.Fatalf("workspace listing with system tools = %v", toolIDs(page.Tools))
	}
}

func toolIDs(tools []*store.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.ID
	}
	return out
}

func testUpdateTool(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	tool := f.create(t, f.serverTool("search"))
	f.create(t, f.serverTool("taken"))
	gone := f.create(t, f.serverTool("gone"))
	_, err := s.DeleteTool(ctx, f.ws.ID, gone.ID, "")
	mustOK(t, "DeleteTool", err)
	v2 := &store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: f.fn.ID, Code: "v2"}
	mustOK(t, "CreateFunctionVersion", s.CreateFunctionVersion(ctx, v2))
	time.Sleep(2 * time.Millisecond)

	other := newFixture(t, s, "other")
	later := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name string
		fn   func(*store.Tool) error
		want error
	}{
		{"id", func(t *store.Tool) error { t.ID = "tol_x"; return nil }, store.ErrInvalid},
		{"workspace", func(t *store.Tool) error { t.WorkspaceID = other.ws.ID; return nil }, store.ErrInvalid},
		{"system", func(t *store.Tool) error { t.System = true; return nil }, store.ErrInvalid},
		{"creator", func(t *store.Tool) error { t.CreatedBy = f.admin.ID; return nil }, store.ErrInvalid},
		{"deleted at", func(t *store.Tool) error { t.DeletedAt, t.RetentionTier = &later, store.RetentionShort; return nil }, store.ErrInvalid},
		{"retention tier", func(t *store.Tool) error { t.RetentionTier = store.RetentionShort; return nil }, store.ErrInvalid},
		{"created at", func(t *store.Tool) error { t.CreatedAt = later; return nil }, store.ErrInvalid},
		{"updated at", func(t *store.Tool) error { t.UpdatedAt = later; return nil }, store.ErrInvalid},
		{"client with a function", func(t *store.Tool) error { t.Target = store.TargetClient; return nil }, store.ErrInvalid},
		{"server without a function", func(t *store.Tool) error { t.FunctionID = ""; return nil }, store.ErrInvalid},
		{"empty name", func(t *store.Tool) error { t.Name = ""; return nil }, store.ErrInvalid},
		{"taken name", func(t *store.Tool) error { t.Name = "taken"; return nil }, store.ErrConflict},
		{"function of another workspace", func(t *store.Tool) error { t.FunctionID = other.fn.ID; return nil }, store.ErrNotFound},
		{"version of another workspace", func(t *store.Tool) error { t.FunctionVersionID = other.v1.ID; return nil }, store.ErrNotFound},
		{"schema of another workspace", func(t *store.Tool) error { t.InputSchemaID = other.in.ID; return nil }, store.ErrNotFound},
		{"bad example", func(t *store.Tool) error { t.Examples = []store.ToolExample{{Args: json.RawMessage(`1`)}}; return nil }, store.ErrInvalid},
		{"fn fails", func(t *store.Tool) error { t.Name = "lost"; return errSentinel }, errSentinel},
	} {
		_, err := s.UpdateTool(ctx, f.ws.ID, tool.ID, f.admin.ID, tc.fn)
		wantErr(t, "UpdateTool "+tc.name, err, tc.want)
	}
	got, _ := s.Tool(ctx, f.ws.ID, tool.ID)
	sameTool(t, "after refused updates", got, tool)

	// Every editable field, by a plain member: the runtime user does not change.
	updated, err := s.UpdateTool(ctx, f.ws.ID, tool.ID, f.member.ID, func(t *store.Tool) error {
		t.Name, t.Description = "gone", "reuses a deleted tool's name"
		t.FunctionVersionID = v2.ID
		t.InputSchemaID, t.OutputSchemaID = f.out.ID, f.in.ID
		t.Examples = []store.ToolExample{{Args: json.RawMessage(`{"q":"x"}`), Result: json.RawMessage(`"ok"`)}}
		t.RequiresConfirmation, t.Enabled = true, false
		return nil
	})
	mustOK(t, "UpdateTool", err)
	if !updated.UpdatedAt.After(tool.UpdatedAt) || !updated.CreatedAt.Equal(tool.CreatedAt) {
		t.Fatalf("times after update: %v -> %v", tool.UpdatedAt, updated.UpdatedAt)
	}
	got, _ = s.Tool(ctx, f.ws.ID, tool.ID)
	sameTool(t, "after update", got, updated)
	if got.Name != "gone" || got.FunctionVersionID != v2.ID || !got.RequiresConfirmation || got.Enabled || len(got.Examples) != 1 {
		t.Fatalf("after update: %+v", got)
	}
	// Server to client and back.
	updated, err = s.UpdateTool(ctx, f.ws.ID, tool.ID, f.member.ID, func(t *store.Tool) error {
		t.Target, t.FunctionID, t.FunctionVersionID, t.Examples, t.Description = store.TargetClient, "", "", nil, ""
		return nil
	})
	mustOK(t, "UpdateTool to client", err)
	got, _ = s.Tool(ctx, f.ws.ID, tool.ID)
	sameTool(t, "client", got, updated)
	if got.FunctionID != "" || got.Examples != nil || got.Description != "" {
		t.Fatalf("after clearing: %+v", got)
	}
	_, err = s.UpdateTool(ctx, f.ws.ID, gone.ID, f.admin.ID, func(t *store.Tool) error { return nil })
	wantErr(t, "UpdateTool deleted", err, store.ErrNotFound)
	_, err = s.UpdateTool(ctx, f.ws.ID, "tol_missing", f.admin.ID, func(t *store.Tool) error { return nil })
	wantErr(t, "UpdateTool missing", err, store.ErrNotFound)
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

func testPinning(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	v2 := &store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: f.fn.ID, Code: "v2"}
	mustOK(t, "CreateFunctionVersion", s.CreateFunctionVersion(ctx, v2))
	follows := f.create(t, f.serverTool("follows"))
	pinned := f.serverTool("pinned")
	pinned.FunctionVersionID = f.v1.ID
	f.create(t, pinned)
	client := f.create(t, f.clientTool("client"))
	bare := &store.Function{WorkspaceID: f.ws.ID, Name: "bare"}
	mustOK(t, "CreateFunction", s.CreateFunction(ctx, bare))
	noVersion := f.serverTool("no_version")
	noVersion.FunctionID = bare.ID
	f.create(t, noVersion)

	resolves := func(what, toolID, want string) {
		t.Helper()
		v, err := s.ResolveToolVersion(ctx, f.ws.ID, toolID)
		mustOK(t, "ResolveToolVersion "+what, err)
		if v.ID != want {
			t.Fatalf("%s runs %s (v%d), want %s", what, v.ID, v.Version, want)
		}
	}
	resolves("follows, default v1", follows.ID, f.v1.ID)
	resolves("pinned to v1", pinned.ID, f.v1.ID)
	_, err := s.SetDefaultVersion(ctx, f.ws.ID, f.fn.ID, v2.ID)
	mustOK(t, "SetDefaultVersion", err)
	resolves("follows, default v2", follows.ID, v2.ID)
	resolves("pinned to v1 after the default moved", pinned.ID, f.v1.ID)
	_, err = s.UpdateTool(ctx, f.ws.ID, pinned.ID, f.member.ID, func(t *store.Tool) error { t.FunctionVersionID = ""; return nil })
	mustOK(t, "unpin", err)
	resolves("unpinned", pinned.ID, v2.ID)
	_, err = s.UpdateTool(ctx, f.ws.ID, follows.ID, f.member.ID, func(t *store.Tool) error { t.FunctionVersionID = f.v1.ID; return nil })
	mustOK(t, "pin", err)
	resolves("pinned later", follows.ID, f.v1.ID)

	_, err = s.ResolveToolVersion(ctx, f.ws.ID, client.ID)
	wantErr(t, "client tool", err, store.ErrInvalid)
	_, err = s.ResolveToolVersion(ctx, f.ws.ID, noVersion.ID)
	wantErr(t, "function without versions", err, store.ErrNotFound)
	_, err = s.ResolveToolVersion(ctx, f.ws.ID, "tol_missing")
	wantErr(t, "missing tool", err, store.ErrNotFound)
	_, err = s.DeleteTool(ctx, f.ws.ID, follows.ID, "")
	mustOK(t, "DeleteTool", err)
	_, err = s.ResolveToolVersion(ctx, f.ws.ID, follows.ID)
	wantErr(t, "deleted tool", err, store.ErrNotFound)
}

func testSoftDelete(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	for _, tc := range []struct {
		name      string
		wsTier    store.RetentionTier
		tier      store.RetentionTier
		wantTier  store.RetentionTier
		wantError error
	}{
		{"workspace default", "", "", store.DefaultRetentionTier, nil},
		{"workspace short", store.RetentionShort, "", store.RetentionShort, nil},
		{"workspace none", store.RetentionNone, "", store.RetentionNone, nil},
		{"parameter long over workspace short", store.RetentionShort, store.RetentionLong, store.RetentionLong, nil},
		{"parameter medium", store.RetentionNone, store.RetentionMedium, store.RetentionMedium, nil},
		{"parameter none", store.RetentionLong, store.RetentionNone, store.RetentionNone, nil},
		{"unknown tier", "", "weekly", "", store.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wsTier != "" {
				_, err := s.UpdateWorkspace(ctx, f.ws.ID, f.member.ID, func(w *store.Workspace) error { w.RetentionTier = tc.wsTier; return nil })
				mustOK(t, "UpdateWorkspace", err)
			}
			tool := f.create(t, f.serverTool("tool"))
			before := time.Now().Add(-time.Second)
			del, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, tc.tier)
			wantErr(t, "DeleteTool", err, tc.wantError)
			if err != nil {
				_, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, store.RetentionShort)
				mustOK(t, "DeleteTool", err)
				return
			}
			if del.DeletedAt == nil || del.DeletedAt.Before(before) || del.RetentionTier != tc.wantTier {
				t.Fatalf("DeleteTool = %+v, want tier %s", del, tc.wantTier)
			}
			got, err := s.Tool(ctx, f.ws.ID, tool.ID)
			mustOK(t, "Tool after delete", err)
			sameTool(t, "deleted tool", got, del)
			if !got.DeletedAt.Equal(*del.DeletedAt) || got.RetentionTier != tc.wantTier {
				t.Fatalf("deleted tool read back: %+v", got)
			}
			_, err = s.DeleteTool(ctx, f.ws.ID, tool.ID, "")
			wantErr(t, "delete twice", err, store.ErrNotFound)
			// The name is free again: the next case creates "tool" once more.
		})
	}
	_, err := s.DeleteTool(ctx, f.ws.ID, "tol_missing", "")
	wantErr(t, "delete missing", err, store.ErrNotFound)
	page, err := s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, Deleted: store.DeletedOnly, Limit: 100})
	mustOK(t, "ListTools", err)
	if len(page.Tools) != 7 {
		t.Fatalf("%d deleted tools named tool, want 7", len(page.Tools))
	}
}

func testPurge(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	other := newFixture(t, s, "other")
	tiers := []store.RetentionTier{store.RetentionShort, store.RetentionMedium, store.RetentionLong, store.RetentionNone}
	deleted := map[store.RetentionTier]*store.Tool{}
	for _, tier := range tiers {
		tool := f.create(t, f.serverTool("tool_"+string(tier)))
		del, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, tier)
		mustOK(t, "DeleteTool", err)
		deleted[tier] = del
	}
	// The other workspace's default tier is short: its tool is due with the short one.
	_, err := s.UpdateWorkspace(ctx, other.ws.ID, other.admin.ID, func(w *store.Workspace) error { w.RetentionTier = store.RetentionShort; return nil })
	mustOK(t, "UpdateWorkspace", err)
	otherTool := other.create(t, other.serverTool("other_short"))
	otherDel, err := s.DeleteTool(ctx, other.ws.ID, otherTool.ID, "")
	mustOK(t, "DeleteTool", err)
	active := f.create(t, f.serverTool("active"))

	present := func(ws string, tool *store.Tool) bool {
		t.Helper()
		_, err := s.Tool(ctx, ws, tool.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	day := 24 * time.Hour
	at := func(tool *store.Tool, d time.Duration) time.Time { return tool.DeletedAt.Add(d) }
	for _, step := range []struct {
		name string
		now  time.Time
		want int
		gone []*store.Tool
	}{
		{"in the past", time.Now().Add(-48 * time.Hour), 0, nil},
		{"at deletion", at(deleted[store.RetentionShort], 0), 0, nil},
		{"a day later", at(deleted[store.RetentionShort], day), 0, nil},
		{"just before 7 days", at(deleted[store.RetentionShort], 7*day-time.Millisecond), 0, nil},
		{"7 days: short", at(otherDel, 7*day), 2, []*store.Tool{deleted[store.RetentionShort], otherDel}},
		{"7 days again", at(otherDel, 7*day), 0, nil},
		{"just before 30 days", at(deleted[store.RetentionMedium], 30*day-time.Millisecond), 0, nil},
		{"30 days: medium", at(deleted[store.RetentionMedium], 30*day), 1, []*store.Tool{deleted[store.RetentionMedium]}},
		{"just before 90 days", at(deleted[store.RetentionLong], 90*day-time.Millisecond), 0, nil},
		{"90 days: long", at(deleted[store.RetentionLong], 90*day), 1, []*store.Tool{deleted[store.RetentionLong]}},
		{"a century later: none stays", at(deleted[store.RetentionNone], 100*365*day), 0, nil},
	} {
		purged, err := s.PurgeExpired(ctx, step.now)
		mustOK(t, "PurgeExpired "+step.name, err)
		if len(purged) != step.want {
			t.Fatalf("PurgeExpired %s: %d purged, want %d", step.name, len(purged), step.want)
		}
		for _, tool := range step.gone {
			if !slices.ContainsFunc(purged, func(p *store.Tool) bool { return p.ID == tool.ID && p.Name == tool.Name && p.DeletedAt != nil }) {
				t.Fatalf("PurgeExpired %s: %s is not among the tools it returned", step.name, tool.ID)
			}
		}
		for _, tool := range step.gone {
			if present(tool.WorkspaceID, tool) {
				t.Fatalf("%s: %s (%s) is still there", step.name, tool.Name, tool.RetentionTier)
			}
		}
	}
	if !present(f.ws.ID, deleted[store.RetentionNone]) || !present(f.ws.ID, active) {
		t.Fatal("the none-tier tool or the active tool was purged")
	}
	page, err := s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, Deleted: store.DeletedInclude, Limit: 100})
	mustOK(t, "ListTools", err)
	if ids := toolIDs(page.Tools); !slices.Equal(ids, []string{deleted[store.RetentionNone].ID, active.ID}) {
		t.Fatalf("after purging: %v", ids)
	}
	// A purged tool's name and id are gone for good; the name can be used again.
	f.create(t, f.serverTool("tool_short"))
}

// listCase is a filter and the tools it must list, in order.
type listCase struct {
	name   string
	filter store.ToolFilter
	keep   func(*store.Tool) bool
}

func testListing(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	other := newFixture(t, s, "other")
	fetch := &store.Function{WorkspaceID: f.ws.ID, Name: "fetch"}
	mustOK(t, "CreateFunction", s.CreateFunction(ctx, fetch))

	// 250 tools with a spread of every filtered field; every 7th deleted.
	var tools []*store.Tool
	for i := range 250 {
		prefix := []string{"alpha", "beta", "gamma"}[i%3]
		var tool *store.Tool
		switch i % 4 {
		case 0, 1:
			tool = f.serverTool(fmt.Sprintf("%s_%03d", prefix, i))
		case 2:
			tool = f.serverTool(fmt.Sprintf("%s_%03d", prefix, i))
			tool.FunctionID = fetch.ID
		case 3:
			tool = f.clientTool(fmt.Sprintf("%s_%03d", prefix, i))
		}
		tool.RequiresConfirmation = i%5 == 0
		f.create(t, tool)
		if i%7 == 0 {
			del, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, store.RetentionShort)
			mustOK(t, "DeleteTool", err)
			tool = del
		}
		tools = append(tools, tool)
	}
	// Tools with the same names elsewhere: another workspace, and system tools.
	for i := range 30 {
		other.create(t, other.serverTool(fmt.Sprintf("alpha_%03d", i)))
	}
	sysSchema := &store.Schema{Content: json.RawMessage(`{}`)}
	mustOK(t, "CreateSchema", s.CreateSchema(ctx, sysSchema))
	var system []*store.Tool
	for i := range 5 {
		sys := &store.Tool{Name: fmt.Sprintf("alpha_%03d", i), Target: store.TargetClient, InputSchemaID: sysSchema.ID,
			OutputSchemaID: sysSchema.ID, System: true, RequiresConfirmation: i%2 == 0}
		mustOK(t, "CreateTool system", s.CreateTool(ctx, sys))
		system = append(system, sys)
	}
	yes, no := true, false
	active := func(t *store.Tool) bool { return t.DeletedAt == nil }
	cases := []listCase{
		{"workspace", store.ToolFilter{}, active},
		{"include deleted", store.ToolFilter{Deleted: store.DeletedInclude}, func(*store.Tool) bool { return true }},
		{"only deleted", store.ToolFilter{Deleted: store.DeletedOnly}, func(t *store.Tool) bool { return t.DeletedAt != nil }},
		{"explicit false", store.ToolFilter{Deleted: store.DeletedExclude}, active},
		{"function", store.ToolFilter{FunctionID: fetch.ID}, func(t *store.Tool) bool { return active(t) && t.FunctionID == fetch.ID }},
		{"function, deleted too", store.ToolFilter{FunctionID: f.fn.ID, Deleted: store.DeletedInclude}, func(t *store.Tool) bool { return t.FunctionID == f.fn.ID }},
		{"function of another workspace", store.ToolFilter{FunctionID: other.fn.ID}, func(*store.Tool) bool { return false }},
		{"server", store.ToolFilter{Target: store.TargetServer}, func(t *store.Tool) bool { return active(t) && t.Target == store.TargetServer }},
		{"client", store.ToolFilter{Target: store.TargetClient}, func(t *store.Tool) bool { return active(t) && t.Target == store.TargetClient }},
		{"name exact", store.ToolFilter{Name: "beta_100"}, func(t *store.Tool) bool { return active(t) && t.Name == "beta_100" }},
		{"name exact, deleted", store.ToolFilter{Name: "alpha_000", Deleted: store.DeletedOnly}, func(t *store.Tool) bool { return t.Name == "alpha_000" }},
		{"name exact, no match", store.ToolFilter{Name: "beta"}, func(*store.Tool) bool { return false }},
		{"name prefix", store.ToolFilter{Name: "beta", NamePrefix: true}, func(t *store.Tool) bool { return active(t) && strings.HasPrefix(t.Name, "beta") }},
		{"name prefix, longer", store.ToolFilter{Name: "gamma_1", NamePrefix: true}, func(t *store.Tool) bool { return active(t) && strings.HasPrefix(t.Name, "gamma_1") }},
		{"name prefix is case-sensitive", store.ToolFilter{Name: "BETA", NamePrefix: true}, func(*store.Tool) bool { return false }},
		{"names: an agent's tools", store.ToolFilter{Names: []string{"alpha_003", "beta_100", "gamma_005", "alpha_000", "nowhere"}},
			func(t *store.Tool) bool {
				return active(t) && slices.Contains([]string{"alpha_003", "beta_100", "gamma_005"}, t.Name)
			}},
		{"names, deleted too", store.ToolFilter{Names: []string{"alpha_000", "beta_007"}, Deleted: store.DeletedInclude},
			func(t *store.Tool) bool { return t.Name == "alpha_000" || t.Name == "beta_007" }},
		{"names, none", store.ToolFilter{Names: []string{}}, func(*store.Tool) bool { return false }},
		{"name prefix, LIKE characters are literal", store.ToolFilter{Name: "b%", NamePrefix: true}, func(*store.Tool) bool { return false }},
		{"requires confirmation", store.ToolFilter{RequiresConfirmation: &yes}, func(t *store.Tool) bool { return active(t) && t.RequiresConfirmation }},
		{"no confirmation", store.ToolFilter{RequiresConfirmation: &no}, func(t *store.Tool) bool { return active(t) && !t.RequiresConfirmation }},
		{"combined", store.ToolFilter{Target: store.TargetServer, FunctionID: f.fn.ID, Name: "alpha", NamePrefix: true, RequiresConfirmation: &no, Deleted: store.DeletedInclude},
			func(t *store.Tool) bool {
				return t.Target == store.TargetServer && t.FunctionID == f.fn.ID && strings.HasPrefix(t.Name, "alpha") && !t.RequiresConfirmation
			}},
	}
	for _, tc := range cases {
		tc.filter.WorkspaceID = f.ws.ID
		var want []*store.Tool
		for _, tool := range tools {
			if tc.keep(tool) {
				want = append(want, tool)
			}
		}
		checkListing(t, s, tc.name, tc.filter, want)
	}
	// With the system tools, created last, so listed after the workspace's.
	var want []*store.Tool
	for _, tool := range tools {
		if active(tool) && strings.HasPrefix(tool.Name, "alpha") && tool.RequiresConfirmation {
			want = append(want, tool)
		}
	}
	for _, sys := range system {
		if sys.RequiresConfirmation {
			want = append(want, sys)
		}
	}
	checkListing(t, s, "with system tools", store.ToolFilter{WorkspaceID: f.ws.ID, IncludeSystem: true, Name: "alpha", NamePrefix: true,
		RequiresConfirmation: &yes}, want)
	checkListing(t, s, "system tools", store.ToolFilter{}, system)
	checkListing(t, s, "no such workspace", store.ToolFilter{WorkspaceID: "wsp_missing"}, nil)
}

// checkListing pages through a listing with several page sizes and compares it with want.
func checkListing(t *testing.T, s store.Entities, name string, filter store.ToolFilter, want []*store.Tool) {
	t.Helper()
	for _, limit := range []int{1, 7, 100} {
		if limit == 1 && len(want) > 60 {
			continue // one tool a page: only for the short listings
		}
		f := filter
		f.Limit = limit
		var got []*store.Tool
		pages := 0
		for {
			page, err := s.ListTools(ctx, f)
			if err != nil {
				t.Fatalf("%s, limit %d, page %d: %v", name, limit, pages, err)
			}
			pages++
			if len(page.Tools) > limit {
				t.Fatalf("%s: a page of %d tools, limit %d", name, len(page.Tools), limit)
			}
			if page.NextCursor != "" && len(page.Tools) != limit {
				t.Fatalf("%s: a short page (%d of %d) with a next cursor", name, len(page.Tools), limit)
			}
			got = append(got, page.Tools...)
			if page.NextCursor == "" {
				break
			}
			if pages > 300 {
				t.Fatalf("%s: paging does not end", name)
			}
			f.Cursor = page.NextCursor
		}
		if wantPages := max(1, (len(want)+limit-1)/limit); pages != wantPages && pages != wantPages+1 {
			t.Fatalf("%s, limit %d: %d pages for %d tools", name, limit, pages, len(want))
		}
		if len(got) != len(want) {
			t.Fatalf("%s, limit %d: %d tools, want %d:\n got  %v\n want %v", name, limit, len(got), len(want), toolIDs(got), toolIDs(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID {
				t.Fatalf("%s, limit %d: tool %d is %s (%s), want %s (%s)", name, limit, i, got[i].ID, got[i].Name, want[i].ID, want[i].Name)
			}
			if i > 0 && (got[i].CreatedAt.Before(got[i-1].CreatedAt) || got[i].CreatedAt.Equal(got[i-1].CreatedAt) && got[i].ID < got[i-1].ID) {
				t.Fatalf("%s: not in (created_at, id) order at %d", name, i)
			}
		}
		if len(got) > 0 {
			sameTool(t, name+": listed tool", got[0], want[0])
		}
	}
}

func testListingArguments(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	other := newFixture(t, s, "other")
	for i := range 5 {
		f.create(t, f.serverTool(fmt.Sprintf("t%d", i)))
	}
	base := store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 2}
	first, err := s.ListTools(ctx, base)
	mustOK(t, "ListTools", err)
	if len(first.Tools) != 2 || first.NextCursor == "" {
		t.Fatalf("first page: %d tools, cursor %q", len(first.Tools), first.NextCursor)
	}
	withCursor := func(f store.ToolFilter, c string) store.ToolFilter { f.Cursor = c; return f }
	for _, tc := range []struct {
		name string
		f    store.ToolFilter
		want error
	}{
		{"limit 0", store.ToolFilter{WorkspaceID: f.ws.ID}, store.ErrInvalid},
		{"limit -1", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: -1}, store.ErrInvalid},
		{"limit 101", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 101}, store.ErrInvalid},
		{"limit 1", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 1}, nil},
		{"limit 100", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 100}, nil},
		{"unknown target", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 5, Target: "edge"}, store.ErrInvalid},
		{"unknown deleted filter", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 5, Deleted: "maybe"}, store.ErrInvalid},
		{"empty name prefix", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 5, NamePrefix: true}, store.ErrInvalid},
		{"garbage cursor", withCursor(base, "not a cursor!"), store.ErrInvalid},
		{"truncated cursor", withCursor(base, first.NextCursor[:10]), store.ErrInvalid},
		{"cursor with another filter", withCursor(store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 2, Target: store.TargetClient}, first.NextCursor), store.ErrInvalid},
		{"cursor in another workspace", withCursor(store.ToolFilter{WorkspaceID: other.ws.ID, Limit: 2}, first.NextCursor), store.ErrInvalid},
		{"cursor with another page size", withCursor(store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 3}, first.NextCursor), nil},
		{"cursor with other names", withCursor(store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 2, Names: []string{"t1"}}, first.NextCursor), store.ErrInvalid},
		{"too many names", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 5, Names: make([]string, store.MaxFilterNames+1)}, store.ErrInvalid},
		{"the most names", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 5, Names: make([]string, store.MaxFilterNames)}, nil},
	} {
		_, err := s.ListTools(ctx, tc.f)
		wantErr(t, "ListTools "+tc.name, err, tc.want)
	}
	// A tool created while paging shows up at the end, and nothing is listed twice.
	late := f.create(t, f.serverTool("late"))
	var got []string
	for f2 := withCursor(base, first.NextCursor); ; {
		page, err := s.ListTools(ctx, f2)
		mustOK(t, "ListTools", err)
		got = append(got, toolIDs(page.Tools)...)
		if page.NextCursor == "" {
			break
		}
		f2.Cursor = page.NextCursor
	}
	if len(got) != 4 || got[3] != late.ID {
		t.Fatalf("after a tool was created while paging: %v", got)
	}
	// Exactly a page full: no cursor to an empty page.
	page, err := s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 6})
	mustOK(t, "ListTools", err)
	if len(page.Tools) != 6 || page.NextCursor != "" {
		t.Fatalf("a full last page: %d tools, cursor %q", len(page.Tools), page.NextCursor)
	}
}

func testEntityIsolation(t *testing.T, s store.Entities) {
	a := newFixture(t, s, "a")
	b := newFixture(t, s, "b")
	aTool := a.create(t, a.serverTool("search"))
	aClient := a.create(t, a.clientTool("ask"))
	aGone := a.create(t, a.serverTool("gone"))
	_, err := s.DeleteTool(ctx, a.ws.ID, aGone.ID, store.RetentionNone)
	mustOK(t, "DeleteTool", err)
	aGone, _ = s.Tool(ctx, a.ws.ID, aGone.ID)
	bTool := b.create(t, b.serverTool("search"))
	snapshot := func() []string {
		var out []string
		for _, id := range []string{aTool.ID, aClient.ID, aGone.ID} {
			tool, err := s.Tool(ctx, a.ws.ID, id)
			mustOK(t, "Tool", err)
			out = append(out, canonical(t, tool))
		}
		fn, err := s.Function(ctx, a.ws.ID, a.fn.ID)
		mustOK(t, "Function", err)
		vs, err := s.FunctionVersions(ctx, a.ws.ID, a.fn.ID)
		mustOK(t, "FunctionVersions", err)
		ms, err := s.Members(ctx, a.ws.ID)
		mustOK(t, "Members", err)
		w, err := s.Workspace(ctx, a.ws.ID)
		mustOK(t, "Workspace", err)
		out = append(out, fmt.Sprintf("%+v %d %d %+v", *fn, len(vs), len(ms), *w))
		return out
	}
	before := snapshot()

	noop := func(*store.Tool) error { return nil }
	for _, scope := range []string{b.ws.ID, "", "wsp_missing"} {
		for _, tc := range []struct {
			name string
			call func() error
		}{
			{"get tool", func() error { _, err := s.Tool(ctx, scope, aTool.ID); return err }},
			{"get deleted tool", func() error { _, err := s.Tool(ctx, scope, aGone.ID); return err }},
			{"update tool", func() error { _, err := s.UpdateTool(ctx, scope, aTool.ID, b.admin.ID, noop); return err }},
			{"update tool as its admin", func() error { _, err := s.UpdateTool(ctx, scope, aTool.ID, a.admin.ID, noop); return err }},
			{"delete tool", func() error { _, err := s.DeleteTool(ctx, scope, aTool.ID, ""); return err }},
			{"delete client tool", func() error { _, err := s.DeleteTool(ctx, scope, aClient.ID, store.RetentionShort); return err }},
			{"resolve version", func() error { _, err := s.ResolveToolVersion(ctx, scope, aTool.ID); return err }},
			{"get function", func() error { _, err := s.Function(ctx, scope, a.fn.ID); return err }},
			{"list versions", func() error { _, err := s.FunctionVersions(ctx, scope, a.fn.ID); return err }},
			{"get version", func() error { _, err := s.FunctionVersion(ctx, scope, a.v1.ID); return err }},
			{"add version", func() error {
				return s.CreateFunctionVersion(ctx, &store.FunctionVersion{WorkspaceID: scope, FunctionID: a.fn.ID, Code: "evil"})
			}},
			{"set default version", func() error { _, err := s.SetDefaultVersion(ctx, scope, a.fn.ID, a.v1.ID); return err }},
			{"get schema", func() error { _, err := s.Schema(ctx, scope, a.in.ID); return err }},
		} {
			err := tc.call()
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("from %q, %s of workspace a: %v, want ErrNotFound", scope, tc.name, err)
			}
		}
	}
	// Workspace b's own records cannot point into workspace a.
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"tool on a's function", func() error {
			tool := b.serverTool("x1")
			tool.FunctionID = a.fn.ID
			return s.CreateTool(ctx, tool)
		}, store.ErrNotFound},
		{"tool pinned to a's version", func() error {
			tool := b.serverTool("x2")
			tool.FunctionVersionID = a.v1.ID
			return s.CreateTool(ctx, tool)
		}, store.ErrNotFound},
		{"tool with a's input schema", func() error {
			tool := b.serverTool("x3")
			tool.InputSchemaID = a.in.ID
			return s.CreateTool(ctx, tool)
		}, store.ErrNotFound},
		{"tool with a's output schema", func() error {
			tool := b.clientTool("x4")
			tool.OutputSchemaID = a.out.ID
			return s.CreateTool(ctx, tool)
		}, store.ErrNotFound},
		{"tool created by a's member", func() error {
			tool := b.clientTool("x5")
			tool.CreatedBy = a.member.ID
			return s.CreateTool(ctx, tool)
		}, store.ErrInvalid},
		{"version with a's schema", func() error {
			return s.CreateFunctionVersion(ctx, &store.FunctionVersion{WorkspaceID: b.ws.ID, FunctionID: b.fn.ID, InputSchemaID: a.in.ID})
		}, store.ErrNotFound},
		{"default version from a", func() error { _, err := s.SetDefaultVersion(ctx, b.ws.ID, b.fn.ID, a.v1.ID); return err }, store.ErrNotFound},
		{"move b's tool to a's function", func() error {
			_, err := s.UpdateTool(ctx, b.ws.ID, bTool.ID, b.admin.ID, func(t *store.Tool) error { t.FunctionID = a.fn.ID; return nil })
			return err
		}, store.ErrNotFound},
		{"move b's tool into workspace a", func() error {
			_, err := s.UpdateTool(ctx, b.ws.ID, bTool.ID, b.admin.ID, func(t *store.Tool) error { t.WorkspaceID = a.ws.ID; return nil })
			return err
		}, store.ErrInvalid},
		{"a's admin sets b's runtime user", func() error {
			_, err := s.UpdateTool(ctx, b.ws.ID, bTool.ID, a.admin.ID, func(t *store.Tool) error { t.RuntimeUserID = b.member.ID; return nil })
			return err
		}, store.ErrForbidden},
		{"b's tool runs as a's member", func() error {
			_, err := s.UpdateTool(ctx, b.ws.ID, bTool.ID, b.admin.ID, func(t *store.Tool) error { t.RuntimeUserID = a.member.ID; return nil })
			return err
		}, store.ErrInvalid},
		{"b's default runtime user from a", func() error {
			_, err := s.UpdateWorkspace(ctx, b.ws.ID, b.admin.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = a.member.ID; return nil })
			return err
		}, store.ErrInvalid},
		{"a's admin sets b's default runtime user", func() error {
			_, err := s.UpdateWorkspace(ctx, b.ws.ID, a.admin.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = b.member.ID; return nil })
			return err
		}, store.ErrForbidden},
		{"a's member is not b's", func() error { _, err := s.Member(ctx, b.ws.ID, a.member.ID); return err }, store.ErrNotFound},
		{"remove a's member through b", func() error { return s.RemoveMember(ctx, b.ws.ID, a.member.ID) }, store.ErrNotFound},
		{"promote a's member through b", func() error { return s.SetMemberRole(ctx, b.ws.ID, a.member.ID, store.MemberRoleAdmin) }, store.ErrNotFound},
	} {
		wantErr(t, tc.name, tc.call(), tc.want)
	}
	// Listings of b show nothing of a, whatever the filter.
	for _, tc := range []store.ToolFilter{
		{WorkspaceID: b.ws.ID, Deleted: store.DeletedInclude},
		{WorkspaceID: b.ws.ID, FunctionID: a.fn.ID, Deleted: store.DeletedInclude},
		{WorkspaceID: b.ws.ID, Name: "gone", Deleted: store.DeletedOnly},
		{WorkspaceID: b.ws.ID, IncludeSystem: true, Deleted: store.DeletedInclude},
		{Deleted: store.DeletedInclude},
	} {
		tc.Limit = 100
		page, err := s.ListTools(ctx, tc)
		mustOK(t, "ListTools", err)
		for _, tool := range page.Tools {
			if tool.WorkspaceID != b.ws.ID {
				t.Fatalf("listing %+v shows %s of workspace %q", tc, tool.ID, tool.WorkspaceID)
			}
		}
	}
	fns, err := s.Functions(ctx, b.ws.ID)
	mustOK(t, "Functions", err)
	if len(fns) != 1 || fns[0].ID != b.fn.ID {
		t.Fatalf("b's functions: %+v", fns)
	}
	ms, err := s.Members(ctx, b.ws.ID)
	mustOK(t, "Members", err)
	for _, m := range ms {
		if m.UserID == a.admin.ID || m.UserID == a.member.ID {
			t.Fatalf("b's members include a's %s", m.UserID)
		}
	}
	// Purging does not reach a's none-tier tool, nor its active ones.
	if _, err := s.PurgeExpired(ctx, time.Now().Add(1000*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(); !slices.Equal(before, after) {
		t.Fatalf("workspace a changed:\n before %v\n after  %v", before, after)
	}
}

func testConcurrentSameName(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	const rounds, racers = 10, 4
	for round := range rounds {
		name := fmt.Sprintf("racy_%d", round)
		var (
			wg            sync.WaitGroup
			mu            sync.Mutex
			wins, clashes int
			other         []error
		)
		start := make(chan struct{})
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var tool *store.Tool
				if i%2 == 0 {
					tool = f.serverTool(name)
				} else {
					tool = f.clientTool(name)
				}
				<-start
				err := s.CreateTool(ctx, tool)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, store.ErrConflict):
					clashes++
				default:
					other = append(other, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins != 1 || clashes != racers-1 || len(other) > 0 {
			t.Fatalf("round %d: %d created, %d conflicts, other errors %v; want exactly one winner", round, wins, clashes, other)
		}
		page, err := s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, Name: name, Limit: 10})
		mustOK(t, "ListTools", err)
		if len(page.Tools) != 1 {
			t.Fatalf("round %d: %d tools named %s", round, len(page.Tools), name)
		}
	}
	// Two renames to one free name: one wins.
	x, y := f.create(t, f.serverTool("x")), f.create(t, f.serverTool("y"))
	errs := make(chan error, 2)
	for _, id := range []string{x.ID, y.ID} {
		go func() {
			_, err := s.UpdateTool(ctx, f.ws.ID, id, f.member.ID, func(t *store.Tool) error { t.Name = "z"; return nil })
			errs <- err
		}()
	}
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), store.ErrConflict) {
		t.Fatalf("two renames to one name: %v, %v; want one success and one ErrConflict", e1, e2)
	}
}

func testConcurrentVersions(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	const n = 12
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.CreateFunctionVersion(ctx, &store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: f.fn.ID, Code: fmt.Sprint(i)})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		mustOK(t, "CreateFunctionVersion", err)
	}
	vs, err := s.FunctionVersions(ctx, f.ws.ID, f.fn.ID)
	mustOK(t, "FunctionVersions", err)
	if len(vs) != n+1 {
		t.Fatalf("%d versions, want %d", len(vs), n+1)
	}
	for i, v := range vs {
		if v.Version != i+1 {
			t.Fatalf("version numbers %v: want 1 to %d without gaps", versionNumbers(vs), n+1)
		}
	}
}

func versionNumbers(vs []*store.FunctionVersion) []int {
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = v.Version
	}
	return out
}

// testConcurrentMembership races writes whose rules depend on each other: two admins demoting
// each other (one admin must remain), and removing a member while an admin makes them a tool's
// runtime user (the runtime user must stay a member).
func testConcurrentMembership(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	tool := f.create(t, f.serverTool("search"))
	race := func(a, b func() error) (error, error) {
		var wg sync.WaitGroup
		var ea, eb error
		start := make(chan struct{})
		wg.Add(2)
		go func() { defer wg.Done(); <-start; ea = a() }()
		go func() { defer wg.Done(); <-start; eb = b() }()
		close(start)
		wg.Wait()
		return ea, eb
	}
	for round := range 8 {
		second := newUser(t, s, fmt.Sprintf("admin%d", round))
		addMember(t, s, f.ws.ID, second.ID, store.MemberRoleAdmin)
		ea, eb := race(
			func() error { return s.SetMemberRole(ctx, f.ws.ID, f.admin.ID, store.MemberRoleMember) },
			func() error { return s.SetMemberRole(ctx, f.ws.ID, second.ID, store.MemberRoleMember) },
		)
		if (ea == nil) == (eb == nil) {
			t.Fatalf("round %d: two admins demoting themselves at once: %v, %v; want exactly one to succeed", round, ea, eb)
		}
		// Back to one admin, f.admin, for the next round.
		if ea == nil {
			mustOK(t, "promote", s.SetMemberRole(ctx, f.ws.ID, f.admin.ID, store.MemberRoleAdmin))
		}
		mustOK(t, "demote", s.SetMemberRole(ctx, f.ws.ID, second.ID, store.MemberRoleMember))
		mustOK(t, "remove", s.RemoveMember(ctx, f.ws.ID, second.ID))

		runner := newUser(t, s, fmt.Sprintf("runner%d", round))
		addMember(t, s, f.ws.ID, runner.ID, store.MemberRoleMember)
		ea, eb = race(
			func() error { return s.RemoveMember(ctx, f.ws.ID, runner.ID) },
			func() error {
				_, err := s.UpdateTool(ctx, f.ws.ID, tool.ID, f.admin.ID, func(t *store.Tool) error { t.RuntimeUserID = runner.ID; return nil })
				return err
			},
		)
		if ea == nil && eb == nil {
			t.Fatalf("round %d: a member was removed while becoming a tool's runtime user", round)
		}
		got, err := s.Tool(ctx, f.ws.ID, tool.ID)
		mustOK(t, "Tool", err)
		if got.RuntimeUserID != "" {
			if _, err := s.Member(ctx, f.ws.ID, got.RuntimeUserID); err != nil {
				t.Fatalf("round %d: the runtime user %s is not a member: %v", round, got.RuntimeUserID, err)
			}
		}
		_, err = s.UpdateTool(ctx, f.ws.ID, tool.ID, f.admin.ID, func(t *store.Tool) error { t.RuntimeUserID = ""; return nil })
		mustOK(t, "clear runtime user", err)
	}
	ms, err := s.Members(ctx, f.ws.ID)
	mustOK(t, "Members", err)
	admins := 0
	for _, m := range ms {
		if m.Role == store.MemberRoleAdmin {
			admins++
		}
	}
	if admins != 1 {
		t.Fatalf("%d admins at the end, want 1", admins)
	}
}

// testToolsStamp: a workspace's stamp changes with every change to its tools and functions,
// and with nothing else: not another workspace's changes, not a read.
func testToolsStamp(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "stamped")
	other := newFixture(t, s, "other")
	stamp := func() string {
		t.Helper()
		st, err := s.ToolsStamp(ctx, f.ws.ID)
		mustOK(t, "ToolsStamp", err)
		return st
	}
	last := stamp()
	step := func(what string, change func()) {
		t.Helper()
		// Timestamps have a resolution: a change in the same tick as the last would not show.
		time.Sleep(2 * time.Millisecond)
		change()
		now := stamp()
		if now == last {
			t.Fatalf("%s: the stamp stayed %s", what, now)
		}
		last = now
	}
	var tool *store.Tool
	step("create a tool", func() { tool = f.create(t, f.serverTool("stamped_tool")) })
	step("update it", func() {
		_, err := s.UpdateTool(ctx, f.ws.ID, tool.ID, f.admin.ID, func(tl *store.Tool) error { tl.Description = "changed"; return nil })
		mustOK(t, "UpdateTool", err)
	})
	step("a new default version", func() {
		v := &store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: f.fn.ID, Code: "export default () => 2"}
		mustOK(t, "CreateFunctionVersion", s.CreateFunctionVersion(ctx, v))
		_, err := s.SetDefaultVersion(ctx, f.ws.ID, f.fn.ID, v.ID)
		mustOK(t, "SetDefaultVersion", err)
	})
	step("delete the tool", func() {
		_, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, store.RetentionShort)
		mustOK(t, "DeleteTool", err)
	})
	step("purge it", func() {
		_, err := s.PurgeExpired(ctx, time.Now().Add(8*24*time.Hour))
		mustOK(t, "PurgeExpired", err)
	})
	other.create(t, other.serverTool("elsewhere"))
	_, err := s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 10})
	mustOK(t, "ListTools", err)
	if now := stamp(); now != last {
		t.Fatalf("another workspace's tool or a read changed the stamp: %s, was %s", now, last)
	}
}
