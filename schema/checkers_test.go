package schema

// Provider checkers: each encodes one provider's published rules for a tool set in its wire
// shape (what ToolSet.MarshalJSON produces and the provider receives) and reports every
// violation with the JSON path where it occurs. They read the wire JSON generically, never the
// package's own types, so they judge the rendering the way the provider would.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// checker checks a tool set in its wire shape.
type checker func(wire []byte) []error

var checkers = map[Dialect]checker{
	OpenAI:       checkOpenAI,
	OpenAIStrict: checkOpenAIStrict,
	Anthropic:    checkAnthropic,
	Gemini:       checkGemini,
	MCP:          checkMCP,
}

var (
	// OpenAI function names and Anthropic tool names.
	openAINameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	// Gemini FunctionDeclaration.name: starts with a letter or underscore, then letters,
	// digits, underscores, dots, colons and dashes, at most 64 characters.
	geminiNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`)
	// MCP Tool.name (2025-11-25): 1 to 128 characters of A-Z a-z 0-9 _ - .
	mcpNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

// report collects violations.
type report struct{ errs []error }

func (r *report) add(path, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

func at(path, key string) string { return path + "." + key }
func idx(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}

func parseWire(wire []byte, r *report) []any {
	var v any
	if err := json.Unmarshal(wire, &v); err != nil {
		r.add("$", "not JSON: %v", err)
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		r.add("$", "tools must be a JSON array, got %s", jsonKind(v))
		return nil
	}
	return list
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func checkName(r *report, path string, v any, re *regexp.Regexp, rule string, seen map[string]string) {
	name, ok := v.(string)
	if !ok {
		r.add(path, "name must be a string, got %s", jsonKind(v))
		return
	}
	if !re.MatchString(name) {
		r.add(path, "name %q does not match %s", name, rule)
	}
	if prev, dup := seen[name]; dup {
		r.add(path, "duplicate tool name %q (also at %s)", name, prev)
	}
	seen[name] = path
}

func checkDescription(r *report, path string, m map[string]any) {
	if d, ok := m["description"]; ok {
		if _, isString := d.(string); !isString {
			r.add(at(path, "description"), "description must be a string, got %s", jsonKind(d))
		}
	}
}

func checkKeys(r *report, path string, m map[string]any, allowed ...string) {
	for _, k := range sortedKeys(m) {
		if !slices.Contains(allowed, k) {
			r.add(at(path, k), "unknown field %q", k)
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkObjectSchema checks what every provider requires of an argument schema: a JSON object
// whose root type is "object", that is itself a valid JSON Schema.
func checkObjectSchema(r *report, path string, v any, requireProperties bool) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		r.add(path, "schema must be a JSON object, got %s", jsonKind(v))
		return nil
	}
	if m["type"] != "object" {
		r.add(at(path, "type"), `root type must be "object", got %s`, jsonText(m["type"]))
	}
	if requireProperties {
		// OpenAI: "In context=(), object schema missing properties."
		if _, ok := m["properties"].(map[string]any); !ok {
			r.add(path, "object schema missing properties")
		}
	}
	raw, _ := json.Marshal(m)
	if _, err := CompileJSON(raw); err != nil {
		r.add(path, "not a valid JSON Schema: %v", err)
	}
	return m
}

// ---- OpenAI ----

// checkOpenAI checks chat-completions function tools without strict mode.
func checkOpenAI(wire []byte) []error { return checkOpenAIWire(wire, false) }

// checkOpenAIStrict checks function tools with strict: true against the Structured Outputs
// subset.
func checkOpenAIStrict(wire []byte) []error { return checkOpenAIWire(wire, true) }

func checkOpenAIWire(wire []byte, strict bool) []error {
	r := &report{}
	seen := map[string]string{}
	for i, item := range parseWire(wire, r) {
		p := idx("$", i)
		tool, ok := item.(map[string]any)
		if !ok {
			r.add(p, "tool must be an object, got %s", jsonKind(item))
			continue
		}
		checkKeys(r, p, tool, "type", "function")
		if tool["type"] != "function" {
			r.add(at(p, "type"), `type must be "function", got %s`, jsonText(tool["type"]))
		}
		fn, ok := tool["function"].(map[string]any)
		if !ok {
			r.add(at(p, "function"), "function must be an object")
			continue
		}
		fp := at(p, "function")
		checkKeys(r, fp, fn, "name", "description", "parameters", "strict")
		checkName(r, at(fp, "name"), fn["name"], openAINameRE, "^[a-zA-Z0-9_-]{1,64}$", seen)
		checkDescription(r, fp, fn)
		if s, ok := fn["strict"]; ok {
			if _, isBool := s.(bool); !isBool {
				r.add(at(fp, "strict"), "strict must be a boolean, got %s", jsonKind(s))
			}
		}
		params, hasParams := fn["parameters"]
		if !hasParams {
			if strict {
				r.add(fp, "strict mode needs parameters")
			}
			continue
		}
		root := checkObjectSchema(r, at(fp, "parameters"), params, true)
		if !strict {
			if fn["strict"] == true {
				r.add(at(fp, "strict"), "strict is true in the non-strict dialect")
			}
			continue
		}
		if fn["strict"] != true {
			r.add(at(fp, "strict"), "strict must be true, got %s", jsonText(fn["strict"]))
		}
		if root != nil {
			checkStrictSchema(r, at(fp, "parameters"), root)
		}
	}
	return r.errs
}

const (
	openAIMaxObjectLevels = 10
	openAIMaxProperties   = 5000
)

var (
	strictKeywords = []string{"type", "properties", "required", "additionalProperties", "items", "anyOf",
		"$ref", "$defs", "enum", "const", "description", "title", "pattern", "format", "minimum", "maximum",
		"exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems"}
	strictFormatsAllowed = []string{"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
	jsonTypes            = []string{"string", "number", "integer", "boolean", "object", "array", "null"}
)

// checkStrictSchema checks an argument schema against OpenAI's Structured Outputs rules.
func checkStrictSchema(r *report, path string, root map[string]any) {
	if _, ok := root["anyOf"]; ok {
		r.add(at(path, "anyOf"), "the root must not be anyOf")
	}
	defs, _ := root["$defs"].(map[string]any)
	st := &strictWalk{r: r, defs: defs}
	st.node(path, root, 0, true)
	if d, ok := root["$defs"]; ok && defs == nil {
		r.add(at(path, "$defs"), "$defs must be an object, got %s", jsonKind(d))
	}
	for _, name := range sortedKeys(defs) {
		st.node(at(at(path, "$defs"), name), defs[name], 0, false)
	}
	if st.properties > openAIMaxProperties {
		r.add(path, "%d object properties in total, more than %d", st.properties, openAIMaxProperties)
	}
}

type strictWalk struct {
	r          *report
	defs       map[string]any
	properties int
}

func typeList(v any) ([]string, bool) {
	switch t := v.(type) {
	case string:
		return []string{t}, true
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

func (st *strictWalk) node(path string, v any, levels int, isRoot bool) {
	r := st.r
	m, ok := v.(map[string]any)
	if !ok {
		r.add(path, "a schema must be an object here, got %s", jsonKind(v))
		return
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(strictKeywords, k) {
			r.add(at(path, k), "keyword %q is not supported in strict mode", k)
		}
		if k == "$defs" && !isRoot {
			r.add(at(path, k), "$defs only at the root")
		}
	}
	_, hasType := m["type"]
	_, hasAnyOf := m["anyOf"]
	_, hasEnum := m["enum"]
	_, hasConst := m["const"]
	ref, hasRef := m["$ref"]
	if !hasType && !hasAnyOf && !hasRef && !hasEnum && !hasConst {
		r.add(path, "schema has no type (nor anyOf, $ref, enum or const)")
	}
	var ts []string
	if hasType {
		var ok bool
		ts, ok = typeList(m["type"])
		if !ok || len(ts) == 0 {
			r.add(at(path, "type"), "type must be a string or an array of strings, got %s", jsonText(m["type"]))
		}
		for _, t := range ts {
			if !slices.Contains(jsonTypes, t) {
				r.add(at(path, "type"), "unknown type %q", t)
			}
		}
	}
	if hasRef {
		if len(m) > 1 {
			// OpenAI: "$ref cannot have keywords {'description'}".
			others := slices.DeleteFunc(sortedKeys(m), func(k string) bool { return k == "$ref" })
			r.add(path, "$ref cannot have sibling keywords %v", others)
		}
		s, _ := ref.(string)
		name, isDef := strings.CutPrefix(s, "#/$defs/")
		switch {
		case s == "#":
		case isDef:
			if _, ok := st.defs[name]; !ok {
				r.add(at(path, "$ref"), "$ref %q: no such definition", s)
			}
		default:
			r.add(at(path, "$ref"), "$ref %q must be # or #/$defs/NAME", s)
		}
	}
	if f, ok := m["format"]; ok {
		if s, _ := f.(string); !slices.Contains(strictFormatsAllowed, s) {
			r.add(at(path, "format"), "format %s is not supported in strict mode", jsonText(f))
		}
	}
	if e, ok := m["enum"]; ok {
		if list, isList := e.([]any); !isList || len(list) == 0 {
			r.add(at(path, "enum"), "enum must be a non-empty array")
		}
	}
	_, hasProps := m["properties"]
	if slices.Contains(ts, "object") || hasProps {
		levels++
		if levels > openAIMaxObjectLevels {
			r.add(path, "object nested %d levels deep, more than %d", levels, openAIMaxObjectLevels)
		}
		if ap, ok := m["additionalProperties"]; !ok || ap != false {
			r.add(path, "additionalProperties must be false, got %s", jsonText(ap))
		}
		props, ok := m["properties"].(map[string]any)
		if !ok {
			r.add(path, "object schema missing properties")
		}
		st.properties += len(props)
		var required []string
		if req, ok := m["required"]; ok {
			list, isList := req.([]any)
			if !isList {
				r.add(at(path, "required"), "required must be an array")
			}
			for _, x := range list {
				s, isString := x.(string)
				if !isString {
					r.add(at(path, "required"), "required entries must be strings")
					continue
				}
				if slices.Contains(required, s) {
					r.add(at(path, "required"), "%q listed twice", s)
				}
				required = append(required, s)
			}
		}
		for _, name := range sortedKeys(props) {
			if !slices.Contains(required, name) {
				r.add(at(path, "required"), "property %q is not required (strict mode requires every property)", name)
			}
		}
		for _, name := range required {
			if _, ok := props[name]; !ok {
				r.add(at(path, "required"), "required %q is not a property", name)
			}
		}
		for _, name := range sortedKeys(props) {
			st.node(at(at(path, "properties"), name), props[name], levels, false)
		}
	} else if ap, ok := m["additionalProperties"]; ok {
		r.add(at(path, "additionalProperties"), "additionalProperties on a non-object schema: %s", jsonText(ap))
	}
	if items, ok := m["items"]; ok {
		st.node(at(path, "items"), items, levels, false)
	} else if slices.Contains(ts, "array") {
		r.add(path, "array schema without items")
	}
	if hasAnyOf {
		list, ok := m["anyOf"].([]any)
		if !ok || len(list) == 0 {
			r.add(at(path, "anyOf"), "anyOf must be a non-empty array")
		}
		for i, b := range list {
			st.node(idx(at(path, "anyOf"), i), b, levels, false)
		}
	}
}

// ---- Anthropic ----

// checkAnthropic checks Messages API tools.
func checkAnthropic(wire []byte) []error {
	r := &report{}
	seen := map[string]string{}
	for i, item := range parseWire(wire, r) {
		p := idx("$", i)
		tool, ok := item.(map[string]any)
		if !ok {
			r.add(p, "tool must be an object, got %s", jsonKind(item))
			continue
		}
		checkKeys(r, p, tool, "name", "description", "input_schema")
		checkName(r, at(p, "name"), tool["name"], openAINameRE, "^[a-zA-Z0-9_-]{1,64}$", seen)
		checkDescription(r, p, tool)
		in, ok := tool["input_schema"]
		if !ok {
			r.add(p, "input_schema is required")
			continue
		}
		if m := checkObjectSchema(r, at(p, "input_schema"), in, false); m != nil {
			// "input_schema does not support oneOf, allOf, or anyOf at the top level"
			for _, k := range []string{"oneOf", "allOf", "anyOf"} {
				if _, ok := m[k]; ok {
					r.add(at(at(p, "input_schema"), k), "%s is not supported at the top level", k)
				}
			}
		}
	}
	return r.errs
}

// ---- Gemini ----

var (
	geminiKeywords = []string{"type", "format", "title", "description", "nullable", "enum", "maxItems",
		"minItems", "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
		"pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum"}
	geminiTypes        = []string{"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"}
	geminiFormatByType = map[string][]string{
		"STRING":  {"enum", "date-time"},
		"INTEGER": {"int32", "int64"},
		"NUMBER":  {"float", "double"},
	}
	// Keywords that only mean something for one type.
	geminiKeywordType = map[string]string{
		"properties": "OBJECT", "required": "OBJECT", "propertyOrdering": "OBJECT",
		"minProperties": "OBJECT", "maxProperties": "OBJECT",
		"items": "ARRAY", "minItems": "ARRAY", "maxItems": "ARRAY",
		"minLength": "STRING", "maxLength": "STRING", "pattern": "STRING",
	}
)

// checkGemini checks a Gemini tools list: [{"functionDeclarations": [...]}].
func checkGemini(wire []byte) []error {
	r := &report{}
	list := parseWire(wire, r)
	if list == nil {
		return r.errs
	}
	if len(list) != 1 {
		r.add("$", "want one tool holding every functionDeclaration, got %d", len(list))
	}
	seen := map[string]string{}
	for ti, t := range list {
		tp := idx("$", ti)
		tool, ok := t.(map[string]any)
		if !ok {
			r.add(tp, "tool must be an object")
			continue
		}
		checkKeys(r, tp, tool, "functionDeclarations")
		decls, ok := tool["functionDeclarations"].([]any)
		if !ok {
			r.add(at(tp, "functionDeclarations"), "functionDeclarations must be an array")
			continue
		}
		for i, d := range decls {
			p := idx(at(tp, "functionDeclarations"), i)
			decl, ok := d.(map[string]any)
			if !ok {
				r.add(p, "declaration must be an object")
				continue
			}
			checkKeys(r, p, decl, "name", "description", "parameters")
			checkName(r, at(p, "name"), decl["name"], geminiNameRE, "^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$", seen)
			checkDescription(r, p, decl)
			params, ok := decl["parameters"]
			if !ok {
				continue
			}
			pm, ok := params.(map[string]any)
			if !ok {
				r.add(at(p, "parameters"), "parameters must be an object")
				continue
			}
			if pm["type"] != "OBJECT" {
				r.add(at(at(p, "parameters"), "type"), `parameters type must be "OBJECT", got %s`, jsonText(pm["type"]))
			}
			checkGeminiSchema(r, at(p, "parameters"), pm)
		}
	}
	return r.errs
}

func checkGeminiSchema(r *report, path string, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		r.add(path, "a schema must be an object, got %s", jsonKind(v))
		return
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(geminiKeywords, k) {
			r.add(at(path, k), "field %q is not part of Gemini's Schema", k)
		}
	}
	t, hasType := m["type"]
	ts, _ := t.(string)
	_, hasAnyOf := m["anyOf"]
	switch {
	case !hasType && !hasAnyOf:
		r.add(path, "schema has neither type nor anyOf")
	case hasType && !slices.Contains(geminiTypes, ts):
		r.add(at(path, "type"), "type must be one of %v (a single string), got %s", geminiTypes, jsonText(t))
	}
	if n, ok := m["nullable"]; ok {
		if _, isBool := n.(bool); !isBool {
			r.add(at(path, "nullable"), "nullable must be a boolean")
		}
	}
	if e, ok := m["enum"]; ok {
		if ts != "STRING" {
			r.add(at(path, "enum"), "enum is only allowed with type STRING, got %s", jsonText(t))
		}
		list, isList := e.([]any)
		if !isList || len(list) == 0 {
			r.add(at(path, "enum"), "enum must be a non-empty array")
		}
		for i, x := range list {
			if _, isString := x.(string); !isString {
				r.add(idx(at(path, "enum"), i), "enum values must be strings, got %s", jsonText(x))
			}
		}
	}
	if f, ok := m["format"]; ok {
		if s, _ := f.(string); !slices.Contains(geminiFormatByType[ts], s) {
			r.add(at(path, "format"), "format %s is not supported for type %s", jsonText(f), jsonText(t))
		}
		if f == "enum" {
			if _, ok := m["enum"]; !ok {
				r.add(at(path, "format"), `format "enum" without enum`)
			}
		}
	}
	for _, k := range sortedKeys(m) {
		if want, ok := geminiKeywordType[k]; ok && hasType && ts != want {
			r.add(at(path, k), "%s applies to type %s, not %s", k, want, ts)
		}
		if (k == "minimum" || k == "maximum") && hasType && ts != "NUMBER" && ts != "INTEGER" {
			r.add(at(path, k), "%s applies to NUMBER and INTEGER, not %s", k, ts)
		}
	}
	props, _ := m["properties"].(map[string]any)
	if ts == "OBJECT" && len(props) == 0 {
		r.add(path, "an OBJECT must have non-empty properties")
	}
	if req, ok := m["required"]; ok {
		list, _ := req.([]any)
		for _, x := range list {
			if name, _ := x.(string); props[name] == nil {
				r.add(at(path, "required"), "required %s is not a property", jsonText(x))
			}
		}
	}
	if order, ok := m["propertyOrdering"]; ok {
		list, _ := order.([]any)
		for _, x := range list {
			if name, _ := x.(string); props[name] == nil {
				r.add(at(path, "propertyOrdering"), "propertyOrdering names %s, which is not a property", jsonText(x))
			}
		}
	}
	for _, name := range sortedKeys(props) {
		checkGeminiSchema(r, at(at(path, "properties"), name), props[name])
	}
	if items, ok := m["items"]; ok {
		checkGeminiSchema(r, at(path, "items"), items)
	} else if ts == "ARRAY" {
		r.add(path, "an ARRAY must have items")
	}
	if hasAnyOf {
		list, ok := m["anyOf"].([]any)
		if !ok || len(list) == 0 {
			r.add(at(path, "anyOf"), "anyOf must be a non-empty array")
		}
		for i, b := range list {
			checkGeminiSchema(r, idx(at(path, "anyOf"), i), b)
		}
	}
}

// ---- MCP ----

// checkMCP checks the tools of a tools/list result.
func checkMCP(wire []byte) []error {
	r := &report{}
	seen := map[string]string{}
	for i, item := range parseWire(wire, r) {
		p := idx("$", i)
		tool, ok := item.(map[string]any)
		if !ok {
			r.add(p, "tool must be an object, got %s", jsonKind(item))
			continue
		}
		checkKeys(r, p, tool, "name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta")
		checkName(r, at(p, "name"), tool["name"], mcpNameRE, "1 to 128 of [A-Za-z0-9_.-]", seen)
		checkDescription(r, p, tool)
		in, ok := tool["inputSchema"]
		if !ok {
			r.add(p, "inputSchema is required")
		} else {
			checkObjectSchema(r, at(p, "inputSchema"), in, false)
		}
		if out, ok := tool["outputSchema"]; ok {
			checkObjectSchema(r, at(p, "outputSchema"), out, false)
		}
	}
	return r.errs
}

// ---- tests of the checkers themselves: they must catch what providers reject ----

func TestCheckersCatchViolations(t *testing.T) {
	long := strings.Repeat("x", 65)
	tooLongMCP := strings.Repeat("m", 129)
	deep, _ := nestedObjects(11)
	strictDeep := mustStrictWire(t, deep)
	manyProps := map[string]any{}
	var names []any
	for i := 0; i < 5001; i++ {
		n := fmt.Sprintf("p%d", i)
		manyProps[n] = map[string]any{"type": "string"}
		names = append(names, n)
	}
	bigStrict, _ := json.Marshal([]any{map[string]any{"type": "function", "function": map[string]any{
		"name": "big", "strict": true, "parameters": map[string]any{"type": "object", "properties": manyProps,
			"required": names, "additionalProperties": false}}}})

	cases := []struct {
		name    string
		check   checker
		wire    string
		want    []string // substrings, each of which must appear in some violation
		howMany int      // exact number of violations
	}{
		{
			name:  "openai names, root type, duplicates",
			check: checkOpenAI,
			wire: `[{"type":"function","function":{"name":"bad name!","parameters":{"type":"array","items":{}}}},
				{"type":"function","function":{"name":"` + long + `","parameters":{"type":"object","properties":{}}}},
				{"type":"function","function":{"name":"ok","parameters":{"type":"object","properties":{}}}},
				{"type":"function","function":{"name":"ok","parameters":{"type":"object"}}},
				{"type":"tool","function":{"name":"t","parameters":{"type":"object","properties":{},"minLength":"x"}}}]`,
			want: []string{`$[0].function.name: name "bad name!" does not match`, `$[0].function.parameters.type: root type must be "object", got "array"`,
				`$[0].function.parameters: object schema missing properties`,
				`$[1].function.name: name "xxxxxxxx`, `$[3].function.name: duplicate tool name "ok" (also at $[2].function.name)`,
				`$[3].function.parameters: object schema missing properties`, `$[4].type: type must be "function"`,
				`$[4].function.parameters: not a valid JSON Schema`},
			howMany: 8,
		},
		{
			name:  "strict mode rules",
			check: checkOpenAIStrict,
			wire: `[{"type":"function","function":{"name":"s","strict":false,"parameters":{"type":"object",
				"properties":{
					"a":{"type":"string","minLength":1},
					"b":{"type":"string","format":"uri"},
					"c":{"description":"no type"},
					"d":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]},
					"e":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},"required":["x","z"],"additionalProperties":false},
					"f":{"$ref":"#/$defs/missing"},
					"g":{"$ref":"#/$defs/thing","description":"sibling"},
					"h":{"type":"object","additionalProperties":false},
					"i":{"type":"array"},
					"j":{"type":["string","date"]}
				},
				"$defs":{"thing":{"type":"string","default":"x"}},
				"required":["a","b","c","d","e","f","g","h","i"]}}},
				{"type":"function","function":{"name":"u","strict":true,"parameters":{"type":"object","anyOf":[{"type":"object"}],"properties":{},"additionalProperties":false}}}]`,
			want: []string{
				`$[0].function.strict: strict must be true, got false`,
				`$[0].function.parameters: additionalProperties must be false`,
				`$[0].function.parameters.required: property "j" is not required`,
				`$[0].function.parameters.properties.a.minLength: keyword "minLength" is not supported`,
				`$[0].function.parameters.properties.b.format: format "uri" is not supported`,
				`$[0].function.parameters.properties.c: schema has no type`,
				`$[0].function.parameters.properties.d: additionalProperties must be false, got null`,
				`$[0].function.parameters.properties.e.required: property "y" is not required`,
				`$[0].function.parameters.properties.e.required: required "z" is not a property`,
				`$[0].function.parameters.properties.f.$ref: $ref "#/$defs/missing": no such definition`,
				`$[0].function.parameters.properties.g: $ref cannot have sibling keywords [description]`,
				`$[0].function.parameters.properties.h: object schema missing properties`,
				`$[0].function.parameters.properties.i: array schema without items`,
				`$[0].function.parameters.properties.j.type: unknown type "date"`,
				`$[0].function.parameters.$defs.thing.default: keyword "default" is not supported`,
				`$[1].function.parameters.anyOf: the root must not be anyOf`,
				`$[1].function.parameters.anyOf[0]: additionalProperties must be false`,
				`$[1].function.parameters.anyOf[0]: object schema missing properties`,
				`$[0].function.parameters: not a valid JSON Schema`, // the unknown type "date"
			},
			howMany: 19,
		},
		{
			name:    "strict nesting deeper than 10 object levels",
			check:   checkOpenAIStrict,
			wire:    strictDeep,
			want:    []string{"object nested 11 levels deep, more than 10"},
			howMany: 1,
		},
		{
			name:    "strict total properties",
			check:   checkOpenAIStrict,
			wire:    string(bigStrict),
			want:    []string{"$[0].function.parameters: 5001 object properties in total, more than 5000"},
			howMany: 1,
		},
		{
			name:  "anthropic",
			check: checkAnthropic,
			wire: `[{"name":"` + long + `","input_schema":{"type":"object"}},
				{"name":"no_schema","description":"d"},
				{"name":"str","input_schema":{"type":"string"}},
				{"name":"union","input_schema":{"type":"object","anyOf":[{"required":["a"]}]}},
				{"name":"x.y","description":3,"input_schema":{"type":"object"},"parameters":{}}]`,
			want: []string{`$[0].name: name "xxxx`, `$[1]: input_schema is required`,
				`$[2].input_schema.type: root type must be "object", got "string"`,
				`$[3].input_schema.anyOf: anyOf is not supported at the top level`,
				`$[4].name: name "x.y" does not match`, `$[4].description: description must be a string`,
				`$[4].parameters: unknown field "parameters"`},
			howMany: 7,
		},
		{
			name:  "gemini",
			check: checkGemini,
			wire: `[{"functionDeclarations":[
				{"name":"9abc","parameters":{"type":"OBJECT","properties":{
					"r":{"$ref":"#/$defs/x"},
					"ap":{"type":"OBJECT","properties":{"a":{"type":"STRING"}},"additionalProperties":false},
					"u":{"type":["STRING","NULL"]},
					"lower":{"type":"string"},
					"ie":{"type":"INTEGER","enum":["1","2"]},
					"ne":{"type":"STRING","enum":["a",1]},
					"eo":{"type":"OBJECT","properties":{}},
					"uf":{"type":"STRING","format":"uuid"},
					"c":{"type":"STRING","const":"x"},
					"one":{"oneOf":[{"type":"STRING"}]},
					"arr":{"type":"ARRAY"},
					"ml":{"type":"INTEGER","minLength":1}
				},"required":["r","missing"],"propertyOrdering":["r","ghost"]}},
				{"name":"ok","parameters":{"type":"STRING"}}]}]`,
			want: []string{
				`$[0].functionDeclarations[0].name: name "9abc" does not match`,
				`parameters.properties.r.$ref: field "$ref" is not part of Gemini's Schema`,
				`parameters.properties.r: schema has neither type nor anyOf`,
				`parameters.properties.ap.additionalProperties: field "additionalProperties" is not part`,
				`parameters.properties.u.type: type must be one of`,
				`parameters.properties.lower.type: type must be one of [STRING NUMBER INTEGER BOOLEAN ARRAY OBJECT] (a single string), got "string"`,
				`parameters.properties.ie.enum: enum is only allowed with type STRING, got "INTEGER"`,
				`parameters.properties.ne.enum[1]: enum values must be strings, got 1`,
				`parameters.properties.eo: an OBJECT must have non-empty properties`,
				`parameters.properties.uf.format: format "uuid" is not supported for type "STRING"`,
				`parameters.properties.c.const: field "const" is not part`,
				`parameters.properties.one.oneOf: field "oneOf" is not part`,
				`parameters.properties.one: schema has neither type nor anyOf`,
				`parameters.properties.arr: an ARRAY must have items`,
				`parameters.properties.ml.minLength: minLength applies to type STRING, not INTEGER`,
				`parameters.required: required "missing" is not a property`,
				`parameters.propertyOrdering: propertyOrdering names "ghost", which is not a property`,
				`$[0].functionDeclarations[1].parameters.type: parameters type must be "OBJECT", got "STRING"`,
			},
			howMany: 18,
		},
		{
			name:  "mcp",
			check: checkMCP,
			wire: `[{"name":"` + tooLongMCP + `","inputSchema":{"type":"object"}},
				{"name":"has space","inputSchema":{"properties":{}}},
				{"name":"out","inputSchema":{"type":"object"},"outputSchema":{"type":"array"}},
				{"name":"","input_schema":{"type":"object"}},
				{"name":"out","inputSchema":{"type":"object"}}]`,
			want: []string{`$[0].name: name "mmmm`, `$[1].name: name "has space" does not match`,
				`$[1].inputSchema.type: root type must be "object", got null`,
				`$[2].outputSchema.type: root type must be "object", got "array"`,
				`$[3].name: name "" does not match`, `$[3].input_schema: unknown field`, `$[3]: inputSchema is required`,
				`$[4].name: duplicate tool name "out"`},
			howMany: 8,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := c.check([]byte(c.wire))
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			for _, w := range c.want {
				found := false
				for _, g := range got {
					if strings.Contains(g, w) {
						found = true
						break
					}
				}
				if !found {
					t.Errorf("no violation contains %q", w)
				}
			}
			if len(got) != c.howMany {
				t.Errorf("got %d violations, want %d:\n%s", len(got), c.howMany, strings.Join(got, "\n"))
			}
		})
	}
}

