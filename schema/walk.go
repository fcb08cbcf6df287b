package schema

import "reflect"

// children calls fn for every direct subschema of s, with a pointer to where it is held so fn
// may replace it.
func children(s *Schema, fn func(**Schema)) {
	for _, p := range []**Schema{&s.Items, &s.AdditionalProperties, &s.AdditionalItems,
		&s.Contains, &s.Not, &s.If, &s.Then, &s.Else, &s.PropertyNames,
		&s.UnevaluatedItems, &s.UnevaluatedProperties, &s.ContentSchema} {
		if *p != nil {
			fn(p)
		}
	}
	for _, list := range [][]*Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems, s.ItemsArray} {
		for i := range list {
			fn(&list[i])
		}
	}
	for _, m := range []map[string]*Schema{s.Properties, s.PatternProperties, s.Defs,
		s.Definitions, s.DependentSchemas, s.DependencySchemas} {
		for k := range m {
			v := m[k]
			fn(&v)
			m[k] = v
		}
	}
}

// walk calls fn for s and every schema below it, parents before children.
func walk(s *Schema, fn func(*Schema)) {
	if s == nil {
		return
	}
	fn(s)
	children(s, func(p **Schema) { walk(*p, fn) })
}

// isFalse reports whether s is the schema that rejects everything: JSON false, which
// jsonschema-go represents as {"not": {}}, possibly with annotations.
func isFalse(s *Schema) bool {
	if s == nil || s.Not == nil || !reflect.ValueOf(*s.Not).IsZero() {
		return false
	}
	c := *s
	c.Not, c.Title, c.Description, c.Comment = nil, "", "", ""
	return reflect.ValueOf(c).IsZero()
}

// isEmpty reports whether s is the schema that accepts everything (JSON true or {}).
func isEmpty(s *Schema) bool {
	if s == nil {
		return true
	}
	for _, set := range []bool{
		s.Type != "", len(s.Types) > 0, s.Properties != nil, s.Items != nil, s.AdditionalProperties != nil,
		s.Enum != nil, s.Const != nil, s.Ref != "", s.AnyOf != nil, s.OneOf != nil, s.AllOf != nil, s.Not != nil,
	} {
		if set {
			return false
		}
	}
	return true
}

// isRecord reports whether s describes a map: an object whose keys are free and whose values
// follow one schema.
func isRecord(s *Schema) bool {
	return schemaType(s) == "object" && len(s.Properties) == 0 &&
		s.AdditionalProperties != nil && !isFalse(s.AdditionalProperties)
}

// types lists the JSON types s admits through type/types ("" entries omitted).
func types(s *Schema) []string {
	if s.Type != "" {
		return []string{s.Type}
	}
	return s.Types
}

func allowsNull(s *Schema) bool {
	if containsString(types(s), "null") {
		return true
	}
	for _, a := range append(append([]*Schema{}, s.AnyOf...), s.OneOf...) {
		if containsString(types(a), "null") {
			return true
		}
	}
	for _, e := range s.Enum {
		if e == nil {
			return true
		}
	}
	return false
}
