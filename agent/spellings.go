package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode"
)

// Definitions are written by hand, often after published examples that spell their fields in
// camelCase (includeToolCalls, initUserMessageProperty, maxInstances) beside snake_case ones
// (receives_messages), while Quiver's own are mostly snake_case. Every field of every
// definition type is therefore read in both spellings: its JSON name (the tag) and that
// name's snake_case and camelCase forms. canonicalKeys rewrites a decoded document's keys to
// the JSON names before the document is decoded, so that one strict decoding still refuses an
// unknown field by name, and a field added later needs no alias of its own.

// agentPackage is the import path of this package: its struct types are definition types,
// whose keys are rewritten. Other packages' types (a JSON Schema, variables) keep their own
// keys, which mean what their standards say.
var agentPackage = reflect.TypeFor[Prompt]().PkgPath()

// fieldSpelling is what one spelling of a key stands for.
type fieldSpelling struct {
	name string       // the field's JSON name
	typ  reflect.Type // the field's type, to rewrite the keys of its value
}

var spellingCache sync.Map // reflect.Type -> map[string]fieldSpelling

// spellingsOf maps every accepted spelling of t's fields to the field: its JSON name first,
// so that a field's own name always means that field, then the name's snake_case and
// camelCase forms.
func spellingsOf(t reflect.Type) map[string]fieldSpelling {
	if m, ok := spellingCache.Load(t); ok {
		return m.(map[string]fieldSpelling)
	}
	fields := jsonFields(t)
	m := make(map[string]fieldSpelling, 3*len(fields))
	for _, f := range fields {
		m[f.name] = f
	}
	for _, f := range fields {
		for _, s := range []string{snakeCase(f.name), camelCase(f.name)} {
			if _, taken := m[s]; !taken {
				m[s] = f
			}
		}
	}
	spellingCache.Store(t, m)
	return m
}

// jsonFields lists the fields encoding/json reads into a struct of type t, with their JSON
// names, embedded structs' fields included.
func jsonFields(t reflect.Type) []fieldSpelling {
	var out []fieldSpelling
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" && !strings.HasPrefix(tag, "-,") {
			continue
		}
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, fieldSpelling{name: name, typ: f.Type})
	}
	return out
}

// snakeCase writes a camelCase name in snake_case (maxInstances: max_instances); a name
// already in snake_case is unchanged.
func snakeCase(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// camelCase writes a snake_case name in camelCase (include_tool_calls: includeToolCalls); a
// name already in camelCase is unchanged.
func camelCase(name string) string {
	var b strings.Builder
	up := false
	for _, r := range name {
		switch {
		case r == '_' && b.Len() > 0:
			up = true
		case up:
			b.WriteRune(unicode.ToUpper(r))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// canonicalKeys rewrites, in place, the keys of v (a document decoded into maps and slices)
// that spell a field of t in another accepted spelling to the field's JSON name, through
// every definition type t holds. Keys that are no field are left for the decoder to refuse;
// a value that is not an object where t is a struct (a shorthand: a name, true or false) is
// left for the type's own UnmarshalJSON. Two spellings of one field in one object are an
// error naming both and where they are (path).
func canonicalKeys(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return canonicalItems(v, t, path)
	case reflect.Map:
		return canonicalValues(v, t, path)
	case reflect.Struct:
		return canonicalFields(v, t, path)
	}
	return nil
}

// canonicalItems rewrites the keys of the items of a list.
func canonicalItems(v any, t reflect.Type, path string) error {
	list, _ := v.([]any)
	for i, item := range list {
		if err := canonicalKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	return nil
}

// canonicalValues rewrites the keys of the values of a map keyed by strings.
func canonicalValues(v any, t reflect.Type, path string) error {
	obj, ok := v.(map[string]any)
	if !ok || t.Key().Kind() != reflect.String {
		return nil
	}
	for _, k := range keys(obj) {
		if err := canonicalKeys(obj[k], t.Elem(), joinPath(path, k)); err != nil {
			return err
		}
	}
	return nil
}

// canonicalFields rewrites the keys of an object that is one of this package's structs to
// its fields' JSON names, and the keys of their values.
func canonicalFields(v any, t reflect.Type, path string) error {
	obj, ok := v.(map[string]any)
	if !ok || t.PkgPath() != agentPackage {
		return nil
	}
	spellings := spellingsOf(t)
	written, err := fieldSpellings(obj, spellings, path)
	if err != nil {
		return err
	}
	for _, name := range keys(written) {
		if k := written[name]; k != name {
			obj[name] = obj[k]
			delete(obj, k)
		}
		if err := canonicalKeys(obj[name], spellings[name].typ, joinPath(path, name)); err != nil {
			return err
		}
	}
	return nil
}

// fieldSpellings is the key of obj that spells each field it has, by the field's JSON name;
// a field spelt twice is an error.
func fieldSpellings(obj map[string]any, spellings map[string]fieldSpelling, path string) (map[string]string, error) {
	written := map[string]string{}
	for _, k := range keys(obj) {
		f, ok := spellings[k]
		if !ok {
			continue
		}
		if other, dup := written[f.name]; dup {
			return nil, fmt.Errorf("%s%s and %s are two spellings of the field %s: write it once", pathPrefix(path), other, k, f.name)
		}
		written[f.name] = k
	}
	return written, nil
}

// pathPrefix is where an error is, before what it says: "path: ", or nothing at the top.
func pathPrefix(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// canonicalJSON decodes b (numbers kept exact) with the keys of t's fields in their JSON
// names (see canonicalKeys).
func canonicalJSON(b []byte, t reflect.Type) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if err := canonicalKeys(v, t, ""); err != nil {
		return nil, err
	}
	return v, nil
}

// decodeCanonical decodes v, a document canonicalJSON returned, into out: strictly (an
// unknown field is an error naming it) for the types that have always refused them.
func decodeCanonical(v any, out any, strict bool) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if strict {
		dec.DisallowUnknownFields()
	}
	return dec.Decode(out)
}

// unmarshalCanonical is json.Unmarshal into out, of type t, with every accepted spelling of
// t's fields read.
func unmarshalCanonical(b []byte, t reflect.Type, out any, strict bool) error {
	v, err := canonicalJSON(b, t)
	if err != nil {
		return err
	}
	return decodeCanonical(v, out, strict)
}

// UnmarshalJSON reads a prompt written in JSON, each field in either spelling (see
// canonicalKeys); fields it does not know are ignored, as encoding/json ignores them.
func (p *Prompt) UnmarshalJSON(b []byte) error {
	type plain Prompt
	var q plain
	if err := unmarshalCanonical(b, reflect.TypeFor[Prompt](), &q, false); err != nil {
		return fmt.Errorf("prompt: %w", err)
	}
	*p = Prompt(q)
	return nil
}

// UnmarshalJSON reads an agent written in JSON, each field in either spelling (see
// canonicalKeys); fields it does not know are ignored, as encoding/json ignores them.
func (a *Agent) UnmarshalJSON(b []byte) error {
	type plain Agent
	var q plain
	if err := unmarshalCanonical(b, reflect.TypeFor[Agent](), &q, false); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	*a = Agent(q)
	return nil
}
