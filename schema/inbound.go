package schema

import (
	"slices"
)

// inboundDoc is the canonical schema a value is rewritten into, and what is known of its
// subschemas: whether each admits a string, found once per call however many values ask.
type inboundDoc struct {
	root   *Schema
	admits map[*Schema]bool
}

func newInboundDoc(root *Schema) *inboundDoc {
	return &inboundDoc{root: root, admits: map[*Schema]bool{}}
}

// inbound rewrites a value a model produced against a rendered (strict or Gemini) schema back
// into the shape of the canonical schema orig: it undoes exactly what strict() and gemini() do.
func inbound(d *inboundDoc, orig *Schema, v any, depth int) any {
	if orig == nil || depth > 64 {
		return v
	}
	if orig.Ref != "" {
		target, err := resolveLocalRef(d.root, orig.Ref)
		if err != nil {
			return v
		}
		return inbound(d, target, v, depth+1)
	}
	switch x := d.fromText(orig, v).(type) {
	case []any:
		return d.inboundList(orig, x, depth)
	case map[string]any:
		d.inboundObject(orig, x, depth)
		return x
	default:
		return x
	}
}

// fromText decodes a string that holds a free-form value or a map: such values may arrive as
// JSON text.
func (d *inboundDoc) fromText(orig *Schema, v any) any {
	str, ok := v.(string)
	if !ok || !isEmpty(orig) && d.admitsString(orig) {
		return v
	}
	if decoded, err := Decode([]byte(str)); err == nil {
		return decoded
	}
	return v
}

// inboundList rewrites a list: back into a map when orig is one (rendered as a list of
// entries), and otherwise item by item.
func (d *inboundDoc) inboundList(orig *Schema, x []any, depth int) any {
	if isRecord(orig) {
		if m, ok := fromEntries(x); ok {
			return inbound(d, orig, m, depth+1)
		}
		return x
	}
	if items := renderedItems(orig); items != nil {
		for i := range x {
			x[i] = inbound(d, items, x[i], depth+1)
		}
	}
	return x
}

// renderedItems is the schema of orig's items; the empty schema when an array has none, as
// its items were rendered as JSON text.
func renderedItems(orig *Schema) *Schema {
	if orig.Items == nil && schemaType(orig) == "array" {
		return &Schema{}
	}
	return orig.Items
}

// inboundObject rewrites an object's members in place, dropping the nulls the dialect added.
func (d *inboundDoc) inboundObject(orig *Schema, x map[string]any, depth int) {
	for k, val := range x {
		ps, declared := orig.Properties[k]
		switch {
		case declared && d.addedNull(orig, k, ps, val):
			delete(x, k)
		case declared:
			x[k] = inbound(d, ps, val, depth+1)
		case isRecord(orig):
			x[k] = inbound(d, orig.AdditionalProperties, val, depth+1)
		}
	}
}

// addedNull reports whether val, the value of property k, is a null the dialect added: k is
// optional and its own schema does not admit null.
func (d *inboundDoc) addedNull(orig *Schema, k string, ps *Schema, val any) bool {
	return val == nil && !slices.Contains(orig.Required, k) && !allowsNull(resolved(d.root, ps))
}

func resolved(root, s *Schema) *Schema {
	for i := 0; s != nil && s.Ref != "" && i < maxRefDepth; i++ {
		t, err := resolveLocalRef(root, s.Ref)
		if err != nil {
			return s
		}
		s = t
	}
	return s
}

// admitsString reports whether s could accept some string. Each subschema is looked at once
// per call: branches that name the same definitions would otherwise be walked once per path.
func (d *inboundDoc) admitsString(s *Schema) bool {
	s = resolved(d.root, s)
	if s == nil || isEmpty(s) {
		return true
	}
	if known, ok := d.admits[s]; ok {
		return known
	}
	d.admits[s] = true // while deciding: a branch that comes back here may be a string
	d.admits[s] = d.decideString(s)
	return d.admits[s]
}

func (d *inboundDoc) decideString(s *Schema) bool {
	if containsString(types(s), "string") {
		return true
	}
	if s.Const != nil {
		_, ok := (*s.Const).(string)
		return ok
	}
	for _, e := range s.Enum {
		if _, ok := e.(string); ok {
			return true
		}
	}
	for _, b := range append(append([]*Schema{}, s.AnyOf...), s.OneOf...) {
		if d.admitsString(b) {
			return true
		}
	}
	return false
}

// fromEntries turns [{"key":k,"value":v}, ...] into a map, or reports false if the list is not
// in that shape.
func fromEntries(list []any) (map[string]any, bool) {
	m := make(map[string]any, len(list))
	for _, e := range list {
		entry, ok := e.(map[string]any)
		if !ok || len(entry) != 2 {
			return nil, false
		}
		k, ok := entry["key"].(string)
		if !ok {
			return nil, false
		}
		v, ok := entry["value"]
		if !ok {
			return nil, false
		}
		m[k] = v
	}
	return m, true
}
