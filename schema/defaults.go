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
	if err := db.expandAll(kept); err != nil {
		return nil, err
	}
	return d, nil
}

// expandAll fills in the defaults inside every default of the nodes kept.
func (db *defaultsBuilder) expandAll(kept map[*defaultsNode]bool) error {
	for n := range kept {
		for name, pd := range n.props {
			if err := db.expand(name, pd); err != nil {
				return err
			}
		}
	}
	return nil
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
	if err := db.buildProps(d, n); err != nil {
		return nil, err
	}
	if err := db.buildItems(d, n); err != nil {
		return nil, err
	}
	return d, nil
}

func (db *defaultsBuilder) buildProps(d *defaultsNode, n *node) error {
	for _, name := range n.propOrder {
		pd, err := db.buildProp(n.props[name], name)
		if err != nil {
			return err
		}
		if pd != nil {
			db.addProp(d, name, pd)
		}
	}
	return nil
}

// buildProp is what a property contributes: its default and the defaults inside its value;
// nil when neither.
func (db *defaultsBuilder) buildProp(ps *node, name string) (*propDefaults, error) {
	raw, err := db.defaultOf(ps, name)
	if err != nil {
		return nil, err
	}
	child, err := db.build(ps)
	if err != nil || raw == nil && child == nil {
		return nil, err
	}
	return &propDefaults{value: raw, child: child}, nil
}

func (db *defaultsBuilder) addProp(d *defaultsNode, name string, pd *propDefaults) {
	if d.props == nil {
		d.props = map[string]*propDefaults{}
	}
	d.props[name] = pd
	if pd.value != nil {
		db.values = append(db.values, d)
	}
	db.link(pd.child, d)
}

func (db *defaultsBuilder) buildItems(d *defaultsNode, n *node) error {
	if n.items == nil {
		return nil
	}
	var err error
	d.items, err = db.build(n.items)
	db.link(d.items, d)
	return err
}

// link records the edge from parent to child, if there is a child.
func (db *defaultsBuilder) link(child, parent *defaultsNode) {
	if child != nil {
		db.parents[child] = append(db.parents[child], parent)
	}
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
	kept := db.reaching()
	for d := range kept {
		d.dropUnkept(kept)
	}
	return kept
}

// reaching is the set of nodes from which a default can be reached: those with one, and
// their ancestors.
func (db *defaultsBuilder) reaching() map[*defaultsNode]bool {
	kept := map[*defaultsNode]bool{}
	queue := slices.Clone(db.values)
	for len(queue) > 0 {
		d := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if !kept[d] {
			kept[d] = true
			queue = append(queue, db.parents[d]...)
		}
	}
	return kept
}

// dropUnkept drops the properties and items of d that lead to no node kept.
func (d *defaultsNode) dropUnkept(kept map[*defaultsNode]bool) {
	for name, pd := range d.props {
		if !kept[pd.child] {
			pd.child = nil
		}
		if pd.value == nil && pd.child == nil {
			delete(d.props, name)
		}
	}
	if !kept[d.items] {
		d.items = nil
	}
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
	switch x := v.(type) {
	case map[string]any:
		return db.fillProps(n, x)
	case []any:
		return db.fillItems(n, x)
	}
	return false, nil
}

func (db *defaultsBuilder) fillProps(n *defaultsNode, x map[string]any) (bool, error) {
	changed := false
	for _, name := range propNames(n.props) {
		c, err := db.fillProp(x, name, n.props[name])
		if err != nil {
			return changed, err
		}
		changed = changed || c
	}
	return changed, nil
}

// fillProp inserts a property's default into x when x lacks it, and otherwise fills in the
// defaults inside its value.
func (db *defaultsBuilder) fillProp(x map[string]any, name string, pd *propDefaults) (bool, error) {
	cur, ok := x[name]
	switch {
	case !ok && pd.value != nil:
		return db.insert(x, name, pd)
	case ok && pd.child != nil:
		return db.fill(pd.child, cur)
	}
	return false, nil
}

// insert inserts a property's default, its own defaults filled in, into x.
func (db *defaultsBuilder) insert(x map[string]any, name string, pd *propDefaults) (bool, error) {
	if err := db.expand(name, pd); err != nil {
		return false, err
	}
	if db.spent += len(pd.value); db.spent > maxDefaultBytes {
		return false, fmt.Errorf("schema: the defaults of %q come to more than %d bytes once the defaults inside them are filled in; simplify the schema", name, maxDefaultBytes)
	}
	d, err := decodeNumber(pd.value)
	if err != nil {
		return false, err
	}
	x[name] = d
	return true, nil
}

