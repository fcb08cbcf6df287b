// Package schema infers, compiles and validates the JSON Schemas of tool arguments and results,
// and renders them in the dialect each model provider accepts.
//
// Schemas are represented by [jsonschema.Schema] from github.com/google/jsonschema-go, the type
// the official MCP Go SDK uses too, so a schema written for one works with the other. Validation
// is done by github.com/santhosh-tekuri/jsonschema/v6 on a schema compiled once, at definition.
package schema

import (
	"encoding"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema is the JSON Schema type used throughout Quiver.
type Schema = jsonschema.Schema

// Infer returns the JSON Schema of T, a struct (or pointer to struct) describing tool arguments
// or results. See [InferType] for the struct tags it understands.
func Infer[T any]() (*Schema, error) {
	return InferType(reflect.TypeFor[T]())
}

// InferType returns the JSON Schema of t.
//
// Field names follow encoding/json (the json tag, omitempty/omitzero make a field optional,
// "-" skips it). Besides the "jsonschema" tag, which github.com/google/jsonschema-go reads as the
// description, these tags refine a field's schema:
//
//	description:"..."        the field's description (same as jsonschema:"...")
//	enum:"a,b,c"             allowed values, parsed as the field's type; a JSON array also works
//	minimum:"1" maximum:"14" inclusive numeric bounds
//	exclusiveMinimum:"0" exclusiveMaximum:"1"
//	minLength:"1" maxLength:"80"   string length bounds
//	minItems:"1" maxItems:"10"     array length bounds
//	default:"3"              default value, parsed as the field's type (JSON for objects/arrays)
//	pattern:"^[a-z]+$"       regular expression a string must match
//	format:"date-time"       a JSON Schema format (date-time, date, time, email, uri, uuid, ...)
//
// For a slice or array field, enum, pattern, format, bounds on length and numeric bounds apply to
// its items; minItems and maxItems apply to the array itself. Tag values that do not parse as the
// field's type, and defaults that do not satisfy the field's own schema, are errors, reported
// with the Go field that carries them.
//
// Slices are offered as arrays, not as "array or null": a model should send [] rather than null,
// and encoding/json decodes both.
func InferType(t reflect.Type) (*Schema, error) {
	s, _, err := infer(t, true)
	return s, err
}

// InferOutputType is InferType for values a Go function returns rather than receives: a nil
// slice encodes as null, so slices stay "array or null". It also reports whether every value
// of t is guaranteed to satisfy the schema, that is whether no tag adds a constraint (enum,
// bounds, pattern, format, lengths) the Go type does not enforce by itself; checking such
// values against the schema would only cost time.
func InferOutputType(t reflect.Type) (s *Schema, guaranteed bool, err error) {
	return infer(t, false)
}

func infer(t reflect.Type, input bool) (*Schema, bool, error) {
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		return nil, false, fmt.Errorf("schema: infer %s: %w", t, err)
	}
	r := refiner{arraysNotNull: input}
	if err := r.refine(t, s, t.String()); err != nil {
		return nil, false, fmt.Errorf("schema: infer %s: %w", t, err)
	}
	return s, !r.constrained && !customEncoding(t, map[reflect.Type]bool{}), nil
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	// knownEncodings are the standard types jsonschema-go maps to the schema of what they
	// encode to (a string).
	knownEncodings = []reflect.Type{reflect.TypeFor[time.Time](), reflect.TypeFor[slog.Level](),
		reflect.TypeFor[big.Int](), reflect.TypeFor[big.Rat](), reflect.TypeFor[big.Float]()}
)

// customEncoding reports whether t or a type inside it encodes itself (json.Marshaler or
// encoding.TextMarshaler): the schema inferred from its Go shape then says nothing certain
// about its JSON.
func customEncoding(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	if slices.Contains(knownEncodings, t) {
		return false
	}
	return encodesItself(t) || customEncodingInside(t, seen)
}

