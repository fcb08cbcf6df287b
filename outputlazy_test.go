package quiver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/schemastat"
	"github.com/quiverhq/quiver/schema"
)

// TestAdvisoryOutputCompiledAtFirstUse: an advisory output schema (an OpenAPI document's) is
// not compiled when the tool is made but at the first result it checks, once for the tool and
// its copies; a result unlike it passes with the warning; one that cannot be compiled costs
// no tool, and is said in the warning of each result. A contract's schema is compiled by
// NewTool, which refuses one that cannot be.
func TestAdvisoryOutputCompiledAtFirstUse(t *testing.T) {
	ctx := context.Background()
	point := &schema.Schema{Type: "object", Required: []string{"x"}, Properties: map[string]*schema.Schema{"x": {Type: "integer"}}}
	broken := &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"x": {Type: "string", Pattern: "("}}}
	answer := func(v string) quiver.ToolFunc {
		return func(context.Context, json.RawMessage) (any, error) { return json.RawMessage(v), nil }
	}
	if _, err := quiver.NewTool(quiver.Spec{Name: "svc_contract", Description: "Gets.", OutputSchema: broken}, answer(`{}`)); err == nil {
		t.Fatal("a contract's schema that cannot be compiled was accepted")
	}
	before := schemastat.Compilations.Load()
	advisory, err := quiver.NewTool(quiver.Spec{Name: "svc_get", Description: "Gets.", OutputSchema: point, OutputAdvisory: true}, answer(`{"x":"seven"}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := schemastat.Compilations.Load() - before; n != 0 {
		t.Fatalf("making the tool compiled %d schemas, want 0", n)
	}
	unusable, err := quiver.NewTool(quiver.Spec{Name: "svc_broken", Description: "Gets.", OutputSchema: broken, OutputAdvisory: true}, answer(`{"x":"a"}`))
	if err != nil {
		t.Fatalf("an advisory schema that cannot be compiled cost the tool: %v", err)
	}
	copied, err := advisory.As("svc_get_again", "Gets again.")
	if err != nil {
		t.Fatal(err)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(advisory, unusable, copied); err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: reg}
	for _, tc := range []struct{ tool, warning string }{
		{"svc_get", "does not match the output schema"},
		{"svc_get_again", "does not match the output schema"},
		{"svc_get", "does not match the output schema"},
		{"svc_broken", "an output schema that cannot be used"},
		{"svc_broken", "an output schema that cannot be used"},
	} {
		r, err := d.Dispatch(ctx, quiver.Call{Name: tc.tool, Args: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		var meta map[string]any
		_ = json.Unmarshal(r.Meta, &meta)
		warning, _ := meta[quiver.OutputWarningMeta].(string)
		if r.IsError() || !strings.Contains(warning, tc.warning) {
			t.Errorf("%s: %s %s, warning %q, want one saying %q", tc.tool, r.Status, r.Error, warning, tc.warning)
		}
	}
	// The point schema once (shared by the copy), the broken one tried once.
	if n := schemastat.Compilations.Load() - before; n != 2 {
		t.Errorf("%d schemas compiled in all, want 2", n)
	}
}
