package agent

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// spelledCase is one field of a definition type, reached from a root type, written in one
// document per spelling.
type spelledCase struct {
	label        string         // the path of JSON names, e.g. subagents[].resumable.maxInstances
	snake, camel map[string]any // the document with every key on the path in that spelling
	both         map[string]any // the field in both spellings at once ("" when they are the same)
	bothKeys     [2]string
}

// spelledCases walks every field of t (a definition type), into the definition types it
// holds, and returns a case per field that is no definition type itself. A field whose type
// has no sample value fails the test: a field added later is covered, or the test says what
// to add.
func spelledCases(t *testing.T, typ reflect.Type, label string) []spelledCase {
	t.Helper()
	var out []spelledCase
	for _, f := range jsonFields(typ) {
		sn, cm := snakeCase(f.name), camelCase(f.name)
		inner, list := definitionStruct(f.typ)
		if inner != nil {
			for _, c := range spelledCases(t, inner, label+f.name+suffix(list)+".") {
				out = append(out, spelledCase{label: c.label,
					snake: map[string]any{sn: wrap(c.snake, list)}, camel: map[string]any{cm: wrap(c.camel, list)},
					both: wrapBoth(sn, c.both, list), bothKeys: c.bothKeys})
			}
			continue
		}
		v := sample(t, label+f.name, f.typ)
		c := spelledCase{label: label + f.name, snake: map[string]any{sn: v}, camel: map[string]any{cm: v}}
		if sn != cm {
			c.both, c.bothKeys = map[string]any{sn: v, cm: v}, [2]string{sn, cm}
		}
		out = append(out, c)
	}
	return out
}

func suffix(list bool) string {
	if list {
		return "[]"
	}
	return ""
}

func wrap(v map[string]any, list bool) any {
	if list {
		return []any{v}
	}
	return v
}

func wrapBoth(key string, both map[string]any, list bool) map[string]any {
	if both == nil {
		return nil
	}
	return map[string]any{key: wrap(both, list)}
}

// definitionStruct is the definition type t holds (through a pointer or a slice), if any.
func definitionStruct(t reflect.Type) (reflect.Type, bool) {
	list := false
	for {
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
			continue
		case reflect.Slice:
			if t.Elem().Kind() != reflect.Uint8 {
				list, t = true, t.Elem()
				continue
			}
		}
		break
	}
	if t.Kind() == reflect.Struct && t.PkgPath() == agentPackage {
		return t, list
	}
	return nil, false
}

// sample is a value, not the zero value, for a field of type typ.
func sample(t *testing.T, field string, typ reflect.Type) any {
	t.Helper()
	switch typ {
	case reflect.TypeFor[json.RawMessage](), reflect.TypeFor[*schema.Schema]():
		return map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}
	case reflect.TypeFor[quiver.Variables]():
		return []any{map[string]any{"name": "REGION", "type": "text", "required": true}}
	}
	switch typ.Kind() {
	case reflect.Pointer:
		return sample(t, field, typ.Elem())
	case reflect.String:
		return "value"
	case reflect.Bool:
		return true
	case reflect.Int, reflect.Int64:
		return 3
	case reflect.Float64:
		return 0.5
	case reflect.Slice:
		if typ.Elem().Kind() == reflect.String {
			return []any{"one"}
		}
	}
	t.Fatalf("field %s: no sample value for type %s; add one to sample so that its spellings are tested", field, typ)
	return nil
}

