package schema

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func mustCompileJSON(t *testing.T, doc string) *Compiled {
	t.Helper()
	c, err := CompileJSON([]byte(doc))
	if err != nil {
		t.Fatalf("CompileJSON(%s): %v", doc, err)
	}
	return c
}

func mustDecode(t *testing.T, doc string) any {
	t.Helper()
	v, err := Decode([]byte(doc))
	if err != nil {
		t.Fatalf("Decode(%s): %v", doc, err)
	}
	return v
}

// problemsOf validates and returns the problems as "pointer: message" strings.
func problemsOf(t *testing.T, c *Compiled, instance string) []string {
	t.Helper()
	err := c.Validate(mustDecode(t, instance))
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate(%s) returned %T %v, want *ValidationError", instance, err, err)
	}
	if ve.Error() == "" {
		t.Errorf("empty error text")
	}
	out := make([]string, len(ve.Problems))
	for i, p := range ve.Problems {
		out[i] = p.String()
	}
	return out
}

func TestValidationMessages(t *testing.T) {
	huge := strings.Repeat("y", 5000)
	cases := []struct {
		name     string
		schema   string
		instance string
		want     []string
	}{
		{"maximum", `{"type":"object","properties":{"limit":{"type":"integer","maximum":100}}}`, `{"limit":500}`,
			[]string{"/limit: maximum 100, got 500"}},
		{"minimum", `{"type":"object","properties":{"days":{"type":"integer","minimum":1}}}`, `{"days":-3}`,
			[]string{"/days: minimum 1, got -3"}},
		{"fractional bounds", `{"type":"object","properties":{"n":{"type":"number","maximum":1.5}}}`, `{"n":2.25}`,
			[]string{"/n: maximum 1.5, got 2.25"}},
		{"exclusive bounds and multipleOf", `{"type":"object","properties":{"p":{"type":"number","exclusiveMinimum":0},"m":{"type":"integer","exclusiveMaximum":10},"s":{"type":"number","multipleOf":0.5}}}`,
			`{"p":0,"m":10,"s":0.3}`,
			[]string{"/m: must be less than 10, got 10", "/p: must be greater than 0, got 0", "/s: must be a multiple of 0.5, got 0.3"}},
		{"missing required", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`, `{}`,
			[]string{`/: missing required property "city"`}},
		{"missing several required", `{"type":"object","properties":{"a":{},"b":{}},"required":["a","b"]}`, `{}`,
			[]string{`/: missing required properties "a", "b"`}},
		{"unknown property", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`, `{"a":"x","zz":1}`,
			[]string{`/: unknown property "zz" (not in the schema)`}},
		{"wrong type", `{"type":"object","properties":{"a":{"type":"string"}}}`, `{"a":3}`,
			[]string{"/a: expected string, got number"}},
		{"wrong root type", `{"type":"object"}`, `[]`,
			[]string{"/: expected object, got array"}},
		{"nullable type", `{"type":"object","properties":{"a":{"type":["string","null"]}}}`, `{"a":1}`,
			[]string{"/a: expected null or string, got number"}},
		{"enum", `{"type":"object","properties":{"unit":{"enum":["celsius","fahrenheit"]}}}`, `{"unit":"kelvin"}`,
			[]string{`/unit: must be one of "celsius", "fahrenheit", got "kelvin"`}},
		{"enum of other values", `{"type":"object","properties":{"a":{"enum":[1,{"k":1},[1],null]}}}`, `{"a":2}`,
			[]string{`/a: must be one of 1, an object, an array, null, got 2`}},
		{"const", `{"type":"object","properties":{"kind":{"const":"circle"}}}`, `{"kind":"square"}`,
			[]string{`/kind: must be "circle", got "square"`}},
		{"pattern", `{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}$"}}}`, `{"code":"abc"}`,
			[]string{`/code: must match pattern ^[A-Z]{3}$, got "abc"`}},
		{"format date-time", `{"type":"object","properties":{"at":{"type":"string","format":"date-time"}}}`, `{"at":"yesterday"}`,
			[]string{`/at: must be a valid date-time, got "yesterday"`}},
		{"format email", `{"type":"object","properties":{"to":{"type":"string","format":"email"}}}`, `{"to":"nobody"}`,
			[]string{`/to: must be a valid email, got "nobody"`}},
		{"minLength", `{"type":"object","properties":{"q":{"type":"string","minLength":3}}}`, `{"q":"ab"}`,
			[]string{"/q: minimum length 3, got 2"}},
		{"maxLength counts characters", `{"type":"object","properties":{"q":{"type":"string","maxLength":2}}}`, `{"q":"été"}`,
			[]string{"/q: maximum length 2, got 3"}},
		{"array bounds", `{"type":"object","properties":{"a":{"type":"array","minItems":2}, "b":{"type":"array","maxItems":1}}}`, `{"a":[1],"b":[1,2]}`,
			[]string{"/a: at least 2 items, got 1", "/b: at most 1 items, got 2"}},
		{"anyOf of types", `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`, `{"v":true}`,
			[]string{"/v: expected string or integer, got boolean"}},
		{"anyOf with reasons", `{"type":"object","properties":{"v":{"anyOf":[{"type":"string","maxLength":2},{"type":"string","pattern":"^x"}]}}}`, `{"v":"abc"}`,
			[]string{`/v: matches none of the allowed alternatives: /v: maximum length 2, got 3 | /v: must match pattern ^x, got "abc"`}},
		{"anyOf of objects", `{"type":"object","properties":{"s":{"anyOf":[
				{"type":"object","properties":{"r":{"type":"number"}},"required":["r"]},
				{"type":"object","properties":{"side":{"type":"number"}},"required":["side"]}]}}}`, `{"s":{}}`,
			[]string{`/s: matches none of the allowed alternatives: /s: missing required property "r" | /s: missing required property "side"`}},
		{"oneOf matching two", `{"type":"object","properties":{"n":{"oneOf":[{"type":"number"},{"type":"integer"}]}}}`, `{"n":3}`,
			[]string{"/n: matches 2 alternatives, must match exactly one"}},
		{"oneOf matching none", `{"type":"object","properties":{"n":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`, `{"n":null}`,
			[]string{"/n: expected string or integer, got null"}},
		{"nested pointer", `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"array","items":{"type":"object","properties":{"c":{"type":"integer"}}}}}}}}`,
			`{"a":{"b":[{"c":1},{"c":1.5}]}}`, []string{"/a/b/1/c: expected integer, got number"}},
		{"pointer escaping", `{"type":"object","properties":{"a/b":{"type":"string"},"c~d":{"type":"string"}}}`, `{"a/b":1,"c~d":2}`,
			[]string{"/a~1b: expected string, got number", "/c~0d: expected string, got number"}},
		{"through $ref", `{"type":"object","$defs":{"pos":{"type":"integer","minimum":1}},"properties":{"page":{"$ref":"#/$defs/pos"}}}`, `{"page":0}`,
			[]string{"/page: minimum 1, got 0"}},
		{"through a pointer $ref", `{"type":"object","properties":{"a":{"type":"integer","maximum":3},"b":{"$ref":"#/properties/a"}}}`, `{"a":1,"b":4}`,
			[]string{"/b: maximum 3, got 4"}},
		{"recursive $ref", `{"$defs":{"n":{"type":"object","properties":{"v":{"type":"string"},"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["v"]}},"$ref":"#/$defs/n"}`,
			`{"v":"a","kids":[{"v":"b","kids":[{"kids":[]}]}]}`, []string{`/kids/0/kids/0: missing required property "v"`}},
		{"false schema", `{"type":"object","properties":{"x":false}}`, `{"x":1}`,
			[]string{"/x: not allowed here"}},
		{"huge string truncated", `{"type":"object","properties":{"a":{"type":"string","pattern":"^x$"}}}`, `{"a":"` + huge + `"}`,
			[]string{`/a: must match pattern ^x$, got "` + strings.Repeat("y", 60) + `..."`}},
		{"huge enum value truncated", `{"type":"object","properties":{"a":{"enum":["x"]}}}`, `{"a":"` + huge + `"}`,
			[]string{`/a: must be one of "x", got "` + strings.Repeat("y", 60) + `..."`}},
		{"huge property name truncated", `{"type":"object","additionalProperties":false}`, `{"` + huge + `":1}`,
			[]string{`/: unknown property "` + strings.Repeat("y", 60) + `..." (not in the schema)`}},
		{"multi-byte truncation stays valid UTF-8", `{"type":"object","properties":{"a":{"const":"x"}}}`, `{"a":"` + strings.Repeat("é", 40) + `"}`,
			[]string{`/a: must be "x", got "` + strings.Repeat("é", 30) + `..."`}},
		{"several problems together", `{"type":"object","properties":{"a":{"type":"integer","maximum":5},"b":{"type":"string"},"c":{"type":"array","items":{"type":"boolean"}}},"required":["d"],"additionalProperties":false}`,
			`{"a":6,"b":1,"c":[true,"no"],"e":null}`,
			[]string{`/: missing required property "d"`, `/: unknown property "e" (not in the schema)`, "/a: maximum 5, got 6",
				"/b: expected string, got number", "/c/1: expected boolean, got string"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := problemsOf(t, mustCompileJSON(t, c.schema), c.instance)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("problems\n got %q\nwant %q", got, c.want)
			}
			for _, p := range got {
				if len(p) > 400 {
					t.Errorf("problem is %d bytes long: a large value was echoed", len(p))
				}
			}
		})
	}
}

