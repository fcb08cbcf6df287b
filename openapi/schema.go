package openapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/quiverhq/quiver/schema"
)

// The conversion of an OpenAPI schema to the JSON Schema (draft 2020-12) a tool declares is
// written here because kin-openapi describes schemas as OpenAPI has them: 3.0's nullable,
// boolean exclusiveMinimum and example, and references into components. Nothing else
// translates them, and the rules are few:
//
//   - a reference to #/components/schemas/NAME becomes #/$defs/NAME, with NAME's schema (and
//     what it refers to) in the tool's $defs, so that recursive schemas stay finite;
//   - nullable: true adds "null" to the type (and to an enum);
//   - 3.0's exclusiveMinimum: true with minimum m becomes exclusiveMinimum: m (the same for the
//     maximum);
//   - what JSON Schema does not have (example, discriminator, xml, externalDocs, x-...) is left
//     out;
//   - default is an annotation of what the service assumes when a value is not given: it is
//     left out (Quiver would otherwise insert it, and check it against its schema, where a
//     document's default: "" beside format: uri would refuse the operation), and said in the
//     description of what a tool takes;
//   - additionalProperties: false beside a $ref and no properties of its own (which JSON
//     Schema 2020-12 reads as "no property at all", where the document means "no property the
//     referred schema does not have") becomes unevaluatedProperties: false, which says that;
//   - properties marked readOnly are left out of what a tool takes, and writeOnly ones out of
//     what it returns, as the specification says a client does.

// direction is whether a schema describes what is sent (a request) or received.
type direction int

const (
	request direction = iota
	response
)

// components are the components of a source converted so far in one direction, each once:
// the tools that refer to one share its conversion.
type components struct {
	schemas map[string]any      // $defs key to converted schema (nil while being converted)
	deps    map[string][]string // the keys each one refers to, each once
	users   map[string][]string // the keys that refer to each one
	edges   map[[2]string]bool  // the references noted in deps and users
	sizes   map[string]int      // each one's size as JSON
	keys    map[string]string   // component name to its $defs key
	names   map[string]string   // $defs key to the component it was given to
	failed  map[string]error    // keys whose conversion failed, and why
	// broken are the keys whose conversion failed or that refer, through others, to one that
	// did, with the failure: kept as references are noted, so that looking one up costs
	// nothing however many references a document has.
	broken map[string]error
}

func newComponents() *components {
	return &components{schemas: map[string]any{}, deps: map[string][]string{}, users: map[string][]string{},
		edges: map[[2]string]bool{}, sizes: map[string]int{}, keys: map[string]string{}, names: map[string]string{},
		failed: map[string]error{}, broken: map[string]error{}}
}

// refer notes that the component from refers to the component to; from is broken if to is.
func (cs *components) refer(from, to string) {
	if cs.edges[[2]string{from, to}] {
		return
	}
	cs.edges[[2]string{from, to}] = true
	cs.deps[from] = append(cs.deps[from], to)
	cs.users[to] = append(cs.users[to], from)
	if err := cs.broken[to]; err != nil {
		cs.breaks(from, err)
	}
}

// fail records that a component's conversion failed.
func (cs *components) fail(key string, err error) {
	cs.failed[key] = err
	cs.breaks(key, err)
}

// breaks marks key, and every component that refers to it through others, broken by err.
func (cs *components) breaks(key string, err error) {
	stack := []string{key}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if cs.broken[k] != nil {
			continue
		}
		cs.broken[k] = err
		stack = append(stack, cs.users[k]...)
	}
}

// converter converts the schemas of one tool, noting the components they use.
type converter struct {
	doc   *openapi3.T
	dir   direction
	cache *components
	used  map[string]bool
	stack []string // the components being converted, innermost last
}

func newConverter(doc *openapi3.T, dir direction, cache *components) *converter {
	return &converter{doc: doc, dir: dir, cache: cache, used: map[string]bool{}}
}

// use marks a component and what it refers to as this tool's.
func (c *converter) use(key string) {
	if c.used[key] {
		return
	}
	c.used[key] = true
	for _, d := range c.cache.deps[key] {
		c.use(d)
	}
}

// convert turns sr into a JSON Schema value (a map, or true for an empty schema).
func (c *converter) convert(sr *openapi3.SchemaRef) (map[string]any, error) {
	if sr == nil {
		return map[string]any{}, nil
	}
	raw, err := json.Marshal(sr)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	out, err := c.walk(v)
	if err != nil {
		return nil, err
	}
	m, ok := out.(map[string]any)
	if !ok {
		return map[string]any{}, nil
	}
	return m, nil
}