func encodesItself(t reflect.Type) bool {
	for _, u := range []reflect.Type{t, reflect.PointerTo(t)} {
		if u.Implements(jsonMarshaler) || u.Implements(textMarshaler) {
			return true
		}
	}
	return false
}

// customEncodingInside reports whether a type inside t encodes itself.
func customEncodingInside(t reflect.Type, seen map[reflect.Type]bool) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return customEncoding(t.Elem(), seen)
	case reflect.Map:
		return customEncoding(t.Key(), seen) || customEncoding(t.Elem(), seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if customEncoding(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// refiner walks a Go type alongside the schema inferred from it and applies Quiver's tags.
type refiner struct {
	arraysNotNull bool
	constrained   bool // some tag added a constraint the Go type does not guarantee
}

func (r *refiner) refine(t reflect.Type, s *Schema, where string) error {
	if s == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		if r.arraysNotNull && slices.Equal(s.Types, []string{"null", "array"}) {
			s.Types, s.Type = nil, "array"
		}
		return r.refine(t.Elem(), s.Items, where+"[]")
	case reflect.Array:
		return r.refine(t.Elem(), s.Items, where+"[]")
	case reflect.Map:
		return r.refine(t.Elem(), s.AdditionalProperties, where+"[key]")
	case reflect.Struct:
		return r.refineStruct(t, s, where)
	}
	return nil
}

func (r *refiner) refineStruct(t reflect.Type, s *Schema, where string) error {
	if s.Properties == nil {
		return nil // a type with a schema of its own, such as time.Time
	}
	for _, f := range reflect.VisibleFields(t) {
		fs := fieldSchema(f, s)
		if fs == nil {
			continue
		}
		if err := r.refineField(f, fs, where+"."+f.Name); err != nil {
			return err
		}
	}
	return nil
}

// fieldSchema is the schema of the property a struct field encodes to; nil when it encodes to
// none of its own.
func fieldSchema(f reflect.StructField, s *Schema) *Schema {
	if f.Anonymous || !f.IsExported() {
		return nil
	}
	name, ok := jsonName(f)
	if !ok {
		return nil
	}
	return s.Properties[name]
}

func (r *refiner) refineField(f reflect.StructField, fs *Schema, where string) error {
	if err := r.refine(f.Type, fs, where); err != nil {
		return err
	}
	r.constrained = r.constrained || hasConstraintTag(f.Tag)
	if err := applyTags(f.Tag, fs); err != nil {
		return fmt.Errorf("field %s: %w", where, err)
	}
	return nil
}

// jsonName reports the property name encoding/json uses for f, and false if f is skipped.
func jsonName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, true
}

var constraintTags = []string{"enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
	"minLength", "maxLength", "minItems", "maxItems", "pattern", "format"}

func hasConstraintTag(tag reflect.StructTag) bool {
	for _, k := range constraintTags {
		if _, ok := tag.Lookup(k); ok {
			return true
		}
	}
	return false
}

func applyTags(tag reflect.StructTag, s *Schema) error {
	if d, ok := tag.Lookup("description"); ok {
		s.Description = d
	}
	// Constraints on values go to the items of an array field.
	target := s
	if isArray(s) && s.Items != nil {
		target = s.Items
	}
	if err := applyEnum(tag, target); err != nil {
		return err
	}
	if err := applyBounds(tag, target); err != nil {
		return err
	}
	if err := applyCounts(tag, s, target); err != nil {
		return err
	}
	if v, ok := tag.Lookup("pattern"); ok {
		target.Pattern = v
	}
	if v, ok := tag.Lookup("format"); ok {
		target.Format = v
	}
	return applyDefault(tag, s)
}

func applyEnum(tag reflect.StructTag, target *Schema) error {
	v, ok := tag.Lookup("enum")
	if !ok {
		return nil
	}
	values, err := parseList(v, target)
	if err != nil {
		return fmt.Errorf("tag enum:%q: %w", v, err)
	}
	if allowsNull(target) && !slices.Contains(values, nil) {
		values = append(values, nil) // a pointer may be nil: enum must not reject the null its type allows
	}
	target.Enum = values
	return nil
}

