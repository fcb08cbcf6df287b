package storetest

import (
	"encoding/json"
	"errors"
	"testing"

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
		{"OpenAPISources", testOpenAPISources},
		{"Governance", testGovernance},
		{"Entitlements", testEntitlements},
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
