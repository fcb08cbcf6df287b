package quiver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/schema"
)

// keyGuard rejects argument keys that differ only in case from a Go field's JSON name.
// encoding/json matches object keys to struct fields case-insensitively, so with a
// hand-written schema that admits extra properties, {"N": 100} would pass validation (N being
// an extra property) and then be decoded into field n, escaping n's constraints. Inferred
// schemas close every struct (additionalProperties: false) and need no guard.
type keyGuard struct {
	fields map[string]*keyGuard // a struct's JSON names; a nil value has nothing to check below
	elem   *keyGuard            // a slice's, array's or map's elements
}

// newKeyGuard returns the guard for t, or nil when t decodes no struct fields.
func newKeyGuard(t reflect.Type) *keyGuard {
	return buildKeyGuard(t, map[reflect.Type]*keyGuard{})
}

func buildKeyGuard(t reflect.Type, seen map[reflect.Type]*keyGuard) *keyGuard {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if g, ok := seen[t]; ok {
		return g // recursive type: reuse the guard being built
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		g := &keyGuard{}
		seen[t] = g
		if g.elem = buildKeyGuard(t.Elem(), seen); g.elem == nil {
			seen[t] = nil
			return nil
		}
		return g
	case reflect.Struct:
		g := &keyGuard{fields: map[string]*keyGuard{}}
		seen[t] = g
		// encoding/json's rules: an embedded struct without a json name has its fields
		// promoted; with a name it is one field, and its own fields are not promoted.
		var named [][]int
		for _, f := range reflect.VisibleFields(t) {
			if slices.ContainsFunc(named, func(prefix []int) bool {
				return len(f.Index) > len(prefix) && slices.Equal(f.Index[:len(prefix)], prefix)
			}) {
				continue
			}
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if tag == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			if f.Anonymous {
				if name == "" {
					continue // promoted: its fields come next in VisibleFields
				}
				named = append(named, f.Index)
			}
			if name == "" {
				name = f.Name
			}
			g.fields[name] = buildKeyGuard(f.Type, seen)
		}
		return g
	}
	return nil
}

// check walks a decoded value alongside the guard's type.
func (g *keyGuard) check(v any, ptr string) error {
	if g == nil {
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if g.fields == nil {
				if err := g.elem.check(val, ptr+"/"+k); err != nil {
					return err
				}
				continue
			}
			if child, ok := g.fields[k]; ok {
				if err := child.check(val, ptr+"/"+k); err != nil {
					return err
				}
				continue
			}
			for name := range g.fields {
				if strings.EqualFold(name, k) {
					return fmt.Errorf("%s/%s: property names are case-sensitive: use %q", ptr, truncate(k, 40), name)
				}
			}
		}
	case []any:
		for i, val := range x {
			if err := g.elem.check(val, fmt.Sprintf("%s/%d", ptr, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// guardNeeded reports whether arguments valid against s could still reach a field of t under
// a key that differs from the field's name only in case. It is false when every object in s
// that corresponds to a struct of t is closed (additionalProperties: false) and declares no
// such near-miss name, which is how most hand-written schemas are: then no call needs the
// guard's second decoding of its arguments. Anything it cannot follow ($ref, unions, pattern
// properties) counts as needing the guard.
func guardNeeded(t reflect.Type, s *schema.Schema) bool {
	g := newKeyGuard(t)
	return g != nil && g.needed(s)
}

func (g *keyGuard) needed(s *schema.Schema) bool {
	if g == nil {
		return false
	}
	if s == nil || s.Ref != "" || s.AnyOf != nil || s.OneOf != nil || s.AllOf != nil || s.PatternProperties != nil {
		return true
	}
	if g.fields == nil {
		sub := s.Items
		if sub == nil {
			sub = s.AdditionalProperties
		}
		return g.elem.needed(sub)
	}
	if b, err := json.Marshal(s.AdditionalProperties); err != nil || string(b) != "false" {
		return true
	}
	for prop, ps := range s.Properties {
		child, exact := g.fields[prop]
		if !exact {
			for name := range g.fields {
				if strings.EqualFold(name, prop) {
					return true
				}
			}
			continue
		}
		if child.needed(ps) {
			return true
		}
	}
	return false
}
