package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
)

// toolWorld is a platform over a store with workspace wsp_a, a member usr_m, a function with a
// version, and a shared tool named "echo".
type toolWorld struct {
	p       *platform.Platform
	st      *memstore.Store
	admin   platform.Actor
	member  platform.Actor
	viewer  platform.Actor
	fn      *store.Function
	version *store.FunctionVersion
}

func newToolWorld(t *testing.T) *toolWorld {
	t.Helper()
	ctx := context.Background()
	st := openStore(t)
	must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_a", Name: "a"}))
	must(t, st.CreateUser(ctx, &store.User{ID: "usr_m", Email: "m@example.com"}))
	must(t, st.AddMember(ctx, &store.Membership{WorkspaceID: "wsp_a", UserID: "usr_m", Role: store.MemberRoleMember}))
	must(t, st.CreateUser(ctx, &store.User{ID: "usr_a", Email: "a@example.com"}))
	must(t, st.AddMember(ctx, &store.Membership{WorkspaceID: "wsp_a", UserID: "usr_a", Role: store.MemberRoleAdmin}))
	shared := &quiver.Registry{}
	must(t, shared.Register(quiver.Func("echo", "Echoes.", func(context.Context, struct{}) (string, error) { return "", nil })))
	p, err := platform.New(platform.Config{Store: st, Registry: shared})
	must(t, err)
	w := &toolWorld{p: p, st: st,
		admin:  platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_a", KeyID: "key_a", Role: store.KeyRoleAdmin},
		member: platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", KeyID: "key_m", Role: store.KeyRoleMember},
		viewer: platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", KeyID: "key_v", Role: store.KeyRoleViewer},
	}
	if w.fn, err = p.CreateFunction(ctx, w.member, "double"); err != nil {
		t.Fatal(err)
	}
	if w.version, err = p.CreateFunctionVersion(ctx, w.member, w.fn.ID, platform.NewVersion{Code: "export default ({ n }) => n * 2"}); err != nil {
		t.Fatal(err)
	}
	return w
}

// refusal checks that err is a platform refusal of kind naming field.
func refusal(t *testing.T, what string, err error, kind platform.Kind, field string) {
	t.Helper()
	var e *platform.Error
	if !errors.As(err, &e) || e.Kind != kind || e.Field != field {
		t.Errorf("%s: %v (%#v), want a %s refusal of %q", what, err, e, kind, field)
	}
}

var inSchema = json.RawMessage(`{"type":"object","description":"Doubles n.","properties":{"n":{"type":"number"}}}`)

