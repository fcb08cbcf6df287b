package platform_test

import (
	"context"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
)

// SaveFunctionTool stores a tool, its function and a version in one step; saved again it adds
// a version the tool runs; it refuses what CreateTool refuses (a name the workspace may not
// take, a viewer, a contract that makes no tool) before anything is written; and the workspace serves what it stored.
func TestSaveFunctionTool(t *testing.T) {
	ctx := context.Background()
	w := newToolWorld(t)
	def := jsfunc.Definition{Name: "triple", Description: "Triples n.", Code: "export default ({ n }) => n * 3",
		InputSchema: &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"n": {Type: "integer"}}},
		Variables:   []quiver.Variable{{Name: "FACTOR"}}, RequiresConfirmation: true}
	first, err := w.p.SaveFunctionTool(ctx, w.member, def)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || first.Version.Version != 1 || !first.Tool.RequiresConfirmation || first.Tool.Target != store.TargetServer {
		t.Fatalf("first save: %+v %+v", first.Tool, first.Version)
	}
	tool, ok := w.p.Workspace(ctx, "wsp_a").Registry().Lookup("triple")
	if !ok || !tool.Spec().RequiresConfirmation || len(tool.Spec().Variables) != 1 {
		t.Fatalf("the workspace serves %v %+v", ok, tool)
	}

	def.Code, def.RequiresConfirmation = "export default ({ n }) => n * 30", false
	again, err := w.p.SaveFunctionTool(ctx, w.member, def)
	if err != nil {
		t.Fatal(err)
	}
	if again.Created || again.Tool.ID != first.Tool.ID || again.Version.Version != 2 || again.Tool.RequiresConfirmation {
		t.Fatalf("second save: %+v %+v", again.Tool, again.Version)
	}
	f, err := w.p.Function(ctx, w.member, again.Tool.FunctionID)
	if err != nil || f.DefaultVersionID != again.Version.ID {
		t.Fatalf("the function's default version: %+v %v", f, err)
	}

	for _, tt := range []struct {
		what  string
		actor platform.Actor
		name  string
		kind  platform.Kind
		field string
		words string
	}{
		{"a control character", w.member, "bad\nname", platform.Invalid, "name", "U+000A"},
		{"a shared tool's name", w.member, "echo", platform.Conflict, "name", `the server serves a tool named "echo" already`},
		{"a viewer", w.viewer, "fresh", platform.Forbidden, "", "is a viewer's"},
		{"no description", w.member, "undescribed", platform.Invalid, "description", "a tool needs a description"},
	} {
		d := def
		d.Name = tt.name
		if tt.field == "description" {
			d.Description = ""
		}
		_, err := w.p.SaveFunctionTool(ctx, tt.actor, d)
		refusal(t, tt.what, err, tt.kind, tt.field)
		if err == nil || !strings.Contains(err.Error(), tt.words) {
			t.Errorf("%s: %v, want %q", tt.what, err, tt.words)
		}
	}
	fns, err := w.p.Functions(ctx, w.member)
	if err != nil || len(fns) != 2 { // double (the world's) and triple
		t.Errorf("a refused save left functions: %d %v", len(fns), err)
	}
	d := def
	d.Name, d.Code = "broken", "export default ("
	if _, err := w.p.SaveFunctionTool(ctx, w.member, d); err == nil || !strings.Contains(err.Error(), "code") {
		t.Errorf("code that does not parse: %v", err)
	}
}
