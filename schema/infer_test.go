package schema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

type taggedArgs struct {
	Desc     string           `json:"desc" description:"A description."`
	JS       string           `json:"js" jsonschema:"From the jsonschema tag."`
	Unit     string           `json:"unit" enum:"c,f"`
	Level    int              `json:"level" enum:"1, 2,3"`
	Ratio    float64          `json:"ratio" enum:"0.5,1.5"`
	JSONEnum string           `json:"json_enum" enum:"[\"a,b\",\"c\"]"`
	IntJSON  int              `json:"int_json" enum:"[10,20]"`
	Bounded  int              `json:"bounded" minimum:"1" maximum:"14"`
	Excl     float64          `json:"excl" exclusiveMinimum:"0" exclusiveMaximum:"1"`
	Text     string           `json:"text" minLength:"1" maxLength:"80"`
	List     []string         `json:"list" minItems:"1" maxItems:"10"`
	DefS     string           `json:"def_s,omitempty" default:"hi"`
	DefI     int              `json:"def_i,omitempty" default:"3"`
	DefB     bool             `json:"def_b,omitempty" default:"true"`
	DefF     float64          `json:"def_f,omitempty" default:"0.25"`
	DefO     point            `json:"def_o,omitzero" default:"{\"x\":1,\"y\":2}"`
	DefA     []int            `json:"def_a,omitempty" default:"[1,2]"`
	DefT     time.Time        `json:"def_t,omitzero" default:"2024-01-01T00:00:00Z" format:"date-time"`
	Pat      string           `json:"pat" pattern:"^[a-z]+$"`
	Fmt      string           `json:"fmt" format:"email"`
	Codes    []string         `json:"codes" enum:"ab,cd" minLength:"2" maxLength:"3" pattern:"^[a-z]+$"`
	IDs      []string         `json:"ids,omitempty" format:"uuid"`
	Nums     []int            `json:"nums" minimum:"0" maximum:"9" minItems:"2"`
	Fixed    [3]int           `json:"fixed"`
	Opt      string           `json:"opt,omitempty"`
	Zero     int              `json:"zero,omitzero"`
	Ptr      *int             `json:"ptr"`
	PtrEnum  *string          `json:"ptr_enum,omitempty" enum:"a,b"`
	PtrInts  []*int           `json:"ptr_ints,omitempty" enum:"1,2"`
	Rec      map[string]int   `json:"rec"`
	RecObj   map[string]point `json:"rec_obj,omitempty"`
	When     time.Time        `json:"when" format:"date-time"`
	WhenPtr  *time.Time       `json:"when_ptr,omitempty"`
	Nested   point            `json:"nested"`
	NestPtr  *point           `json:"nest_ptr,omitempty"`
	Any      any              `json:"any,omitempty"`
	Skip     int              `json:"-"`
	NoTag    bool             //nolint:revive // no json tag: the Go name is the property name
	//lint:ignore U1000 an unexported field, which inference must skip
	private int
	Strs    map[string]string `json:"strs,omitempty" description:"Labels."`
}

