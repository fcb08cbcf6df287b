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
	// operations: each method of each path, whether Source.Operations selects it or not.
	operations int
	// selected: the operations selectors select (all of them when there are none), the
	// source's cap; settings name the source's settings in the refusal.
	selected  int
	selectors []string
	settings  Settings
}

// counter counts what a scan meets against the limits.
type counter struct {
	limits
	values, operations, selected int
	sel                          *selector
}

func newCounter(lim limits) *counter {
	return &counter{limits: lim, sel: newSelector(lim.selectors)}
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

// selectOperation counts an operation the selectors select, against the source's cap.
func (c *counter) selectOperation(method, path, id string, tags []string) error {
	if !c.sel.selects(method, path, id, tags) {
		return nil
	}
	c.selected++
	if c.selected > c.limits.selected {
		return capError(c.limits.selected, len(c.limits.selectors) > 0, c.limits.settings)
	}
	return nil
}

// capError is the refusal of more operations than a source's cap: it says both ways out,
// selecting fewer and raising the cap.
func capError(limit int, selecting bool, names Settings) error {
	what := "the document has"
	if selecting {
		what = fmt.Sprintf("the selection (%s) matches", names.Operations)
	}
	return fmt.Errorf("%s more than %d operations, the most a source imports unless its cap is raised: "+
		"select the ones to import with %s (an operationId, tag:NAME or \"METHOD /path\" each), "+
		"or raise the cap with %s (at most %d)", what, limit, names.Operations, names.MaxOperations, MaxDocumentOperations)
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
	c := newCounter(lim)
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		isJSON, err := scanJSON(data, c)
		if isJSON || err != nil {
			return isJSON, err
		}
		// A flow mapping of YAML that is not JSON (unquoted keys, say): read as YAML.
		c = newCounter(lim)
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
	roleOperation
	roleTags
)

// childRole is the role of the value of member key in an object of role parent.
func childRole(parent role, key string) role {
	switch {
	case parent == roleRoot && key == "paths":
		return rolePaths
	case parent == rolePaths:
		return rolePathItem
	case parent == rolePathItem && isMethod(key):
		return roleOperation
	case parent == roleOperation && key == "tags":
		return roleTags
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
	// name is a path item's path, an operation's method; id and tags an operation's.
	name, id string
	tags     []string
}

// scanJSON counts a JSON document token by token. isJSON is false, with no error, when data is
// not one JSON value followed by nothing but white space.
func scanJSON(data []byte, c *counter) (isJSON bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	s := &jsonScan{counter: c}
	for started := false; ; started = true {
		tok, err := dec.Token()
		switch {
		case err == io.EOF:
			return started, nil
		case err != nil:
			return false, nil
		case started && len(s.stack) == 0:
			return false, nil // a second value after the document
		}
		if err := s.token(tok); err != nil {
			return true, err
		}
	}
}

// jsonScan counts a JSON document: the objects and arrays it is inside.
type jsonScan struct {
	*counter
	stack []jsonFrame
}

// token counts one token: a member's name, the end of an object or array, or a value.
func (s *jsonScan) token(tok json.Token) error {
	top := s.top()
	if key, ok := tok.(string); ok && top.object && top.expectKey {
		return s.key(top, key)
	}
	d, isDelim := tok.(json.Delim)
	if isDelim && (d == '}' || d == ']') {
		return s.end()
	}
	// A value: the document, an item of an array or a member's.
	if err := s.addValues(1); err != nil {
		return err
	}
	if str, ok := tok.(string); ok {
		s.note(top, str)
	}
	top.expectKey = top.object
	if isDelim {
		f := jsonFrame{object: d == '{', expectKey: d == '{', role: s.roleIn(top)}
		if f.role == rolePathItem || f.role == roleOperation {
			f.name = top.key
		}
		s.stack = append(s.stack, f)
	}
	return nil
}

// end ends the object or array the scan is in: an operation's counts against the cap.
func (s *jsonScan) end() error {
	f := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	if f.role != roleOperation || !f.object {
		return nil
	}
	return s.selectOperation(strings.ToUpper(f.name), s.top().name, f.id, f.tags)
}

// note keeps a string value that selecting an operation reads: its id, or one of its tags.
func (s *jsonScan) note(top *jsonFrame, str string) {
	switch {
	case top.role == roleOperation && top.key == "operationId":
		top.id = str
	case top.role == roleTags && len(s.stack) > 1:
		op := &s.stack[len(s.stack)-2]
		op.tags = append(op.tags, str)
	}
}

// top is the object or array the scan is inside, or a frame of the document itself.
func (s *jsonScan) top() *jsonFrame {
	if len(s.stack) == 0 {
		return &jsonFrame{}
	}
	return &s.stack[len(s.stack)-1]
}

// key takes the name of a member of top, counting an operation of a path item.
func (s *jsonScan) key(top *jsonFrame, key string) error {
	if top.role == rolePathItem && isMethod(key) {
		if err := s.addOperation(); err != nil {
			return err
		}
	}
	top.key, top.expectKey = key, false
	return nil
}

// roleIn is the role of an object or array that starts in top.
func (s *jsonScan) roleIn(top *jsonFrame) role {
	switch {
	case len(s.stack) == 0:
		return roleRoot
	case top.object:
		return childRole(top.role, top.key)
	}
	return roleOther
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
	flow := n.Style&yaml.FlowStyle != 0 && (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode)
	if err := y.check(n, key, flow && !inFlow); err != nil {
		return 0, err
	}
	total := 1
	if n.Kind == yaml.DocumentNode {
		total = 0
	}
	for i, child := range n.Content {
		childKey, isValue := valueKey(n, i, key)
		if !isValue {
			continue
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

// check checks the members of a mapping, and the written values of an outermost flow
// collection.
func (y *yamlScan) check(n *yaml.Node, key string, outermostFlow bool) error {
	if n.Kind == yaml.MappingNode {
		if err := y.checkMembers(len(n.Content)/2, key); err != nil {
			return err
		}
	}
	if outermostFlow {
		return y.checkFlow(written(n), key)
	}
	return nil
}

// valueKey reports whether the i-th node n holds is a value (a mapping's keys are not), and
// the key it is under.
func valueKey(n *yaml.Node, i int, key string) (string, bool) {
	if n.Kind != yaml.MappingNode {
		return key, true
	}
	if i%2 == 0 {
		return "", false
	}
	return n.Content[i-1].Value, true
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
		if err := y.itemOperations(paths.Content[i-1].Value, resolve(paths.Content[i])); err != nil {
			return err
		}
	}
	return nil
}

// itemOperations counts the methods of a path item.
func (y *yamlScan) itemOperations(path string, item *yaml.Node) error {
	if item == nil || item.Kind != yaml.MappingNode {
		return nil
	}
	for j := 0; j+1 < len(item.Content); j += 2 {
		method := item.Content[j].Value
		if !isMethod(method) {
			continue
		}
		if err := y.addOperation(); err != nil {
			return err
		}
		op := resolve(item.Content[j+1])
		var id string
		if n := member(op, "operationId"); n != nil && n.Kind == yaml.ScalarNode {
			id = n.Value
		}
		if err := y.selectOperation(strings.ToUpper(method), path, id, scalarValues(member(op, "tags"))); err != nil {
			return err
		}
	}
	return nil
}

// scalarValues are the scalars of a sequence node (none for nil).
func scalarValues(n *yaml.Node) []string {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	var out []string
	for _, item := range n.Content {
		if item = resolve(item); item.Kind == yaml.ScalarNode {
			out = append(out, item.Value)
		}
	}
	return out
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

// checkSelection refuses a document of more than MaxDocumentOperations and a selection of more
// than the source's cap, counted again on the loaded document (the scan did not follow a path
// item's $ref), before any tool is made.
func checkSelection(doc *openapi3.T, lim limits) error {
	c := newCounter(lim)
	for _, path := range doc.Paths.InMatchingOrder() {
		for _, op := range pathOperations(doc.Paths.Value(path)) {
			if err := c.addOperation(); err != nil {
				return err
			}
			if err := c.selectOperation(op.method, path, op.op.OperationID, op.op.Tags); err != nil {
				return err
			}
		}
	}
	return nil
}

// methodOp is an operation of a path item, with its method.
type methodOp struct {
	method string
	op     *openapi3.Operation
}

// pathOperations are the operations of a path item (none for nil), in the order of methods.
func pathOperations(item *openapi3.PathItem) []methodOp {
	if item == nil {
		return nil
	}
	var out []methodOp
	for _, method := range methods {
		if op := item.GetOperation(method); op != nil {
			out = append(out, methodOp{method, op})
		}
	}
	return out
}
