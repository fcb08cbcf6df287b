package openapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// argsGen makes a tool's arguments from its input schema, as a careful client would: the
// required properties only, each a value the schema allows (its const, its first enum value,
// its first example, or one made for its type, format, bounds and pattern). It reads the
// schema as JSON, its $refs pointing into the same document ("#/$defs/...").
type argsGen struct {
	root map[string]any
}

// errNoValue says the generator found no value for a schema (a pattern it cannot meet, say).
var errNoValue = errors.New("no value the schema allows")

// generateArgs returns arguments for the input schema (JSON).
func generateArgs(input json.RawMessage) (map[string]any, error) {
	var root map[string]any
	if len(input) == 0 || string(input) == "null" {
		return map[string]any{}, nil
	}
	if err := json.Unmarshal(input, &root); err != nil {
		return nil, err
	}
	g := &argsGen{root: root}
	v, err := g.value(root, 0)
	if err != nil {
		return nil, err
	}
	args, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the input schema is not an object's: %v", v)
	}
	return args, nil
}

// value is a value s allows.
func (g *argsGen) value(s map[string]any, depth int) (any, error) {
	if depth > 24 {
		return nil, fmt.Errorf("schemas nested too deep: %w", errNoValue)
	}
	s, err := g.resolve(s)
	if err != nil {
		return nil, err
	}
	if v, ok := g.given(s); ok {
		return v, nil
	}
	if v, ok, err := g.composed(s, depth); ok || err != nil {
		return v, err
	}
	switch typeOf(s) {
	case "object":
		return g.object(s, depth)
	case "array":
		return g.array(s, depth)
	case "string":
		return stringValue(s)
	case "integer", "number":
		return numberValue(s), nil
	case "boolean":
		return true, nil
	case "null":
		return nil, nil
	}
	return "x", nil // no type: anything goes
}

// resolve follows s's $ref within the schema, when it has one.
func (g *argsGen) resolve(s map[string]any) (map[string]any, error) {
	for range 32 {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s, nil
		}
		target, err := g.pointer(ref)
		if err != nil {
			return nil, err
		}
		s = target
	}
	return nil, fmt.Errorf("a $ref chain too long: %w", errNoValue)
}

// pointer is the schema a local $ref ("#/a/b") names.
func (g *argsGen) pointer(ref string) (map[string]any, error) {
	if !strings.HasPrefix(ref, "#") {
		return nil, fmt.Errorf("$ref %q is not local: %w", ref, errNoValue)
	}
	var cur any = g.root
	for _, part := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(ref, "#"), "/"), "/") {
		if part == "" {
			continue
		}
		part = strings.NewReplacer("~1", "/", "~0", "~").Replace(part)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q: %w", ref, errNoValue)
		}
		cur = m[part]
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("$ref %q names no schema: %w", ref, errNoValue)
	}
	return m, nil
}

// given is the value the schema names itself: its const, first non-null enum value or first
// example.
func (g *argsGen) given(s map[string]any) (any, bool) {
	if v, ok := s["const"]; ok {
		return v, true
	}
	if enum, ok := s["enum"].([]any); ok {
		for _, v := range enum {
			if v != nil {
				return v, true
			}
		}
	}
	if ex, ok := s["examples"].([]any); ok && len(ex) > 0 && ex[0] != nil {
		return ex[0], true
	}
	return nil, false
}

// composed is a value for allOf (the branches' objects merged), oneOf and anyOf (the first
// branch that makes one); ok is false when s has none of them.
func (g *argsGen) composed(s map[string]any, depth int) (any, bool, error) {
	if all, ok := s["allOf"].([]any); ok && len(all) > 0 {
		merged := map[string]any{}
		for _, b := range all {
			bs, _ := b.(map[string]any)
			v, err := g.value(bs, depth+1)
			if err != nil {
				return nil, true, err
			}
			m, isObject := v.(map[string]any)
			if !isObject {
				return v, true, nil
			}
			for k, x := range m {
				merged[k] = x
			}
		}
		// The schema's own required properties, beside the branches'.
		own, err := g.object(s, depth)
		if err != nil {
			return nil, true, err
		}
		for k, x := range own {
			merged[k] = x
		}
		return merged, true, nil
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		branches, ok := s[key].([]any)
		if !ok {
			continue
		}
		for _, b := range branches {
			bs, _ := b.(map[string]any)
			if typeOf(bs) == "null" {
				continue
			}
			if v, err := g.value(bs, depth+1); err == nil {
				return v, true, nil
			}
		}
		return nil, true, fmt.Errorf("no branch of %s: %w", key, errNoValue)
	}
	return nil, false, nil
}

