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
		if ref, ok := n.obj["$ref"].(string); ok && (ref == "#" || strings.HasPrefix(ref, "#/")) {
			n.obj["$ref"] = "#" + wrapPrefix + ref[1:]
		}
	}
	wrapper[wrapKey] = map[string]any{"s": doc}
	return wrapper
}

// compileGroups returns one node of each group of nodes that must be compiled together, in an
// order in which each group comes after every group it reaches: Tarjan's algorithm finds the
// strongly connected components in that order. A group larger than MaxRecursiveNodes is
// refused.
func (g *graph) compileGroups(b *builder) ([]*node, error) {
	type frame struct {
		n    *node
		next int
	}
	index := map[*node]int{}
	low := map[*node]int{}
	onStack := map[*node]bool{}
	var stack []*node
	var groups []*node
	var frames []frame
	visit := func(n *node) {
		index[n], low[n] = len(index), len(index)
		stack = append(stack, n)
		onStack[n] = true
		frames = append(frames, frame{n: n})
	}
	visit(g.root)
	for len(frames) > 0 {
		if err := b.step(); err != nil {
			return nil, err
		}
		top := &frames[len(frames)-1]
		if child := top.n.edge(top.next); child != nil {
			top.next++
			if _, seen := index[child]; !seen {
				visit(child)
			} else if onStack[child] {
				low[top.n] = min(low[top.n], index[child])
			}
			continue
		}
		n := top.n
		frames = frames[:len(frames)-1]
		if len(frames) > 0 {
			parent := frames[len(frames)-1].n
			low[parent] = min(low[parent], low[n])
		}
		if low[n] != index[n] {
			continue
		}
		size := 0
		for {
			m := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[m] = false
			size++
			if m == n {
				break
			}
		}
		if size > MaxRecursiveNodes {
			return nil, fmt.Errorf("schema: the $refs at %s tie %d subschemas together in a recursion; at most %d may be: "+
				"simplify it, e.g. refer back to fewer schemas", where(n.loc), size, MaxRecursiveNodes)
		}
		groups = append(groups, n)
	}
	return groups, nil
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
