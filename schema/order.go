package schema

import (
	"context"
	"fmt"
	"strings"

	validator "github.com/santhosh-tekuri/jsonschema/v6"
)

// The validator (santhosh-tekuri/jsonschema v6) compiles a schema and everything it reaches in
// one call, keeping the schemas of that call in a list it searches on each new one: a document
// of n subschemas costs n² comparisons (a flat schema of 10,000 properties, 1.3 s; 100,000,
// minutes). A call that finds a subschema compiled by an earlier call does not search, so the
// document is compiled one subschema at a time, each after those it reaches. Two obstacles
// remain. Every subschema brings in the root of its resource, and with it the whole document:
// the document is therefore wrapped, so that its root is a definition of a root that holds
// nothing else. And schemas that $ref each other in a cycle can only be compiled together:
// such a group (a strongly connected component) costs the square of its size, and is bounded
// by MaxRecursiveNodes.

// MaxRecursiveNodes is the most subschemas a recursion may tie together: schemas that reach
// each other through $refs, in a cycle, are compiled at once, at a cost that grows with the
// square of their number (about 50 ms at the bound on a 2-core VM). A recursive tree or
// expression schema ties a handful.
const MaxRecursiveNodes = 2000

// wrapKey is where the wrapped document holds the schema: "definitions" is a place for
// subschemas in every draft the validator reads.
const wrapKey = "definitions"

// wrapPrefix is the location of the schema in the wrapped document.
const wrapPrefix = "/" + wrapKey + "/s"

// documentKeywords are what belongs to a document rather than to its root schema: they move
// to the wrapper.
var documentKeywords = []string{"$schema", "$id", "id", "$vocabulary"}

// wrap returns the document the validator compiles: a root holding doc as its only
// definition, with every reference by JSON pointer moved below it. It rewrites the $refs of
// doc in place.
func (g *graph) wrap(doc any) any {
	wrapper := map[string]any{}
	if obj, ok := doc.(map[string]any); ok {
		for _, kw := range documentKeywords {
			if v, ok := obj[kw]; ok {
				wrapper[kw] = v
				delete(obj, kw)
			}
		}
	}
	for _, n := range g.nodes {
		if ref, ok := n.obj["$ref"].(string); ok && isPointerRef(ref) {
			n.obj["$ref"] = "#" + wrapPrefix + ref[1:]
		}
	}
	wrapper[wrapKey] = map[string]any{"s": doc}
	return wrapper
}

// isPointerRef reports whether ref is a JSON pointer into the document: # or #/....
func isPointerRef(ref string) bool {
	return ref == "#" || strings.HasPrefix(ref, "#/")
}

// compileGroups returns one node of each group of nodes that must be compiled together, in an
// order in which each group comes after every group it reaches: Tarjan's algorithm finds the
// strongly connected components in that order. A group larger than MaxRecursiveNodes is
// refused.
func (g *graph) compileGroups(b *builder) ([]*node, error) {
	t := &tarjan{index: map[*node]int{}, low: map[*node]int{}, onStack: map[*node]bool{}}
	t.visit(g.root)
	for len(t.path) > 0 {
		if err := b.step(); err != nil {
			return nil, err
		}
		if err := t.advance(); err != nil {
			return nil, err
		}
	}
	return t.groups, nil
}

// tarjan is the state of compileGroups's walk: each node's index and low link, the nodes not
// yet in a group, the path from the root with the next edge of each node on it, and the groups
// found.
type tarjan struct {
	index, low map[*node]int
	onStack    map[*node]bool
	stack      []*node
	path       []visitFrame
	groups     []*node
}

func (t *tarjan) visit(n *node) {
	t.index[n], t.low[n] = len(t.index), len(t.index)
	t.stack = append(t.stack, n)
	t.onStack[n] = true
	t.path = append(t.path, visitFrame{n: n})
}

// advance follows the next edge of the node at the end of the path, or leaves the node when
// there is none.
func (t *tarjan) advance() error {
	top := &t.path[len(t.path)-1]
	child := top.n.edge(top.next)
	if child == nil {
		return t.leave()
	}
	top.next++
	if _, seen := t.index[child]; !seen {
		t.visit(child)
	} else if t.onStack[child] {
		t.low[top.n] = min(t.low[top.n], t.index[child])
	}
	return nil
}

// leave takes the node at the end of the path off it; when the node is the first of its group
// to have been visited, the group is complete.
func (t *tarjan) leave() error {
	n := t.path[len(t.path)-1].n
	t.path = t.path[:len(t.path)-1]
	if len(t.path) > 0 {
		parent := t.path[len(t.path)-1].n
		t.low[parent] = min(t.low[parent], t.low[n])
	}
	if t.low[n] != t.index[n] {
		return nil
	}
	if size := t.popGroup(n); size > MaxRecursiveNodes {
		return fmt.Errorf("schema: the $refs at %s tie %d subschemas together in a recursion; at most %d may be: "+
			"simplify it, e.g. refer back to fewer schemas", where(n.loc), size, MaxRecursiveNodes)
	}
	t.groups = append(t.groups, n)
	return nil
}

// popGroup takes n's group off the stack and returns its size.
func (t *tarjan) popGroup(n *node) int {
	for size := 1; ; size++ {
		m := t.stack[len(t.stack)-1]
		t.stack = t.stack[:len(t.stack)-1]
		t.onStack[m] = false
		if m == n {
			return size
		}
	}
}

// compileWrapped compiles the wrapped document one group at a time (see above), stopping when
// ctx ends, and returns the compiler, in which every subschema of the document is compiled,
// and the schema.
func compileWrapped(ctx context.Context, g *graph, groups []*node, wrapped any) (*validator.Compiler, *validator.Schema, error) {
	c := newCompiler()
	if err := c.AddResource(resourceURL, wrapped); err != nil {
		return nil, nil, fmt.Errorf("schema: compile: %s", cleanError(err))
	}
	if _, err := c.Compile(resourceURL); err != nil { // the wrapper alone: every group needs it
		return nil, nil, fmt.Errorf("schema: compile: %s", cleanError(err))
	}
	var root *validator.Schema
	for i, n := range groups {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
		}
		s, err := c.Compile(fragmentURL(n.loc))
		if err != nil {
			return nil, nil, fmt.Errorf("schema: compile: %s", cleanError(err))
		}
		if n == g.root {
			root = s
		}
	}
	return c, root, nil
}

// cleanError words a validator error about the wrapped document as if about the schema.
func cleanError(err error) string {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, resourceURL+"#"+wrapPrefix, "schema#")
	msg = strings.ReplaceAll(msg, "'"+wrapPrefix, "'")
	return strings.ReplaceAll(msg, resourceURL, "schema")
}
