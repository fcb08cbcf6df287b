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
	if t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return true
	}
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
		if r.arraysNotNull && len(s.Types) == 2 && s.Types[0] == "null" && s.Types[1] == "array" {
			s.Types, s.Type = nil, "array"
		}
		return r.refine(t.Elem(), s.Items, where+"[]")
	case reflect.Array:
		return r.refine(t.Elem(), s.Items, where+"[]")
	case reflect.Map:
		return r.refine(t.Elem(), s.AdditionalProperties, where+"[key]")
	case reflect.Struct:
		if s.Properties == nil {
			return nil // a type with a schema of its own, such as time.Time
		}
		for _, f := range reflect.VisibleFields(t) {
			if f.Anonymous || !f.IsExported() {
				continue
			}
			name, ok := jsonName(f)
			if !ok {
				continue
			}
			fs := s.Properties[name]
			if fs == nil {
				continue
			}
			fieldWhere := where + "." + f.Name
			if err := r.refine(f.Type, fs, fieldWhere); err != nil {
				return err
			}
			if hasConstraintTag(f.Tag) {
				r.constrained = true
			}
			if err := applyTags(f.Tag, fs); err != nil {
				return fmt.Errorf("field %s: %w", fieldWhere, err)
			}
		}
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
	if v, ok := tag.Lookup("enum"); ok {
		values, err := parseList(v, target)
		if err != nil {
			return fmt.Errorf("tag enum:%q: %w", v, err)
		}
		if allowsNull(target) && !slices.ContainsFunc(values, func(x any) bool { return x == nil }) {
			values = append(values, nil) // a pointer may be nil: enum must not reject the null its type allows
		}
		target.Enum = values
	}
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
	if v, ok := tag.Lookup("pattern"); ok {
		target.Pattern = v
	}
	if v, ok := tag.Lookup("format"); ok {
		target.Format = v
	}
	if v, ok := tag.Lookup("default"); ok {
		d, err := parseValue(v, s)
		if err != nil {
			return fmt.Errorf("tag default:%q: %w", v, err)
		}
		raw, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("tag default:%q: %w", v, err)
		}
		s.Default = raw
	}
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

// parseValue parses a tag value as a value of s's type.
func parseValue(v string, s *Schema) (any, error) {
	switch schemaType(s) {
	case "string":
		return v, nil
	case "integer":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", v)
		}
		return n, nil
	case "number":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", v)
		}
		return f, nil
	case "boolean":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not a boolean", v)
		}
		return b, nil
	default:
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			return nil, fmt.Errorf("%q is not JSON: %v", v, err)
		}
		return x, nil
	}
}