// TestProblemOrderIsStable: the validator walks maps in random order; the problems a model
// reads must not change from one run to the next.
func TestProblemOrderIsStable(t *testing.T) {
	c := mustCompileJSON(t, `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"},
		"d":{"type":"integer"},"e":{"type":"integer"},"f":{"type":"integer"}},"required":["z"],"additionalProperties":false}`)
	doc := `{"f":"x","e":"x","d":"x","c":"x","b":"x","a":"x","y":1}`
	first := strings.Join(problemsOf(t, c, doc), "; ")
	for i := 0; i < 50; i++ {
		if got := strings.Join(problemsOf(t, c, doc), "; "); got != first {
			t.Fatalf("problems changed order:\n%s\n%s", first, got)
		}
	}
	want := `/: missing required property "z"; /: unknown property "y" (not in the schema); /a: expected integer, got string; ` +
		`/b: expected integer, got string; /c: expected integer, got string; /d: expected integer, got string; ` +
		`/e: expected integer, got string; /f: expected integer, got string`
	if first != want {
		t.Errorf("problems\n got %s\nwant %s", first, want)
	}
}

func TestValidationErrorText(t *testing.T) {
	c := mustCompileJSON(t, `{"type":"object","properties":{"limit":{"type":"integer","maximum":100}},"required":["q"]}`)
	err := c.Validate(mustDecode(t, `{"limit":500}`))
	want := `/: missing required property "q"; /limit: maximum 100, got 500`
	if err == nil || err.Error() != want {
		t.Errorf("Error() = %v, want %q", err, want)
	}
	// Problems marshal with their JSON names, for a tool result the model reads.
	b, _ := json.Marshal(Problem{Pointer: "/limit", Message: "maximum 100, got 500"})
	if string(b) != `{"pointer":"/limit","message":"maximum 100, got 500"}` {
		t.Errorf("Problem JSON = %s", b)
	}
	if got := (Problem{Message: "m"}).String(); got != "/: m" {
		t.Errorf("root problem String() = %q", got)
	}
}

