package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// namedSchema is one schema of the shared corpus, with argument samples in each shape a
// provider's model would send them.
type namedSchema struct {
	name     string
	schema   *Schema
	inferred bool // built by Infer from a Go type rather than written by hand

	// valid is an argument object in canonical form that the schema accepts.
	valid string
	// strictArgs is the same arguments as a model answering the openai-strict rendering sends
	// them (every property present, null for omitted optionals, maps as key/value entries,
	// free-form values as JSON text). Empty: identical to valid.
	strictArgs string
	// geminiArgs is the same for the gemini rendering. Empty: identical to valid.
	geminiArgs string
	// invalid lists argument objects the schema must reject.
	invalid []string
}

func (n namedSchema) strictSample() string { return cmpOr(n.strictArgs, n.valid) }
func (n namedSchema) geminiSample() string { return cmpOr(n.geminiArgs, n.valid) }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ---- Go types the inferred part of the corpus is built from ----

type scalarArgs struct {
	Text  string  `json:"text" description:"Any text." minLength:"1" maxLength:"200"`
	Ratio float64 `json:"ratio" minimum:"0" maximum:"1"`
	Count int     `json:"count" exclusiveMinimum:"0" exclusiveMaximum:"1000"`
	Flag  bool    `json:"flag" jsonschema:"A switch."`
}

type enumArgs struct {
	Unit   string   `json:"unit" enum:"celsius,fahrenheit"`
	Level  int      `json:"level" enum:"1,2,3"`
	Tags   []string `json:"tags,omitempty" enum:"[\"red\",\"green, blue\"]"`
	Choice *string  `json:"choice,omitempty" enum:"yes,no"`
}

type optionalArgs struct {
	Query string  `json:"query"`
	Note  string  `json:"note,omitempty"`
	Limit *int    `json:"limit"`
	Maybe *string `json:"maybe,omitempty"`
	Skip  string  `json:"-"`
	Zero  int     `json:"zero,omitzero"`
}

type defaultOptions struct {
	Depth int    `json:"depth" default:"1"`
	Label string `json:"label,omitempty" default:"none"`
}

type defaultArgs struct {
	Days    int            `json:"days,omitempty" default:"3" minimum:"1" maximum:"14"`
	Mode    string         `json:"mode,omitempty" default:"fast" enum:"fast,slow"`
	Verbose bool           `json:"verbose,omitempty" default:"true"`
	Scale   float64        `json:"scale,omitempty" default:"1.5"`
	Opts    defaultOptions `json:"opts,omitzero" default:"{\"depth\":2}"`
	Items   []defaultItem  `json:"items,omitempty"`
}

type defaultItem struct {
	Name string `json:"name"`
	Qty  int    `json:"qty,omitempty" default:"1"`
}

type point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

type arrayArgs struct {
	Names  []string   `json:"names" minItems:"1" maxItems:"5" minLength:"2" pattern:"^[a-z]+$"`
	Grid   [][]int    `json:"grid"`
	Triple [3]float64 `json:"triple"`
	Points []point    `json:"points,omitempty"`
	Scores []float64  `json:"scores,omitempty" minimum:"0" maximum:"10"`
}

type mapArgs struct {
	Counts map[string]int      `json:"counts"`
	Places map[string]point    `json:"places,omitempty"`
	Groups map[string][]string `json:"groups,omitempty"`
}

type base struct {
	ID      string    `json:"id" format:"uuid"`
	Created time.Time `json:"created" format:"date-time"`
}

type embeddedArgs struct {
	base
	Title string     `json:"title" minLength:"1"`
	When  *time.Time `json:"when,omitempty"`
}

type freeArgs struct {
	Payload any            `json:"payload"`
	Meta    map[string]any `json:"meta,omitempty"`
	Extra   any            `json:"extra,omitempty"`
}

type formatArgs struct {
	Email string `json:"email" format:"email"`
	Day   string `json:"day" format:"date"`
	Host  string `json:"host,omitempty" format:"hostname"`
	Site  string `json:"site,omitempty" format:"uri"`
	Code  string `json:"code" pattern:"^[A-Z]{3}-[0-9]{2}$"`
}