// Q2, A2, A3: every field of every definition type is read in its snake_case and its
// camelCase spelling (seed 000 writes includeToolCalls, maxInstances, receives_messages), to
// the same value, wherever definitions are read: definition files and the Go types' JSON.
// Both spellings of one field at once are refused, naming both. The fields are found by
// reflection, so a field added later is covered.
func TestEverySpellingOfEveryField(t *testing.T) {
	roots := []struct {
		name   string
		typ    reflect.Type
		decode func(raw []byte) (any, error)
	}{
		{"definition file", reflect.TypeFor[definition](), func(raw []byte) (any, error) { return parseDefinition(raw) }},
		{"Prompt JSON", reflect.TypeFor[Prompt](), func(raw []byte) (any, error) { var p Prompt; err := json.Unmarshal(raw, &p); return p, err }},
		{"Agent JSON", reflect.TypeFor[Agent](), func(raw []byte) (any, error) { var a Agent; err := json.Unmarshal(raw, &a); return a, err }},
		{"Subprompt JSON", reflect.TypeFor[Subprompt](), func(raw []byte) (any, error) { var s Subprompt; err := json.Unmarshal(raw, &s); return s, err }},
		{"Subagent JSON", reflect.TypeFor[Subagent](), func(raw []byte) (any, error) { var s Subagent; err := json.Unmarshal(raw, &s); return s, err }},
	}
	for _, root := range roots {
		t.Run(root.name, func(t *testing.T) {
			cases := spelledCases(t, root.typ, "")
			if len(cases) < 4 {
				t.Fatalf("%d fields found: the walk misses the type's fields", len(cases))
			}
			for _, c := range cases {
				t.Run(c.label, func(t *testing.T) {
					decode := func(doc map[string]any) (any, error) {
						raw, err := json.Marshal(doc)
						if err != nil {
							t.Fatal(err)
						}
						return root.decode(raw)
					}
					snake, err := decode(c.snake)
					if err != nil {
						t.Fatalf("snake_case %v: %v", c.snake, err)
					}
					camel, err := decode(c.camel)
					if err != nil {
						t.Fatalf("camelCase %v: %v", c.camel, err)
					}
					if !reflect.DeepEqual(snake, camel) {
						t.Fatalf("the spellings read differently:\n%+v\n%+v", snake, camel)
					}
					if reflect.DeepEqual(snake, reflect.Zero(reflect.TypeOf(snake)).Interface()) {
						t.Fatalf("%v read as the zero value: the field was not read", c.snake)
					}
					if c.both == nil {
						return
					}
					if _, err := decode(c.both); err == nil || !strings.Contains(err.Error(), c.bothKeys[0]) || !strings.Contains(err.Error(), c.bothKeys[1]) ||
						!strings.Contains(err.Error(), "write it once") {
						t.Fatalf("both spellings %v: %v, want an error naming %s and %s", c.both, err, c.bothKeys[0], c.bothKeys[1])
					}
				})
			}
		})
	}
}

// Each spelling stands for one field only: no two fields of a definition type share a
// spelling, so a key always means what its writer meant.
func TestSpellingsAreUnambiguous(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(typ reflect.Type)
	walk = func(typ reflect.Type) {
		if seen[typ] {
			return
		}
		seen[typ] = true
		fields := jsonFields(typ)
		owner := map[string]string{}
		for _, f := range fields {
			for _, s := range []string{f.name, snakeCase(f.name), camelCase(f.name)} {
				if o, ok := owner[s]; ok && o != f.name {
					t.Errorf("%s: the spelling %q stands for both %s and %s", typ, s, o, f.name)
				}
				owner[s] = f.name
			}
			if inner, _ := definitionStruct(f.typ); inner != nil {
				walk(inner)
			}
		}
	}
	walk(reflect.TypeFor[definition]())
	walk(reflect.TypeFor[Agent]())
	if len(seen) < 6 {
		t.Fatalf("walked %d definition types, want at least definition, Agent, Prompt, StopRules, Subprompt, Subagent, Immediate, Resumable", len(seen))
	}
}

func TestCaseConversions(t *testing.T) {
	cases := []struct{ in, snake, camel string }{
		{"include_tool_calls", "include_tool_calls", "includeToolCalls"},
		{"maxInstances", "max_instances", "maxInstances"},
		{"nameEnv", "name_env", "nameEnv"},
		{"receives_messages", "receives_messages", "receivesMessages"},
		{"name", "name", "name"},
	}
	for _, c := range cases {
		if got := snakeCase(c.in); got != c.snake {
			t.Errorf("snakeCase(%q) = %q, want %q", c.in, got, c.snake)
		}
		if got := camelCase(c.in); got != c.camel {
			t.Errorf("camelCase(%q) = %q, want %q", c.in, got, c.camel)
		}
	}
}
