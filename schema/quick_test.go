package schema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// quickSchemas are schemas the fast path covers, used by the differential tests below.
var quickSchemas = []string{
	`{"type":"object","properties":{"city":{"type":"string","minLength":1},"days":{"type":"integer","minimum":1,"maximum":14}},"required":["city","days"],"additionalProperties":false}`,
	`{"type":"object","properties":{"q":{"type":"string","maxLength":5,"pattern":"^[a-z]*$"},"n":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},"tags":{"type":"array","items":{"type":"string","enum":["a","b"]},"minItems":1,"maxItems":2}}}`,
	`{"type":"object","properties":{"limit":{"type":"integer","default":10,"maximum":100},"mode":{"type":"string","enum":["fast","slow"],"default":"fast"},"opt":{"type":["string","null"]}},"required":["opt"]}`,
	`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"array","items":{"type":"object","properties":{"c":{"type":"boolean"}},"required":["c"],"additionalProperties":false}}},"additionalProperties":{"type":"integer"}}}}`,
	`{"type":"object","additionalProperties":{"type":"string"}}`,
	`{"type":"object","properties":{"any":{},"nul":{"type":"null"}}}`,
	`{"type":"object","properties":{"from":{"type":"string","format":"date"},"at":{"type":"string","format":"date-time"},"mail":{"type":["string","null"],"format":"email"},"id":{"type":"string","format":"uuid"}}}`,
}

// quickInputs are argument texts, valid and invalid, exercised against every schema.
var quickInputs = []string{
	`{"city":"Paris","days":3}`, `{"city":"","days":3}`, `{"city":"Paris","days":15}`, `{"city":"Paris","days":3.0}`,
	`{"city":"Paris","days":3.5}`, `{"city":"Paris"}`, `{"city":"Paris","days":3,"x":1}`, `{"city":"Pa\u0072is","days":3}`,
	`{"city":"Paris","days":3,"city":"Rome"}`, `{"city":"Paris","days":1e1}`, `{"city":"Paris","days":-0}`,
	`{"city":"Paris","days":12345678901234567890}`, ` { "city" : "Paris" , "days" : 3 } `, `{"city":"Paris","days":3}x`,
	`{"q":"abc","n":0.5,"tags":["a"]}`, `{"q":"abcdef"}`, `{"q":"ABC"}`, `{"n":0}`, `{"n":1}`, `{"tags":[]}`,
	`{"tags":["a","b","a"]}`, `{"tags":["c"]}`, `{"q":"a\"b"}`, `{"q":"é"}`, `{"q":"\x"}`, `{"q":"\u00"}`,
	`{"opt":null}`, `{"opt":"x","limit":5}`, `{"opt":"x","limit":500}`, `{"opt":"x","mode":"slow"}`, `{"opt":"x","mode":"other"}`, `{}`,
	`{"a":{"b":[{"c":true},{"c":false}],"z":3}}`, `{"a":{"b":[{"c":1}]}}`, `{"a":{"b":[{}]}}`, `{"a":{"z":"s"}}`,
	`{"k":"v","k2":"v2"}`, `{"k":1}`, `{"any":[1,{"x":null}],"nul":null}`, `{"nul":0}`, `{"_meta":1}`,
	`[]`, `"str"`, `null`, `{`, `{"a":}`, `{"a" 1}`, `{"a":1,}`, `{"a":[1,]}`, `{"a":tru}`, `{"a":01}`, `{"a":-}`, `{"a":1.}`,
	"{\"q\":\"a\x01b\"}", "{\"q\":\"\xff\"}",
	`{"from":"2026-11-22"}`, `{"from":"2026-13-01"}`, `{"from":"22/11/2026"}`, `{"from":"2026-11-2\u0032"}`,
	`{"at":"2026-11-22T10:00:00Z"}`, `{"at":"2026-11-22 10:00"}`, `{"mail":"a@b.co"}`, `{"mail":"nope"}`, `{"mail":null}`,
	`{"id":"123e4567-e89b-12d3-a456-426614174000"}`, `{"id":"123"}`,
}

// TestQuickAgreesWithValidator is the differential test: wherever the fast path says "valid",
// the full path (decode, apply defaults, validate) must say valid too and produce the same
// arguments.
func TestQuickAgreesWithValidator(t *testing.T) {
	for si, doc := range quickSchemas {
		c, err := CompileJSON([]byte(doc))
		if err != nil {
			t.Fatalf("schema %d: %v", si, err)
		}
		if c.quick == nil {
			t.Fatalf("schema %d is meant to be covered by the fast path", si)
		}
		for _, in := range quickInputs {
			checkQuickAgrees(t, c, []byte(in))
		}
	}
}