// Every rule of a stored tool holds without HTTP: each refusal says its kind and the input at
// fault, and nothing refused is served.
func TestCreateToolRules(t *testing.T) {
	w := newToolWorld(t)
	ctx := context.Background()
	server := func(mod func(*platform.NewTool)) platform.NewTool {
		in := platform.NewTool{Name: "doubler", Target: store.TargetServer, FunctionID: w.fn.ID, InputSchema: inSchema}
		if mod != nil {
			mod(&in)
		}
		return in
	}
	cases := []struct {
		name  string
		actor platform.Actor
		in    platform.NewTool
		kind  platform.Kind
		field string
	}{
		{"a viewer", w.viewer, server(nil), platform.Forbidden, ""},
		// "two words" is accepted with a warning (seed 003 §8.3); hostile input is refused.
		{"a bad name", w.member, server(func(in *platform.NewTool) { in.Name = "two\nlines" }), platform.Invalid, "name"},
		{"a blank name", w.member, server(func(in *platform.NewTool) { in.Name = " " }), platform.Invalid, "name"},
		{"the name of a shared tool", w.member, server(func(in *platform.NewTool) { in.Name = "echo" }), platform.Conflict, "name"},
		{"a server tool without a function", w.member, server(func(in *platform.NewTool) { in.FunctionID = "" }), platform.Invalid, "function_id"},
		{"an id of another kind", w.member, server(func(in *platform.NewTool) { in.FunctionID = "tol_1" }), platform.Invalid, "function_id"},
		{"an unknown function", w.member, server(func(in *platform.NewTool) { in.FunctionID = "fun_nope" }), platform.NotFound, "function_id"},
		{"an unknown version", w.member, server(func(in *platform.NewTool) { in.FunctionVersionID = "fnv_nope" }), platform.NotFound, "function_version_id"},
		{"a client tool with a function", w.member, server(func(in *platform.NewTool) { in.Target = store.TargetClient }), platform.Invalid, "function_id"},
		{"an input schema that is no object", w.member, server(func(in *platform.NewTool) { in.InputSchema = json.RawMessage(`[1]`) }), platform.Invalid, "input_schema"},
		{"an output schema that is no object", w.member, server(func(in *platform.NewTool) { in.OutputSchema = json.RawMessage(`"x"`) }), platform.Invalid, "output_schema"},
		{"no description anywhere", w.member, server(func(in *platform.NewTool) { in.InputSchema = json.RawMessage(`{"type":"object"}`) }), platform.Invalid, "description"},
		{"an example that breaks the schema", w.member, server(func(in *platform.NewTool) {
			in.Examples = []store.ToolExample{{Args: json.RawMessage(`{"n":"two"}`)}}
		}), platform.Invalid, "examples"},
		{"a runtime user set by a member", w.member, server(func(in *platform.NewTool) { in.RuntimeUserID = "usr_m" }), platform.Forbidden, "runtime_user_id"},
		{"a runtime user who is no member", w.admin, server(func(in *platform.NewTool) { in.RuntimeUserID = "usr_x" }), platform.Invalid, "runtime_user_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := w.p.CreateTool(ctx, c.actor, c.in)
			refusal(t, c.name, err, c.kind, c.field)
		})
	}
	if got := names(w.p.Workspace(ctx, "wsp_a").Registry()); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("refused tools are served: %v", got)
	}

	tool, err := w.p.CreateTool(ctx, w.admin, server(func(in *platform.NewTool) { in.RuntimeUserID = "usr_m" }))
	must(t, err)
	if tool.CreatedBy != "usr_a" || tool.RuntimeUserID != "usr_m" || !tool.Enabled {
		t.Errorf("stored %+v", tool)
	}
	if got := names(w.p.Workspace(ctx, "wsp_a").Registry()); !slices.Equal(got, []string{"doubler", "echo"}) {
		t.Errorf("the stored tool is not served at once: %v", got)
	}
	_, err = w.p.CreateTool(ctx, w.member, server(nil))
	refusal(t, "a second tool of the same name", err, platform.Conflict, "name")

	// Changes keep the rules: a rename onto a shared name, a viewer, an unknown tool.
	echo := "echo"
	_, err = w.p.UpdateTool(ctx, w.member, tool.ID, platform.ToolChange{Name: &echo})
	refusal(t, "a rename onto a shared tool", err, platform.Conflict, "name")
	_, err = w.p.UpdateTool(ctx, w.viewer, tool.ID, platform.ToolChange{})
	refusal(t, "a viewer's change", err, platform.Forbidden, "")
	_, err = w.p.UpdateTool(ctx, w.member, "tol_nope", platform.ToolChange{})
	refusal(t, "a change of an unknown tool", err, platform.NotFound, "")
	_, err = w.p.UpdateTool(ctx, w.member, tool.ID, platform.ToolChange{RuntimeUserID: platform.Optional[string]{Set: true}})
	refusal(t, "a member unsetting the runtime user", err, platform.Forbidden, "runtime_user_id")

	renamed := "tripler"
	if got, err := w.p.UpdateTool(ctx, w.member, tool.ID, platform.ToolChange{Name: &renamed}); err != nil || got.Name != renamed {
		t.Fatalf("rename: %v %v", got, err)
	}
	if _, err := w.p.DeleteTool(ctx, w.member, tool.ID, ""); err != nil {
		t.Fatal(err)
	}
	if got := names(w.p.Workspace(ctx, "wsp_a").Registry()); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("a deleted tool is served: %v", got)
	}
}

// A function's versions are checked before they are stored, and only the workspace's own
// functions change.
func TestFunctionRules(t *testing.T) {
	w := newToolWorld(t)
	ctx := context.Background()
	_, err := w.p.CreateFunctionVersion(ctx, w.member, w.fn.ID, platform.NewVersion{Code: "export default ({ n } => n"})
	refusal(t, "code that does not parse", err, platform.Invalid, "code")
	_, err = w.p.CreateFunctionVersion(ctx, w.member, w.fn.ID, platform.NewVersion{Code: "export default () => 1", InputSchema: json.RawMessage(`true`)})
	refusal(t, "an input schema that is no object", err, platform.Invalid, "input_schema")
	_, err = w.p.CreateFunctionVersion(ctx, w.viewer, w.fn.ID, platform.NewVersion{Code: "export default () => 1"})
	refusal(t, "a viewer's version", err, platform.Forbidden, "")
	_, err = w.p.CreateFunctionVersion(ctx, w.member, "fun_nope", platform.NewVersion{Code: "export default () => 1"})
	refusal(t, "a version of an unknown function", err, platform.NotFound, "")
	_, err = w.p.CreateFunction(ctx, w.member, "double")
	refusal(t, "a function name taken", err, platform.Conflict, "name")
	_, err = w.p.SetDefaultVersion(ctx, w.member, w.fn.ID, "ver_1")
	refusal(t, "a default version id of another kind", err, platform.Invalid, "version_id")

	v2, err := w.p.CreateFunctionVersion(ctx, w.member, w.fn.ID, platform.NewVersion{Code: "export default ({ n }) => n * 3"})
	must(t, err)
	f, err := w.p.SetDefaultVersion(ctx, w.member, w.fn.ID, v2.ID)
	must(t, err)
	if f.DefaultVersionID != v2.ID {
		t.Errorf("default version %s, want %s", f.DefaultVersionID, v2.ID)
	}
	versions, err := w.p.FunctionVersions(ctx, w.viewer, w.fn.ID)
	if err != nil || len(versions) != 2 || !strings.HasPrefix(versions[0].ID, store.PrefixFunctionVersion+"_") {
		t.Errorf("versions: %v %v", versions, err)
	}
}
