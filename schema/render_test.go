package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var hundredChars = strings.Repeat("long_tool_name_", 7)[:100]

// awkwardNames are canonical names some provider rejects or that collide once mapped.
var awkwardNames = []string{"everything.echo", "weird name!", hundredChars, "9starts_with_digit", "a.b", "a_b",
	"-leading-dash", "ns:tool", "café", "fs/read~1"}

// renderCorpusTools lists every corpus schema as a tool, the same schemas again under awkward
// names, a tool without arguments, latent tools and tools with output schemas.
func renderCorpusTools(t *testing.T) []ToolSchema {
	t.Helper()
	list := corpus(t)
	var tools []ToolSchema
	for _, n := range list {
		tools = append(tools, ToolSchema{Name: n.name, Description: "Corpus schema " + n.name + ".", Input: n.schema})
	}
	for i, name := range awkwardNames {
		tools = append(tools, ToolSchema{Name: name, Description: "Awkward name.", Input: list[i%len(list)].schema})
	}
	point := mustInfer[point](t)
	tools = append(tools,
		ToolSchema{Name: "no_args", Description: "Takes nothing."},
		ToolSchema{Name: "with_output", Description: "Returns a point.", Input: list[0].schema, Output: point},
		ToolSchema{Name: "text_output", Description: "Returns text.", Input: list[1].schema, Output: &Schema{Type: "string"}},
		ToolSchema{Name: "latent", Description: "The model answers.", Input: list[2].schema, Output: point, Latent: true},
		ToolSchema{Name: "latent_free", Description: "The model answers anything.", Latent: true},
		ToolSchema{Name: "latent_tree", Description: "The model answers a tree.", Input: list[0].schema, Output: corpusByName(t, "recursive_tree").schema, Latent: true},
	)
	return tools
}

func corpusByName(t *testing.T, name string) namedSchema {
	t.Helper()
	for _, n := range corpus(t) {
		if n.name == name {
			return n
		}
	}
	t.Fatalf("no corpus schema %q", name)
	return namedSchema{}
}

func marshalSchema(t *testing.T, s *Schema) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRenderCorpusSatisfiesProviders is the heart of L1: every corpus schema, under plain and
// awkward names, rendered in every dialect, must be accepted by that provider's rules.
func TestRenderCorpusSatisfiesProviders(t *testing.T) {
	tools := renderCorpusTools(t)
	before := make([]string, len(tools))
	for i, tool := range tools {
		if tool.Input != nil {
			before[i] = marshalSchema(t, tool.Input)
		}
	}
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) {
			ts, err := Render(d, tools)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if ts.Dialect != d || len(ts.Tools) != len(tools) {
				t.Fatalf("got dialect %s with %d tools, want %s with %d", ts.Dialect, len(ts.Tools), d, len(tools))
			}
			wire, err := json.Marshal(ts)
			if err != nil {
				t.Fatalf("MarshalJSON: %v", err)
			}
			for _, e := range checkers[d](wire) {
				t.Error(e)
			}
			again, err := Render(d, tools)
			if err != nil {
				t.Fatal(err)
			}
			wire2, _ := json.Marshal(again)
			if !bytes.Equal(wire, wire2) {
				t.Errorf("rendering is not deterministic")
			}
			for i, rt := range ts.Tools {
				if rt.Canonical != tools[i].Name {
					t.Errorf("tool %d: Canonical %q, want %q", i, rt.Canonical, tools[i].Name)
				}
				got, ok := ts.Lookup(rt.Name)
				if !ok || got.Canonical != tools[i].Name {
					t.Errorf("Lookup(%q) = %v, %v; want %q", rt.Name, got, ok, tools[i].Name)
				}
				if d == OpenAIStrict && (!rt.Strict || rt.StrictFallback != "") {
					t.Errorf("%s: not strict (%s)", rt.Canonical, rt.StrictFallback)
				}
				if d != OpenAIStrict && rt.Strict {
					t.Errorf("%s: Strict set in dialect %s", rt.Canonical, d)
				}
			}
		})
	}
	for i, tool := range tools {
		if tool.Input != nil && marshalSchema(t, tool.Input) != before[i] {
			t.Errorf("rendering modified the input schema of %s", tool.Name)
		}
	}
}