// mustStrictWire wraps a schema, as is, in a strict OpenAI tool list.
func mustStrictWire(t *testing.T, schemaJSON string) string {
	t.Helper()
	// Make every object strict-shaped so that depth is the only violation.
	var v any
	if err := json.Unmarshal([]byte(schemaJSON), &v); err != nil {
		t.Fatal(err)
	}
	var fix func(any)
	fix = func(x any) {
		m, ok := x.(map[string]any)
		if !ok {
			return
		}
		if m["type"] == "object" {
			m["additionalProperties"] = false
			props := m["properties"].(map[string]any)
			var req []any
			for _, k := range sortedKeys(props) {
				req = append(req, k)
				p := props[k].(map[string]any)
				delete(p, "minLength")
				fix(p)
			}
			m["required"] = req
		}
	}
	fix(v)
	b, _ := json.Marshal([]any{map[string]any{"type": "function", "function": map[string]any{"name": "deep", "strict": true, "parameters": v}}})
	return string(b)
}

func TestCheckersAcceptMinimalValidTools(t *testing.T) {
	cases := map[Dialect]string{
		OpenAI:       `[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`,
		OpenAIStrict: `[{"type":"function","function":{"name":"get_weather","description":"d","strict":true,"parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":["string","null"],"enum":["c","f",null]}},"required":["city","unit"],"additionalProperties":false}}}]`,
		Anthropic:    `[{"name":"get_weather","description":"d","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`,
		Gemini:       `[{"functionDeclarations":[{"name":"weather.get:v1","description":"d","parameters":{"type":"OBJECT","properties":{"city":{"type":"STRING","nullable":true}},"required":["city"]}},{"name":"_now"}]}]`,
		MCP:          `[{"name":"weather.get","description":"d","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"t":{"type":"number"}}}}]`,
	}
	for d, wire := range cases {
		if errs := checkers[d]([]byte(wire)); len(errs) != 0 {
			t.Errorf("%s: unexpected violations: %v", d, errs)
		}
	}
}
