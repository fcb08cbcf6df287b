package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"
)

// A document is counted before it is loaded. The loader (kin-openapi) builds up to a kilobyte
// and a half for each object of a document, copies what a YAML alias repeats as often as it is
// repeated, and decodes YAML with a decoder that compares every key of a mapping with every
// other: a few megabytes of small values cost gigabytes, a kilobyte of nested aliases all the
// memory there is, a mapping of 300,000 keys minutes of a core, before any rule of Quiver
// could refuse the document. The scan reads JSON token by token, keeping nothing, and YAML on
// the parser's node tree (which holds an alias once, and costs ten to ninety times the text:
// the one price paid before a YAML document can be refused), and refuses a document past its
// limits before the loader starts.

// limits bound what a document may hold.
type limits struct {
	// values: objects, arrays, strings, numbers, booleans and nulls, member names not
	// counted; a YAML alias counts as all the values it repeats, since the loader copies them.
	values int
	// members of one mapping of a YAML document (merge keys not expanded): YAML's decoder
	// compares each key of a mapping with every other, where JSON's keeps them in a map.
	members int
	// flow: values in one flow collection ({...} or [...], what it holds included) of a YAML
	// document: the loader's YAML parser holds the tokens of a flow collection until it ends,
	// at several hundred bytes each, where the scan's parser (an older version) does not.
	flow int
	// operations: each method of each path, whether Source.Operations selects it or not, since
	// selecting happens on the loaded document.
	operations int
}

// counter counts what a scan meets against the limits.
type counter struct {
	limits
	values, operations int
}

func (c *counter) addValues(n int) error {
	c.values += n
	if c.values > c.limits.values {
		return fmt.Errorf("the document has more than %d values (objects, arrays, strings, numbers; a YAML alias counts as what it repeats), "+
			"the most Quiver reads in one document", c.limits.values)
	}
	return nil
}

func (c *counter) checkMembers(n int, key string) error {
	if n > c.limits.members {
		return fmt.Errorf("the mapping %s has more than %d members, the most Quiver reads in one mapping of a YAML document", describeKey(key), c.limits.members)
	}
	return nil
}

func (c *counter) checkFlow(n int, key string) error {
	if n > c.limits.flow {
		return fmt.Errorf("the flow collection ({...} or [...]) %s holds more than %d values, the most Quiver reads in one: "+
			"write it in block style, or the document as JSON", describeKey(key), c.limits.flow)
	}
	return nil
}

func (c *counter) addOperation() error {
	c.operations++
	if c.operations > c.limits.operations {
		return fmt.Errorf("the document has more than %d operations (a method of a path each), the most Quiver reads in one document: "+
			"import a part of it", c.limits.operations)
	}
	return nil
}

func describeKey(key string) string {
	if key == "" {
		return "at the document's top"
	}
	return fmt.Sprintf("under %q", key)
}

// scanDocument counts the document's values and operations (and the members of each mapping
// of a YAML document), and reports whether it is JSON (else it is read as YAML, JSON's
// superset).
func scanDocument(data []byte, lim limits) (isJSON bool, err error) {
	c := &counter{limits: lim}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		isJSON, err := scanJSON(data, c)
		if isJSON || err != nil {
			return isJSON, err
		}
		// A flow mapping of YAML that is not JSON (unquoted keys, say): read as YAML.
		c = &counter{limits: lim}
	}
	return false, scanYAML(data, c)
}

// role is where an object sits, as far as counting operations needs to know.
type role uint8

const (
	roleOther role = iota
	roleRoot
	rolePaths
	rolePathItem
)

// childRole is the role of the value of member key in an object of role parent.
func childRole(parent role, key string) role {
	switch {
	case parent == roleRoot && key == "paths":
		return rolePaths
	case parent == rolePaths:
		return rolePathItem
	}
	return roleOther
}

// isMethod reports whether a member of a path item is an operation.
func isMethod(key string) bool {
	return key == strings.ToLower(key) && slices.Contains(methods, strings.ToUpper(key))
}

// jsonFrame is an object or array the JSON scan is inside.
type jsonFrame struct {
	object    bool
	role      role
	key       string // the member whose value comes next, in an object
	expectKey bool
}

// scanJSON counts a JSON document token by token. isJSON is false, with no error, when data is
// not one JSON value followed by nothing but white space.
func scanJSON(data []byte, c *counter) (isJSON bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []jsonFrame
	for started := false; ; started = true {
		tok, err := dec.Token()
		switch {
		case err == io.EOF:
			return started, nil
		case err != nil:
			return false, nil
		case started && len(stack) == 0:
			return false, nil // a second value after the document
		}
		top := &jsonFrame{} // the document itself, when the stack is empty
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if key, ok := tok.(string); ok && top.object && top.expectKey {
			if top.role == rolePathItem && isMethod(key) {
				if err := c.addOperation(); err != nil {
					return true, err
				}
			}
			top.key, top.expectKey = key, false
			continue
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		// A value: the document, an item of an array or a member's.
		if err := c.addValues(1); err != nil {
			return true, err
		}
		top.expectKey = top.object
		if d, ok := tok.(json.Delim); ok {
			f := jsonFrame{object: d == '{', expectKey: d == '{', role: roleRoot}
			if len(stack) > 0 {
				f.role = roleOther
				if top.object {
					f.role = childRole(top.role, top.key)
				}
			}
			stack = append(stack, f)
		}
	}
}

// scanYAML counts a YAML document on the parser's node tree, which holds each alias once,
// before anything is decoded from it (decoding copies what an alias repeats).
func scanYAML(data []byte, c *counter) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		// The loader says what is wrong with the text, where it reads it.
		return nil
	}
	y := &yamlScan{counter: c, sizes: map[*yaml.Node]int{}, open: map[*yaml.Node]bool{}}
	if err := y.operations(&root); err != nil {
		return err
	}
	n, err := y.size(&root, "", false)
	if err != nil {
		return err
	}
	return c.addValues(n)
}