// defsInto adds the components the tool uses to root's $defs.
func (c *converter) defsInto(root map[string]any) {
	if len(c.used) == 0 {
		return
	}
	defs := make(map[string]any, len(c.used))
	for key := range c.used {
		defs[key] = c.cache.schemas[key]
	}
	root["$defs"] = defs
}

// dropped are the OpenAPI keywords that JSON Schema does not have.
var dropped = map[string]bool{"example": true, "discriminator": true, "xml": true, "externalDocs": true, "nullable": true, "default": true}

// walk converts a decoded schema (or a part of one: a map, a list of schemas, a value).
func (c *converter) walk(v any) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return v, nil
	}
	if ref, ok := m["$ref"].(string); ok {
		name, err := c.component(ref)
		if err != nil {
			return nil, err
		}
		m["$ref"] = "#/$defs/" + name
		closedRef(m)
	}
	out, err := c.keywords(m)
	if err != nil {
		return nil, err
	}
	if def, ok := m["default"]; ok && c.dir == request {
		describeDefault(out, def)
	}
	if m["nullable"] == true {
		if _, typed := out["type"]; !typed {
			// nullable beside allOf, a $ref...: null or the schema.
			return map[string]any{"anyOf": []any{out, map[string]any{"type": "null"}}}, nil
		}
		nullable(out)
	}
	exclusiveBounds(out)
	requiredKept(out)
	return out, nil
}

// keywords converts the keywords of m that JSON Schema has.
func (c *converter) keywords(m map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, val := range m {
		if dropped[k] || strings.HasPrefix(k, "x-") {
			continue
		}
		w, err := c.keyword(k, val)
		if err != nil {
			return nil, err
		}
		out[k] = w
	}
	return out, nil
}

// keyword converts the value of a schema's keyword k: the schemas it holds are walked.
func (c *converter) keyword(k string, val any) (any, error) {
	switch k {
	case "properties", "patternProperties", "$defs", "dependentSchemas":
		props, _ := val.(map[string]any)
		return c.walkMap(props, k == "properties")
	case "allOf", "anyOf", "oneOf", "prefixItems":
		list, _ := val.([]any)
		return c.walkList(list)
	case "items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else", "unevaluatedProperties", "unevaluatedItems":
		return c.walk(val)
	}
	return val, nil
}

// walkMap converts a map of schemas; of properties, those hidden in this direction are left
// out.
func (c *converter) walkMap(schemas map[string]any, properties bool) (map[string]any, error) {
	conv := make(map[string]any, len(schemas))
	for name, p := range schemas {
		if properties && c.hidden(p) {
			continue
		}
		w, err := c.walk(p)
		if err != nil {
			return nil, err
		}
		conv[name] = w
	}
	return conv, nil
}

func (c *converter) walkList(list []any) ([]any, error) {
	conv := make([]any, len(list))
	for i, p := range list {
		w, err := c.walk(p)
		if err != nil {
			return nil, err
		}
		conv[i] = w
	}
	return conv, nil
}

// closedRef turns additionalProperties: false beside a $ref, in a schema with no properties of
// its own, into unevaluatedProperties: false: the referred schema's properties, and no other.
func closedRef(m map[string]any) {
	_, props := m["properties"]
	_, patterns := m["patternProperties"]
	if m["additionalProperties"] != false || props || patterns {
		return
	}
	delete(m, "additionalProperties")
	if _, set := m["unevaluatedProperties"]; !set {
		m["unevaluatedProperties"] = false
	}
}

// describeDefault says a default in the description of a schema it was left out of.
func describeDefault(out map[string]any, def any) {
	text, err := json.Marshal(def)
	if err != nil || len(text) > 200 {
		return
	}
	d, _ := out["description"].(string)
	if d = strings.TrimSpace(d); d != "" {
		d += " "
	}
	out["description"] = d + "Default (the service's): " + string(text) + "."
}

// exclusiveBounds turns OpenAPI 3.0's boolean exclusiveMinimum and exclusiveMaximum into JSON
// Schema's numbers.
func exclusiveBounds(out map[string]any) {
	for _, bound := range []string{"Minimum", "Maximum"} {
		ex, limit := "exclusive"+bound, strings.ToLower(bound[:1])+bound[1:]
		switch out[ex] {
		case true:
			if n, ok := out[limit]; ok {
				out[ex] = n
				delete(out, limit)
			} else {
				delete(out, ex)
			}
		case false:
			delete(out, ex)
		}
	}
}

