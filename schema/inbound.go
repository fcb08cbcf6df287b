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
	root := d.root
	if orig == nil || depth > 64 {
		return v
	}
	if orig.Ref != "" {
		target, err := resolveLocalRef(root, orig.Ref)
		if err != nil {
			return v
		}
		return inbound(d, target, v, depth+1)
	}
	// Free-form values and maps may arrive as JSON text.
	if str, ok := v.(string); ok && (isEmpty(orig) || !d.admitsString(orig)) {
		if decoded, err := Decode([]byte(str)); err == nil {
			v = decoded
		}
	}
	switch x := v.(type) {
	case []any:
		if isRecord(orig) {
			if m, ok := fromEntries(x); ok {
				return inbound(d, orig, m, depth+1)
			}
			return v
		}
		items := orig.Items
		if items == nil && schemaType(orig) == "array" {
			items = &Schema{} // items without a schema were rendered as JSON text
		}
		if items != nil {
			for i := range x {
				x[i] = inbound(d, items, x[i], depth+1)
			}
		}
	case map[string]any:
		for k, val := range x {
			ps, declared := orig.Properties[k]
			if !declared {
				if isRecord(orig) {
					x[k] = inbound(d, orig.AdditionalProperties, val, depth+1)
				}
				continue
			}
			if val == nil && !slices.Contains(orig.Required, k) && !allowsNull(resolved(root, ps)) {
				delete(x, k) // a null the dialect added for an optional property
				continue
			}
			x[k] = inbound(d, ps, val, depth+1)
		}
	}
	return v
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