// Seven object levels, the root included.
type lvl7 struct {
	A lvl6 `json:"a"`
}
type lvl6 struct {
	B lvl5 `json:"b"`
}
type lvl5 struct {
	C lvl4 `json:"c"`
}
type lvl4 struct {
	D lvl3 `json:"d"`
}
type lvl3 struct {
	E lvl2 `json:"e"`
}
type lvl2 struct {
	F lvl1 `json:"f"`
}
type lvl1 struct {
	Leaf string `json:"leaf" minLength:"1"`
	Opt  *int   `json:"opt,omitempty"`
}

// Ten object levels (deep10, deep9, deep8, then lvl7's seven): strict mode's limit.
type deep10 struct {
	N deep9 `json:"n"`
}
type deep9 struct {
	N deep8 `json:"n"`
}
type deep8 struct {
	N lvl7 `json:"n"`
}

// Seven levels of mixed containers: object, array, object, map, object, array, object.
type mixedRoot struct {
	Rows []mixedRow `json:"rows"`
}
type mixedRow struct {
	Cells map[string]mixedCell `json:"cells"`
}
type mixedCell struct {
	Parts []mixedPart `json:"parts"`
}
type mixedPart struct {
	V int `json:"v" maximum:"9"`
}

type emptyArgs struct{}

type kitchenSink struct {
	Name     string            `json:"name" description:"Who." minLength:"1" maxLength:"40"`
	Age      int               `json:"age,omitempty" minimum:"0" maximum:"150" default:"30"`
	Kind     string            `json:"kind" enum:"a,b"`
	Labels   map[string]string `json:"labels,omitempty"`
	Location *point            `json:"location,omitempty"`
	Marker   struct{}          `json:"marker"`
	Nested   struct {
		Deep []struct {
			Value float64 `json:"value" exclusiveMinimum:"0"`
		} `json:"deep"`
	} `json:"nested"`
}

// ---- helpers ----

func mustInfer[T any](t testing.TB) *Schema {
	t.Helper()
	s, err := Infer[T]()
	if err != nil {
		t.Fatalf("Infer[%T]: %v", *new(T), err)
	}
	return s
}

func mustParse(t testing.TB, doc string) *Schema {
	t.Helper()
	var s Schema
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatalf("parse schema %s: %v", doc, err)
	}
	return &s
}

// nestedObjects returns a hand-written schema of n object levels (root included) and a value
// it accepts.
func nestedObjects(n int) (schemaJSON, value string) {
	s := `{"type":"string","minLength":1}`
	v := `"bottom"`
	for i := n; i >= 1; i-- {
		s = fmt.Sprintf(`{"type":"object","description":"level %d","properties":{"next":%s,"tag":{"type":"integer"}},"required":["next"]}`, i, s)
		v = fmt.Sprintf(`{"next":%s}`, v)
	}
	return s, v
}

// nestedStrict is nestedObjects' value as a strict-mode model sends it: every optional tag null.
func nestedStrict(n int) string {
	v := `"bottom"`
	for i := 0; i < n; i++ {
		v = fmt.Sprintf(`{"next":%s,"tag":null}`, v)
	}
	return v
}