// requiredKept keeps of a schema's required properties those it still has (one hidden in this
// direction is no longer required).
func requiredKept(out map[string]any) {
	props, ok := out["properties"].(map[string]any)
	if !ok {
		return
	}
	req, ok := out["required"].([]any)
	if !ok {
		return
	}
	kept := req[:0:0]
	for _, r := range req {
		if name, _ := r.(string); props[name] != nil {
			kept = append(kept, r)
		}
	}
	out["required"] = kept
	if len(kept) == 0 {
		delete(out, "required")
	}
}

// hidden reports whether a property is not part of this direction's message: readOnly in a
// request, writeOnly in a response.
func (c *converter) hidden(p any) bool {
	m, _ := p.(map[string]any)
	if c.dir == request {
		return m["readOnly"] == true
	}
	return m["writeOnly"] == true
}

// nullable adds null to a schema's type and enum.
func nullable(s map[string]any) {
	switch t := s["type"].(type) {
	case string:
		s["type"] = []any{t, "null"}
	case []any:
		if !containsAny(t, "null") {
			s["type"] = append(t, "null")
		}
	}
	if e, ok := s["enum"].([]any); ok && !containsAny(e, nil) {
		s["enum"] = append(e, nil)
	}
}

func containsAny(list []any, v any) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

var defName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// component converts the component a reference names into the tool's $defs (once) and
// returns its key there.
func (c *converter) component(ref string) (string, error) {
	name, err := componentName(ref)
	if err != nil {
		return "", err
	}
	key := c.cache.keyOf(name)
	if n := len(c.stack); n > 0 {
		c.cache.refer(c.stack[n-1], key)
	}
	if err := c.cache.broken[key]; err != nil {
		return "", err
	}
	if _, done := c.cache.schemas[key]; !done {
		sr := c.doc.Components.Schemas[name]
		if sr == nil {
			return "", fmt.Errorf("$ref %q: the document has no such schema", ref)
		}
		if err := c.convertComponent(key, name, sr); err != nil {
			return "", err
		}
	}
	c.use(key)
	return key, nil
}

// componentName is the name of the schema a reference names: only references to
// #/components/schemas/NAME are followed.
func componentName(ref string) (string, error) {
	raw, ok := strings.CutPrefix(ref, "#/components/schemas/")
	if !ok || strings.Contains(raw, "/") {
		return "", fmt.Errorf("$ref %q: only references to #/components/schemas/NAME are followed", ref)
	}
	name, err := url.PathUnescape(raw)
	if err != nil {
		return "", fmt.Errorf("$ref %q: %v", ref, err)
	}
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(name), nil
}

// convertComponent converts the component name into the cache under key.
func (c *converter) convertComponent(key, name string, sr *openapi3.SchemaRef) error {
	c.cache.schemas[key] = nil // being converted: a reference back to it is a recursion, not a new def
	c.stack = append(c.stack, key)
	conv, err := c.convert(&openapi3.SchemaRef{Value: sr.Value})
	c.stack = c.stack[:len(c.stack)-1]
	if err != nil {
		// Kept as failed: a component converted inside it may refer back to it, and a later
		// tool using that one must fail the same way rather than miss it from its $defs.
		delete(c.cache.schemas, key)
		err = fmt.Errorf("schema %s: %w", name, err)
		c.cache.fail(key, err)
		return err
	}
	c.cache.schemas[key] = conv
	encoded, err := json.Marshal(conv)
	if err != nil {
		return fmt.Errorf("schema %s: %w", name, err)
	}
	c.cache.sizes[key] = len(encoded)
	return nil
}

// keyOf is a component's $defs key: its name with what a JSON pointer would need escaped
// replaced by _, made unique when two names would share it.
func (cs *components) keyOf(name string) string {
	if key, ok := cs.keys[name]; ok {
		return key
	}
	base := defName.ReplaceAllString(name, "_")
	key := base
	for n := 2; cs.names[key] != ""; n++ {
		key = fmt.Sprintf("%s_%d", base, n)
	}
	cs.keys[name], cs.names[key] = key, name
	return key
}

// defsSize is the size of the components the tool uses, as JSON: what its schemas will be at
// least, known before they are marshalled.
func (c *converter) defsSize() int {
	n := 0
	for key := range c.used {
		n += c.cache.sizes[key]
	}
	return n
}

// encodeSchema is a converted schema as JSON: its size is what the caps count, known before
// the (costlier) decoding into the schema type tools declare.
func encodeSchema(m map[string]any) ([]byte, error) { return json.Marshal(m) }

// decodeSchema turns an encoded schema into the schema type tools declare; nil stays nil.
func decodeSchema(raw []byte) (*schema.Schema, error) {
	if raw == nil {
		return nil, nil
	}
	var s schema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
