package schema

import (
	"fmt"
	"slices"
)

// The validator checks a value against a schema by following the schema's edges anew at every
// place: nothing is memoised, so a value part that several paths through the schema reach is
// checked once per path. A schema that names a definition from two branches of an anyOf, itself
// named from two branches, and so on, makes a small value cost exponential time; a recursive
// one makes it grow with the value's depth. validationCost counts those checks without making
// them, in time linear in the value, and the validator runs only when they are few enough.

// weighted is a schema node and how many paths reach it at the current part of the value.
type weighted struct {
	n     *node
	paths int
}

// coster counts the checks validating one value takes, up to a limit.
type coster struct {
	steps, limit int
	// Scratch space for closure, reused from one value part to the next.
	order []*node
	pos   map[*node]int
	count map[*node]int
	seen  map[*node]bool
}

// validationCost reports whether validating v against the schema at entry takes at most limit
// checks; if not, the error says so.
func (g *graph) validationCost(entry *node, v any, limit int) error {
	c := &coster{limit: limit}
	if c.value(v, []weighted{{entry, 1}}) {
		return nil
	}
	return fmt.Errorf("checking this value against the schema would take more than %d steps "+
		"(the schema names the same definitions along many paths); simplify the schema or send a smaller value", limit)
}

// value counts the checks of v against the schema nodes entries reaches, and of v's parts
// against what those lead to. It reports false as soon as the count passes the limit.
func (c *coster) value(v any, entries []weighted) bool {
	reached := c.closure(entries)
	for _, w := range reached {
		c.steps = min(c.steps+w.paths, c.limit+1)
	}
	if c.steps > c.limit {
		return false
	}
	switch x := v.(type) {
	case map[string]any:
		return c.members(reached, x)
	case []any:
		return c.items(reached, x)
	}
	return true
}

func (c *coster) members(reached []weighted, x map[string]any) bool {
	for key, member := range x {
		next := c.member(reached, key)
		if c.steps > c.limit || len(next) > 0 && !c.value(member, next) {
			return false
		}
	}
	return true
}

func (c *coster) items(reached []weighted, x []any) bool {
	for i, item := range x {
		if next := itemEntries(reached, i); len(next) > 0 && !c.value(item, next) {
			return false
		}
	}
	return true
}

// itemEntries is where the i-th item of an array leads from the nodes reached at the array.
func itemEntries(reached []weighted, i int) []weighted {
	var next []weighted
	for _, w := range reached {
		if i < len(w.n.prefix) {
			next = append(next, weighted{w.n.prefix[i], w.paths})
		}
		next = appendAll(next, w.n.rest, w.paths)
		next = appendAll(next, w.n.anyItem, w.paths)
	}
	return next
}

// member is where a property key of an object leads from the nodes reached at the object; the
// key itself is checked against propertyNames on the way.
func (c *coster) member(reached []weighted, key string) []weighted {
	var next []weighted
	for _, w := range reached {
		next = c.memberOf(next, w, key)
	}
	return next
}

// memberOf appends to next where key leads from the node w.
func (c *coster) memberOf(next []weighted, w weighted, key string) []weighted {
	n := w.n
	next, matched := n.declared(next, key, w.paths)
	if !matched && n.additional != nil {
		next = append(next, weighted{n.additional, w.paths})
	}
	if n.anyProp != nil {
		next = append(next, weighted{n.anyProp, w.paths})
	}
	if n.propNames != nil {
		c.value(key, []weighted{{n.propNames, w.paths}}) // a string: only its own count
	}
	return next
}

// declared appends to next the property and the patterns of n that key matches, and reports
// whether there were any.
func (n *node) declared(next []weighted, key string, paths int) ([]weighted, bool) {
	matched := false
	if p := n.props[key]; p != nil {
		next, matched = append(next, weighted{p, paths}), true
	}
	for _, pat := range n.patterns {
		if pat.re == nil || pat.re.MatchString(key) {
			next, matched = append(next, weighted{pat.n, paths}), true
		}
	}
	return next, matched
}

func appendAll(out []weighted, nodes []*node, paths int) []weighted {
	for _, n := range nodes {
		out = append(out, weighted{n, paths})
	}
	return out
}

// closure is every node the entries reach without moving into the value (through $ref, allOf,
// anyOf, ...), with the number of paths reaching each. The validator stops a path that comes
// back to a node it is checking the same value against, so such an edge is not counted.
func (c *coster) closure(entries []weighted) []weighted {
	if chain := c.chain(entries); chain != nil {
		return chain
	}
	// Order the nodes reached so that each comes after every node with an edge to it (edges
	// back to a node on the path left out), then push the path counts along the edges.
	c.reset()
	for _, e := range entries {
		c.postOrder(e.n)
		c.count[e.n] = min(c.count[e.n]+e.paths, c.limit+1)
	}
	slices.Reverse(c.order)
	for i, n := range c.order {
		c.pos[n] = i
	}
	return c.pushCounts()
}

// reset empties the scratch space.
func (c *coster) reset() {
	if c.pos == nil {
		c.pos, c.count, c.seen = map[*node]int{}, map[*node]int{}, map[*node]bool{}
	}
	clear(c.pos)
	clear(c.count)
	clear(c.seen)
	c.order = c.order[:0]
}

// pushCounts pushes the path counts along the edges, in order, and returns the nodes with
// their counts.
func (c *coster) pushCounts() []weighted {
	out := make([]weighted, 0, len(c.order))
	for _, n := range c.order {
		paths := c.count[n]
		for _, t := range n.inPlace {
			if c.pos[t] > c.pos[n] {
				c.count[t] = min(c.count[t]+paths, c.limit+1)
			}
		}
		out = append(out, weighted{n, paths})
	}
	return out
}

// chain is the closure of a single entry whose nodes each apply at most one other in place
// (a plain schema, or a $ref to a definition): one path to each. It returns nil otherwise.
func (c *coster) chain(entries []weighted) []weighted {
	if len(entries) != 1 {
		return nil
	}
	out := entries[:1:1]
	for n := entries[0].n; len(n.inPlace) > 0; n = n.inPlace[0] {
		if len(n.inPlace) > 1 || len(out) > maxChain {
			return nil
		}
		out = append(out, weighted{n.inPlace[0], entries[0].paths})
	}
	return out
}

// maxChain is the longest chain of $refs chain follows; a longer one (or one that comes back
// on itself) takes the general way.
const maxChain = 16

// postOrder appends to c.order every node n reaches in place, each after those it reaches.
func (c *coster) postOrder(n *node) {
	if c.seen[n] {
		return
	}
	c.seen[n] = true
	type frame struct {
		n    *node
		next int
	}
	stack := []frame{{n: n}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.next == len(top.n.inPlace) {
			c.order = append(c.order, top.n)
			stack = stack[:len(stack)-1]
			continue
		}
		t := top.n.inPlace[top.next]
		top.next++
		if !c.seen[t] {
			c.seen[t] = true
			stack = append(stack, frame{n: t})
		}
	}
}