// object is an object of s's required properties.
func (g *argsGen) object(s map[string]any, depth int) (map[string]any, error) {
	out := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	required, _ := s["required"].([]any)
	for _, r := range required {
		name, _ := r.(string)
		ps, _ := props[name].(map[string]any)
		if ps == nil {
			ps = map[string]any{"type": "string"}
		}
		v, err := g.value(ps, depth+1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// array is an array of as many items as s needs at least.
func (g *argsGen) array(s map[string]any, depth int) ([]any, error) {
	n := int(number(s, "minItems", 0))
	items, _ := s["items"].(map[string]any)
	out := []any{}
	for range n {
		v, err := g.value(items, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// typeOf is s's type: the first that is not null, object when it has properties.
func typeOf(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if name, _ := x.(string); name != "null" {
				return name
			}
		}
		return "null"
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	return ""
}

// formats are a value of each string format a document may assert.
var formats = map[string]string{
	"date-time": "2024-01-02T03:04:05Z", "date": "2024-01-02", "time": "03:04:05Z", "email": "a@example.com",
	"uri": "https://example.com/a", "url": "https://example.com/a", "uri-reference": "https://example.com/a",
	"uuid": "123e4567-e89b-12d3-a456-426614174000", "ipv4": "192.0.2.1", "ipv6": "2001:db8::1", "hostname": "example.com",
	"byte": "YQ==", "binary": "a", "int64": "1", "int32": "1", "duration": "PT1S",
}

// patternCandidates are tried against a pattern without an example, in turn.
var patternCandidates = []string{"a", "abc", "A1", "1", "123", "2024-01-02", "2024-01-02T03:04:05Z", "https://example.com/a",
	"123e4567-e89b-12d3-a456-426614174000", "a@example.com", "urn:altinn:a:b", "a-b", "v1", "AB", "a.b"}

// stringValue is a string s allows.
func stringValue(s map[string]any) (any, error) {
	v := "a"
	if f, ok := formats[fmt.Sprint(s["format"])]; ok {
		v = f
	}
	if p, ok := s["pattern"].(string); ok {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", p, errNoValue)
		}
		if !re.MatchString(v) {
			v = ""
			for _, c := range patternCandidates {
				if re.MatchString(c) {
					v = c
					break
				}
			}
			if v == "" {
				return nil, fmt.Errorf("pattern %q: %w", p, errNoValue)
			}
		}
	}
	if n := int(number(s, "minLength", 0)); len(v) < n {
		v += strings.Repeat("a", n-len(v))
	}
	if n := int(number(s, "maxLength", -1)); n >= 0 && len(v) > n {
		v = v[:n]
	}
	return v, nil
}

// numberValue is a number within s's bounds.
func numberValue(s map[string]any) any {
	v := 1.0
	if lo := number(s, "minimum", -1e18); lo > -1e18 {
		v = lo
	}
	if lo := number(s, "exclusiveMinimum", -1e18); lo > -1e18 {
		v = lo + 1
	}
	if hi := number(s, "maximum", 1e18); v > hi {
		v = hi
	}
	if m := number(s, "multipleOf", 0); m > 0 {
		v = m * float64(int64(v/m+0.999999))
	}
	return v
}

// number is s's numeric keyword, or def.
func number(s map[string]any, key string, def float64) float64 {
	if f, ok := s[key].(float64); ok {
		return f
	}
	return def
}
