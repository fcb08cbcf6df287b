package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// defaultsNode is the part of a schema that can contribute defaults, precomputed at compile time
// so that applying defaults to a call walks only where a default can land. A recursive schema
// makes a cyclic graph of them; applying defaults walks the value, which is finite.
type defaultsNode struct {
	props map[string]*propDefaults
	items *defaultsNode
}

type propDefaults struct {
	// value is the default with the defaults of its own schema filled in (once, at compile
	// time); nil when the property itself has no default.
	value  json.RawMessage
	child  *defaultsNode // defaults inside the property's value, when it is given
	filled bool          // value has its own defaults in it
}

// maxRefDepth bounds how far a chain of $refs is followed where a value is rewritten for a
// dialect (inbound), so that a $ref that names itself terminates.
const maxRefDepth = 16

// defaultsBuilder collects the defaults reachable through properties and items of a schema,
// following its $refs, each schema once. It checks each default against its own schema.
type defaultsBuilder struct {
	b     *builder
	check func(at *node, name string, value any) error
	memo  map[*node]*defaultsNode
	// parents lists, for each node built, the nodes with an edge to it: a node is kept when
	// a default can be reached from it, which is known only once every node is built.
	parents map[*defaultsNode][]*defaultsNode
	values  []*defaultsNode // nodes with a default of their own
	// expanding marks the defaults being filled in; spent counts the values they come to.
	expanding map[*propDefaults]bool
	spent     int
}