// corpus returns the schemas every dialect test runs over. It covers every type of S2 (string,
// number, integer, boolean, null, const, enum, optional, nullable, default, array, object,
// record, anyOf/oneOf unions), nesting of 7 and of 8+ levels, $defs/$ref including recursion,
// free-form values, empty arguments, formats, patterns and numeric bounds, both inferred from
// Go types and written by hand.
func corpus(t testing.TB) []namedSchema {
	t.Helper()
	nested7, nested7Value := nestedObjects(7)
	nested9, nested9Value := nestedObjects(9)
	list := []namedSchema{
		// ---- inferred ----
		{
			name: "scalars", schema: mustInfer[scalarArgs](t), inferred: true,
			valid:   `{"text":"hello","ratio":0.5,"count":7,"flag":true}`,
			invalid: []string{`{"text":"","ratio":0.5,"count":7,"flag":true}`, `{"text":"x","ratio":2,"count":7,"flag":true}`, `{"text":"x","ratio":0.5,"count":0,"flag":true}`, `{"text":"x","ratio":0.5,"count":1,"flag":"yes"}`},
		},
		{
			name: "enums", schema: mustInfer[enumArgs](t), inferred: true,
			valid:      `{"unit":"celsius","level":2,"tags":["red","green, blue"],"choice":"no"}`,
			strictArgs: `{"unit":"celsius","level":2,"tags":["red","green, blue"],"choice":"no"}`,
			invalid:    []string{`{"unit":"kelvin","level":2}`, `{"unit":"celsius","level":4}`, `{"unit":"celsius","level":1,"tags":["blue"]}`, `{"unit":"celsius","level":1,"choice":"maybe"}`},
		},
		{
			name: "optional_nullable", schema: mustInfer[optionalArgs](t), inferred: true,
			valid:      `{"query":"q","limit":null,"maybe":null}`,
			strictArgs: `{"query":"q","note":null,"limit":null,"maybe":null,"zero":null}`,
			invalid:    []string{`{"query":"q"}`, `{"limit":1}`, `{"query":"q","limit":"1"}`, `{"query":"q","limit":1,"Skip":"x"}`},
		},
		{
			name: "defaults", schema: mustInfer[defaultArgs](t), inferred: true,
			valid:      `{"days":5,"items":[{"name":"a"},{"name":"b","qty":2}]}`,
			strictArgs: `{"days":5,"mode":null,"verbose":null,"scale":null,"opts":null,"items":[{"name":"a","qty":null},{"name":"b","qty":2}]}`,
			invalid:    []string{`{"days":15}`, `{"mode":"medium"}`, `{"items":[{"qty":1}]}`},
		},
		{
			name: "arrays", schema: mustInfer[arrayArgs](t), inferred: true,
			valid:      `{"names":["ab","cd"],"grid":[[1,2],[],[3]],"triple":[1,2.5,3],"points":[{"x":1,"y":2}],"scores":[0,10]}`,
			strictArgs: `{"names":["ab","cd"],"grid":[[1,2],[],[3]],"triple":[1,2.5,3],"points":[{"x":1,"y":2}],"scores":[0,10]}`,
			invalid:    []string{`{"names":[],"grid":[],"triple":[1,2,3]}`, `{"names":["a"],"grid":[],"triple":[1,2,3]}`, `{"names":["AB"],"grid":[],"triple":[1,2,3]}`, `{"names":["ab"],"grid":[],"triple":[1,2]}`, `{"names":["ab"],"grid":[],"triple":[1,2,3],"scores":[11]}`, `{"names":["ab"],"grid":null,"triple":[1,2,3]}`},
		},
		{
			name: "records", schema: mustInfer[mapArgs](t), inferred: true,
			valid:      `{"counts":{"a":1,"b":2},"places":{"home":{"x":1,"y":2}},"groups":{"g":["x","y"],"h":[]}}`,
			strictArgs: `{"counts":[{"key":"a","value":1},{"key":"b","value":2}],"places":[{"key":"home","value":{"x":1,"y":2}}],"groups":[{"key":"g","value":["x","y"]},{"key":"h","value":[]}]}`,
			geminiArgs: `{"counts":[{"key":"a","value":1},{"key":"b","value":2}],"places":[{"key":"home","value":{"x":1,"y":2}}],"groups":[{"key":"g","value":["x","y"]},{"key":"h","value":[]}]}`,
			invalid:    []string{`{"counts":{"a":"1"}}`, `{"counts":[]}`, `{"counts":{},"places":{"p":{"x":1}}}`},
		},
		{
			name: "embedded_time", schema: mustInfer[embeddedArgs](t), inferred: true,
			valid:   `{"id":"0b9e4a3c-5f7d-4c1e-9a2b-3c4d5e6f7a8b","created":"2024-05-01T10:00:00Z","title":"t","when":null}`,
			invalid: []string{`{"id":"nope","created":"2024-05-01T10:00:00Z","title":"t"}`, `{"id":"0b9e4a3c-5f7d-4c1e-9a2b-3c4d5e6f7a8b","created":"yesterday","title":"t"}`},
		},
		{
			name: "free_form", schema: mustInfer[freeArgs](t), inferred: true,
			valid:      `{"payload":{"a":[1,{"b":null}]},"meta":{"k":"v","n":2}}`,
			strictArgs: `{"payload":"{\"a\":[1,{\"b\":null}]}","meta":"{\"k\":\"v\",\"n\":2}","extra":null}`,
			geminiArgs: `{"payload":"{\"a\":[1,{\"b\":null}]}","meta":"{\"k\":\"v\",\"n\":2}"}`,
			invalid:    []string{`{"meta":{}}`, `{"payload":1,"meta":[]}`},
		},
		{
			name: "formats_patterns", schema: mustInfer[formatArgs](t), inferred: true,
			valid:      `{"email":"a@example.com","day":"2024-02-29","host":"example.com","site":"https://example.com/x","code":"ABC-12"}`,
			strictArgs: `{"email":"a@example.com","day":"2024-02-29","host":"example.com","site":"https://example.com/x","code":"ABC-12"}`,
			invalid:    []string{`{"email":"nope","day":"2024-02-29","code":"ABC-12"}`, `{"email":"a@example.com","day":"2023-02-29","code":"ABC-12"}`, `{"email":"a@example.com","day":"2024-02-29","code":"abc-12"}`},
		},
		{
			name: "nested_7_inferred", schema: mustInfer[lvl7](t), inferred: true,
			valid:      `{"a":{"b":{"c":{"d":{"e":{"f":{"leaf":"x","opt":3}}}}}}}`,
			strictArgs: `{"a":{"b":{"c":{"d":{"e":{"f":{"leaf":"x","opt":3}}}}}}}`,
			invalid:    []string{`{"a":{"b":{"c":{"d":{"e":{"f":{"leaf":""}}}}}}}`, `{"a":{"b":{"c":{"d":{"e":{}}}}}}`},
		},
		{
			name: "nested_10_inferred", schema: mustInfer[deep10](t), inferred: true,
			valid:   `{"n":{"n":{"n":{"a":{"b":{"c":{"d":{"e":{"f":{"leaf":"x","opt":null}}}}}}}}}}`,
			invalid: []string{`{"n":{"n":{"n":{"a":{"b":{"c":{"d":{"e":{"f":{"leaf":1}}}}}}}}}}`, `{"n":{"n":{"n":{"a":{"b":{"c":{"d":{"e":{"f":{"leaf":"x","opt":1.5}}}}}}}}}}`},
		},
		{
			name: "nested_7_mixed", schema: mustInfer[mixedRoot](t), inferred: true,
			valid:      `{"rows":[{"cells":{"c1":{"parts":[{"v":1},{"v":9}]}}},{"cells":{}}]}`,
			strictArgs: `{"rows":[{"cells":[{"key":"c1","value":{"parts":[{"v":1},{"v":9}]}}]},{"cells":[]}]}`,
			geminiArgs: `{"rows":[{"cells":[{"key":"c1","value":{"parts":[{"v":1},{"v":9}]}}]},{"cells":[]}]}`,
			invalid:    []string{`{"rows":[{"cells":{"c1":{"parts":[{"v":10}]}}}]}`},
		},
		{
			name: "empty_struct", schema: mustInfer[emptyArgs](t), inferred: true,
			valid:   `{}`,
			invalid: []string{`{"x":1}`, `[]`},
		},
		{
			name: "kitchen_sink", schema: mustInfer[kitchenSink](t), inferred: true,
			valid:      `{"name":"n","kind":"a","labels":{"x":"y"},"location":{"x":1,"y":2},"marker":{},"nested":{"deep":[{"value":0.5}]}}`,
			strictArgs: `{"name":"n","age":null,"kind":"a","labels":[{"key":"x","value":"y"}],"location":{"x":1,"y":2},"marker":{},"nested":{"deep":[{"value":0.5}]}}`,
			geminiArgs: `{"name":"n","kind":"a","labels":[{"key":"x","value":"y"}],"location":{"x":1,"y":2},"marker":"{}","nested":{"deep":[{"value":0.5}]}}`,
			invalid:    []string{`{"name":"n","kind":"a","marker":{},"nested":{"deep":[{"value":0}]}}`, `{"name":"n","kind":"c","marker":{},"nested":{"deep":[]}}`, `{"name":"n","kind":"a","marker":{"x":1},"nested":{"deep":[]}}`},
		},

		// ---- hand-written ----
		{
			name: "const_literals",
			schema: mustParse(t, `{"type":"object","properties":{
				"kind":{"const":"circle","description":"The literal circle."},
				"version":{"const":2},
				"on":{"const":true}},
				"required":["kind","version"],"additionalProperties":false}`),
			valid:      `{"kind":"circle","version":2}`,
			strictArgs: `{"kind":"circle","version":2,"on":null}`,
			invalid:    []string{`{"kind":"square","version":2}`, `{"kind":"circle","version":3}`, `{"kind":"circle","version":2,"on":false}`},
		},
		{
			name: "null_and_nullable",
			schema: mustParse(t, `{"type":"object","properties":{
				"nothing":{"type":"null"},
				"text":{"type":["string","null"]},
				"color":{"type":["string","null"],"enum":["red","blue",null]},
				"count":{"anyOf":[{"type":"integer"},{"type":"null"}]}},
				"required":["nothing","text","color"]}`),
			valid:      `{"nothing":null,"text":null,"color":null,"count":null}`,
			strictArgs: `{"nothing":null,"text":null,"color":null,"count":null}`,
			invalid:    []string{`{"nothing":0,"text":null,"color":null}`, `{"nothing":null,"text":1,"color":null}`, `{"nothing":null,"text":null,"color":"green"}`},
		},
		{
			name: "enum_kinds",
			schema: mustParse(t, `{"type":"object","properties":{
				"size":{"type":"integer","enum":[1,2,4]},
				"mode":{"enum":["a","b"]},
				"ratio":{"type":"number","enum":[0.5,1.5]},
				"flag":{"enum":[true,false]}},
				"required":["size","mode"]}`),
			valid:      `{"size":4,"mode":"b","ratio":1.5,"flag":false}`,
			strictArgs: `{"size":4,"mode":"b","ratio":1.5,"flag":false}`,
			geminiArgs: `{"size":4,"mode":"b","ratio":1.5,"flag":"false"}`,
			invalid:    []string{`{"size":3,"mode":"a"}`, `{"size":1,"mode":"c"}`, `{"size":1,"mode":"a","flag":"true"}`},
		},
		{
			name: "union_anyof",
			schema: mustParse(t, `{"type":"object","properties":{
				"value":{"anyOf":[{"type":"string","maxLength":5},{"type":"number","minimum":0},
					{"type":"object","properties":{"col":{"type":"string"}},"required":["col"],"additionalProperties":false}]},
				"either":{"type":["string","integer"]}},
				"required":["value"]}`),
			valid:      `{"value":{"col":"c"},"either":7}`,
			strictArgs: `{"value":{"col":"c"},"either":7}`,
			invalid:    []string{`{"value":true}`, `{"value":"toolong"}`, `{"value":-1}`, `{"value":{"col":1}}`, `{"value":1,"either":1.5}`},
		},
		{
			name: "union_oneof",
			schema: mustParse(t, `{"type":"object","properties":{
				"shape":{"oneOf":[
					{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"],"additionalProperties":false},
					{"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"number"}},"required":["kind","side"],"additionalProperties":false}]}},
				"required":["shape"],"additionalProperties":false}`),
			valid:   `{"shape":{"kind":"square","side":2}}`,
			invalid: []string{`{"shape":{"kind":"circle","side":2}}`, `{"shape":{"kind":"triangle"}}`},
		},
		{
			name: "defs_refs",
			schema: mustParse(t, `{"type":"object","$defs":{
				"address":{"type":"object","properties":{"street":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"},"country":{"type":"string","default":"FR"}},"required":["street","zip"],"additionalProperties":false}},
				"properties":{"home":{"$ref":"#/$defs/address","description":"Home."},"work":{"$ref":"#/$defs/address","description":"Office."}},
				"required":["home"]}`),
			valid:      `{"home":{"street":"s","zip":"75001","country":"FR"}}`,
			strictArgs: `{"home":{"street":"s","zip":"75001","country":"FR"},"work":null}`,
			invalid:    []string{`{"home":{"street":"s","zip":"7500"}}`, `{"home":{"street":"s","zip":"75001","floor":2}}`, `{"work":{"street":"s","zip":"75001"}}`},
		},
		{
			name: "recursive_tree",
			schema: mustParse(t, `{"type":"object","$defs":{
				"node":{"type":"object","properties":{"label":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["label"],"additionalProperties":false}},
				"properties":{"root":{"$ref":"#/$defs/node"}},"required":["root"],"additionalProperties":false}`),
			valid:      `{"root":{"label":"a","children":[{"label":"b","children":[{"label":"c"}]},{"label":"d"}]}}`,
			strictArgs: `{"root":{"label":"a","children":[{"label":"b","children":[{"label":"c","children":null}]},{"label":"d","children":null}]}}`,
			invalid:    []string{`{"root":{"label":"a","children":[{"children":[]}]}}`, `{"root":{"label":"a","children":[{"label":"b","children":[{"label":3}]}]}}`},
		},
		{
			name: "nested_7_hand", schema: mustParse(t, nested7),
			valid:      nested7Value,
			strictArgs: nestedStrict(7),
			invalid:    []string{strings.Replace(nested7Value, `"bottom"`, `""`, 1), strings.Replace(nested7Value, `"bottom"`, `7`, 1)},
		},
		{
			name: "nested_9_hand", schema: mustParse(t, nested9),
			valid:      nested9Value,
			strictArgs: nestedStrict(9),
			invalid:    []string{strings.Replace(nested9Value, `"bottom"`, `""`, 1)},
		},
		{
			name: "free_form_hand",
			schema: mustParse(t, `{"type":"object","properties":{
				"anything":{"description":"Whatever you like."},
				"obj":{"type":"object"},
				"list":{"type":"array"},
				"text":{"type":"string"}},
				"required":["anything"]}`),
			valid:      `{"anything":[1,"two",{"three":3}],"obj":{"k":[true]},"list":[1,"x",null],"text":"{\"not\":\"decoded\"}"}`,
			strictArgs: `{"anything":"[1,\"two\",{\"three\":3}]","obj":"{\"k\":[true]}","list":["1","\"x\"","null"],"text":"{\"not\":\"decoded\"}"}`,
			geminiArgs: `{"anything":"[1,\"two\",{\"three\":3}]","obj":"{\"k\":[true]}","list":["1","\"x\"","null"],"text":"{\"not\":\"decoded\"}"}`,
			invalid:    []string{`{}`, `{"anything":1,"obj":[]}`, `{"anything":1,"list":{}}`},
		},
		{
			name: "formats_hand",
			schema: mustParse(t, `{"type":"object","properties":{
				"at":{"type":"string","format":"date-time"},
				"time":{"type":"string","format":"time"},
				"ip":{"type":"string","format":"ipv4"},
				"ip6":{"type":"string","format":"ipv6"},
				"id":{"type":"string","format":"uuid"},
				"dur":{"type":"string","format":"duration"},
				"n":{"type":"integer","format":"int32"},
				"f":{"type":"number","format":"double"}},
				"required":["at","id"]}`),
			valid:      `{"at":"2024-01-02T03:04:05+01:00","time":"10:20:30Z","ip":"192.168.0.1","ip6":"::1","id":"123e4567-e89b-12d3-a456-426614174000","dur":"P3D","n":5,"f":0.25}`,
			strictArgs: `{"at":"2024-01-02T03:04:05+01:00","time":"10:20:30Z","ip":"192.168.0.1","ip6":"::1","id":"123e4567-e89b-12d3-a456-426614174000","dur":"P3D","n":5,"f":0.25}`,
			invalid:    []string{`{"at":"2024-13-02T03:04:05Z","id":"123e4567-e89b-12d3-a456-426614174000"}`, `{"at":"2024-01-02T03:04:05Z","id":"x"}`, `{"at":"2024-01-02T03:04:05Z","id":"123e4567-e89b-12d3-a456-426614174000","ip":"300.1.1.1"}`},
		},
		{
			name: "numeric_bounds",
			schema: mustParse(t, `{"type":"object","properties":{
				"pct":{"type":"number","minimum":0,"maximum":100},
				"pos":{"type":"number","exclusiveMinimum":0},
				"neg":{"type":"integer","exclusiveMaximum":0},
				"step":{"type":"number","multipleOf":0.5},
				"n":{"type":"integer","minimum":-5,"maximum":5}},
				"required":["pct","n"],"additionalProperties":false}`),
			valid:      `{"pct":100,"pos":0.001,"neg":-1,"step":2.5,"n":-5}`,
			strictArgs: `{"pct":100,"pos":0.001,"neg":-1,"step":2.5,"n":-5}`,
			invalid:    []string{`{"pct":101,"n":0}`, `{"pct":1,"n":0,"pos":0}`, `{"pct":1,"n":0,"neg":0}`, `{"pct":1,"n":0,"step":0.3}`, `{"pct":1,"n":1.5}`},
		},
		{
			name: "record_hand",
			schema: mustParse(t, `{"type":"object","properties":{
				"matrix":{"type":"object","additionalProperties":{"type":"object","additionalProperties":{"type":"number"}}},
				"env":{"type":["object","null"],"additionalProperties":{"type":"string"}}},
				"required":["matrix"]}`),
			valid:      `{"matrix":{"r1":{"c1":1,"c2":2},"r2":{}},"env":{"HOME":"/root"}}`,
			strictArgs: `{"matrix":[{"key":"r1","value":[{"key":"c1","value":1},{"key":"c2","value":2}]},{"key":"r2","value":[]}],"env":[{"key":"HOME","value":"/root"}]}`,
			geminiArgs: `{"matrix":[{"key":"r1","value":[{"key":"c1","value":1},{"key":"c2","value":2}]},{"key":"r2","value":[]}],"env":[{"key":"HOME","value":"/root"}]}`,
			invalid:    []string{`{"matrix":{"r1":{"c1":"1"}}}`, `{"matrix":{"r1":[]}}`},
		},
		{
			name: "document_keywords",
			schema: mustParse(t, `{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"https://example.com/tool.json",
				"title":"Search","type":"object","description":"Searches.","$comment":"hand-written",
				"properties":{"q":{"type":"string","examples":["cats"],"x-display":"Query","deprecated":false},
				"page":{"type":"integer","minimum":1,"default":1,"readOnly":false}},
				"required":["q"],"x-vendor":{"owner":"search-team"}}`),
			valid:      `{"q":"cats","page":2}`,
			strictArgs: `{"q":"cats","page":2}`,
			invalid:    []string{`{"page":0}`, `{"q":1}`},
		},
		{
			name:    "mcp_no_args",
			schema:  mustParse(t, `{"type":"object"}`),
			valid:   `{}`,
			invalid: []string{`[]`, `"x"`, `null`},
		},
		{
			name: "draft07_definitions",
			schema: mustParse(t, `{"type":"object","definitions":{
				"color":{"type":"string","enum":["red","green"]},
				"pair":{"type":"object","properties":{"fg":{"$ref":"#/definitions/color"},"bg":{"$ref":"#/definitions/color"}},"required":["fg"],"additionalProperties":false}},
				"properties":{"colors":{"type":"array","items":{"$ref":"#/definitions/pair"}}},"required":["colors"]}`),
			valid:      `{"colors":[{"fg":"red"},{"fg":"green","bg":"red"}]}`,
			strictArgs: `{"colors":[{"fg":"red","bg":null},{"fg":"green","bg":"red"}]}`,
			invalid:    []string{`{"colors":[{"fg":"blue"}]}`, `{"colors":[{"bg":"red"}]}`},
		},
		{
			name: "array_of_objects_with_defaults",
			schema: mustParse(t, `{"type":"object","properties":{
				"tasks":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"object","properties":{
					"title":{"type":"string"},"priority":{"type":"integer","default":3,"minimum":1,"maximum":5},
					"tags":{"type":"array","items":{"type":"string"},"uniqueItems":true}},
					"required":["title"]}}},
				"required":["tasks"]}`),
			valid:      `{"tasks":[{"title":"a","priority":1,"tags":["x"]},{"title":"b"}]}`,
			strictArgs: `{"tasks":[{"title":"a","priority":1,"tags":["x"]},{"title":"b","priority":null,"tags":null}]}`,
			invalid:    []string{`{"tasks":[]}`, `{"tasks":[{"title":"a","priority":6}]}`, `{"tasks":[{"title":"a","tags":["x","x"]}]}`},
		},
	}
	return list
}

