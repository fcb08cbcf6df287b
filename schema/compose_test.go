package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

func composeTools(t *testing.T) []ToolSchema {
	t.Helper()
	return []ToolSchema{
		{Name: "get_weather", Description: "Gets the weather.", Input: mustInfer[enumArgs](t), Reasoning: true},
		{Name: "tree", Description: "Takes a tree.", Input: corpusByName(t, "recursive_tree").schema},
		{Name: "now", Description: "Tells the time."},
		{Name: "summarize", Description: "The model summarizes.", Input: mustInfer[scalarArgs](t), Output: mustInfer[point](t), Latent: true},
		{Name: "classify", Description: "The model classifies into a tree.", Latent: true,
			Output: corpusByName(t, "defs_refs").schema},
	}
}

func TestComposeStructure(t *testing.T) {
	tools := composeTools(t)
	before := make([]string, len(tools))
	for i, tool := range tools {
		before[i] = marshalSchemaOrNil(tool.Input) + marshalSchemaOrNil(tool.Output)
	}
	s, err := Compose(tools, mustInfer[point](t))
	if err != nil {
		t.Fatalf("Compose: %v", err)
	}
	for i, tool := range tools {
		if marshalSchemaOrNil(tool.Input)+marshalSchemaOrNil(tool.Output) != before[i] {
			t.Errorf("Compose modified the schemas of %s", tool.Name)
		}
	}
	if s.Type != "object" || !isFalse(s.AdditionalProperties) {
		t.Errorf("root %s is not a closed object", marshalSchema(t, s))
	}
	if strings.Join(s.Required, ",") != "calls,output" || len(s.Properties) != 2 {
		t.Errorf("root requires %q with properties %v", s.Required, keysOf(s.Properties))
	}
	calls := s.Properties["calls"]
	if calls.Type != "array" || calls.Items == nil || len(calls.Items.AnyOf) != len(tools) {
		t.Fatalf("calls = %s", marshalSchema(t, calls))
	}
	for i, b := range calls.Items.AnyOf {
		tool := tools[i]
		tc := b.Properties[ToolField]
		if tc == nil || tc.Const == nil || *tc.Const != any(tool.Name) {
			t.Errorf("branch %d: _tool = %s, want const %q", i, marshalSchemaOrNil(tc), tool.Name)
		}
		if tc != nil && tc.Description != tool.Description {
			t.Errorf("branch %d: _tool description %q", i, tc.Description)
		}
		// _reasoningForCall only where the tool's Reasoning asks for it, optional, second.
		if r := b.Properties[ReasoningField]; tool.Reasoning && (r == nil || r.Type != "string") || !tool.Reasoning && r != nil {
			t.Errorf("branch %d (reasoning %v): %s = %s", i, tool.Reasoning, ReasoningField, marshalSchemaOrNil(r))
		}
		if containsString(b.Required, ReasoningField) {
			t.Errorf("branch %d: %s is required", i, ReasoningField)
		}
		if b.Required[0] != ToolField {
			t.Errorf("branch %d: required %q does not start with _tool", i, b.Required)
		}
		if b.PropertyOrder[0] != ToolField || tool.Reasoning && b.PropertyOrder[1] != ReasoningField {
			t.Errorf("branch %d: property order %q", i, b.PropertyOrder)
		}
		if !isFalse(b.AdditionalProperties) {
			t.Errorf("branch %d: additional properties allowed", i)
		}
		_, hasOutput := b.Properties[OutputField]
		if hasOutput != tool.Latent || containsString(b.Required, OutputField) != tool.Latent {
			t.Errorf("branch %d (%s): _output present=%v required=%v, latent=%v", i, tool.Name, hasOutput,
				containsString(b.Required, OutputField), tool.Latent)
		}
		for _, ref := range refsIn(b) {
			if !strings.HasPrefix(ref, "#/$defs/"+tool.Name+".") {
				t.Errorf("branch %d: ref %q not rewritten to the hoisted $defs", i, ref)
			}
		}
		if b.Defs != nil || b.Properties[OutputField] != nil && b.Properties[OutputField].Defs != nil {
			t.Errorf("branch %d: $defs left in place", i)
		}
	}
	for _, name := range []string{"tree.node", "classify.address"} {
		if s.Defs[name] == nil {
			t.Errorf("$defs lacks %q: has %v", name, keysOf(s.Defs))
		}
	}
	if out := s.Properties["output"]; !allowsNull(out) || out.Properties["x"] == nil || !isFalse(out.AdditionalProperties) {
		t.Errorf("output = %s, want the point schema, nullable and closed", marshalSchema(t, out))
	}
}

func keysOf(m map[string]*Schema) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return sortedCopy(out)
}

