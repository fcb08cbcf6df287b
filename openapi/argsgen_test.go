package openapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/schema"
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
		var first any
		found := false
		for _, b := range branches {
			bs, _ := b.(map[string]any)
			bs, err := g.resolve(bs)
			if err != nil {
				continue
			}
			bs = inherit(s, key, bs)
			if typeOf(bs) == "null" {
				continue
			}
			v, err := g.value(bs, depth+1)
			if err != nil {
				continue
			}
			// A path or query parameter travels as text, which a mock server reading it
			// may take for another branch too (1 for both oneOf's integer and its string):
			// a value whose text no other branch takes is preferred.
			if key == "anyOf" || !g.textFitsOther(v, bs, branches) {
				return v, true, nil
			}
			if !found {
				first, found = v, true
			}
		}
		if found {
			return first, true, nil
		}
		return nil, true, fmt.Errorf("no branch of %s: %w", key, errNoValue)
	}
	return nil, false, nil
}

// inherit is a branch of parent's oneOf or anyOf (key) read with the parent's own keywords: a
// branch that only names required properties ({"required": ["state"]}) takes the parent's
// type and properties, and the parent's required ones stay required.
func inherit(parent map[string]any, key string, branch map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range parent {
		if k != key && k != "oneOf" && k != "anyOf" && k != "allOf" {
			out[k] = v
		}
	}
	for k, v := range branch {
		switch k {
		case "required":
			own, _ := out["required"].([]any)
			more, _ := v.([]any)
			out[k] = append(slices.Clone(own), more...)
		case "properties":
			merged := map[string]any{}
			if own, ok := out[k].(map[string]any); ok {
				maps.Copy(merged, own)
			}
			if more, ok := v.(map[string]any); ok {
				maps.Copy(merged, more)
			}
			out[k] = merged
		default:
			out[k] = v
		}
	}
	return out
}

// textFitsOther says whether v's text, as a parameter carries it, would also be read as a
// value of a branch other than the one it was made for (compared by type: a string branch
// without enum, const or pattern takes any text; a number branch, a number's text; a boolean
// branch, true or false).
func (g *argsGen) textFitsOther(v any, made map[string]any, branches []any) bool {
	text := fmt.Sprint(v)
	for _, b := range branches {
		bs, _ := b.(map[string]any)
		bs, err := g.resolve(bs)
		if err != nil || typeOf(bs) == typeOf(made) {
			continue
		}
		switch typeOf(bs) {
		case "string":
			_, enum := bs["enum"]
			_, cnst := bs["const"]
			_, pattern := bs["pattern"]
			if !enum && !cnst && !pattern {
				return true
			}
		case "integer", "number":
			if _, err := strconv.ParseFloat(text, 64); err == nil {
				return true
			}
		case "boolean":
			if text == "true" || text == "false" {
				return true
			}
		}
	}
	return false
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
				v = fromPattern(p)
			}
			if !re.MatchString(v) {
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
	if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(v) {
		return nil, fmt.Errorf("pattern %q with the length bounds: %w", p, errNoValue)
	}
	return v, nil
}

// fromPattern is a string the regular expression matches, made from its syntax: each
// repetition its least count, each alternation its first branch, each class one of its
// characters ('a', 'A' or '1' when it has them); "" when it cannot make one.
func fromPattern(p string) string {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return ""
	}
	var b strings.Builder
	if !writeMatch(&b, re.Simplify()) {
		return ""
	}
	return b.String()
}

func writeMatch(b *strings.Builder, re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpNoMatch:
		return false
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		if len(re.Rune) < 2 {
			return false
		}
		b.WriteRune(classRune(re.Rune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte('a')
	case syntax.OpCapture:
		return writeMatch(b, re.Sub[0])
	case syntax.OpPlus:
		return writeMatch(b, re.Sub[0])
	case syntax.OpRepeat:
		for range re.Min {
			if !writeMatch(b, re.Sub[0]) {
				return false
			}
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !writeMatch(b, sub) {
				return false
			}
		}
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			var alt strings.Builder
			if writeMatch(&alt, sub) {
				b.WriteString(alt.String())
				return true
			}
		}
		return false
	}
	// The rest match the empty string: *, ?, anchors, word boundaries, the empty match.
	return true
}

// classRune is a character of a class (its ranges, lo-hi pairs): 'a', 'A' or '1' when the
// class has one, its first otherwise.
func classRune(ranges []rune) rune {
	for _, want := range []rune{'a', 'A', '1'} {
		for i := 0; i+1 < len(ranges); i += 2 {
			if ranges[i] <= want && want <= ranges[i+1] {
				return want
			}
		}
	}
	return ranges[0]
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

// TestGenerateArgs: the generator makes arguments that the schema compiler accepts for the
// shapes of the real documents that it once could not meet (a pattern none of
// patternCandidates matches, anyOf branches that only name required properties) and, for a
// oneOf whose branches a parameter's text could match both of, the value only one takes.
func TestGenerateArgs(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         string // the arguments, as JSON; "" when any valid ones do
	}{
		{"ssh key pattern", `{"type":"object","required":["key"],"properties":{"key":{"type":"string",
			"pattern":"^ssh-(rsa|dss|ed25519) |^ecdsa-sha2-nistp(256|384|521) "}}}`, `{"key":"ssh-rsa "}`},
		{"digest", `{"type":"object","required":["d"],"properties":{"d":{"type":"string","pattern":"^sha256:[a-f0-9]{64}$"}}}`,
			`{"d":"sha256:` + strings.Repeat("a", 64) + `"}`},
		{"base64", `{"type":"object","required":["v"],"properties":{"v":{"type":"string",
			"pattern":"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$"}}}`, `{"v":"aa=="}`},
		{"version", `{"type":"object","required":["v"],"properties":{"v":{"type":"string","pattern":"^\\d+\\.\\d+\\.\\d+$"}}}`, `{"v":"1.1.1"}`},
		{"pattern and minLength", `{"type":"object","required":["r"],"properties":{"r":{"type":"string","pattern":"^refs/","minLength":8}}}`, ""},
		{"anyOf of required names", `{"type":"object","required":["body"],"properties":{"body":{"type":"object",
			"additionalProperties":false,"properties":{"state":{"type":"string","enum":["open"]},"note":{"type":"string"}},
			"anyOf":[{"required":["state"]},{"required":["note"]}]}}}`, `{"body":{"state":"open"}}`},
		{"oneOf of required names beside the parent's", `{"type":"object","required":["name"],"properties":{
			"name":{"type":"string"},"alerts":{"type":"array","minItems":1,"items":{"type":"integer"}},"filter":{"type":"string"}},
			"oneOf":[{"required":["alerts"]},{"required":["filter"]}]}`, `{"alerts":[1],"name":"a"}`},
		{"oneOf integer or string", `{"type":"object","required":["id"],"properties":{"id":{"oneOf":[{"type":"integer"},{"type":"string"}]}}}`,
			`{"id":"a"}`},
		{"oneOf integer or an enum", `{"type":"object","required":["id"],"properties":{"id":{"oneOf":[{"type":"integer"},{"type":"string","enum":["latest"]}]}}}`,
			`{"id":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, err := generateArgs(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			c, err := schema.CompileJSON([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(args)
			var decoded any
			if err := json.Unmarshal(raw, &decoded); err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(decoded); err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
			if tc.want != "" && string(raw) != tc.want {
				t.Errorf("got %s, want %s", raw, tc.want)
			}
		})
	}
}
