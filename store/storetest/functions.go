package storetest

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/store"
)

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
		{"tab in name", store.Function{WorkspaceID: f.ws.ID, Name: "a\tb"}, store.ErrInvalid},
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
	// A function's name is a tool's name (quiver tools add names the function for its tool),
	// which need not be snake_case: spaces and punctuation are fine.
	mustOK(t, "a name with spaces", s.CreateFunction(ctx, &store.Function{WorkspaceID: other.ws.ID, Name: "a b/c?"}))

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