// TestRenderEachCorpusSchemaAlone renders every corpus schema as a set of one, so that a
// violation points at the schema that causes it.
func TestRenderEachCorpusSchemaAlone(t *testing.T) {
	for _, n := range corpus(t) {
		for _, d := range Dialects {
			ts, err := Render(d, []ToolSchema{{Name: n.name, Description: "d", Input: n.schema}})
			if err != nil {
				t.Errorf("%s/%s: Render: %v", n.name, d, err)
				continue
			}
			wire, _ := json.Marshal(ts)
			for _, e := range checkers[d](wire) {
				t.Errorf("%s/%s: %v", n.name, d, e)
			}
		}
	}
}

func TestRenderWireShapes(t *testing.T) {
	in := mustInfer[scalarArgs](t)
	out := mustInfer[point](t)
	tools := []ToolSchema{{Name: "calc", Description: "Calculates.", Input: in, Output: out}, {Name: "ping", Description: "Pings."}}
	cases := []struct {
		dialect Dialect
		paths   map[string]any // dotted path in the wire JSON -> expected value (nil: must exist)
		absent  []string
	}{
		{OpenAI, map[string]any{"0.type": "function", "0.function.name": "calc", "0.function.description": "Calculates.",
			"0.function.parameters.type": "object", "1.function.parameters.type": "object", "1.function.parameters.properties": map[string]any{}},
			[]string{"0.function.strict", "0.function.parameters.$schema"}},
		{OpenAIStrict, map[string]any{"0.function.strict": true, "1.function.strict": true, "0.function.parameters.additionalProperties": false,
			"1.function.parameters.additionalProperties": false}, nil},
		{Anthropic, map[string]any{"0.name": "calc", "0.input_schema.type": "object", "1.input_schema.properties": map[string]any{}},
			[]string{"0.function", "0.output_schema"}},
		{Gemini, map[string]any{"0.functionDeclarations.0.name": "calc", "0.functionDeclarations.0.parameters.type": "OBJECT"},
			[]string{"0.functionDeclarations.1.parameters", "1"}},
		{MCP, map[string]any{"0.name": "calc", "0.inputSchema.type": "object", "0.outputSchema.type": "object",
			"0.outputSchema.required": []any{"x", "y"}, "1.inputSchema.type": "object"},
			[]string{"1.outputSchema"}},
	}
	for _, c := range cases {
		ts, err := Render(c.dialect, tools)
		if err != nil {
			t.Fatalf("%s: %v", c.dialect, err)
		}
		wire, _ := json.Marshal(ts)
		var v any
		if err := json.Unmarshal(wire, &v); err != nil {
			t.Fatal(err)
		}
		for path, want := range c.paths {
			got, ok := dig(v, path)
			if !ok {
				t.Errorf("%s: %s missing in %s", c.dialect, path, wire)
				continue
			}
			if want != nil && !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s = %#v, want %#v", c.dialect, path, got, want)
			}
		}
		for _, path := range c.absent {
			if _, ok := dig(v, path); ok {
				t.Errorf("%s: %s present in %s", c.dialect, path, wire)
			}
		}
	}
}

