package schema_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/quiverhq/quiver/schema"
)

func parseSchema(t *testing.T, doc string) *schema.Schema {
	t.Helper()
	s := new(schema.Schema)
	if err := json.Unmarshal([]byte(doc), s); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return s
}

// generic decodes a schema as plain JSON, to compare it with a document as written.
func generic(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// withoutDescriptions drops the descriptions Quiver adds for the model, which seed 002's
// example does not show.
func withoutDescriptions(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if k == "description" {
				continue
			}
			out[k] = withoutDescriptions(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutDescriptions(e)
		}
		return out
	}
	return v
}

// L2, M1: seed 002's own example composes into the schema the seed writes: output nullable and
// closed (additionalProperties: false), each call item naming its tool with a _tool const,
// and no _reasoningForCall unless the tool's ToolSchema.Reasoning asks for it. Quiver also
// closes the root and each call item, which the seed's example leaves open; a model meant to
// answer in this shape gains nothing from extra keys.
func TestComposeAsSeed002Writes(t *testing.T) {
	greet := parseSchema(t, `{"type":"object","properties":{"userName":{"type":"string"}},"required":["userName"]}`)
	output := parseSchema(t, `{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}`)
	// The seed's composed schema, with what Quiver adds on top of it (closed root and items).
	want := func(reasoning bool) map[string]any {
		item := map[string]any{
			"type": "object",
			"properties": map[string]any{
				"_tool":    map[string]any{"const": "greetUser"},
				"userName": map[string]any{"type": "string"},
			},
			"required":             []any{"_tool", "userName"},
			"additionalProperties": false,
		}
		if reasoning {
			item["properties"].(map[string]any)["_reasoningForCall"] = map[string]any{"type": "string"}
		}
		return map[string]any{
			"type": "object",
			"properties": map[string]any{
				"output": map[string]any{
					"type":                 []any{"object", "null"},
					"properties":           map[string]any{"summary": map[string]any{"type": "string"}},
					"required":             []any{"summary"},
					"additionalProperties": false,
				},
				"calls": map[string]any{"type": "array", "items": item},
			},
			"required":             []any{"calls", "output"},
			"additionalProperties": false,
		}
	}
	for _, reasoning := range []bool{false, true} {
		got, err := schema.Compose([]schema.ToolSchema{{Name: "greetUser", Input: greet, Reasoning: reasoning}}, output)
		if err != nil {
			t.Fatal(err)
		}
		g, w := withoutDescriptions(generic(t, got)), want(reasoning)
		if a, b := generic(t, g), generic(t, w); !jsonEqual(a, b) {
			gb, _ := json.Marshal(g)
			wb, _ := json.Marshal(w)
			t.Errorf("reasoning %v: composed\n got %s\nwant %s", reasoning, gb, wb)
		}
	}
	// The caller's output schema is not changed by composing it.
	if output.AdditionalProperties != nil {
		t.Error("Compose closed the caller's output schema in place")
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// The output is closed only where closing it keeps every answer it meant to accept: an object
// that declares its properties in place and says nothing of others.
func TestComposeClosesOutputOnlyWhereSafe(t *testing.T) {
	tests := []struct {
		name       string
		output     string // "" for text output
		wantClosed bool
		wantAdd    string // additionalProperties as written, when kept
	}{
		{"object with properties", `{"type":"object","properties":{"a":{"type":"string"}}}`, true, ""},
		{"free-form object", `{"type":"object"}`, false, ""},
		{"pattern properties", `{"type":"object","properties":{"a":{}},"patternProperties":{"^x-":{}}}`, false, ""},
		{"additional properties allowed", `{"type":"object","properties":{"a":{}},"additionalProperties":true}`, false, "true"},
		{"additional properties typed", `{"type":"object","additionalProperties":{"type":"integer"}}`, false, `{"type":"integer"}`},
		{"unevaluated properties", `{"type":"object","unevaluatedProperties":false}`, false, ""},
		{"properties from allOf", `{"type":"object","allOf":[{"properties":{"a":{}}}]}`, false, ""},
		{"properties from anyOf", `{"type":"object","anyOf":[{"properties":{"a":{}}},{"properties":{"b":{}}}]}`, false, ""},
		{"a ref", `{"$defs":{"p":{"type":"object"}},"$ref":"#/$defs/p"}`, false, ""},
		{"if/then", `{"type":"object","if":{"properties":{"a":{"const":1}}},"then":{"properties":{"b":{}}}}`, false, ""},
		{"an array", `{"type":"array","items":{"type":"string"}}`, false, ""},
		{"a string", `{"type":"string"}`, false, ""},
		{"text", "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out *schema.Schema
			if tt.output != "" {
				out = parseSchema(t, tt.output)
			}
			s, err := schema.Compose(nil, out)
			if err != nil {
				t.Fatal(err)
			}
			o := generic(t, s.Properties["output"])
			add, has := o["additionalProperties"]
			if tt.wantClosed != (has && add == false) {
				t.Errorf("output %v: closed %v, want %v", o, has && add == false, tt.wantClosed)
			}
			if tt.wantAdd != "" {
				b, _ := json.Marshal(add)
				if string(b) != tt.wantAdd {
					t.Errorf("additionalProperties %s, want %s as written", b, tt.wantAdd)
				}
			}
			// Whatever was done, a valid final output still validates, and null still means
			// "not done".
			c, err := schema.Compile(s)
			if err != nil {
				t.Fatal(err)
			}
			if v, err := schema.Decode([]byte(`{"calls":[],"output":null}`)); err != nil || c.Validate(v) != nil {
				t.Errorf("null output refused: %v", c.Validate(v))
			}
		})
	}
	// Keys seed 002's order has: calls and output both required.
	s, err := schema.Compose(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Required, []string{"calls", "output"}) {
		t.Errorf("required %v", s.Required)
	}
}

// ConstAsEnum keeps what a schema accepts: a const and a one-value enum are the same
// constraint, and the caller's schema is left as it was.
func TestConstAsEnum(t *testing.T) {
	in := &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{
		"_tool":  {Const: ptr[any]("greetUser")},
		"n":      {Type: "integer", Const: ptr[any](json.Number("3"))},
		"either": {Const: ptr[any]("a"), Enum: []any{"a", "b"}}, // both: left as written
	}}
	out := schema.ConstAsEnum(in)
	want := `{"type":"object","properties":{"_tool":{"type":"string","enum":["greetUser"]},` +
		`"n":{"type":"integer","enum":[3]},"either":{"const":"a","enum":["a","b"]}}}`
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if got := generic(t, out); !jsonEqual(got, w) {
		t.Errorf("ConstAsEnum = %v, want %s", got, want)
	}
	if in.Properties["_tool"].Const == nil || in.Properties["_tool"].Enum != nil {
		t.Error("ConstAsEnum changed its argument")
	}
}

func ptr[T any](v T) *T { return &v }