func checkQuickAgrees(t *testing.T, c *Compiled, in []byte) {
	t.Helper()
	out, ok := c.QuickCheck(in)
	if !ok {
		return
	}
	v, err := Decode(in)
	if err != nil {
		t.Fatalf("quick accepted %q, which does not decode: %v", in, err)
	}
	obj, isObj := v.(map[string]any)
	if !isObj {
		t.Fatalf("quick accepted non-object %q", in)
	}
	for k := range obj {
		if strings.HasPrefix(k, "_") {
			t.Fatalf("quick accepted meta-field in %q", in)
		}
	}
	if _, err := c.ApplyDefaults(v); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(v); err != nil {
		t.Fatalf("quick accepted %q for %s, the validator rejects it: %v", in, c.JSON(), err)
	}
	got, err := Decode(out)
	if err != nil {
		t.Fatalf("quick output %q does not decode: %v", out, err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("quick output %s differs from the full path's %v", out, v)
	}
}

func TestQuickCoversCommonCalls(t *testing.T) {
	tests := []struct {
		schema, in, want string
	}{
		{quickSchemas[0], `{"city":"Paris","days":3}`, `{"city":"Paris","days":3}`},
		{quickSchemas[2], `{"opt":null}`, `{"opt":null,"limit":10,"mode":"fast"}`},
		{quickSchemas[2], `{ }`, ``}, // missing required: not known, full path words the error
		{quickSchemas[2], `{"opt":"x","mode":"slow"}`, `{"opt":"x","mode":"slow","limit":10}`},
		{quickSchemas[3], `{"a":{"b":[{"c":true}],"z":3}}`, `{"a":{"b":[{"c":true}],"z":3}}`},
		{quickSchemas[6], `{"from":"2026-11-22","at":"2026-11-22T10:00:00Z"}`, `{"from":"2026-11-22","at":"2026-11-22T10:00:00Z"}`},
		{quickSchemas[6], `{"from":"2026-13-01"}`, ``},
	}
	for _, tt := range tests {
		c, err := CompileJSON([]byte(tt.schema))
		if err != nil {
			t.Fatal(err)
		}
		out, ok := c.QuickCheck([]byte(tt.in))
		if tt.want == "" {
			if ok {
				t.Errorf("QuickCheck(%s) = ok, want not known", tt.in)
			}
			continue
		}
		if !ok {
			t.Errorf("QuickCheck(%s) = not known, want the fast path", tt.in)
			continue
		}
		var got, want any
		json.Unmarshal(out, &got)
		json.Unmarshal([]byte(tt.want), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("QuickCheck(%s) = %s, want %s", tt.in, out, tt.want)
		}
	}
}

func TestQuickDeclinesUnsupportedSchemas(t *testing.T) {
	for _, doc := range []string{
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`,
		`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"integer","default":1}}}}}`,
		`{"type":"object","properties":{"a":{"type":"integer","multipleOf":2}}}`,
		`{"type":"object","properties":{"a":{"const":"x"}}}`,
		`{"type":"object","properties":{"a":{"enum":[1,2]}}}`,
		`{"type":"object","enum":[{"c":1}],"properties":{"c":{}}}`, // the root's own enum
		`{"type":["object","string"],"properties":{"c":{}}}`,
	} {
		c, err := CompileJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if c.quick != nil {
			t.Errorf("fast path claims %s, which it does not implement", doc)
		}
	}
}

// FuzzQuick holds the fast path to the validator on arbitrary input.
func FuzzQuick(f *testing.F) {
	for _, in := range quickInputs {
		f.Add(in)
	}
	var compiled []*Compiled
	for _, doc := range quickSchemas {
		c, err := CompileJSON([]byte(doc))
		if err != nil {
			f.Fatal(err)
		}
		compiled = append(compiled, c)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, c := range compiled {
			checkQuickAgrees(t, c, []byte(in))
		}
	})
}

// Only {"not": {}} is the false schema: a "not" with content is a real constraint, which strict
// mode cannot express, so such a tool falls back to non-strict.
func TestNotIsNotFalse(t *testing.T) {
	in := mustParse(t, `{"type":"object","properties":{"a":{"type":"string","not":{"pattern":"^a"}}},"additionalProperties":{"not":{}}}`)
	ts, err := Render(OpenAIStrict, []ToolSchema{{Name: "t", Description: "d", Input: in}})
	if err != nil {
		t.Fatal(err)
	}
	if rt := ts.Tools[0]; rt.Strict || !strings.Contains(rt.StrictFallback, "uses not") {
		t.Errorf("strict = %v, fallback %q; want a fallback naming not", rt.Strict, rt.StrictFallback)
	}
	if !isFalse(in.AdditionalProperties) || isFalse(in.Properties["a"].Not) || isFalse(in.Properties["a"]) {
		t.Error("isFalse must hold for {\"not\":{}} only")
	}
}