func (db *defaultsBuilder) fillItems(n *defaultsNode, x []any) (bool, error) {
	if n.items == nil {
		return false, nil
	}
	changed := false
	for _, item := range x {
		c, err := db.fill(n.items, item)
		if err != nil {
			return changed, err
		}
		changed = changed || c
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
	for tokens := strings.Split(path, "/"); len(tokens) > 0 && s != nil; {
		s, tokens = refStep(s, tokens)
	}
	if s == nil {
		return nil, fmt.Errorf("schema: $ref %q: no such definition", ref)
	}
	return s, nil
}

// The keywords a $ref's path goes through: each leads to a subschema, to one named by the
// token after it, or to one indexed by that token.
var (
	refSubschema = map[string]func(*Schema) *Schema{
		"items":                func(s *Schema) *Schema { return s.Items },
		"additionalProperties": func(s *Schema) *Schema { return s.AdditionalProperties },
		"not":                  func(s *Schema) *Schema { return s.Not },
	}
	refNamed = map[string]func(*Schema) map[string]*Schema{
		"$defs":             func(s *Schema) map[string]*Schema { return s.Defs },
		"definitions":       func(s *Schema) map[string]*Schema { return s.Definitions },
		"properties":        func(s *Schema) map[string]*Schema { return s.Properties },
		"patternProperties": func(s *Schema) map[string]*Schema { return s.PatternProperties },
		"dependentSchemas":  func(s *Schema) map[string]*Schema { return s.DependentSchemas },
	}
	refIndexed = map[string]func(*Schema) []*Schema{
		"anyOf":       func(s *Schema) []*Schema { return s.AnyOf },
		"oneOf":       func(s *Schema) []*Schema { return s.OneOf },
		"allOf":       func(s *Schema) []*Schema { return s.AllOf },
		"prefixItems": func(s *Schema) []*Schema { return s.PrefixItems },
	}
)

// refStep follows the keyword at the head of tokens from s, and returns where it leads (nil:
// nowhere) with the tokens left.
func refStep(s *Schema, tokens []string) (*Schema, []string) {
	keyword, tokens := tokens[0], tokens[1:]
	if sub, ok := refSubschema[keyword]; ok {
		return sub(s), tokens
	}
	tok, rest := refToken(tokens)
	if named, ok := refNamed[keyword]; ok {
		return named(s)[tok], rest
	}
	if indexed, ok := refIndexed[keyword]; ok {
		return refIndex(indexed(s), tok), rest
	}
	return nil, rest
}

// refToken is the first of tokens unescaped ("" when there is none), and the tokens after it.
func refToken(tokens []string) (string, []string) {
	if len(tokens) == 0 {
		return "", tokens
	}
	tok := tokens[0]
	if t, err := url.PathUnescape(tok); err == nil { // a $ref is a URI fragment
		tok = t
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~"), tokens[1:]
}

func refIndex(list []*Schema, tok string) *Schema {
	n, err := strconv.Atoi(tok)
	if err != nil || n < 0 || n >= len(list) {
		return nil
	}
	return list[n]
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
	switch x := v.(type) {
	case map[string]any:
		return n.applyProps(x)
	case []any:
		return n.applyItems(x)
	}
	return false, nil
}

func (n *defaultsNode) applyProps(x map[string]any) (bool, error) {
	changed := false
	for name, pd := range n.props {
		c, err := pd.applyTo(x, name)
		if err != nil {
			return changed, err
		}
		changed = changed || c
	}
	return changed, nil
}

// applyTo inserts a property's default into x when x lacks it, and otherwise applies the
// defaults inside its value.
func (pd *propDefaults) applyTo(x map[string]any, name string) (bool, error) {
	cur, ok := x[name]
	switch {
	case !ok && pd.value != nil:
		// Decode afresh each time: a shared value would alias between calls.
		d, err := decodeNumber(pd.value)
		if err != nil {
			return false, err
		}
		x[name] = d
		return true, nil // complete: its own defaults were filled in at compile time
	case ok && pd.child != nil:
		return pd.child.apply(cur)
	}
	return false, nil
}

func (n *defaultsNode) applyItems(x []any) (bool, error) {
	if n.items == nil {
		return false, nil
	}
	changed := false
	for _, item := range x {
		c, err := n.items.apply(item)
		if err != nil {
			return changed, err
		}
		changed = changed || c
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