func dig(v any, path string) (any, bool) {
	for _, part := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[part]; !ok {
				return nil, false
			}
		case []any:
			var i int
			if _, err := fmt.Sscan(part, &i); err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func TestRenderNameMapping(t *testing.T) {
	cases := []struct {
		dialect Dialect
		names   []string
		want    map[string]string // canonical -> exact provider name ("" : only checked by rule)
	}{
		{OpenAI, []string{"get_weather", "everything.echo", "weird name!", "9starts_with_digit", "-x"},
			map[string]string{"get_weather": "get_weather", "everything.echo": "everything_echo", "weird name!": "weird_name_",
				"9starts_with_digit": "9starts_with_digit", "-x": "-x"}},
		{Anthropic, []string{"café", "ns:tool"}, map[string]string{"café": "caf_", "ns:tool": "ns_tool"}},
		{Gemini, []string{"everything.echo", "9starts_with_digit", "-x", "ns:tool", "weird name!"},
			map[string]string{"everything.echo": "everything.echo", "9starts_with_digit": "_9starts_with_digit",
				"-x": "_-x", "ns:tool": "ns:tool", "weird name!": "weird_name_"}},
		{MCP, []string{"everything.echo", "ns:tool", hundredChars, "9starts_with_digit"},
			map[string]string{"everything.echo": "everything.echo", "ns:tool": "ns_tool", hundredChars: hundredChars,
				"9starts_with_digit": "9starts_with_digit"}},
		{OpenAI, []string{"a.b", "a_b"}, map[string]string{"a_b": "a_b"}},
		{OpenAI, []string{"a_b", "a.b", "a b", "a:b"}, map[string]string{"a_b": "a_b"}},
		{OpenAIStrict, []string{hundredChars, hundredChars[:99] + "!"}, nil},
		{MCP, []string{strings.Repeat("n", 200)}, nil},
		{OpenAI, []string{""}, map[string]string{"": "_"}},
	}
	for _, c := range cases {
		tools := make([]ToolSchema, len(c.names))
		for i, n := range c.names {
			tools[i] = ToolSchema{Name: n, Description: "d"}
		}
		ts, err := Render(c.dialect, tools)
		if err != nil {
			t.Errorf("%s %q: %v", c.dialect, c.names, err)
			continue
		}
		wire, _ := json.Marshal(ts)
		for _, e := range checkers[c.dialect](wire) {
			t.Errorf("%s %q: %v", c.dialect, c.names, e)
		}
		seen := map[string]bool{}
		for i, rt := range ts.Tools {
			canonical := c.names[i]
			if rt.Canonical != canonical {
				t.Errorf("Canonical %q, want %q", rt.Canonical, canonical)
			}
			if want, ok := c.want[canonical]; ok && rt.Name != want {
				t.Errorf("%s: %q maps to %q, want %q", c.dialect, canonical, rt.Name, want)
			}
			if seen[rt.Name] {
				t.Errorf("%s: provider name %q given twice", c.dialect, rt.Name)
			}
			seen[rt.Name] = true
			if out := ts.Outbound(canonical); out != rt.Name {
				t.Errorf("%s: Outbound(%q) = %q, want %q", c.dialect, canonical, out, rt.Name)
			}
			got, args, ok := ts.Inbound(rt.Name, []byte(`{}`))
			if !ok || got != canonical || string(args) != `{}` {
				t.Errorf("%s: Inbound(%q) = %q, %s, %v; want %q", c.dialect, rt.Name, got, args, ok, canonical)
			}
			if len(canonical) > 64 && c.dialect != MCP {
				// A shortened name keeps a readable prefix and a hash suffix.
				if len(rt.Name) != 64 || !strings.HasPrefix(rt.Name, canonical[:40]) {
					t.Errorf("%s: long name mapped to %q", c.dialect, rt.Name)
				}
			}
		}
	}
}

func TestOutboundUnknownNamePassesThrough(t *testing.T) {
	ts, err := Render(OpenAI, []ToolSchema{{Name: "a.b", Description: "d"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ts.Outbound("removed_tool"); got != "removed_tool" {
		t.Errorf("Outbound(removed_tool) = %q", got)
	}
}

func TestRenderRejectsDuplicateNames(t *testing.T) {
	for _, names := range [][]string{{"a_b", "a_b"}, {"a.b", "a.b"}, {"x", "y", "x"}} {
		for _, d := range Dialects {
			tools := make([]ToolSchema, len(names))
			for i, n := range names {
				tools[i] = ToolSchema{Name: n, Description: "d"}
			}
			if _, err := Render(d, tools); err == nil || !strings.Contains(err.Error(), "duplicate tool name") {
				t.Errorf("%s %q: err = %v, want a duplicate tool name error", d, names, err)
			}
		}
	}
}

func TestRenderUnknownDialect(t *testing.T) {
	if _, err := Render("cohere", nil); err == nil || !strings.Contains(err.Error(), `unknown dialect "cohere"`) ||
		!strings.Contains(err.Error(), "openai-strict") {
		t.Errorf("Render(cohere) error = %v", err)
	}
	for _, d := range Dialects {
		got, err := ParseDialect(string(d))
		if err != nil || got != d {
			t.Errorf("ParseDialect(%q) = %q, %v", d, got, err)
		}
	}
	if _, err := ParseDialect("OpenAI"); err == nil {
		t.Errorf("ParseDialect is case-sensitive; OpenAI should fail")
	}
}

func TestInboundUnknownName(t *testing.T) {
	for _, d := range Dialects {
		ts, err := Render(d, []ToolSchema{{Name: "known", Description: "d", Input: mustInfer[scalarArgs](t)}})
		if err != nil {
			t.Fatal(err)
		}
		name, args, ok := ts.Inbound("unknown", []byte(`{"a":1}`))
		if ok || name != "unknown" || string(args) != `{"a":1}` {
			t.Errorf("%s: Inbound(unknown) = %q, %s, %v", d, name, args, ok)
		}
		if rt, ok := ts.Lookup("unknown"); ok || rt != nil {
			t.Errorf("%s: Lookup(unknown) = %v, %v", d, rt, ok)
		}
		// The canonical name is not a provider name when it was mapped.
		ts2, _ := Render(d, []ToolSchema{{Name: "weird name!", Description: "d"}})
		if _, _, ok := ts2.Inbound("weird name!", nil); ok {
			t.Errorf("%s: Inbound accepted the canonical name of a mapped tool", d)
		}
	}
}

// TestInboundPassesOddArgumentsThrough: arguments that are not a JSON object are the
// dispatcher's to reject, with the canonical name.
func TestInboundPassesOddArgumentsThrough(t *testing.T) {
	tools := []ToolSchema{{Name: "everything.echo", Description: "d", Input: mustInfer[mapArgs](t)}}
	for _, d := range Dialects {
		ts, err := Render(d, tools)
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range []string{`[1,2]`, `"text"`, `{"counts":`, ``, `null`, `{"a":1} trailing`} {
			name, out, ok := ts.Inbound(ts.Tools[0].Name, []byte(args))
			if !ok || name != "everything.echo" || string(out) != args {
				t.Errorf("%s: Inbound(%s) = %q, %s, %v", d, args, name, out, ok)
			}
		}
	}
}

// TestInboundRoundTrip: for the dialects that change the shape of values, a sample answer a
// model would give under the rendered schema must come back, through Inbound, as the canonical
// arguments, valid against the original schema.
func TestInboundRoundTrip(t *testing.T) {
	list := corpus(t)
	var tools []ToolSchema
	for _, n := range list {
		// A dotted name: mapped for OpenAI, kept by Gemini; Inbound must give it back either way.
		tools = append(tools, ToolSchema{Name: "corpus." + n.name, Description: "d", Input: n.schema})
	}
	for _, d := range []Dialect{OpenAIStrict, Gemini} {
		ts, err := Render(d, tools)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range list {
			t.Run(string(d)+"/"+n.name, func(t *testing.T) {
				rt := ts.Tools[i]
				sample := n.strictSample()
				if d == Gemini {
					sample = n.geminiSample()
				}
				// The sample must be something the model can produce under the rendered schema.
				if err := validateAgainstRendered(d, rt.Parameters, sample); err != nil {
					t.Fatalf("sample %s does not fit the %s rendering: %v\nrendered: %s", sample, d, err, rt.Parameters)
				}
				name, out, ok := ts.Inbound(rt.Name, []byte(sample))
				if !ok || name != "corpus."+n.name {
					t.Fatalf("Inbound(%q) = %q, %v", rt.Name, name, ok)
				}
				got, err := Decode(out)
				if err != nil {
					t.Fatalf("Inbound produced invalid JSON %s: %v", out, err)
				}
				c, err := Compile(n.schema)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Validate(got); err != nil {
					t.Errorf("inbound arguments %s fail the canonical schema: %v", out, err)
				}
				want, _ := Decode([]byte(n.valid))
				if !reflect.DeepEqual(got, want) {
					t.Errorf("inbound arguments\n got %s\nwant %s", out, n.valid)
				}
			})
		}
	}
}

// TestInboundLeavesPlainDialectsAlone: dialects that send the schema as written get the
// arguments back byte for byte.
func TestInboundLeavesPlainDialectsAlone(t *testing.T) {
	for _, d := range []Dialect{OpenAI, Anthropic, MCP} {
		for _, n := range corpus(t) {
			ts, err := Render(d, []ToolSchema{{Name: n.name, Description: "d", Input: n.schema}})
			if err != nil {
				t.Fatal(err)
			}
			name, out, ok := ts.Inbound(n.name, []byte(n.valid))
			if !ok || name != n.name || string(out) != n.valid {
				t.Errorf("%s/%s: Inbound = %q, %s, %v", d, n.name, name, out, ok)
			}
		}
	}
}

// validateAgainstRendered checks a sample against a rendered parameters schema: strict schemas
// are JSON Schema already; Gemini's are translated from its OpenAPI subset.
func validateAgainstRendered(d Dialect, params json.RawMessage, sample string) error {
	if params == nil {
		if sample != `{}` {
			return fmt.Errorf("the tool has no parameters but the sample is %s", sample)
		}
		return nil
	}
	doc := []byte(params)
	if d == Gemini {
		var g any
		if err := json.Unmarshal(params, &g); err != nil {
			return err
		}
		doc, _ = json.Marshal(geminiToJSONSchema(g))
	}
	c, err := CompileJSON(doc)
	if err != nil {
		return fmt.Errorf("compile rendered schema: %w", err)
	}
	v, err := Decode([]byte(sample))
	if err != nil {
		return err
	}
	return c.Validate(v)
}

// geminiToJSONSchema translates Gemini's schema into the JSON Schema it stands for.
func geminiToJSONSchema(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	nullable := m["nullable"] == true
	for k, x := range m {
		switch k {
		case "type":
			t := strings.ToLower(x.(string))
			if nullable {
				out["type"] = []any{t, "null"}
			} else {
				out["type"] = t
			}
		case "properties":
			props := map[string]any{}
			for name, p := range x.(map[string]any) {
				props[name] = geminiToJSONSchema(p)
			}
			out["properties"] = props
		case "items":
			out["items"] = geminiToJSONSchema(x)
		case "anyOf":
			var list []any
			for _, b := range x.([]any) {
				list = append(list, geminiToJSONSchema(b))
			}
			if nullable {
				list = append(list, map[string]any{"type": "null"})
			}
			out["anyOf"] = list
		case "enum":
			list := append([]any{}, x.([]any)...)
			if nullable {
				list = append(list, nil)
			}
			out["enum"] = list
		case "format":
			if x == "date-time" {
				out["format"] = x
			}
		case "nullable", "propertyOrdering", "example":
		default:
			out[k] = x
		}
	}
	return out
}

func TestStrictFallback(t *testing.T) {
	deep11, _ := nestedObjects(11)
	big := &Schema{Type: "object", Properties: map[string]*Schema{}}
	for i := 0; i <= 5000; i++ {
		big.Properties[fmt.Sprintf("p%04d", i)] = &Schema{Type: "boolean"}
	}
	cases := []struct {
		name   string
		schema *Schema
		reason string
	}{
		{"allOf", mustParse(t, `{"type":"object","properties":{"a":{"allOf":[{"type":"string"},{"minLength":1}]}}}`), "a uses allOf"},
		{"not", mustParse(t, `{"type":"object","properties":{"a":{"not":{"type":"string"}}}}`), "a uses not"},
		{"if", mustParse(t, `{"type":"object","properties":{"a":{"type":"string"}},"if":{"required":["a"]},"then":{}}`), "uses if"},
		{"patternProperties", mustParse(t, `{"type":"object","patternProperties":{"^x":{"type":"string"}}}`), "patternProperties"},
		{"prefixItems", mustParse(t, `{"type":"object","properties":{"t":{"type":"array","prefixItems":[{"type":"string"}]}}}`), "t uses prefixItems"},
		{"root anyOf", mustParse(t, `{"anyOf":[{"type":"object","properties":{"a":{"type":"string"}}},{"type":"object","properties":{"b":{"type":"string"}}}]}`), "root must be a plain object"},
		{"root array", mustParse(t, `{"type":"array","items":{"type":"string"}}`), "root must be a plain object"},
		{"root record", mustParse(t, `{"type":"object","additionalProperties":{"type":"integer"}}`), "root"},
		{"11 object levels", mustParse(t, deep11), "nested deeper than strict mode's 10 levels"},
		{"5001 properties", big, "5001 properties"},
		{"pointer $ref", mustParse(t, `{"type":"object","properties":{"a":{"type":"string"},"b":{"$ref":"#/properties/a"}}}`), `b uses $ref "#/properties/a"`},
		{"keywords beside $ref", mustParse(t, `{"type":"object","$defs":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/s","maxItems":3}}}`), "a uses keywords beside $ref"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts, err := Render(OpenAIStrict, []ToolSchema{{Name: "f", Description: "d", Input: c.schema}})
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			rt := ts.Tools[0]
			if rt.Strict || !strings.Contains(rt.StrictFallback, c.reason) {
				t.Errorf("Strict=%v StrictFallback=%q, want a fallback mentioning %q", rt.Strict, rt.StrictFallback, c.reason)
			}
			if _, _, err := Strict(c.schema); err == nil {
				t.Errorf("Strict accepted the schema")
			}
			wire, _ := json.Marshal(ts)
			var v any
			json.Unmarshal(wire, &v)
			if s, _ := dig(v, "0.function.strict"); s != false {
				t.Errorf("wire strict = %v, want false", s)
			}
			// Sent non-strict, it must still satisfy the plain function-calling rules, except
			// that no dialect can fix a root that is not an object: that schema is the tool's own
			// mistake, and the plain checker must say so.
			errs := checkOpenAI(wire)
			if c.name == "root anyOf" || c.name == "root array" {
				if len(errs) == 0 || !strings.Contains(errs[0].Error(), `root type must be "object"`) {
					t.Errorf("plain checker: %v, want a root type violation", errs)
				}
			} else {
				for _, e := range errs {
					t.Error(e)
				}
			}
			// The arguments come back unchanged: nothing was rewritten.
			if _, out, _ := ts.Inbound("f", []byte(`{"a":null}`)); string(out) != `{"a":null}` {
				t.Errorf("Inbound rewrote arguments of a non-strict tool: %s", out)
			}
		})
	}
}

func TestStrictRendering(t *testing.T) {
	s, notes, err := Strict(mustInfer[kitchenSink](t))
	if err != nil {
		t.Fatal(err)
	}
	got := marshalSchema(t, s)
	for _, want := range []string{
		`"age":{"type":["integer","null"],"minimum":0,"maximum":150}`,
		`"labels":{"type":["array","null"],"items":{"type":"object","properties":{"key":{"type":"string"},"value":{"type":"string"}},"required":["key","value"],"additionalProperties":false}`,
		`"location":{"type":["null","object"]`,
		`"marker":{"type":"object","properties":{},"additionalProperties":false}`,
		`"required":["name","age","kind","labels","location","marker","nested"],"additionalProperties":false`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("strict schema lacks %s\n%s", want, got)
		}
	}
	wantNotes := []string{"age defaults to 30", "name has at least 1 characters", "name has at most 40 characters"}
	if !reflect.DeepEqual(sortedCopy(notes), wantNotes) {
		t.Errorf("notes = %q, want %q", notes, wantNotes)
	}
	ts, _ := Render(OpenAIStrict, []ToolSchema{{Name: "k", Description: "Does k.", Input: mustInfer[kitchenSink](t)}})
	if want := "Does k. (Constraints: age defaults to 30; name has at least 1 characters; name has at most 40 characters.)"; ts.Tools[0].Description != want {
		t.Errorf("description = %q, want %q", ts.Tools[0].Description, want)
	}
	// A nil schema is the empty object.
	s, _, err = Strict(nil)
	if err != nil || marshalSchema(t, s) != `{"type":"object","properties":{},"additionalProperties":false}` {
		t.Errorf("Strict(nil) = %s, %v", marshalSchema(t, s), err)
	}
}

func sortedCopy(list []string) []string {
	out := append([]string{}, list...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestNoArgumentSchemas: every spelling of "no arguments" renders as a tool a provider takes.
func TestNoArgumentSchemas(t *testing.T) {
	for _, in := range []*Schema{nil, mustInfer[emptyArgs](t), mustParse(t, `{"type":"object"}`),
		mustParse(t, `{"type":"object","properties":{}}`), mustParse(t, `{"type":"object","additionalProperties":true}`)} {
		for _, d := range Dialects {
			ts, err := Render(d, []ToolSchema{{Name: "now", Description: "d", Input: in}})
			if err != nil {
				t.Fatal(err)
			}
			wire, _ := json.Marshal(ts)
			for _, e := range checkers[d](wire) {
				t.Errorf("%s with input %s: %v", d, marshalSchemaOrNil(in), e)
			}
			if d == OpenAIStrict && !ts.Tools[0].Strict {
				t.Errorf("input %s is sent non-strict: %s", marshalSchemaOrNil(in), ts.Tools[0].StrictFallback)
			}
			if d == Gemini && ts.Tools[0].Parameters != nil {
				t.Errorf("gemini: parameters %s for a tool without arguments", ts.Tools[0].Parameters)
			}
			name, out, ok := ts.Inbound("now", []byte(`{}`))
			if !ok || name != "now" || string(out) != `{}` {
				t.Errorf("%s: Inbound = %q %s %v", d, name, out, ok)
			}
		}
	}
}

func marshalSchemaOrNil(s *Schema) string {
	if s == nil {
		return "nil"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func TestGeminiRendering(t *testing.T) {
	cases := []struct {
		name   string
		schema string
		want   string // the rendered parameters
	}{
		{"nullable via type list", `{"type":"object","properties":{"a":{"type":["integer","null"],"minimum":1}},"required":["a"]}`,
			`{"properties":{"a":{"minimum":1,"nullable":true,"type":"INTEGER"}},"propertyOrdering":["a"],"required":["a"],"type":"OBJECT"}`},
		{"type union becomes anyOf", `{"type":"object","properties":{"a":{"type":["string","number"]}}}`,
			`{"properties":{"a":{"anyOf":[{"type":"STRING"},{"type":"NUMBER"}]}},"propertyOrdering":["a"],"type":"OBJECT"}`},
		{"const string becomes enum", `{"type":"object","properties":{"k":{"const":"x"}}}`,
			`{"properties":{"k":{"enum":["x"],"type":"STRING"}},"propertyOrdering":["k"],"type":"OBJECT"}`},
		{"unsupported keywords move to the description", `{"type":"object","properties":{"n":{"type":"number","exclusiveMinimum":0,"multipleOf":2,"description":"N."}}}`,
			`{"properties":{"n":{"description":"N. (Constraints: a multiple of 2; greater than 0.)","type":"NUMBER"}},"propertyOrdering":["n"],"type":"OBJECT"}`},
		{"refs inlined", `{"type":"object","$defs":{"p":{"type":"string","format":"date-time"}},"properties":{"at":{"$ref":"#/$defs/p","description":"When."}}}`,
			`{"properties":{"at":{"description":"When.","format":"date-time","type":"STRING"}},"propertyOrdering":["at"],"type":"OBJECT"}`},
		{"nested empty object is JSON text", `{"type":"object","properties":{"o":{"type":"object","properties":{},"additionalProperties":false}}}`,
			`{"properties":{"o":{"description":"(a JSON value written as JSON text)","type":"STRING"}},"propertyOrdering":["o"],"type":"OBJECT"}`},
	}
	for _, c := range cases {
		ts, err := Render(Gemini, []ToolSchema{{Name: "g", Description: "d", Input: mustParse(t, c.schema)}})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := string(ts.Tools[0].Parameters); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// TestPointerRefs: zod-to-json-schema, which many MCP servers use, reuses a schema with a $ref
// to where it first appeared (#/properties/...). Such a schema compiles, validates, gets its
// defaults, renders for Gemini and comes back through Inbound.
func TestPointerRefs(t *testing.T) {
	s := mustParse(t, `{"type":"object","properties":{
		"home":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","default":"00000"},
			"tags":{"type":"object","additionalProperties":{"type":"integer"}}},"required":["city"],"additionalProperties":false},
		"work":{"$ref":"#/properties/home"},
		"sites":{"type":"array","items":{"$ref":"#/properties/home/properties/tags"}}},
		"required":["home"]}`)
	c, err := Compile(s)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	if got := problemsOf(t, c, `{"home":{"city":"a"},"work":{"zip":"1"}}`); !reflect.DeepEqual(got, []string{`/work: missing required property "city"`}) {
		t.Errorf("problems %q", got)
	}
	v := mustDecode(t, `{"home":{"city":"a"},"work":{"city":"b"}}`)
	if _, err := c.ApplyDefaults(v); err != nil {
		t.Fatal(err)
	}
	if got, want := canonicalJSON(t, v), normalize(t, `{"home":{"city":"a","zip":"00000"},"work":{"city":"b","zip":"00000"}}`); got != want {
		t.Errorf("defaults: got %s, want %s", got, want)
	}
	for _, d := range Dialects {
		ts, err := Render(d, []ToolSchema{{Name: "places", Description: "d", Input: s}})
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		wire, _ := json.Marshal(ts)
		check := checkers[d]
		if d == OpenAIStrict {
			// Strict mode falls back for pointer refs (TestStrictFallback): the tool is sent
			// non-strict and must satisfy the plain rules.
			if ts.Tools[0].Strict {
				t.Errorf("strict: pointer refs sent strict")
			}
			check = checkOpenAI
		}
		for _, e := range check(wire) {
			t.Errorf("%s: %v", d, e)
		}
	}
	ts, _ := Render(Gemini, []ToolSchema{{Name: "places", Description: "d", Input: s}})
	sample := `{"home":{"city":"a","tags":[{"key":"x","value":1}]},"work":{"city":"b"},"sites":[[{"key":"y","value":2}]]}`
	if err := validateAgainstRendered(Gemini, ts.Tools[0].Parameters, sample); err != nil {
		t.Fatalf("sample does not fit the rendering: %v\n%s", err, ts.Tools[0].Parameters)
	}
	_, out, _ := ts.Inbound("places", []byte(sample))
	if got, want := canonicalJSON(t, mustDecode(t, string(out))), normalize(t, `{"home":{"city":"a","tags":{"x":1}},"work":{"city":"b"},"sites":[{"y":2}]}`); got != want {
		t.Errorf("inbound: got %s, want %s", got, want)
	}
}

// L4 in native tool calling: every corpus tool rendered with Reasoning offers an optional
// _reasoningForCall string, in a shape each provider accepts, and leaves the input schema as it
// was.
func TestRenderReasoningField(t *testing.T) {
	tools := renderCorpusTools(t)
	before := make([]string, len(tools))
	for i := range tools {
		if tools[i].Input != nil {
			before[i] = marshalSchema(t, tools[i].Input)
		}
		tools[i].Reasoning = true
	}
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) {
			ts, err := Render(d, tools)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			wire, _ := json.Marshal(ts)
			for _, e := range checkers[d](wire) {
				t.Error(e)
			}
			for _, rt := range ts.Tools {
				var params struct {
					Properties map[string]json.RawMessage `json:"properties"`
					Required   []string                   `json:"required"`
				}
				if err := json.Unmarshal(rt.Parameters, &params); err != nil {
					t.Fatalf("%s: %v", rt.Canonical, err)
				}
				raw, ok := params.Properties[ReasoningField]
				if !ok {
					t.Errorf("%s: no %s in %s", rt.Canonical, ReasoningField, rt.Parameters)
					continue
				}
				var p struct {
					Type any `json:"type"`
				}
				if err := json.Unmarshal(raw, &p); err != nil || !strings.Contains(strings.ToLower(fmt.Sprint(p.Type)), "string") {
					t.Errorf("%s: %s is %s", rt.Canonical, ReasoningField, raw)
				}
				if d != OpenAIStrict && slices.Contains(params.Required, ReasoningField) {
					t.Errorf("%s: %s is required in %s", rt.Canonical, ReasoningField, d)
				}
			}
		})
	}
	for i, tool := range tools {
		if tool.Input != nil && marshalSchema(t, tool.Input) != before[i] {
			t.Errorf("rendering modified the input schema of %s", tool.Name)
		}
	}
}
