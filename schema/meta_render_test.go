package schema_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/schema"
)

// The meta-fields a tool enables are offered in every dialect, optional (nullable in strict
// OpenAI, where every property is required), and only then.
func TestMetaFieldsAreOfferedOnlyWhenEnabled(t *testing.T) {
	in := &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"text": {Type: "string"}}, Required: []string{"text"}}
	tools := []schema.ToolSchema{
		{Name: "stateful", Description: "Enables all three.", Input: in, MetaFields: schema.MetaFields},
		{Name: "plain", Description: "Enables none.", Input: in},
		{Name: "bare", Description: "No arguments, one meta-field.", MetaFields: []string{schema.InstanceField}},
	}
	for _, d := range schema.Dialects {
		ts, err := schema.Render(d, tools)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		for _, rt := range ts.Tools {
			var params struct {
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			}
			if err := json.Unmarshal(rt.Parameters, &params); err != nil {
				t.Fatalf("%s %s: %v: %s", d, rt.Name, err, rt.Parameters)
			}
			want := map[string][]string{"stateful": schema.MetaFields, "bare": {schema.InstanceField}}[rt.Canonical]
			for _, f := range schema.MetaFields {
				prop, offered := params.Properties[f]
				enabled := strings.Contains(strings.Join(want, ","), f)
				if offered != enabled {
					t.Errorf("%s %s: %s offered %v, enabled %v: %s", d, rt.Name, f, offered, enabled, rt.Parameters)
					continue
				}
				if !offered {
					continue
				}
				required := strings.Contains(strings.Join(params.Required, ","), f)
				switch {
				case d == schema.OpenAIStrict && rt.Strict:
					// Strict: required, and null accepted for "not used".
					if !required || !strings.Contains(string(prop), "null") {
						t.Errorf("strict %s: %s is not required and nullable: %s", rt.Name, f, prop)
					}
				case required:
					t.Errorf("%s %s: %s is required: %s", d, rt.Name, f, rt.Parameters)
				}
			}
		}
	}
	composed, err := schema.Compose(tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(composed)
	if n := strings.Count(string(b), `"_outputPath"`); n != 1 {
		t.Errorf("the composed schema offers _outputPath %d times, want once (the stateful tool's): %s", n, b)
	}
}
