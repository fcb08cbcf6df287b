package schema

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// strictMaxDepth is OpenAI strict mode's limit on object nesting.
const strictMaxDepth = 10

// strictMaxProperties is OpenAI strict mode's limit on object properties in one schema.
const strictMaxProperties = 5000

// strictFormats are the string formats OpenAI strict mode accepts.
var strictFormats = []string{"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}

// Strict returns s rewritten for OpenAI strict mode (function calling with strict: true, or
// response_format json_schema with strict: true), with the constraints it had to drop listed in
// words for the description. It returns an error naming the keyword and place when s uses what
// strict mode cannot express. A nil s is the empty object.
func Strict(s *Schema) (*Schema, []string, error) { return strict(s) }

func strict(in *Schema) (*Schema, []string, error) {
	if in == nil {
		return &Schema{Type: "object", Properties: map[string]*Schema{}, AdditionalProperties: falseSchema()}, nil, nil
	}
	s := in.CloneSchemas()
	s.Schema, s.ID = "", ""
	if err := checkStrictRoot(s); err != nil {
		return nil, nil, err
	}
	if err := moveDefinitions(s); err != nil {
		return nil, nil, err
	}
	st := &strictState{}
	if err := st.visitAll(s); err != nil {
		return nil, nil, err
	}
	return s, st.notes, nil
}

// checkStrictRoot checks that the root is a plain object, and gives one without declared
// arguments ({"type":"object"}, as MCP servers write it) none, as for a nil schema, rather
// than turn it into JSON text.
func checkStrictRoot(s *Schema) error {
	if schemaType(s) != "object" || s.AnyOf != nil || s.OneOf != nil {
		return fmt.Errorf("the root must be a plain object schema")
	}
	if len(s.Properties) == 0 && isFreeForm(s) {
		s.Properties, s.AdditionalProperties = map[string]*Schema{}, falseSchema()
	}
	if isRecord(s) {
		return fmt.Errorf("the root must be a plain object schema, not a map")
	}
	return nil
}

// moveDefinitions moves draft-07's definitions into $defs, which is what strict mode knows,
// and points the references to them there.
func moveDefinitions(s *Schema) error {
	if len(s.Definitions) == 0 {
		return nil
	}
	if s.Defs == nil {
		s.Defs = map[string]*Schema{}
	}
	for name, d := range s.Definitions {
		if _, clash := s.Defs[name]; clash {
			return fmt.Errorf("%q is both in $defs and in definitions", name)
		}
		s.Defs[name] = d
	}
	s.Definitions = nil
	walk(s, func(x *Schema) {
		if name, ok := strings.CutPrefix(x.Ref, "#/definitions/"); ok {
			x.Ref = "#/$defs/" + name
		}
	})
	return nil
}

// visitAll visits the root and each definition, and checks the properties they come to.
func (st *strictState) visitAll(s *Schema) error {
	if err := st.visit(s, "", 0); err != nil {
		return err
	}
	for name, d := range s.Defs {
		if err := st.visit(d, "$defs/"+name, 1); err != nil {
			return err
		}
	}
	if st.properties > strictMaxProperties {
		return fmt.Errorf("the schema has %d properties, more than strict mode's %d", st.properties, strictMaxProperties)
	}
	return nil
}

type strictState struct {
	notes      []string
	properties int // object properties counted so far
}

func falseSchema() *Schema { return &Schema{Not: &Schema{}} }

func (st *strictState) note(path, format string, args ...any) {
	where := path
	if where == "" {
		where = "arguments"
	}
	st.notes = append(st.notes, where+" "+fmt.Sprintf(format, args...))
}

func (st *strictState) visit(s *Schema, path string, depth int) error {
	if depth > strictMaxDepth {
		return fmt.Errorf("%s is nested deeper than strict mode's %d levels", orRoot(path), strictMaxDepth)
	}
	if s.Ref != "" { // $defs are visited on their own
		return st.visitRef(s, path)
	}
	if kw := strictUnsupported(s); kw != "" {
		return fmt.Errorf("%s uses %s, which strict mode does not support", orRoot(path), kw)
	}
	if s.OneOf != nil { // strict mode has anyOf only; for disjoint branches they mean the same
		s.AnyOf, s.OneOf = append(s.AnyOf, s.OneOf...), nil
	}
	st.dropUnsupported(s, path)
	switch {
	case isFreeForm(s):
		toJSONText(s)
		return nil
	case isRecord(s):
		toEntries(s)
	}
	return st.visitInside(s, path, depth)
}

// visitInside visits what s holds: properties, items and alternatives.
func (st *strictState) visitInside(s *Schema, path string, depth int) error {
	if schemaType(s) == "object" || s.Properties != nil {
		if err := st.visitObject(s, path, depth); err != nil {
			return err
		}
	}
	if err := st.visitItems(s, path, depth); err != nil {
		return err
	}
	for _, a := range s.AnyOf {
		if err := st.visit(a, path, depth); err != nil {
			return err
		}
	}
	return nil
}

// visitItems visits an array's items; items without a schema become JSON text.
func (st *strictState) visitItems(s *Schema, path string, depth int) error {
	if s.Items != nil {
		return st.visit(s.Items, path+"[]", depth)
	}
	if schemaType(s) == "array" {
		s.Items = &Schema{}
		toJSONText(s.Items)
	}
	return nil
}

// visitRef checks a reference: to # or #/$defs/NAME only, with nothing beside it but
// annotations, which go on a wrapper (strict mode rejects any keyword beside $ref).
func (st *strictState) visitRef(s *Schema, path string) error {
	if name, ok := strings.CutPrefix(s.Ref, "#/$defs/"); s.Ref != "#" && (!ok || strings.Contains(name, "/")) {
		return fmt.Errorf("%s uses $ref %q; strict mode refers only to # and #/$defs/NAME", orRoot(path), s.Ref)
	}
	st.dropUnsupported(s, path)
	bare := *s
	bare.Title, bare.Description = "", ""
	if !reflect.DeepEqual(bare, Schema{Ref: s.Ref}) {
		return fmt.Errorf("%s uses keywords beside $ref, which strict mode does not support", orRoot(path))
	}
	if s.Title != "" || s.Description != "" {
		*s = Schema{Title: s.Title, Description: s.Description, AnyOf: []*Schema{{Ref: s.Ref}}}
	}
	return nil
}

// strictUnsupported names the first keyword of s that strict mode cannot express; "" when
// none.
func strictUnsupported(s *Schema) string {
	for _, kw := range []struct {
		name string
		used bool
	}{
		{"allOf", s.AllOf != nil}, {"not", s.Not != nil && !isFalse(s)}, {"if", s.If != nil},
		{"dependentRequired", s.DependentRequired != nil}, {"dependentSchemas", s.DependentSchemas != nil},
		{"patternProperties", s.PatternProperties != nil}, {"unevaluatedProperties", s.UnevaluatedProperties != nil},
		{"unevaluatedItems", s.UnevaluatedItems != nil}, {"propertyNames", s.PropertyNames != nil},
		{"contains", s.Contains != nil}, {"prefixItems", s.PrefixItems != nil || s.ItemsArray != nil},
	} {
		if kw.used {
			return kw.name
		}
	}
	return ""
}

// visitObject closes an object, as strict mode wants: no additional properties, every
// property required (the optional ones nullable instead), each property visited.
func (st *strictState) visitObject(s *Schema, path string, depth int) error {
	s.AdditionalProperties = falseSchema()
	if s.Properties == nil {
		s.Properties = map[string]*Schema{} // strict mode rejects an object without properties
	}
	st.properties += len(s.Properties)
	order := propertyOrder(s)
	for _, name := range order {
		p := s.Properties[name]
		if !slices.Contains(s.Required, name) {
			p = nullable(p)
			s.Properties[name] = p
		}
		if err := st.visit(p, join(path, name), depth+1); err != nil {
			return err
		}
	}
	s.Required = order
	return nil
}

func (st *strictState) dropUnsupported(s *Schema, path string) {
	if s.Default != nil {
		st.note(path, "defaults to %s", s.Default)
		s.Default = nil
	}
	st.dropCounts(s, path)
	if s.Format != "" && !slices.Contains(strictFormats, s.Format) {
		st.note(path, "is in %s format", s.Format)
		s.Format = ""
	}
	s.Examples, s.Comment, s.ContentEncoding, s.ContentMediaType = nil, "", "", ""
	s.ReadOnly, s.WriteOnly, s.Deprecated = false, false, false
	s.Schema, s.ID, s.Anchor, s.DynamicAnchor = "", "", "", ""
	s.Extra = nil // unknown keywords (x-...), which strict mode rejects
}

// dropCounts drops the bounds on length, items and properties, which strict mode does not
// support, noting each.
func (st *strictState) dropCounts(s *Schema, path string) {
	if s.MinLength != nil {
		st.note(path, "has at least %d characters", *s.MinLength)
		s.MinLength = nil
	}
	if s.MaxLength != nil {
		st.note(path, "has at most %d characters", *s.MaxLength)
		s.MaxLength = nil
	}
	if s.UniqueItems {
		st.note(path, "has no duplicate items")
		s.UniqueItems = false
	}
	if s.MinProperties != nil || s.MaxProperties != nil {
		st.note(path, "has between %s and %s properties", intOr(s.MinProperties, "0"), intOr(s.MaxProperties, "any number of"))
		s.MinProperties, s.MaxProperties = nil, nil
	}
}

// isFreeForm reports whether s accepts any value, or any object, with nothing to constrain it:
// strict mode and Gemini need a type, so such values travel as JSON text.
func isFreeForm(s *Schema) bool {
	if isEmpty(s) && s.Const == nil && s.Enum == nil {
		return true
	}
	return schemaType(s) == "object" && len(s.Properties) == 0 && s.AnyOf == nil &&
		(s.AdditionalProperties == nil || isEmpty(s.AdditionalProperties))
}

const jsonTextNote = "a JSON value written as JSON text"

func toJSONText(s *Schema) {
	desc := strings.TrimSpace(s.Description + " (" + jsonTextNote + ")")
	nullOK := allowsNull(s) || isEmpty(s) // the empty schema accepts null too
	*s = Schema{Type: "string", Description: desc}
	if nullOK {
		s.Type, s.Types = "", []string{"string", "null"}
	}
}

// toEntries turns a map schema into a list of {key, value} entries, which strict mode and
// Gemini can express; Inbound turns the list back into a map.
func toEntries(s *Schema) {
	value := s.AdditionalProperties
	desc := strings.TrimSpace(s.Description + " (a map, given as a list of key/value entries)")
	nullOK := allowsNull(s)
	*s = Schema{
		Type:        "array",
		Description: desc,
		Items: &Schema{
			Type:                 "object",
			Properties:           map[string]*Schema{"key": {Type: "string"}, "value": value},
			PropertyOrder:        []string{"key", "value"},
			Required:             []string{"key", "value"},
			AdditionalProperties: falseSchema(),
		},
	}
	if nullOK {
		s.Type, s.Types = "", []string{"array", "null"}
	}
}

// nullable returns p widened to accept null, as strict mode requires for optional properties.
func nullable(p *Schema) *Schema {
	switch {
	case allowsNull(p):
		return p
	case p.Ref != "" || p.Const != nil:
		// The annotations go on the wrapper: strict mode rejects keywords beside $ref.
		inner := *p
		inner.Title, inner.Description = "", ""
		return &Schema{Title: p.Title, Description: p.Description, AnyOf: []*Schema{&inner, {Type: "null"}}}
	case p.AnyOf != nil || p.OneOf != nil:
		p.AnyOf = append(append(p.AnyOf, p.OneOf...), &Schema{Type: "null"})
		p.OneOf = nil
		// A type beside the alternatives must admit null too, or the null branch never
		// matches ({"type": "object", "anyOf": [...]}).
		addNullType(p)
	default:
		addNullType(p)
		if p.Enum != nil {
			p.Enum = append(p.Enum, nil)
		}
	}
	return p
}

// addNullType adds null to the types p names, if it names any. (It names no null: p does not
// allow null.)
func addNullType(p *Schema) {
	if p.Type != "" || p.Types != nil {
		p.Types, p.Type = append(types(p), "null"), ""
	}
}

// propertyOrder lists s's properties in declaration order where known, then by name.
func propertyOrder(s *Schema) []string {
	order := make([]string, 0, len(s.Properties))
	for _, n := range s.PropertyOrder {
		if _, ok := s.Properties[n]; ok && !slices.Contains(order, n) {
			order = append(order, n)
		}
	}
	var rest []string
	for n := range s.Properties {
		if !slices.Contains(order, n) {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	return append(order, rest...)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orRoot(path string) string {
	if path == "" {
		return "the argument object"
	}
	return path
}

func intOr(p *int, def string) string {
	if p == nil {
		return def
	}
	return fmt.Sprint(*p)
}