func TestInferTags(t *testing.T) {
	s, err := Infer[taggedArgs]()
	if err != nil {
		t.Fatalf("Infer: %v", err)
	}
	want := map[string]string{
		"desc":      `{"type":"string","description":"A description."}`,
		"js":        `{"type":"string","description":"From the jsonschema tag."}`,
		"unit":      `{"type":"string","enum":["c","f"]}`,
		"level":     `{"type":"integer","enum":[1,2,3]}`,
		"ratio":     `{"type":"number","enum":[0.5,1.5]}`,
		"json_enum": `{"type":"string","enum":["a,b","c"]}`,
		"int_json":  `{"type":"integer","enum":[10,20]}`,
		"bounded":   `{"type":"integer","minimum":1,"maximum":14}`,
		"excl":      `{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}`,
		"text":      `{"type":"string","minLength":1,"maxLength":80}`,
		"list":      `{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":10}`,
		"def_s":     `{"type":"string","default":"hi"}`,
		"def_i":     `{"type":"integer","default":3}`,
		"def_b":     `{"type":"boolean","default":true}`,
		"def_f":     `{"type":"number","default":0.25}`,
		"def_o":     `{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"additionalProperties":false,"default":{"x":1,"y":2}}`,
		"def_a":     `{"type":"array","items":{"type":"integer"},"default":[1,2]}`,
		"def_t":     `{"type":"string","format":"date-time","default":"2024-01-01T00:00:00Z"}`,
		"pat":       `{"type":"string","pattern":"^[a-z]+$"}`,
		"fmt":       `{"type":"string","format":"email"}`,
		"codes":     `{"type":"array","items":{"type":"string","enum":["ab","cd"],"minLength":2,"maxLength":3,"pattern":"^[a-z]+$"}}`,
		"ids":       `{"type":"array","items":{"type":"string","format":"uuid"}}`,
		"nums":      `{"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":2}`,
		"fixed":     `{"type":"array","items":{"type":"integer"},"minItems":3,"maxItems":3}`,
		"opt":       `{"type":"string"}`,
		"zero":      `{"type":"integer"}`,
		"ptr":       `{"type":["null","integer"]}`,
		"ptr_enum":  `{"type":["null","string"],"enum":["a","b",null]}`,
		"ptr_ints":  `{"type":"array","items":{"type":["null","integer"],"enum":[1,2,null]}}`,
		"rec":       `{"type":"object","additionalProperties":{"type":"integer"}}`,
		"rec_obj":   `{"type":"object","additionalProperties":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"additionalProperties":false}}`,
		"when":      `{"type":"string","format":"date-time"}`,
		"when_ptr":  `{"type":["null","string"]}`,
		"nested":    `{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"additionalProperties":false}`,
		"nest_ptr":  `{"type":["null","object"],"properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"additionalProperties":false}`,
		"any":       `true`,
		"NoTag":     `{"type":"boolean"}`,
		"strs":      `{"type":"object","additionalProperties":{"type":"string"},"description":"Labels."}`,
	}
	for name, w := range want {
		p, ok := s.Properties[name]
		if !ok {
			t.Errorf("property %q missing", name)
			continue
		}
		if got, w := canonicalSchema(t, p), normalize(t, w); got != w {
			t.Errorf("%s:\n got %s\nwant %s", name, got, w)
		}
	}
	if len(s.Properties) != len(want) {
		var extra []string
		for name := range s.Properties {
			if _, ok := want[name]; !ok {
				extra = append(extra, name)
			}
		}
		t.Errorf("unexpected properties %q (Skip and private must not appear)", extra)
	}
	wantRequired := []string{"desc", "js", "unit", "level", "ratio", "json_enum", "int_json", "bounded", "excl", "text", "list",
		"pat", "fmt", "codes", "nums", "fixed", "ptr", "rec", "when", "nested", "NoTag"}
	if !reflect.DeepEqual(s.Required, wantRequired) {
		t.Errorf("required = %q\nwant %q", s.Required, wantRequired)
	}
	if s.Type != "object" || !isFalse(s.AdditionalProperties) {
		t.Errorf("root is %s, want a closed object", marshalSchema(t, s))
	}
	// The declared order is kept for rendering.
	if s.PropertyOrder[0] != "desc" || s.PropertyOrder[len(s.PropertyOrder)-1] != "strs" {
		t.Errorf("property order %q", s.PropertyOrder)
	}
	// And the whole thing compiles, defaults included.
	c, err := Compile(s)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	if !c.HasDefaults() {
		t.Errorf("HasDefaults() = false")
	}
}

// canonicalSchema marshals s and re-encodes it with sorted keys.
func canonicalSchema(t *testing.T, s *Schema) string {
	t.Helper()
	return normalize(t, marshalSchema(t, s))
}

