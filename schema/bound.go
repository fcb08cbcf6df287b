package schema

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Bounds on what a schema may cost the server. A schema comes from whoever defines a tool (a
// workspace member, an OpenAPI document, a remote MCP server), while compiling it and checking
// values against it are paid for by the server, for every workspace alike. No bound depends on
// the size of the document alone: a few kilobytes of $refs that name each other many times
// stand for billions of paths.
const (
	// MaxSchemaNodes is the most subschemas a schema document may hold: every object or boolean
	// in a place a schema goes (properties, items, $defs, anyOf, ...), each counted once however
	// many $refs name it. Compiling costs the validator some 25 µs a subschema on a 2-core VM;
	// a large tool's schema has a few hundred, and OpenAI's strict mode allows 5,000
	// properties.
	MaxSchemaNodes = 10_000

	// MaxSchemaVisits is the most schema nodes a schema leads to when every $ref is followed
	// anew along every path, a $ref back to a schema on the path (a recursion) counted once:
	// what checking a value that filled every path would take. A schema that names each
	// definition from one place has as many as it has nodes; one whose definitions each name
	// the next four times passes the bound at 10 levels. Compiling does not depend on it (each
	// schema is visited once); it refuses early what no value could be checked against in
	// MaxValidationSteps.
	MaxSchemaVisits = 1_000_000

	// MaxValidationSteps is the most checks of a value's parts against schema nodes that
	// validating one value may take, counted before the validator runs, for a schema that
	// names a definition from several places or is recursive: the validator memoises nothing,
	// so such a schema makes the work grow with the paths through it, and with the depth of
	// the value. A check costs the validator from 0.3 µs to 9 µs (a failed anyOf, whose errors
	// it words); a megabyte of arguments takes about a hundred thousand.
	MaxValidationSteps = 200_000
)

// graph is a schema document as the validator compiles it: every subschema, with the edges the
// validator follows from it. It is built from the document itself, before the validator sees
// it, so that the bounds above are checked on what the validator would do.
type graph struct {
	root    *node
	nodes   map[string]*node // by location
	anchors map[string]*node // by $anchor name
	// visits is the root's count of MaxSchemaVisits, reachable the nodes it reaches; recursive
	// tells whether a $ref leads back to a schema on its own path.
	visits, reachable int
	recursive         bool
}

// node is one subschema. inPlace are the schemas that apply to the same value ($ref, allOf,
// anyOf, oneOf, not, if, then, else, dependentSchemas); the others apply to a part of it.
type node struct {
	loc string         // JSON pointer in the document, "" for the root
	obj map[string]any // nil for true and false
	ref *node          // the target of $ref
	// items is the schema of "items" when it is one schema (not a list); it is in rest too.
	items *node

	inPlace    []*node
	props      map[string]*node
	propOrder  []string // sorted: every walk over a node is the same walk
	patterns   []pattern
	additional *node // additionalProperties: properties neither named nor matched
	anyProp    *node // unevaluatedProperties: counted for every property
	propNames  *node // propertyNames: each name, as a string
	prefix     []*node
	rest       []*node // items (after prefixItems) and additionalItems
	anyItem    []*node // contains, unevaluatedItems

	// Filled by countVisits.
	state  visitState
	visits int
}

type pattern struct {
	re *regexp.Regexp // nil: a pattern Go cannot compile, counted as matching every name
	n  *node
}

type visitState uint8

const (
	unvisited visitState = iota
	visiting
	visited
)

// Keywords whose values are subschemas, in every draft the validator reads.
var (
	schemaKeywords     = []string{"additionalProperties", "additionalItems", "contains", "not", "if", "then", "else", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	schemaListKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	schemaMapKeywords  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)

// ctxCheckEvery is how many steps pass between two looks at the context: often enough that a
// request that ended stops within a millisecond, rarely enough to cost nothing.
const ctxCheckEvery = 1024

// builder holds what building a graph counts.
type builder struct {
	ctx   context.Context
	g     *graph
	steps int
	id    string // the keyword that names a resource in this document's draft
}

func (b *builder) step() error {
	b.steps++
	if b.steps%ctxCheckEvery == 0 {
		return b.ctx.Err()
	}
	return nil
}

// newGraph reads a decoded schema document (as validator.UnmarshalJSON returns it) and checks
// it against MaxSchemaNodes and MaxSchemaVisits, stopping early when ctx ends.
func newGraph(ctx context.Context, doc any) (*graph, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := &builder{ctx: ctx, g: &graph{nodes: map[string]*node{}, anchors: map[string]*node{}}, id: "$id"}
	if obj, ok := doc.(map[string]any); ok {
		if s, _ := obj["$schema"].(string); strings.Contains(s, "draft-04") {
			b.id = "id"
		}
	}
	root, err := b.add("", doc)
	if err != nil {
		return nil, err
	}
	b.g.root = root
	if err := b.g.countVisits(b); err != nil {
		return nil, err
	}
	return b.g, nil
}

// add registers the subschema v at loc and everything below it. References are resolved once
// every node is known, and only for the nodes the root reaches, as the validator does.
func (b *builder) add(loc string, v any) (*node, error) {
	if err := b.step(); err != nil {
		return nil, err
	}
	if len(b.g.nodes) >= MaxSchemaNodes {
		return nil, fmt.Errorf("schema: more than %d subschemas (at %s); a schema may have at most %d: simplify it", MaxSchemaNodes, where(loc), MaxSchemaNodes)
	}
	n := &node{loc: loc}
	b.g.nodes[loc] = n
	obj, ok := v.(map[string]any)
	if !ok {
		return n, nil // true, false, or what the validator will refuse
	}
	n.obj = obj
	for _, read := range []func(*node) error{b.names, b.addSingles, b.addItems, b.addLists, b.addMaps} {
		if err := read(n); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// addSingles reads the keywords whose value is one subschema.
func (b *builder) addSingles(n *node) error {
	for _, kw := range schemaKeywords {
		sub, ok := n.obj[kw]
		if !ok || !isSchemaValue(sub) {
			continue
		}
		c, err := b.add(n.loc+"/"+escapeToken(kw), sub)
		if err != nil {
			return err
		}
		b.single(n, kw, c)
	}
	return nil
}

// addLists reads the keywords whose value is a list of subschemas.
func (b *builder) addLists(n *node) error {
	for _, kw := range schemaListKeywords {
		dst := &n.inPlace
		if kw == "prefixItems" {
			dst = &n.prefix
		}
		list, _ := n.obj[kw].([]any)
		for i, sub := range list {
			c, err := b.add(fmt.Sprintf("%s/%s/%d", n.loc, kw, i), sub)
			if err != nil {
				return err
			}
			*dst = append(*dst, c)
		}
	}
	return nil
}

// addMaps reads the keywords whose value is a map of subschemas.
func (b *builder) addMaps(n *node) error {
	for _, kw := range schemaMapKeywords {
		if err := b.addMap(n, kw); err != nil {
			return err
		}
	}
	return nil
}

// names records the anchors a schema declares. It refuses an $id below the root, which would
// start another resource in which references resolve differently, and dynamic references,
// whose target depends on the path a value takes: neither has a use in a tool's arguments.
func (b *builder) names(n *node) error {
	if name, ok := n.obj["$anchor"].(string); ok {
		b.g.anchors[name] = n
	}
	for _, kw := range []string{"$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor"} {
		if _, ok := n.obj[kw]; ok {
			return fmt.Errorf("schema: compile: %s at %s: dynamic references are not supported; use $ref", kw, where(n.loc))
		}
	}
	id, ok := n.obj[b.id].(string)
	switch {
	case !ok || n.loc == "":
	case strings.HasPrefix(id, "#"): // draft 6 and 7 name an anchor with $id
		b.g.anchors[id[1:]] = n
	default:
		return fmt.Errorf("schema: %s at %s: only the root may have an %s (one below it would start another document)", b.id, where(n.loc), b.id)
	}
	return nil
}

func (b *builder) single(n *node, kw string, c *node) {
	switch kw {
	case "additionalProperties":
		n.additional = c
	case "additionalItems":
		n.rest = append(n.rest, c)
	case "contains", "unevaluatedItems":
		n.anyItem = append(n.anyItem, c)
	case "propertyNames":
		n.propNames = c
	case "unevaluatedProperties":
		n.anyProp = c
	case "contentSchema": // checked only when content is asserted, which it is not
	default: // not, if, then, else
		n.inPlace = append(n.inPlace, c)
	}
}

// addItems reads items: a schema for every item past prefixItems, or (before draft 2020) a
// list of schemas for the first items.
func (b *builder) addItems(n *node) error {
	switch items := n.obj["items"].(type) {
	case []any:
		for i, sub := range items {
			c, err := b.add(fmt.Sprintf("%s/items/%d", n.loc, i), sub)
			if err != nil {
				return err
			}
			n.prefix = append(n.prefix, c)
		}
	case map[string]any, bool:
		c, err := b.add(n.loc+"/items", items)
		if err != nil {
			return err
		}
		n.items = c
		n.rest = append(n.rest, c)
	}
	return nil
}

func (b *builder) addMap(n *node, kw string) error {
	m, _ := n.obj[kw].(map[string]any)
	for _, k := range schemaKeys(m) {
		c, err := b.add(n.loc+"/"+escapeToken(kw)+"/"+escapeToken(k), m[k])
		if err != nil {
			return err
		}
		n.addMember(kw, k, c)
	}
	return nil
}

// schemaKeys are the keys of m whose values are schemas (dependencies also holds lists of
// names), in order.
func schemaKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k, sub := range m {
		if isSchemaValue(sub) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// addMember records c, the subschema under key k of the map keyword kw. $defs and definitions
// apply to nothing until a $ref names them.
func (n *node) addMember(kw, k string, c *node) {
	switch kw {
	case "properties":
		if n.props == nil {
			n.props = map[string]*node{}
		}
		n.props[k] = c
		n.propOrder = append(n.propOrder, k)
	case "patternProperties":
		re, _ := regexp.Compile(k) // the validator refuses a pattern Go cannot compile
		n.patterns = append(n.patterns, pattern{re: re, n: c})
	case "dependentSchemas", "dependencies":
		n.inPlace = append(n.inPlace, c)
	}
}

func isSchemaValue(v any) bool {
	switch v.(type) {
	case map[string]any, bool:
		return true
	}
	return false
}

func hasRef(obj map[string]any) bool {
	_, ok := obj["$ref"]
	return ok
}

// link resolves a node's $ref. A schema has no other document to refer to (there is no
// loader), and no resource but the root.
func (b *builder) link(n *node) error {
	ref, ok := n.obj["$ref"].(string)
	if !ok {
		return fmt.Errorf("schema: compile: $ref at %s is not a string", where(n.loc))
	}
	target, err := b.g.resolve(ref)
	if err != nil {
		return fmt.Errorf("schema: compile: $ref %q at %s: %w", ref, where(n.loc), err)
	}
	n.ref = target
	n.inPlace = append(n.inPlace, target)
	return nil
}

// resolve finds the subschema a reference names: # or a JSON pointer to a subschema
// (#/$defs/NAME, #/properties/a/items, ...), or #NAME for an anchor.
func (g *graph) resolve(ref string) (*node, error) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("only references into the schema itself are followed, such as #/$defs/NAME")
	}
	frag, err := url.PathUnescape(frag) // a reference is a URI: its fragment may be percent-encoded
	if err != nil {
		return nil, fmt.Errorf("not a valid URI fragment: %v", err)
	}
	if frag != "" && !strings.HasPrefix(frag, "/") {
		if n := g.anchors[frag]; n != nil {
			return n, nil
		}
		return nil, fmt.Errorf("no schema has the anchor %q", frag)
	}
	if n := g.nodes[frag]; n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("no subschema there (a reference names a schema: #, #/$defs/NAME, #/properties/NAME, ...)")
}

// countVisits computes MaxSchemaVisits's count for every node reachable from the root, once
// each: a node's count is itself plus its edges' counts, a $ref back to a node being counted
// (a recursion) adding one. Nodes are walked in a fixed order, so the same schema always gets
// the same counts.
func (g *graph) countVisits(b *builder) error {
	vc := &visitCounter{g: g, b: b}
	if err := vc.push(g.root); err != nil {
		return err
	}
	for len(vc.stack) > 0 {
		if err := b.step(); err != nil {
			return err
		}
		if err := vc.advance(); err != nil {
			return err
		}
	}
	g.visits = g.root.visits
	return nil
}

// visitCounter is countVisits's depth-first walk: the nodes being counted, each with the next
// of its edges to follow.
type visitCounter struct {
	g     *graph
	b     *builder
	stack []visitFrame
}

type visitFrame struct {
	n    *node
	next int // index into n's edges
}

// push starts counting n, resolving its $ref.
func (vc *visitCounter) push(n *node) error {
	n.state, n.visits = visiting, 1
	vc.g.reachable++
	vc.stack = append(vc.stack, visitFrame{n: n})
	if n.obj != nil && hasRef(n.obj) {
		return vc.b.link(n)
	}
	return nil
}

// advance follows the next edge of the node on top of the stack, or finishes the node when
// every edge is counted.
func (vc *visitCounter) advance() error {
	top := &vc.stack[len(vc.stack)-1]
	child := top.n.edge(top.next)
	if child == nil {
		return vc.pop()
	}
	top.next++
	switch child.state {
	case unvisited:
		return vc.push(child)
	case visiting: // a recursion: counted once, not followed
		vc.g.recursive = true
		top.n.addVisits(1)
	case visited:
		top.n.addVisits(child.visits)
	}
	return nil
}

// pop finishes the node on top of the stack, adding its count to its parent's.
func (vc *visitCounter) pop() error {
	n := vc.stack[len(vc.stack)-1].n
	n.state = visited
	vc.stack = vc.stack[:len(vc.stack)-1]
	if len(vc.stack) > 0 {
		vc.stack[len(vc.stack)-1].n.addVisits(n.visits)
	}
	if n.visits > MaxSchemaVisits {
		return fmt.Errorf("schema: more than %d schema nodes to visit from %s (following every $ref along every path); "+
			"a schema may lead to at most %d: simplify it, e.g. name each definition from fewer places", MaxSchemaVisits, where(n.loc), MaxSchemaVisits)
	}
	return nil
}

// addVisits adds k to n's count, which stops just past the limit.
func (n *node) addVisits(k int) {
	n.visits = min(n.visits+k, MaxSchemaVisits+1)
}

// edge returns n's i-th edge in a fixed order, nil past the last.
func (n *node) edge(i int) *node {
	for _, list := range [][]*node{n.inPlace, n.prefix, n.rest, n.anyItem} {
		if i < len(list) {
			return list[i]
		}
		i -= len(list)
	}
	if i < len(n.propOrder) {
		return n.props[n.propOrder[i]]
	}
	i -= len(n.propOrder)
	if i < len(n.patterns) {
		return n.patterns[i].n
	}
	i -= len(n.patterns)
	for _, c := range []*node{n.additional, n.anyProp, n.propNames} {
		if c == nil {
			continue
		}
		if i == 0 {
			return c
		}
		i--
	}
	return nil
}

// where names a location in an error, quoted and cut short: "#/$defs/a", or "#" for the root.
// Its names come from whoever wrote the schema, so they are escaped.
func where(loc string) string { return strconv.Quote(truncate("#"+loc, 200)) }

// escapeToken escapes a JSON pointer token (RFC 6901) the way the validator does.
func escapeToken(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// fragmentURL is the validator's URL of the subschema at loc, in the wrapped document.
func fragmentURL(loc string) string {
	toks := strings.Split(wrapPrefix+loc, "/")
	for i, t := range toks {
		toks[i] = url.PathEscape(t)
	}
	return resourceURL + "#" + strings.Join(toks, "/")
}

// dropDocument lets go of the decoded document once compilation is done: what stays is the
// graph's edges, which is all validationCost needs.
func (g *graph) dropDocument() {
	for _, n := range g.nodes {
		n.obj = nil
	}
	g.anchors = nil
}