func TestValidateAcceptsValidValues(t *testing.T) {
	c := mustCompileJSON(t, `{"type":"object","properties":{"n":{"type":"integer"},"big":{"type":"integer","maximum":9007199254740992}}}`)
	for _, doc := range []string{`{}`, `{"n":1}`, `{"n":1.0}`, `{"n":-0}`, `{"big":9007199254740992}`} {
		if err := c.Validate(mustDecode(t, doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
	// Precision: 2^53+1 exceeds the maximum 2^53 although a float64 cannot tell them apart.
	if got := problemsOf(t, c, `{"big":9007199254740993}`); len(got) != 1 || got[0] != "/big: maximum 9007199254740992, got 9007199254740993" {
		t.Errorf("big integer: %q", got)
	}
}

func TestValidateConcurrently(t *testing.T) {
	c, err := Compile(mustInfer[kitchenSink](t))
	if err != nil {
		t.Fatal(err)
	}
	good := `{"name":"n","kind":"a","marker":{},"nested":{"deep":[]}}`
	bad := `{"name":"","kind":"z","marker":{},"nested":{"deep":[]}}`
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			doc := good
			if i%2 == 1 {
				doc = bad
			}
			v, _ := Decode([]byte(doc))
			err := c.Validate(v)
			if (err == nil) != (i%2 == 0) {
				errs <- err
			}
			if _, err := c.ApplyDefaults(v); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent validation: %v", err)
	}
}

func TestDecode(t *testing.T) {
	long := strings.Repeat("x", 100000)
	cases := []struct {
		name    string
		in      string
		wantErr string // "" : must succeed
	}{
		{"object", `{"a":1}`, ""},
		{"surrounding whitespace", " \n{\"a\":1}\n\t ", ""},
		{"trailing data", `{"a":1} x`, "unexpected data after the JSON value at offset 8"},
		{"second value", `{"a":1}{"b":2}`, "unexpected data after the JSON value at offset 8"},
		{"trailing bracket", `{"a":1}}`, "unexpected data after the JSON value at offset 7"},
		{"syntax error", `{"a": tru}`, "invalid JSON at offset 10: invalid character '}' in literal true (expecting 'e')"},
		{"trailing comma", `[1,2,]`, "invalid JSON at offset 6: invalid character ']' looking for beginning of value"},
		{"truncated", `{"a":`, "invalid JSON: unexpected end of input after 5 bytes"},
		{"empty", ``, "invalid JSON: unexpected end of input after 0 bytes"},
		{"long input not echoed", `{"k":"` + long + `", oops}`, "invalid JSON at offset 100010: invalid character 'o' looking for beginning of object key string"},
		{"long truncated input", `{"k":"` + long, "invalid JSON: unexpected end of input after 100006 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := Decode([]byte(c.in))
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if _, ok := v.(map[string]any); !ok {
					t.Errorf("Decode = %T", v)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode succeeded with %v", v)
			}
			if err.Error() != c.wantErr {
				t.Errorf("error %q, want %q", err, c.wantErr)
			}
			if len(err.Error()) > 200 || strings.Contains(err.Error(), "xxxxxxxxxx") {
				t.Errorf("error echoes the input: %.300s", err)
			}
		})
	}
	// Numbers keep their text, so large integers keep their precision.
	v := mustDecode(t, `{"n":12345678901234567890,"f":1.50}`).(map[string]any)
	if v["n"] != json.Number("12345678901234567890") || v["f"] != json.Number("1.50") {
		t.Errorf("numbers decoded as %#v", v)
	}
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want string
	}{
		{"not JSON", `{"type":`, "schema: parse:"},
		{"keyword of the wrong type", `{"type":"object","properties":{"a":{"minLength":"x"}}}`, "schema: parse:"},
		{"invalid keyword value", `{"type":"object","properties":{"a":{"minLength":-1}}}`, "schema: compile:"},
		{"unknown type", `{"type":"thing"}`, "schema: compile:"},
		{"bad pattern", `{"type":"string","pattern":"("}`, "schema: compile:"},
		{"external ref", `{"$ref":"https://example.com/s.json"}`, "schema: compile:"},
		{"missing def", `{"type":"object","properties":{"a":{"$ref":"#/$defs/nope"}}}`, "schema: compile:"},
		{"default violates maximum", `{"type":"object","properties":{"n":{"type":"integer","maximum":5,"default":9}}}`,
			`schema: default of "n" does not satisfy its own schema: /: maximum 5, got 9`},
		{"default violates enum via $ref", `{"type":"object","$defs":{"c":{"enum":["a","b"]}},"properties":{"x":{"$ref":"#/$defs/c","default":"z"}}}`,
			`schema: default of "x" does not satisfy its own schema: /: must be one of "a", "b", got "z"`},
		{"nested default of wrong type", `{"type":"object","properties":{"o":{"type":"object","properties":{"k":{"type":"boolean","default":"yes"}}}}}`,
			`schema: default of "k" does not satisfy its own schema: /: expected boolean, got string`},
	}
	for _, c := range cases {
		_, err := CompileJSON([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), resourceURL) {
			t.Errorf("%s: error names the internal resource URL: %v", c.name, err)
		}
	}
	if _, err := Compile(nil); err == nil {
		t.Errorf("Compile(nil) succeeded")
	}
}

func TestCompiledAccessors(t *testing.T) {
	s := mustInfer[scalarArgs](t)
	c, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	if c.Schema() != s {
		t.Errorf("Schema() is not the compiled schema")
	}
	var back map[string]any
	if err := json.Unmarshal(c.JSON(), &back); err != nil || back["type"] != "object" {
		t.Errorf("JSON() = %s, %v", c.JSON(), err)
	}
}