// applyBounds sets the numeric bounds the tags give.
func applyBounds(tag reflect.StructTag, target *Schema) error {
	for _, b := range []struct {
		key string
		dst **float64
	}{
		{"minimum", &target.Minimum},
		{"maximum", &target.Maximum},
		{"exclusiveMinimum", &target.ExclusiveMinimum},
		{"exclusiveMaximum", &target.ExclusiveMaximum},
	} {
		if v, ok := tag.Lookup(b.key); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("tag %s:%q: not a number", b.key, v)
			}
			*b.dst = &f
		}
	}
	return nil
}

// applyCounts sets the bounds on length the tags give: of the values (target), and of the
// array itself (s).
func applyCounts(tag reflect.StructTag, s, target *Schema) error {
	for _, b := range []struct {
		key string
		dst **int
	}{
		{"minLength", &target.MinLength},
		{"maxLength", &target.MaxLength},
		{"minItems", &s.MinItems},
		{"maxItems", &s.MaxItems},
	} {
		if v, ok := tag.Lookup(b.key); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("tag %s:%q: not a non-negative integer", b.key, v)
			}
			*b.dst = &n
		}
	}
	return nil
}

func applyDefault(tag reflect.StructTag, s *Schema) error {
	v, ok := tag.Lookup("default")
	if !ok {
		return nil
	}
	d, err := parseValue(v, s)
	if err != nil {
		return fmt.Errorf("tag default:%q: %w", v, err)
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("tag default:%q: %w", v, err)
	}
	s.Default = raw
	return nil
}

func isArray(s *Schema) bool {
	return s.Type == "array" || (len(s.Types) > 0 && containsString(s.Types, "array"))
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// schemaType returns the non-null type of s, or "" if it has none or several.
func schemaType(s *Schema) string {
	if s.Type != "" {
		return s.Type
	}
	var found string
	for _, t := range s.Types {
		if t == "null" {
			continue
		}
		if found != "" {
			return ""
		}
		found = t
	}
	return found
}

// parseList parses a comma-separated list (or a JSON array) of values of s's type.
func parseList(v string, s *Schema) ([]any, error) {
	if strings.HasPrefix(strings.TrimSpace(v), "[") {
		var values []any
		if err := json.Unmarshal([]byte(v), &values); err != nil {
			return nil, fmt.Errorf("not a JSON array: %v", err)
		}
		return values, nil
	}
	parts := strings.Split(v, ",")
	values := make([]any, 0, len(parts))
	for _, p := range parts {
		x, err := parseValue(strings.TrimSpace(p), s)
		if err != nil {
			return nil, err
		}
		values = append(values, x)
	}
	return values, nil
}

// tagParsers parse a tag value as a value of each scalar type, and say what the value is not
// when it does not parse.
var tagParsers = map[string]struct {
	parse func(string) (any, error)
	what  string
}{
	"string":  {func(v string) (any, error) { return v, nil }, "a string"},
	"integer": {func(v string) (any, error) { return strconv.ParseInt(v, 10, 64) }, "an integer"},
	"number":  {func(v string) (any, error) { return strconv.ParseFloat(v, 64) }, "a number"},
	"boolean": {func(v string) (any, error) { return strconv.ParseBool(v) }, "a boolean"},
}

// parseValue parses a tag value as a value of s's type; values of other types are JSON.
func parseValue(v string, s *Schema) (any, error) {
	p, ok := tagParsers[schemaType(s)]
	if !ok {
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			return nil, fmt.Errorf("%q is not JSON: %v", v, err)
		}
		return x, nil
	}
	x, err := p.parse(v)
	if err != nil {
		return nil, fmt.Errorf("%q is not %s", v, p.what)
	}
	return x, nil
}