// buildDefaults returns the defaults of the schema at root, nil when it declares none.
func buildDefaults(ctx context.Context, g *graph, check func(at *node, name string, value any) error) (*defaultsNode, error) {
	db := &defaultsBuilder{b: &builder{ctx: ctx, g: g}, check: check, memo: map[*node]*defaultsNode{},
		parents: map[*defaultsNode][]*defaultsNode{}, expanding: map[*propDefaults]bool{}}
	d, err := db.build(g.root)
	if err != nil || d == nil {
		return nil, err
	}
	kept := db.prune()
	if !kept[d] {
		return nil, nil
	}
	for _, n := range db.memo {
		if !kept[n] {
			continue
		}
		for name, pd := range n.props {
			if err := db.expand(name, pd); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

// follow is the schema a chain of $refs leads to (siblings of a $ref bring no defaults); nil
// for a chain that comes back on itself.
func follow(n *node) *node {
	for i := 0; n != nil && n.ref != nil; i++ {
		if i > MaxSchemaNodes {
			return nil
		}
		n = n.ref
	}
	return n
}

func (db *defaultsBuilder) build(at *node) (*defaultsNode, error) {
	n := follow(at)
	if n == nil || n.obj == nil {
		return nil, nil
	}
	if d, ok := db.memo[n]; ok {
		return d, nil
	}
	if err := db.b.step(); err != nil {
		return nil, err
	}
	d := &defaultsNode{}
	db.memo[n] = d // before the children: a recursion finds it
	for _, name := range n.propOrder {
		ps := n.props[name]
		pd := &propDefaults{}
		raw, err := db.defaultOf(ps, name)
		if err != nil {
			return nil, err
		}
		pd.value = raw
		if pd.child, err = db.build(ps); err != nil {
			return nil, err
		}
		if pd.value == nil && pd.child == nil {
			continue
		}
		if d.props == nil {
			d.props = map[string]*propDefaults{}
		}
		d.props[name] = pd
		if pd.value != nil {
			db.values = append(db.values, d)
		}
		if pd.child != nil {
			db.parents[pd.child] = append(db.parents[pd.child], d)
		}
	}
	if items := n.items; items != nil {
		var err error
		if d.items, err = db.build(items); err != nil {
			return nil, err
		}
		if d.items != nil {
			db.parents[d.items] = append(db.parents[d.items], d)
		}
	}
	return d, nil
}

// defaultOf is a property's default as JSON: its own, checked against its schema, or else
// the one of the schema its $ref names.
func (db *defaultsBuilder) defaultOf(ps *node, name string) (json.RawMessage, error) {
	v, own := ps.obj["default"]
	inherited := false
	if !own && ps.ref != nil {
		v, inherited = ps.ref.obj["default"]
	}
	if !own && !inherited {
		return nil, nil
	}
	if own {
		if err := db.check(ps, name, v); err != nil {
			return nil, err
		}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("schema: default of %q: %w", name, err)
	}
	return raw, nil
}

// prune keeps the nodes from which a default can be reached, and drops from those the
// properties and items that lead to none.
func (db *defaultsBuilder) prune() map[*defaultsNode]bool {
	kept := map[*defaultsNode]bool{}
	queue := slices.Clone(db.values)
	for len(queue) > 0 {
		d := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if kept[d] {
			continue
		}
		kept[d] = true
		queue = append(queue, db.parents[d]...)
	}
	for d := range kept {
		for name, pd := range d.props {
			if pd.child != nil && !kept[pd.child] {
				pd.child = nil
			}
			if pd.value == nil && pd.child == nil {
				delete(d.props, name)
			}
		}
		if d.items != nil && !kept[d.items] {
			d.items = nil
		}
	}
	return kept
}

// expand fills the defaults of a default's own schema into it, once: what applying the
// default and then the defaults inside it would give on every call. A default whose schema's
// defaults add it again would never end; one that grows too large is refused the same way.
func (db *defaultsBuilder) expand(name string, pd *propDefaults) error {
	if pd.value == nil || pd.child == nil || pd.filled {
		return nil
	}
	if db.expanding[pd] {
		return fmt.Errorf("schema: the default of %q never ends: the defaults of its own schema add it again; remove one of them", name)
	}
	db.expanding[pd] = true
	defer delete(db.expanding, pd)
	v, err := decodeNumber(pd.value)
	if err != nil {
		return fmt.Errorf("schema: default of %q: %w", name, err)
	}
	if _, err := db.fill(pd.child, v); err != nil {
		return err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("schema: default of %q: %w", name, err)
	}
	pd.value, pd.filled = raw, true
	return nil
}

// fill applies n's defaults to v as apply does, expanding each default inserted first, and
// counts the values inserted against MaxSchemaVisits.
func (db *defaultsBuilder) fill(n *defaultsNode, v any) (bool, error) {
	if err := db.b.step(); err != nil {
		return false, err
	}
	changed := false
	switch x := v.(type) {
	case map[string]any:
		for _, name := range propNames(n.props) {
			pd := n.props[name]
			cur, ok := x[name]
			if !ok {
				if pd.value == nil {
					continue
				}
				if err := db.expand(name, pd); err != nil {
					return changed, err
				}
				if db.spent += len(pd.value); db.spent > maxDefaultBytes {
					return changed, fmt.Errorf("schema: the defaults of %q come to more than %d bytes once the defaults inside them are filled in; simplify the schema", name, maxDefaultBytes)
				}
				d, err := decodeNumber(pd.value)
				if err != nil {
					return changed, err
				}
				x[name], changed = d, true
				continue
			}
			if pd.child != nil {
				c, err := db.fill(pd.child, cur)
				if err != nil {
					return changed, err
				}
				changed = changed || c
			}
		}
	case []any:
		if n.items != nil {
			for _, item := range x {
				c, err := db.fill(n.items, item)
				if err != nil {
					return changed, err
				}
				changed = changed || c
			}
		}
	}
	return changed, nil
}

// propNames lists the properties of a defaults node in name order, so that a default that
// never ends is reported the same way every time.
func propNames(props map[string]*propDefaults) []string {
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// maxDefaultBytes bounds what the defaults inserted into defaults come to, in all, when they
// are filled in at compile time: a few kilobytes of defaults that each fill in four others
// would otherwise take the server's memory and time. A tool's defaults take a few hundred bytes.
const maxDefaultBytes = 256 << 10

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
				continue // complete: its own defaults were filled in at compile time
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