func refsIn(s *Schema) []string {
	var refs []string
	walk(s, func(x *Schema) {
		if x.Ref != "" {
			refs = append(refs, x.Ref)
		}
	})
	return refs
}

func TestComposeValidatesAnswers(t *testing.T) {
	s, err := Compose(composeTools(t), mustInfer[point](t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compile(s)
	if err != nil {
		t.Fatalf("Compile(composed): %v", err)
	}
	good := []string{
		`{"calls":[],"output":{"x":1,"y":2}}`,
		`{"calls":[{"_tool":"now"}],"output":null}`,
		`{"calls":[
			{"_tool":"get_weather","_reasoningForCall":"The user asked.","unit":"celsius","level":1},
			{"_tool":"tree","root":{"label":"a","children":[{"label":"b"}]}},
			{"_tool":"summarize","text":"t","ratio":0.5,"count":3,"flag":false,"_output":{"x":0,"y":0}},
			{"_tool":"classify","_output":{"home":{"street":"s","zip":"12345"}}}],
		 "output":null}`,
	}
	for _, doc := range good {
		if err := c.Validate(mustDecode(t, doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
	bad := []struct{ doc, problem string }{
		{`{"calls":[]}`, `/: missing required property "output"`},
		{`{"calls":[],"output":null,"extra":1}`, `unknown property "extra"`},
		{`{"calls":[{"_tool":"nope"}],"output":null}`, `/calls/0: matches none of the allowed alternatives`},
		{`{"calls":[{"_tool":"summarize","text":"t","ratio":0.5,"count":3,"flag":false}],"output":null}`, `missing required property "_output"`},
		{`{"calls":[{"_tool":"classify","_output":{"home":{"street":"s","zip":"x"}}}],"output":null}`, `/calls/0/_output/home/zip: must match pattern`},
		{`{"calls":[{"_tool":"tree","root":{"label":"a","children":[{"label":7}]}}],"output":null}`, `/calls/0/root/children/0/label: expected string, got number`},
		{`{"calls":[],"output":{"x":1}}`, `missing required property "y"`},
		// The output is closed, as seed 002 writes it; _reasoningForCall only where enabled.
		{`{"calls":[],"output":{"x":1,"y":2,"z":3}}`, `unknown property "z"`},
		{`{"calls":[{"_tool":"now","_reasoningForCall":"why"}],"output":null}`, `/calls/0: matches none of the allowed alternatives`},
	}
	for _, b := range bad {
		err := c.Validate(mustDecode(t, b.doc))
		if err == nil || !strings.Contains(err.Error(), b.problem) {
			t.Errorf("%s: error %v, want it to contain %q", b.doc, err, b.problem)
		}
	}
}

func TestComposeTextOutput(t *testing.T) {
	s, err := Compose([]ToolSchema{{Name: "now", Description: "d"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := s.Properties["output"]
	if strings.Join(out.Types, ",") != "string,null" || out.Description == "" {
		t.Errorf("output = %s, want string|null", marshalSchema(t, out))
	}
	// One tool: the items are its branch, no anyOf.
	if items := s.Properties["calls"].Items; items.AnyOf != nil || items.Properties[ToolField] == nil {
		t.Errorf("items = %s", marshalSchema(t, items))
	}
	c, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{`{"calls":[],"output":"Done."}`, `{"calls":[{"_tool":"now"}],"output":null}`} {
		if err := c.Validate(mustDecode(t, doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
	if err := c.Validate(mustDecode(t, `{"calls":[],"output":3}`)); err == nil {
		t.Errorf("numeric text output accepted")
	}

	// No tools: calls must be empty.
	s, err = Compose(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err = Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(mustDecode(t, `{"calls":[{}],"output":"x"}`)); err == nil {
		t.Errorf("a call accepted although there are no tools")
	}
	if err := c.Validate(mustDecode(t, `{"calls":[],"output":"x"}`)); err != nil {
		t.Error(err)
	}
}

// TestComposeStrict: the composed schema, rewritten for strict mode, passes OpenAI's rules, for
// a text output, an object output and an output with $defs.
func TestComposeStrict(t *testing.T) {
	outputs := map[string]*Schema{
		"text":      nil,
		"object":    mustInfer[kitchenSink](t),
		"with defs": corpusByName(t, "recursive_tree").schema,
		"record":    mustInfer[mapArgs](t),
	}
	for name, out := range outputs {
		t.Run(name, func(t *testing.T) {
			tools := composeTools(t)
			// Every corpus schema that strict mode can take is a tool too.
			// Composition puts the arguments one object level below the root, so schemas of 10
			// levels no longer fit (TestComposeTooDeepForStrict).
			for _, n := range corpus(t) {
				if objectDepth(n.schema, n.schema, 0) <= 9 {
					tools = append(tools, ToolSchema{Name: "c_" + n.name, Description: "d", Input: n.schema})
				}
			}
			s, err := Compose(tools, out)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Compile(s); err != nil {
				t.Fatalf("Compile(composed): %v", err)
			}
			strict, _, err := Strict(s)
			if err != nil {
				t.Fatalf("Strict(composed): %v", err)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(marshalSchema(t, strict)), &m); err != nil {
				t.Fatal(err)
			}
			r := &report{}
			checkStrictSchema(r, "$", m)
			for _, e := range r.errs {
				t.Error(e)
			}
			if _, err := Compile(strict); err != nil {
				t.Errorf("Compile(Strict(composed)): %v", err)
			}
		})
	}
}

func TestComposeAwkwardToolNames(t *testing.T) {
	tree := corpusByName(t, "recursive_tree").schema
	for _, name := range []string{"fs/read", "tilde~name", "weird name!", "everything.echo", "ns:tool", "50%off", "a#b", "q?x"} {
		s, err := Compose([]ToolSchema{{Name: name, Description: "d", Input: tree}}, nil)
		if err != nil {
			t.Errorf("%q: Compose: %v", name, err)
			continue
		}
		c, err := Compile(s)
		if err != nil {
			t.Errorf("%q: Compile(composed): %v", name, err)
			continue
		}
		doc := `{"calls":[{"_tool":` + jsonText(name) + `,"root":{"label":"a","children":[{"label":"b"}]}}],"output":null}`
		if err := c.Validate(mustDecode(t, doc)); err != nil {
			t.Errorf("%q: %v", name, err)
		}
		if err := c.Validate(mustDecode(t, strings.Replace(doc, `"label":"b"`, `"label":1`, 1))); err == nil {
			t.Errorf("%q: the hoisted definition is not enforced", name)
		}
	}
}

func TestComposeErrors(t *testing.T) {
	cases := []struct {
		name   string
		tools  []ToolSchema
		output *Schema
		want   string
	}{
		{"non-object arguments", []ToolSchema{{Name: "x", Input: &Schema{Type: "string"}}}, nil, `tool "x": arguments must be an object schema`},
		{"non-local reference", []ToolSchema{{Name: "x", Input: mustParse(t, `{"type":"object","properties":{"a":{"$ref":"other.json#/x"}}}`)}}, nil,
			"non-local $ref"},
	}
	for _, c := range cases {
		_, err := Compose(c.tools, c.output)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// Tools and outputs that refer to their own root or to a place inside themselves keep their
// meaning in the composed schema: a recursive tool, a pointer ref, a recursive output.
func TestComposeSelfReferences(t *testing.T) {
	recursive := mustParse(t, `{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}},"required":["name"]}`)
	pointer := mustParse(t, `{"type":"object","properties":{"a":{"type":"integer","maximum":5},"b":{"$ref":"#/properties/a"}},"required":["b"]}`)
	s, err := Compose([]ToolSchema{{Name: "tree", Description: "d", Input: recursive}, {Name: "fs/ptr", Description: "d", Input: pointer}}, recursive)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compile(s)
	if err != nil {
		t.Fatalf("Compile(composed): %v", err)
	}
	tests := []struct {
		doc   string
		valid bool
	}{
		{`{"calls":[{"_tool":"tree","name":"a","children":[{"name":"b","children":[{"name":"c"}]}]}],"output":null}`, true},
		{`{"calls":[{"_tool":"tree","name":"a","children":[{"children":[]}]}],"output":null}`, false}, // child lacks name
		{`{"calls":[{"_tool":"fs/ptr","b":5}],"output":null}`, true},
		{`{"calls":[{"_tool":"fs/ptr","b":6}],"output":null}`, false}, // b follows a's maximum
		{`{"calls":[],"output":{"name":"r","children":[{"name":"s"}]}}`, true},
		{`{"calls":[],"output":{"name":"r","children":[{"name":1}]}}`, false},
	}
	for _, tt := range tests {
		err := c.Validate(mustDecode(t, tt.doc))
		if (err == nil) != tt.valid {
			t.Errorf("Validate(%s) = %v, want valid %v", tt.doc, err, tt.valid)
		}
	}
}

func TestComposeTooDeepForStrict(t *testing.T) {
	s, err := Compose([]ToolSchema{{Name: "deep", Description: "d", Input: corpusByName(t, "nested_10_inferred").schema}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Strict(s); err == nil || !strings.Contains(err.Error(), "nested deeper than strict mode's 10 levels") {
		t.Errorf("Strict(composed 11 levels) error = %v", err)
	}
}
