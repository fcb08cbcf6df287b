package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// defaultsNode is the part of a schema that can contribute defaults, precomputed at compile time
// so that applying defaults to a call walks only where a default can land.
type defaultsNode struct {
	props map[string]*propDefaults
	items *defaultsNode
}

type propDefaults struct {
	value json.RawMessage // nil when the property itself has no default
	child *defaultsNode   // defaults inside the property's value
}

// maxRefDepth bounds how far buildDefaults follows $ref, so recursive schemas terminate.
const maxRefDepth = 16

// buildDefaults collects the defaults reachable through properties and items of s, following
// local $refs, and checks each default against its own schema.
func buildDefaults(root, s *Schema, depth int) (*defaultsNode, error) {
	if s == nil || depth > maxRefDepth {
		return nil, nil
	}
	if s.Ref != "" {
		target, err := resolveLocalRef(root, s.Ref)
		if err != nil {
			return nil, err
		}
		return buildDefaults(root, target, depth+1)
	}
	var n defaultsNode
	for name, ps := range s.Properties {
		var pd propDefaults
		target := ps
		if ps.Ref != "" && ps.Default == nil {
			t, err := resolveLocalRef(root, ps.Ref)
			if err != nil {
				return nil, err
			}
			target = t
		}
		if ps.Default != nil {
			if err := checkDefault(root, ps, name); err != nil {
				return nil, err
			}
			pd.value = ps.Default
		} else if target.Default != nil && target != ps {
			pd.value = target.Default
		}
		child, err := buildDefaults(root, target, depth+1)
		if err != nil {
			return nil, err
		}
		pd.child = child
		if pd.value != nil || pd.child != nil {
			if n.props == nil {
				n.props = map[string]*propDefaults{}
			}
			n.props[name] = &pd
		}
	}
	items, err := buildDefaults(root, s.Items, depth+1)
	if err != nil {
		return nil, err
	}
	n.items = items
	if n.props == nil && n.items == nil {
		return nil, nil
	}
	return &n, nil
}

// checkDefault compiles the property's schema on its own (with the root's $defs, so refs
// resolve) and validates the default against it: a default that would fail validation is a bug
// in the tool definition, found at definition time rather than on the first call.
func checkDefault(root, ps *Schema, name string) error {
	sub := ps.CloneSchemas()
	sub.Default = nil
	sub.Defs, sub.Definitions = root.Defs, root.Definitions
	raw, err := json.Marshal(sub)
	if err != nil {
		return fmt.Errorf("schema: default of %q: %w", name, err)
	}
	c, err := compileJSON(raw)
	if err != nil {
		return fmt.Errorf("schema: default of %q: %w", name, err)
	}
	v, err := Decode(ps.Default)
	if err != nil {
		return fmt.Errorf("schema: default of %q: %w", name, err)
	}
	if err := (&Compiled{compiled: c}).Validate(v); err != nil {
		return fmt.Errorf("schema: default of %q does not satisfy its own schema: %w", name, err)
	}
	return nil
}

// resolveLocalRef resolves a $ref that is a JSON pointer into root: #, #/$defs/NAME,
// #/definitions/NAME, or any other path such as #/properties/a (which zod-to-json-schema writes
// for a schema it reuses).
func resolveLocalRef(root *Schema, ref string) (*Schema, error) {
	if ref == "#" {
		return root, nil
	}
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("schema: unsupported $ref %q (only references into the schema itself, such as #/$defs/NAME)", ref)
	}
	s := root
	tokens := strings.Split(path, "/")
	for i := 0; i < len(tokens) && s != nil; i++ {
		key := func() string { // the token after the keyword: a name or an index
			i++
			if i == len(tokens) {
				return ""
			}
			tok := tokens[i]
			if t, err := url.PathUnescape(tok); err == nil { // a $ref is a URI fragment
				tok = t
			}
			return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		}
		index := func(list []*Schema) *Schema {
			n, err := strconv.Atoi(key())
			if err != nil || n < 0 || n >= len(list) {
				return nil
			}
			return list[n]
		}
		switch tokens[i] {
		case "$defs":
			s = s.Defs[key()]
		case "definitions":
			s = s.Definitions[key()]
		case "properties":
			s = s.Properties[key()]
		case "patternProperties":
			s = s.PatternProperties[key()]
		case "dependentSchemas":
			s = s.DependentSchemas[key()]
		case "items":
			s = s.Items
		case "additionalProperties":
			s = s.AdditionalProperties
		case "not":
			s = s.Not
		case "anyOf":
			s = index(s.AnyOf)
		case "oneOf":
			s = index(s.OneOf)
		case "allOf":
			s = index(s.AllOf)
		case "prefixItems":
			s = index(s.PrefixItems)
		default:
			s = nil
		}
	}
	if s == nil {
		return nil, fmt.Errorf("schema: $ref %q: no such definition", ref)
	}
	return s, nil
}

// ApplyDefaults inserts the schema's defaults for properties missing from v (a value from
// [Decode]), recursing into nested objects and arrays. It reports whether it changed anything.
// Properties present with any value, null included, are left alone.
func (c *Compiled) ApplyDefaults(v any) (bool, error) {
	if c.defaults == nil {
		return false, nil
	}
	return c.defaults.apply(v)
}

func (n *defaultsNode) apply(v any) (bool, error) {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		for name, pd := range n.props {
			cur, ok := x[name]
			if !ok {
				if pd.value == nil {
					continue
				}
				// Decode afresh each time: a shared value would alias between calls.
				d, err := decodeNumber(pd.value)
				if err != nil {
					return changed, err
				}
				x[name] = d
				changed = true
				cur = d
			}
			if pd.child != nil {
				c, err := pd.child.apply(cur)
				if err != nil {
					return changed, err
				}
				changed = changed || c
			}
		}
	case []any:
		if n.items != nil {
			for _, item := range x {
				c, err := n.items.apply(item)
				if err != nil {
					return changed, err
				}
				changed = changed || c
			}
		}
	}
	return changed, nil
}

func decodeNumber(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}