// yamlScan counts a YAML node tree, each alias as the values it repeats.
type yamlScan struct {
	*counter
	// sizes are the values of the anchored nodes counted so far, so that an alias repeated a
	// million times costs one count.
	sizes map[*yaml.Node]int
	// open are the anchored nodes being counted: an alias met inside one of them that repeats
	// it is a cycle.
	open map[*yaml.Node]bool
}

// errAliasCycle is a document an alias of which repeats a node that holds it.
var errAliasCycle = errors.New("an alias of the document repeats a node that holds it, which has no end")

// size is the number of values n stands for, aliases expanded, saturated past the limit
// (the caller's addValues refuses). An anchored node is counted once, however many aliases
// repeat it and however deep the anchors nest.
func (y *yamlScan) size(n *yaml.Node, key string, inFlow bool) (int, error) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return 1, nil
		}
		n = n.Alias
	}
	if n.Anchor == "" {
		return y.count(n, key, inFlow)
	}
	if s, ok := y.sizes[n]; ok {
		return s, nil
	}
	if y.open[n] {
		return 0, errAliasCycle
	}
	y.open[n] = true
	s, err := y.count(n, key, inFlow)
	delete(y.open, n)
	y.sizes[n] = s
	return s, err
}

// count is the number of values of n and what it holds, its mappings' members and its
// outermost flow collections' written values checked.
func (y *yamlScan) count(n *yaml.Node, key string, inFlow bool) (int, error) {
	total := 1
	flow := n.Style&yaml.FlowStyle != 0 && (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode)
	switch n.Kind {
	case yaml.DocumentNode:
		total = 0
	case yaml.MappingNode:
		if err := y.checkMembers(len(n.Content)/2, key); err != nil {
			return 0, err
		}
	}
	if flow && !inFlow {
		if err := y.checkFlow(written(n), key); err != nil {
			return 0, err
		}
	}
	for i, child := range n.Content {
		childKey := key
		if n.Kind == yaml.MappingNode {
			if i%2 == 0 {
				continue // a key, not a value
			}
			childKey = n.Content[i-1].Value
		}
		s, err := y.size(child, childKey, inFlow || flow)
		if err != nil {
			return 0, err
		}
		// Saturated: aliases of aliases may stand for more values than an int holds.
		total = min(total+s, y.limits.values+1)
	}
	return total, nil
}

// written is the number of values of n and what it holds as the text writes them: an alias is
// one (the parser meets it as one token).
func written(n *yaml.Node) int {
	total := 1
	for i, child := range n.Content {
		if n.Kind != yaml.MappingNode || i%2 == 1 {
			total += written(child)
		}
	}
	return total
}

// operations counts the methods of the document's paths. (A path item that is a $ref counts
// none here: the loaded document's operations are counted again, each, before any tool is
// made.)
func (y *yamlScan) operations(root *yaml.Node) error {
	doc := resolve(root)
	if doc != nil && doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = resolve(doc.Content[0])
	}
	paths := member(doc, "paths")
	if paths == nil || paths.Kind != yaml.MappingNode {
		return nil
	}
	for i := 1; i < len(paths.Content); i += 2 {
		item := resolve(paths.Content[i])
		if item == nil || item.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j < len(item.Content); j += 2 {
			if isMethod(item.Content[j].Value) {
				if err := y.addOperation(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// resolve is the node an alias repeats, or n.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// member is the value of a mapping's member named key, nil when there is none.
func member(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return resolve(m.Content[i+1])
		}
	}
	return nil
}

// checkSelection refuses a document of more than MaxDocumentOperations (counted again on the
// loaded document: the scan did not follow a path item's $ref) and a selection of more than
// MaxOperations, before any tool is made.
func checkSelection(doc *openapi3.T, selectors []string) error {
	sel := newSelector(selectors)
	total, selected := 0, 0
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		if item == nil {
			continue
		}
		for _, method := range methods {
			op := item.GetOperation(method)
			if op == nil {
				continue
			}
			if total++; total > MaxDocumentOperations {
				return fmt.Errorf("the document has more than %d operations, the most Quiver reads in one document: import a part of it", MaxDocumentOperations)
			}
			if sel.selects(method, path, op) {
				selected++
			}
		}
	}
	if selected > MaxOperations {
		return fmt.Errorf("more than %d operations selected; select some with operations", MaxOperations)
	}
	return nil
}