func TestCorpusIsSound(t *testing.T) {
	list := corpus(t)
	if len(list) < 25 {
		t.Fatalf("corpus has %d schemas, want at least 25", len(list))
	}
	inferred, hand := 0, 0
	names := map[string]bool{}
	for _, n := range list {
		if names[n.name] {
			t.Errorf("duplicate corpus name %q", n.name)
		}
		names[n.name] = true
		if n.inferred {
			inferred++
		} else {
			hand++
		}
		t.Run(n.name, func(t *testing.T) {
			c, err := Compile(n.schema)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			v, err := Decode([]byte(n.valid))
			if err != nil {
				t.Fatalf("Decode valid: %v", err)
			}
			if err := c.Validate(v); err != nil {
				t.Errorf("valid sample rejected: %v", err)
			}
			if len(n.invalid) == 0 {
				t.Errorf("no invalid samples")
			}
			for _, bad := range n.invalid {
				v, err := Decode([]byte(bad))
				if err != nil {
					t.Fatalf("Decode %s: %v", bad, err)
				}
				err = c.Validate(v)
				var ve *ValidationError
				if !asValidationError(err, &ve) {
					t.Errorf("invalid sample %s: got %v, want a *ValidationError", bad, err)
					continue
				}
				if len(ve.Problems) == 0 {
					t.Errorf("invalid sample %s: no problems listed", bad)
				}
			}
		})
	}
	if inferred < 10 || hand < 10 {
		t.Errorf("corpus has %d inferred and %d hand-written schemas, want at least 10 of each", inferred, hand)
	}
}