func TestInferNullablePointerEnumAcceptsNull(t *testing.T) {
	c, err := Compile(mustInfer[enumArgs](t))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{`{"unit":"celsius","level":1,"choice":null}`, `{"unit":"celsius","level":1}`, `{"unit":"celsius","level":1,"choice":"yes"}`} {
		if err := c.Validate(mustDecode(t, doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
	if got := problemsOf(t, c, `{"unit":"celsius","level":1,"choice":"maybe"}`); len(got) != 1 || got[0] != `/choice: must be one of "yes", "no", null, got "maybe"` {
		t.Errorf("problems %q", got)
	}
}

type embeddedPtrArgs struct {
	*base
	Note string `json:"note,omitempty" maxLength:"5"`
}

type outer struct {
	In inner `json:"in"`
}

type inner struct {
	Items []badItem `json:"items"`
}

type badItem struct {
	Limit int `json:"limit" minimum:"abc"`
}

func TestInferStructure(t *testing.T) {
	cases := []struct {
		name string
		got  func() (*Schema, error)
		want string
	}{
		{"embedded struct: promoted fields and their tags", Infer[embeddedArgs],
			`{"type":"object","properties":{"id":{"type":"string","format":"uuid"},"created":{"type":"string","format":"date-time"},
			"title":{"type":"string","minLength":1},"when":{"type":["null","string"]}},"required":["id","created","title"],"additionalProperties":false}`},
		{"embedded pointer struct", Infer[embeddedPtrArgs],
			`{"type":"object","properties":{"id":{"type":"string","format":"uuid"},"created":{"type":"string","format":"date-time"},
			"note":{"type":"string","maxLength":5}},"required":["id","created"],"additionalProperties":false}`},
		{"nested structs, maps and slices", Infer[mixedRoot],
			`{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object","properties":{"cells":{"type":"object",
			"additionalProperties":{"type":"object","properties":{"parts":{"type":"array","items":{"type":"object","properties":{"v":{"type":"integer","maximum":9}},
			"required":["v"],"additionalProperties":false}}},"required":["parts"],"additionalProperties":false}}},"required":["cells"],"additionalProperties":false}}},
			"required":["rows"],"additionalProperties":false}`},
		{"pointer to struct", Infer[*point],
			`{"type":["null","object"],"properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"additionalProperties":false}`},
		{"map at the root", Infer[map[string]int], `{"type":"object","additionalProperties":{"type":"integer"}}`},
		{"empty struct", Infer[struct{}], `{"type":"object","additionalProperties":false}`},
		{"time.Time", Infer[time.Time], `{"type":"string"}`},
		{"nested slices are arrays, not array-or-null", Infer[struct {
			Grid [][]string            `json:"grid"`
			M    map[string][]string   `json:"m"`
			P    *[]int                `json:"p"`
			Deep []map[string][]string `json:"deep"`
		}], `{"type":"object","properties":{"grid":{"type":"array","items":{"type":"array","items":{"type":"string"}}},
			"m":{"type":"object","additionalProperties":{"type":"array","items":{"type":"string"}}},
			"p":{"type":"array","items":{"type":"integer"}},
			"deep":{"type":"array","items":{"type":"object","additionalProperties":{"type":"array","items":{"type":"string"}}}}},
			"required":["grid","m","p","deep"],"additionalProperties":false}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := c.got()
			if err != nil {
				t.Fatalf("Infer: %v", err)
			}
			if got, want := canonicalSchema(t, s), normalize(t, c.want); got != want {
				t.Errorf("\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestInferErrors(t *testing.T) {
	cases := []struct {
		name string
		got  func() (*Schema, error)
		want []string // substrings of the error
	}{
		{"minimum not a number", Infer[struct {
			Limit int `json:"limit" minimum:"abc"`
		}], []string{"schema: infer", ".Limit", `tag minimum:"abc": not a number`}},
		{"maximum not a number", Infer[struct {
			Limit float64 `json:"limit" maximum:"1e"`
		}], []string{".Limit", `tag maximum:"1e": not a number`}},
		{"exclusiveMinimum not a number", Infer[struct {
			X float64 `exclusiveMinimum:"zero"`
		}], []string{".X", `tag exclusiveMinimum:"zero"`}},
		{"default not an integer", Infer[struct {
			Days int `json:"days" default:"x"`
		}], []string{".Days", `tag default:"x": "x" is not an integer`}},
		{"default float on an integer", Infer[struct {
			Days int `json:"days" default:"1.5"`
		}], []string{".Days", `"1.5" is not an integer`}},
		{"default not a boolean", Infer[struct {
			On bool `json:"on" default:"maybe"`
		}], []string{".On", `"maybe" is not a boolean`}},
		{"default not a number", Infer[struct {
			F float64 `json:"f" default:"fast"`
		}], []string{".F", `"fast" is not a number`}},
		{"default object not JSON", Infer[struct {
			P point `json:"p" default:"{x:1}"`
		}], []string{".P", `tag default:"{x:1}"`, "is not JSON"}},
		{"enum not integers", Infer[struct {
			Level int `json:"level" enum:"low,high"`
		}], []string{".Level", `tag enum:"low,high": "low" is not an integer`}},
		{"enum JSON array broken", Infer[struct {
			Unit string `json:"unit" enum:"[\"c\","`
		}], []string{".Unit", "not a JSON array"}},
		{"negative minLength", Infer[struct {
			S string `json:"s" minLength:"-1"`
		}], []string{".S", `tag minLength:"-1": not a non-negative integer`}},
		{"maxItems not an integer", Infer[struct {
			L []int `json:"l" maxItems:"ten"`
		}], []string{".L", `tag maxItems:"ten"`}},
		{"deeply nested field named by its path", Infer[outer], []string{"outer.In.Items[].Limit", `tag minimum:"abc"`}},
		{"unsupported type", Infer[struct {
			C chan int `json:"c"`
		}], []string{"schema: infer"}},
		{"recursive Go type", Infer[treeNode], []string{"schema: infer", "cycle"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := c.got()
			if err == nil {
				t.Fatalf("Infer succeeded: %s", marshalSchema(t, s))
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

type treeNode struct {
	Kids []treeNode `json:"kids"`
}

// TestInferDefaultsViolatingTheirSchema: a default that fails its own field's constraints is
// found at definition time, by Compile.
func TestInferDefaultsViolatingTheirSchema(t *testing.T) {
	cases := []struct {
		name string
		got  func() (*Schema, error)
		want string
	}{
		{"enum", Infer[struct {
			Mode string `json:"mode,omitempty" default:"medium" enum:"fast,slow"`
		}], `schema: default of "mode" does not satisfy its own schema: /: must be one of "fast", "slow", got "medium"`},
		{"maximum", Infer[struct {
			Days int `json:"days,omitempty" default:"30" maximum:"14"`
		}], `schema: default of "days" does not satisfy its own schema: /: maximum 14, got 30`},
		{"pattern", Infer[struct {
			Code string `json:"code,omitempty" default:"abc" pattern:"^[0-9]+$"`
		}], `/: must match pattern ^[0-9]+$, got "abc"`},
		{"format", Infer[struct {
			At string `json:"at,omitempty" default:"soon" format:"date-time"`
		}], `/: must be a valid date-time, got "soon"`},
		{"object default missing a required field", Infer[struct {
			P point `json:"p,omitzero" default:"{\"x\":1}"`
		}], `default of "p" does not satisfy its own schema: /: missing required property "y"`},
		{"minLength", Infer[struct {
			S string `json:"s,omitempty" default:"" minLength:"1"`
		}], `/: minimum length 1, got 0`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := c.got()
			if err != nil {
				t.Fatalf("Infer: %v", err)
			}
			_, err = Compile(s)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Compile error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

type plainResult struct {
	Name  string            `json:"name" description:"Only a description."`
	Count int               `json:"count" default:"1"`
	Tags  []string          `json:"tags"`
	Sub   []point           `json:"sub,omitempty"`
	M     map[string][]int  `json:"m,omitempty"`
	Ptr   *plainResultInner `json:"ptr,omitempty"`
}

type plainResultInner struct {
	List []string `json:"list"`
}

func TestInferOutputType(t *testing.T) {
	cases := []struct {
		name       string
		typ        reflect.Type
		guaranteed bool
	}{
		{"no constraint tags", reflect.TypeFor[plainResult](), true},
		{"slice of structs", reflect.TypeFor[[]point](), true},
		{"map", reflect.TypeFor[map[string]point](), true},
		{"enum", reflect.TypeFor[enumArgs](), false},
		{"bounds", reflect.TypeFor[scalarArgs](), false},
		{"format on an embedded field", reflect.TypeFor[embeddedArgs](), false},
		{"pattern deep inside", reflect.TypeFor[arrayArgs](), false},
		{"nested constraint", reflect.TypeFor[lvl7](), false},
		{"maximum inside a map value", reflect.TypeFor[mixedRoot](), false},
		{"minItems only", reflect.TypeFor[struct {
			L []int `json:"l" minItems:"1"`
		}](), false},
		{"format only", reflect.TypeFor[struct {
			T time.Time `json:"t" format:"date-time"`
		}](), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, guaranteed, err := InferOutputType(c.typ)
			if err != nil {
				t.Fatalf("InferOutputType: %v", err)
			}
			if guaranteed != c.guaranteed {
				t.Errorf("guaranteed = %v, want %v", guaranteed, c.guaranteed)
			}
			if _, err := Compile(s); err != nil {
				t.Errorf("Compile: %v", err)
			}
		})
	}

	// Slices stay "array or null" in results, at every level, because a nil slice encodes as null.
	s, _, err := InferOutputType(reflect.TypeFor[plainResult]())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Schema{s.Properties["tags"], s.Properties["sub"], s.Properties["m"].AdditionalProperties, s.Properties["ptr"].Properties["list"]} {
		if !reflect.DeepEqual(p.Types, []string{"null", "array"}) {
			t.Errorf("slice schema %s, want type [null array]", marshalSchema(t, p))
		}
	}
	// ... whereas InferType offers arrays to a model that should send [].
	in := mustInfer[plainResult](t)
	if in.Properties["tags"].Type != "array" || in.Properties["ptr"].Properties["list"].Type != "array" {
		t.Errorf("InferType kept a nullable slice: %s", marshalSchema(t, in))
	}
	// And a real Go value with nil slices validates against the output schema.
	c, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(plainResult{Name: "n", Ptr: &plainResultInner{}})
	if err := c.Validate(mustDecode(t, string(b))); err != nil {
		t.Errorf("encoded Go value %s fails its output schema: %v", b, err)
	}
}

// TestInferRoundTripsGoValues: a value of the Go type, encoded by encoding/json, satisfies the
// inferred schema; the schema and the Go type agree on names, optionality and shapes.
func TestInferRoundTripsGoValues(t *testing.T) {
	ten := 10
	unit := "a"
	v := taggedArgs{Desc: "d", JS: "j", Unit: "c", Level: 2, Ratio: 1.5, JSONEnum: "a,b", IntJSON: 20, Bounded: 14, Excl: 0.5,
		Text: "t", List: []string{"x"}, Pat: "abc", Fmt: "a@b.co", Codes: []string{"ab"}, Nums: []int{0, 9}, Ptr: &ten,
		PtrEnum: &unit, Rec: map[string]int{"k": 1}, When: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), NoTag: true}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compile(mustInfer[taggedArgs](t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(mustDecode(t, string(b))); err != nil {
		t.Errorf("%s: %v", b, err)
	}
}
