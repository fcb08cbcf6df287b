package schema

import (
	"encoding/json"
	"reflect"
	"testing"
)

// canonicalJSON re-encodes a decoded value with sorted keys, for comparison.
func canonicalJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func normalize(t *testing.T, doc string) string {
	t.Helper()
	return canonicalJSON(t, mustDecode(t, doc))
}

func TestApplyDefaults(t *testing.T) {
	treeWithDefault := `{"type":"object","$defs":{"node":{"type":"object","properties":{
		"label":{"type":"string","default":"?"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},
		"properties":{"root":{"$ref":"#/$defs/node"}}}`
	cases := []struct {
		name    string
		schema  *Schema
		in      string
		want    string
		changed bool
	}{
		{"top-level scalars", mustInfer[defaultArgs](t), `{}`,
			`{"days":3,"mode":"fast","verbose":true,"scale":1.5,"opts":{"depth":2,"label":"none"}}`, true},
		{"nested object default then its own defaults", mustInfer[defaultArgs](t), `{"days":1,"opts":{"depth":7}}`,
			`{"days":1,"mode":"fast","verbose":true,"scale":1.5,"opts":{"depth":7,"label":"none"}}`, true},
		{"array items", mustInfer[defaultArgs](t), `{"items":[{"name":"a"},{"name":"b","qty":5}]}`,
			`{"days":3,"mode":"fast","verbose":true,"scale":1.5,"opts":{"depth":2,"label":"none"},"items":[{"name":"a","qty":1},{"name":"b","qty":5}]}`, true},
		{"present values untouched, null included", mustInfer[defaultArgs](t),
			`{"days":null,"mode":"slow","verbose":false,"scale":0,"opts":null,"items":null}`,
			`{"days":null,"mode":"slow","verbose":false,"scale":0,"opts":null,"items":null}`, false},
		{"via $ref", corpusByName(t, "defs_refs").schema, `{"home":{"street":"s","zip":"75001"},"work":{"street":"w","zip":"1","country":"DE"}}`,
			`{"home":{"street":"s","zip":"75001","country":"FR"},"work":{"street":"w","zip":"1","country":"DE"}}`, true},
		{"absent $ref object not created", corpusByName(t, "defs_refs").schema, `{"home":{"street":"s","zip":"75001","country":"IT"}}`,
			`{"home":{"street":"s","zip":"75001","country":"IT"}}`, false},
		{"hand-written array of objects", corpusByName(t, "array_of_objects_with_defaults").schema, `{"tasks":[{"title":"a"},{"title":"b","priority":null}]}`,
			`{"tasks":[{"title":"a","priority":3},{"title":"b","priority":null}]}`, true},
		{"recursive", mustParse(t, treeWithDefault), `{"root":{"kids":[{"kids":[{"label":"x"},{}]}]}}`,
			`{"root":{"label":"?","kids":[{"label":"?","kids":[{"label":"x"},{"label":"?"}]}]}}`, true},
		{"default on a $ref property", mustParse(t, `{"type":"object","$defs":{"u":{"enum":["c","f"]}},"properties":{"unit":{"$ref":"#/$defs/u","default":"c"}}}`),
			`{}`, `{"unit":"c"}`, true},
		{"default inherited from the $ref target", mustParse(t, `{"type":"object","$defs":{"u":{"enum":["c","f"],"default":"f"}},"properties":{"unit":{"$ref":"#/$defs/u"}}}`),
			`{}`, `{"unit":"f"}`, true},
		{"object and array defaults", mustParse(t, `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"default":["a","b"]},"o":{"type":"object","default":{"k":[1,{"z":null}]}}}}`),
			`{}`, `{"tags":["a","b"],"o":{"k":[1,{"z":null}]}}`, true},
		{"non-object value", mustInfer[defaultArgs](t), `[1,2]`, `[1,2]`, false},
		{"items of a non-array", mustInfer[defaultArgs](t), `{"items":"x"}`,
			`{"days":3,"mode":"fast","verbose":true,"scale":1.5,"opts":{"depth":2,"label":"none"},"items":"x"}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			comp, err := Compile(c.schema)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if !comp.HasDefaults() {
				t.Fatalf("HasDefaults() = false")
			}
			v := mustDecode(t, c.in)
			changed, err := comp.ApplyDefaults(v)
			if err != nil {
				t.Fatalf("ApplyDefaults: %v", err)
			}
			if changed != c.changed {
				t.Errorf("changed = %v, want %v", changed, c.changed)
			}
			if got := canonicalJSON(t, v); got != normalize(t, c.want) {
				t.Errorf("after defaults\n got %s\nwant %s", got, normalize(t, c.want))
			}
		})
	}
}

func TestDefaultsAreValid(t *testing.T) {
	// Defaults applied to a valid call keep it valid.
	c, err := Compile(mustInfer[defaultArgs](t))
	if err != nil {
		t.Fatal(err)
	}
	v := mustDecode(t, `{"items":[{"name":"x"}]}`)
	if _, err := c.ApplyDefaults(v); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(v); err != nil {
		t.Errorf("defaulted value invalid: %v", err)
	}
	// Numbers keep the json.Number form Decode gives, so the handler sees one representation.
	m := v.(map[string]any)
	if m["days"] != json.Number("3") || m["scale"] != json.Number("1.5") {
		t.Errorf("defaults decoded as %#v and %#v", m["days"], m["scale"])
	}
}

func TestHasDefaults(t *testing.T) {
	for _, s := range []*Schema{mustInfer[scalarArgs](t), mustInfer[mapArgs](t), corpusByName(t, "recursive_tree").schema,
		mustParse(t, `{"type":"object"}`), mustInfer[emptyArgs](t)} {
		c, err := Compile(s)
		if err != nil {
			t.Fatal(err)
		}
		if c.HasDefaults() {
			t.Errorf("HasDefaults() = true for %s", marshalSchemaOrNil(s))
		}
		v := mustDecode(t, `{"a":1}`)
		changed, err := c.ApplyDefaults(v)
		if changed || err != nil || canonicalJSON(t, v) != `{"a":1}` {
			t.Errorf("ApplyDefaults without defaults: %v %v %s", changed, err, canonicalJSON(t, v))
		}
	}
}

// TestApplyDefaultsDoesNotAlias: each call gets its own copy of a default; mutating one result
// must not change what the next call receives.
func TestApplyDefaultsDoesNotAlias(t *testing.T) {
	c, err := Compile(mustParse(t, `{"type":"object","properties":{
		"o":{"type":"object","default":{"k":[1,2],"m":{"x":1}}},
		"tags":{"type":"array","default":["a"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	first := mustDecode(t, `{}`)
	if _, err := c.ApplyDefaults(first); err != nil {
		t.Fatal(err)
	}
	m := first.(map[string]any)
	o := m["o"].(map[string]any)
	o["k"] = append(o["k"].([]any), 3)
	o["m"].(map[string]any)["x"] = 99
	o["new"] = true
	m["tags"].([]any)[0] = "mutated"

	second := mustDecode(t, `{}`)
	if _, err := c.ApplyDefaults(second); err != nil {
		t.Fatal(err)
	}
	want := normalize(t, `{"o":{"k":[1,2],"m":{"x":1}},"tags":["a"]}`)
	if got := canonicalJSON(t, second); got != want {
		t.Errorf("second call got %s, want %s", got, want)
	}
	if reflect.ValueOf(first.(map[string]any)["o"]).Pointer() == reflect.ValueOf(second.(map[string]any)["o"]).Pointer() {
		t.Errorf("both calls share one default map")
	}
}