// TestCorpusCoversS2 checks the corpus really contains every construct S2 lists, so that the
// dialect tests running over it cannot silently lose coverage.
func TestCorpusCoversS2(t *testing.T) {
	seen := map[string]bool{}
	maxDepth := map[bool]int{} // inferred -> deepest object nesting
	for _, n := range corpus(t) {
		d := objectDepth(n.schema, n.schema, 0)
		if d > maxDepth[n.inferred] {
			maxDepth[n.inferred] = d
		}
		if d == 7 {
			seen[fmt.Sprintf("depth7/%v", n.inferred)] = true
		}
		if d >= 8 {
			seen[fmt.Sprintf("depth8+/%v", n.inferred)] = true
		}
		if n.schema.Properties != nil && len(n.schema.Properties) == 0 || n.schema.Properties == nil && schemaType(n.schema) == "object" {
			seen["empty args"] = true
		}
		walk(n.schema, func(s *Schema) {
			for _, ty := range types(s) {
				seen["type "+ty] = true
			}
			switch {
			case s.Const != nil:
				seen["const"] = true
			case s.Enum != nil:
				seen["enum"] = true
			}
			if s.Default != nil {
				seen["default"] = true
			}
			if s.AnyOf != nil {
				seen["anyOf"] = true
			}
			if s.OneOf != nil {
				seen["oneOf"] = true
			}
			if s.Ref != "" {
				seen["$ref"] = true
			}
			if s.Ref == "#/$defs/node" {
				seen["recursive"] = true
			}
			if isRecord(s) {
				seen["record"] = true
			}
			if isFreeForm(s) {
				seen["free-form"] = true
			}
			if s.Format != "" {
				seen["format"] = true
			}
			if s.Pattern != "" {
				seen["pattern"] = true
			}
			if s.Minimum != nil || s.ExclusiveMaximum != nil {
				seen["numeric bound"] = true
			}
			if allowsNull(s) {
				seen["nullable"] = true
			}
			for name := range s.Properties {
				if !containsString(s.Required, name) {
					seen["optional"] = true
				}
			}
		})
	}
	for _, want := range []string{"type string", "type number", "type integer", "type boolean", "type null",
		"type array", "type object", "const", "enum", "default", "anyOf", "oneOf", "$ref", "recursive",
		"record", "free-form", "format", "pattern", "numeric bound", "nullable", "optional", "empty args",
		"depth7/true", "depth7/false", "depth8+/true", "depth8+/false"} {
		if !seen[want] {
			t.Errorf("corpus lacks %s", want)
		}
	}
}

// objectDepth counts object levels along properties, items, additionalProperties and union
// branches (root = 1), following each ref at most once per path so recursion terminates.
func objectDepth(root, s *Schema, _ int) int {
	return objectDepthPath(root, s, map[string]bool{})
}

func objectDepthPath(root, s *Schema, onPath map[string]bool) int {
	if s == nil {
		return 0
	}
	if s.Ref != "" {
		if onPath[s.Ref] {
			return 0
		}
		t, err := resolveLocalRef(root, s.Ref)
		if err != nil {
			return 0
		}
		onPath[s.Ref] = true
		defer delete(onPath, s.Ref)
		return objectDepthPath(root, t, onPath)
	}
	best := 0
	consider := func(c *Schema) {
		if d := objectDepthPath(root, c, onPath); d > best {
			best = d
		}
	}
	for _, p := range s.Properties {
		consider(p)
	}
	consider(s.Items)
	consider(s.AdditionalProperties)
	for _, b := range s.AnyOf {
		consider(b)
	}
	for _, b := range s.OneOf {
		consider(b)
	}
	if schemaType(s) == "object" {
		return best + 1
	}
	return best
}

func asValidationError(err error, target **ValidationError) bool {
	return err != nil && errors.As(err, target)
}
