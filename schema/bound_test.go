package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// lattice is a schema of depth definitions, each naming the next fan times through how (a
// keyword: properties, items, anyOf, allOf, oneOf), under the root property "a": a few
// kilobytes that stand for fan^depth paths. withDefaults gives each reference a default {}.
func lattice(depth, fan int, how string, withDefaults bool) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"a":{"$ref":"#/$defs/d0"}},"$defs":{`)
	for i := 0; i < depth; i++ {
		ref := fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, i+1)
		if withDefaults {
			ref = fmt.Sprintf(`{"$ref":"#/$defs/d%d","default":{}}`, i+1)
		}
		refs := make([]string, fan)
		for j := range refs {
			refs[j] = ref
			if how == "properties" {
				refs[j] = fmt.Sprintf(`"p%d":%s`, j, ref)
			}
		}
		list := strings.Join(refs, ",")
		switch how {
		case "properties":
			fmt.Fprintf(&b, `"d%d":{"type":"object","properties":{%s}},`, i, list)
		case "items":
			fmt.Fprintf(&b, `"d%d":{"type":"array","items":{"anyOf":[%s]}},`, i, list)
		default:
			fmt.Fprintf(&b, `"d%d":{"%s":[%s]},`, i, how, list)
		}
	}
	fmt.Fprintf(&b, `"d%d":{"type":"object"}}}`, depth)
	return b.String()
}

// A schema of a few kilobytes whose definitions name each other many times (security issue 45,
// break 1) is refused before the work it stands for is done, by any keyword that leads there;
// the smaller ones compile, each definition visited once.
func TestCompileRefLattice(t *testing.T) {
	visits := fmt.Sprintf("more than %d schema nodes to visit", MaxSchemaVisits)
	for _, how := range []string{"properties", "items", "anyOf", "allOf", "oneOf"} {
		for _, withDefaults := range []bool{false, true} {
			for depth := 6; depth <= 16; depth++ {
				name := fmt.Sprintf("%s/defaults=%v/depth=%d", how, withDefaults, depth)
				doc := lattice(depth, 4, how, withDefaults)
				_, err := CompileJSON([]byte(doc))
				switch {
				case depth >= 10 && (err == nil || !strings.Contains(err.Error(), visits)):
					t.Errorf("%s (%d bytes): error %v, want it to say %q", name, len(doc), err, visits)
				case depth < 9 && !withDefaults && err != nil, depth < 8 && err != nil:
					t.Errorf("%s: %v", name, err)
				}
			}
		}
	}
}

// Each bound is refused with an error that says what was counted, where, and what is allowed.
func TestCompileBounds(t *testing.T) {
	props := func(n int, value string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`"p%d":%s`, i, value)
		}
		return strings.Join(parts, ",")
	}
	cases := []struct {
		name string
		doc  string
		want string // "" : compiles
	}{
		{"largest flat schema", `{"type":"object","properties":{` + props(MaxSchemaNodes-1, `{"type":"string"}`) + `}}`, ""},
		{"one subschema too many", `{"type":"object","properties":{` + props(MaxSchemaNodes, `{"type":"string"}`) + `}}`,
			fmt.Sprintf("schema: more than %d subschemas (at \"#/properties/", MaxSchemaNodes)},
		{"unreferenced definitions count", `{"type":"object","$defs":{` + props(MaxSchemaNodes, `true`) + `}}`,
			fmt.Sprintf("a schema may have at most %d", MaxSchemaNodes)},
		{"recursion of the largest size", `{"type":"object","$defs":{"n":{"type":"object","properties":{` +
			props(MaxRecursiveNodes-1, `{"$ref":"#/$defs/n"}`) + `}}},"properties":{"root":{"$ref":"#/$defs/n"}}}`, ""},
		{"recursion too large", `{"type":"object","$defs":{"n":{"type":"object","properties":{` +
			props(MaxRecursiveNodes, `{"$ref":"#/$defs/n"}`) + `}}},"properties":{"root":{"$ref":"#/$defs/n"}}}`,
			fmt.Sprintf("schema: the $refs at \"#/$defs/n\" tie %d subschemas together in a recursion; at most %d may be", MaxRecursiveNodes+1, MaxRecursiveNodes)},
		{"lattice", lattice(12, 4, "anyOf", false),
			fmt.Sprintf("schema: more than %d schema nodes to visit from \"#/$defs/d", MaxSchemaVisits)},
		{"default that adds itself", `{"type":"object","$defs":{"n":{"type":"object","properties":{"child":{"$ref":"#/$defs/n","default":{}}}}},
			"properties":{"root":{"$ref":"#/$defs/n"}}}`, `schema: the default of "child" never ends`},
		{"defaults that fill in too much", lattice(8, 4, "properties", true), fmt.Sprintf("come to more than %d bytes", maxDefaultBytes)},
		{"pointer to no subschema", `{"type":"object","properties":{"a":{"$ref":"#/properties"}}}`,
			`schema: compile: $ref "#/properties" at "#/properties/a": no subschema there`},
		{"$id below the root", `{"type":"object","properties":{"a":{"$id":"https://example.com/a.json","type":"string"}}}`,
			`schema: $id at "#/properties/a": only the root may have an $id`},
		{"dynamic reference", `{"type":"object","properties":{"a":{"$dynamicRef":"#meta"}}}`,
			`schema: compile: $dynamicRef at "#/properties/a": dynamic references are not supported`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := CompileJSON([]byte(c.doc))
			if c.want == "" {
				if err != nil {
					t.Fatalf("CompileJSON: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// cancelAfter is a context that ends after its Err has been asked n times: it shows that
// compilation looks at its context as it goes, not only when it starts.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// countLooks is a context that never ends and counts how often its Err is asked.
type countLooks struct {
	context.Context
	n int
}

func (c *countLooks) Err() error { c.n++; return nil }

// Compiling on behalf of a request stops when the request ends: at once for a context already
// cancelled, and midway for one cancelled meanwhile, whichever part of the work it is in
// (reading the graph, compiling, building defaults).
func TestCompileContextCancelled(t *testing.T) {
	parts := make([]string, MaxSchemaNodes/12)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"p%d":{"type":"object","properties":{"q":{"type":"string","default":"x"}}}`, i)
	}
	large := []byte(`{"type":"object","properties":{` + strings.Join(parts, ",") + `}}`)
	looks := &countLooks{Context: context.Background()}
	if _, err := CompileJSONContext(looks, large); err != nil {
		t.Fatalf("not cancelled: %v", err)
	}
	if looks.n < 20 {
		t.Fatalf("compiling %d bytes looks at its context %d times", len(large), looks.n)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := CompileJSONContext(ended, []byte(`{"type":"object"}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("already cancelled: error %v, want context.Canceled", err)
	}
	for k := 1; k < 10; k++ {
		after := looks.n * k / 10
		_, err := CompileJSONContext(&cancelAfter{Context: context.Background(), n: after}, large)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled after %d of %d looks: error %v, want context.Canceled", after, looks.n, err)
		}
	}
}

// A recursive schema that names a definition along two paths makes the validator's work double
// at each level of the value: a value deep enough is refused before the validator runs, a
// shallow one is checked as usual.
func TestValidationSteps(t *testing.T) {
	twoPaths := mustCompileJSON(t, `{"type":"object","$defs":{
		"n":{"allOf":[{"$ref":"#/$defs/m"},{"$ref":"#/$defs/m"}]},
		"m":{"type":"object","properties":{"a":{"$ref":"#/$defs/n"},"v":{"type":"integer"}}}},
		"properties":{"a":{"$ref":"#/$defs/n"}}}`)
	deep := func(depth int, leaf string) string {
		return strings.Repeat(`{"a":`, depth) + leaf + strings.Repeat(`}`, depth)
	}
	refused := fmt.Sprintf("more than %d steps", MaxValidationSteps)
	cases := []struct {
		name  string
		c     *Compiled
		value string
		want  string // "" : valid
	}{
		{"shallow", twoPaths, deep(5, `{"v":1}`), ""},
		{"shallow, invalid", twoPaths, deep(5, `{"v":"x"}`), "expected integer, got string"},
		{"deep", twoPaths, deep(40, `{"v":1}`), refused},
		{"lattice within the bound", mustCompileJSON(t, lattice(7, 4, "allOf", false)), `{"a":{}}`, ""},
		{"lattice past the bound", mustCompileJSON(t, lattice(9, 4, "allOf", false)), `{"a":{}}`, refused},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.c.Validate(mustDecode(t, c.value))
			if c.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want a ValidationError containing %q", err, c.want)
			}
		})
	}
}

// Defaults are built once per definition, also for a recursive schema, and applied as far as
// the value goes; a default's own defaults are filled in once, at compile time.
func TestDefaultsRecursiveAndShared(t *testing.T) {
	c := mustCompileJSON(t, `{"type":"object","$defs":{"n":{"type":"object","properties":{
		"label":{"type":"string","default":"?"},
		"opts":{"type":"object","default":{},"properties":{"depth":{"type":"integer","default":2}}},
		"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},
		"properties":{"root":{"$ref":"#/$defs/n"},"other":{"$ref":"#/$defs/n"}}}`)
	v := mustDecode(t, `{"root":{"kids":[{"kids":[{"kids":[{"kids":[{}]}]}]}]},"other":{"opts":{}}}`)
	if _, err := c.ApplyDefaults(v); err != nil {
		t.Fatal(err)
	}
	node := `{"label":"?","opts":{"depth":2}`
	want := `{"root":` + node + `,"kids":[` + node + `,"kids":[` + node + `,"kids":[` + node + `,"kids":[` + node + `}]}]}]}]},"other":` + node + `}}`
	if got := canonicalJSON(t, v); got != normalize(t, want) {
		t.Errorf("after defaults\n got %s\nwant %s", got, normalize(t, want))
	}
	shared := mustCompileJSON(t, lattice(6, 4, "properties", true))
	v = mustDecode(t, `{"a":{}}`)
	if _, err := shared.ApplyDefaults(v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	// d0 fills in its four properties, each d1 with its four: 4^6 empty objects at the bottom.
	if n := strings.Count(string(b), "{}"); n != 4096 {
		t.Errorf("%d empty objects at the bottom, want 4096", n)
	}
}

// Rendering for Gemini inlines $refs, and reading a model's answer back looks at the schema
// along them: both take time bounded by the schema's size, not by the paths through it.
func TestRenderRefLattice(t *testing.T) {
	in := mustParse(t, lattice(16, 20, "anyOf", false))
	ts, err := Render(Gemini, []ToolSchema{{Name: "t", Description: "d", Input: in}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ts.Tools[0].Parameters); n > 4<<20 {
		t.Errorf("the rendering is %d bytes", n)
	}
	if !strings.Contains(string(ts.Tools[0].Parameters), jsonTextNote) {
		t.Errorf("nothing past the bound travels as JSON text")
	}
	// The definitions admit no string: JSON text is read back as the value it holds.
	canonical, out, ok := ts.Inbound("t", []byte(`{"a":"{\"x\":1}"}`))
	if !ok || canonical != "t" || string(out) != `{"a":{"x":1}}` {
		t.Errorf("Inbound = %s, %s, %v", canonical, out, ok)
	}
}

// BenchmarkCompileWorstCase compiles the costliest schemas the bounds let in, and refuses the
// ones just past them; "validate" checks the costliest value a compiled schema lets in.
func BenchmarkCompileWorstCase(b *testing.B) {
	props := func(n int, value string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`"p%d":%s`, i, value)
		}
		return strings.Join(parts, ",")
	}
	recursion := func(n int) string {
		return `{"type":"object","$defs":{"n":{"type":"object","properties":{` + props(n, `{"$ref":"#/$defs/n"}`) +
			`}}},"properties":{"root":{"$ref":"#/$defs/n"}}}`
	}
	cases := []struct {
		name    string
		doc     string
		refused bool
	}{
		{"lattice accepted (4x9)", lattice(9, 4, "anyOf", false), false},
		{"lattice refused (4x16)", lattice(16, 4, "anyOf", false), true},
		{"lattice with defaults accepted (4x7)", lattice(7, 4, "properties", true), false},
		{"lattice with defaults refused (4x8)", lattice(8, 4, "properties", true), true},
		{"flat accepted (MaxSchemaNodes)", `{"type":"object","properties":{` + props(MaxSchemaNodes-1, `{"type":"string"}`) + `}}`, false},
		{"flat refused (MaxSchemaNodes+1)", `{"type":"object","properties":{` + props(MaxSchemaNodes, `{"type":"string"}`) + `}}`, true},
		{"recursion accepted (MaxRecursiveNodes)", recursion(MaxRecursiveNodes - 1), false},
		{"recursion refused (MaxRecursiveNodes+1)", recursion(MaxRecursiveNodes), true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.doc)))
			for b.Loop() {
				_, err := CompileJSON([]byte(c.doc))
				if (err != nil) != c.refused {
					b.Fatalf("refused %v: %v", c.refused, err)
				}
			}
		})
	}
	b.Run("validate 4x8 (about 175,000 steps)", func(b *testing.B) {
		c, err := CompileJSON([]byte(lattice(8, 4, "allOf", false)))
		if err != nil {
			b.Fatal(err)
		}
		v, _ := Decode([]byte(`{"a":{}}`))
		for b.Loop() {
			if err := c.Validate(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The validator compiles a schema wrapped in a document of its own (see order.go): references
// by pointer and by anchor, names that need escaping, drafts and document keywords mean what
// they meant, and errors name places in the schema, not in the wrapper.
func TestCompileWrappedDocument(t *testing.T) {
	cases := []struct {
		name           string
		schema         string
		valid, invalid string
		problem        string
	}{
		{"boolean root", `true`, `{"x":1}`, "", ""},
		{"root $ref", `{"$ref":"#/$defs/o","$defs":{"o":{"type":"object","required":["a"]}}}`, `{"a":1}`, `{}`, `missing required property "a"`},
		{"escaped names", `{"type":"object","properties":{"a/b":{"$ref":"#/$defs/c~1d%20e"},"t~x":{"$ref":"#/properties/a~1b"}},
			"$defs":{"c/d e":{"type":"integer"}}}`, `{"a/b":1,"t~x":2}`, `{"t~x":"x"}`, "/t~0x: expected integer, got string"},
		{"anchor", `{"type":"object","properties":{"a":{"$ref":"#num"}},"$defs":{"n":{"$anchor":"num","type":"number"}}}`,
			`{"a":1.5}`, `{"a":"x"}`, "/a: expected number, got string"},
		{"root $id and $schema", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"https://example.com/t.json",
			"type":"object","properties":{"a":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}}`, `{"a":"x"}`, `{"a":1}`, "/a: expected string, got number"},
		{"draft-07 $ref ignores its siblings", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s","maxLength":1}}}`, `{"a":"long"}`, `{"a":1}`, "/a: expected string, got number"},
		{"draft-07 anchor in $id", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"definitions":{"s":{"$id":"#str","type":"string"}},"properties":{"a":{"$ref":"#str"}}}`, `{"a":"x"}`, `{"a":1}`, "/a: expected string, got number"},
		{"draft-04 id", `{"$schema":"http://json-schema.org/draft-04/schema#","id":"https://example.com/t.json","type":"object",
			"properties":{"n":{"type":"integer","maximum":3}}}`, `{"n":2}`, `{"n":4}`, "/n: maximum 3, got 4"},
		{"recursion", `{"type":"object","$defs":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}},
			"v":{"type":"integer"}}}},"properties":{"root":{"$ref":"#/$defs/n"}}}`,
			`{"root":{"kids":[{"kids":[{"v":1}]}]}}`, `{"root":{"kids":[{"kids":[{"v":"x"}]}]}}`, "/root/kids/0/kids/0/v: expected integer, got string"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			comp := mustCompileJSON(t, c.schema)
			if err := comp.Validate(mustDecode(t, c.valid)); err != nil {
				t.Errorf("valid %s: %v", c.valid, err)
			}
			if c.invalid == "" {
				return
			}
			err := comp.Validate(mustDecode(t, c.invalid))
			if err == nil || !strings.Contains(err.Error(), c.problem) {
				t.Errorf("invalid %s: error %v, want it to contain %q", c.invalid, err, c.problem)
			}
		})
	}
	_, err := CompileJSON([]byte(`{"type":"object","properties":{"a":{"type":"string","minLength":-1}}}`))
	if err == nil || strings.Contains(err.Error(), wrapKey) || !strings.Contains(err.Error(), "/properties/a/minLength") {
		t.Errorf("error %v, want it to name /properties/a/minLength and not the wrapper", err)
	}
}
