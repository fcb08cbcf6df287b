package schema

import (
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strconv"

	validator "github.com/santhosh-tekuri/jsonschema/v6"
)

// QuickCheck is the dispatcher's fast path. The validator works on decoded values
// (map[string]any), and decoding a call into that form costs more than everything else a call
// does. Most tool schemas use a small subset of JSON Schema (typed properties, required,
// additionalProperties, bounds, lengths, string enums, patterns); for those, quick walks the
// raw JSON bytes once and answers "certainly valid" without decoding anything. It is written
// by hand because no JSON Schema library validates raw bytes without building a value tree.
//
// quick is one-sided: it only ever says "valid" when the full validator would, and says "not
// known" for anything else (invalid input, escapes it would have to decode, meta-fields,
// duplicate keys), after which the caller takes the full path, which also words the errors.
// A differential fuzz test holds it to that.
type quick struct {
	root     *qnode
	defaults []rootDefault // root properties with defaults, in name order
}

type rootDefault struct {
	name  string
	value json.RawMessage
	bit   uint64
}

// JSON types a node admits, as bits.
const (
	tNull uint8 = 1 << iota
	tBool
	tInteger // integral numbers only
	tNumber  // any number
	tString
	tArray
	tObject
	tAny = tNull | tBool | tInteger | tNumber | tString | tArray | tObject
)

type qnode struct {
	types uint8

	minLen, maxLen int // -1: none
	pattern        *regexp.Regexp
	format         *validator.Schema // {"format": F} compiled, so formats mean what they mean on the full path
	enum           []string          // string values only; nil: no enum

	// Bounds; an absent one is the infinity every number is within, so a check needs no flag.
	min, max, exMin, exMax float64

	items              *qnode // nil: any items
	minItems, maxItems int    // -1: none

	props      []qprop
	required   uint64
	closed     bool   // additionalProperties: false
	additional *qnode // schema of other properties; nil: any
}

type qprop struct {
	name string
	node *qnode
	bit  uint64
}

// buildQuick compiles s for the fast path, or returns nil when s uses anything quick does not
// implement exactly.
func buildQuick(s *Schema) *quick {
	if s == nil || schemaType(s) != "object" {
		return nil
	}
	root, ok := qcompile(s, true)
	// The scan starts at the root's properties: a root that admits more than objects, or
	// restricts itself further (an enum), is left to the full path.
	if !ok || root.enum != nil || root.types&tObject == 0 {
		return nil
	}
	return &quick{root: root, defaults: rootDefaults(s, root)}
}

// rootDefaults are the defaults of the root's properties, in the root's (name) order.
func rootDefaults(s *Schema, root *qnode) []rootDefault {
	var defs []rootDefault
	for _, p := range root.props {
		if d := s.Properties[p.name].Default; d != nil {
			defs = append(defs, rootDefault{name: p.name, value: d, bit: p.bit})
		}
	}
	return defs
}

func qcompile(s *Schema, root bool) (*qnode, bool) {
	if s == nil {
		return nil, true
	}
	if isFalse(s) || quickUnsupported(s) {
		return nil, false
	}
	n := &qnode{}
	var ok bool
	if n.types, ok = quickTypes(s); !ok {
		return nil, false
	}
	n.compileBounds(s)
	if !n.compileString(s) || !n.compileArray(s) || !n.compileObject(s, root) {
		return nil, false
	}
	return n, true
}

// quickUnsupported says whether s has a keyword quick does not implement: any of them sends
// the whole schema to the full path.
func quickUnsupported(s *Schema) bool {
	for _, set := range []bool{
		s.Ref != "", s.DynamicRef != "", s.AnyOf != nil, s.OneOf != nil, s.AllOf != nil, s.Not != nil,
		s.If != nil, s.Then != nil, s.Else != nil, s.PatternProperties != nil, s.PropertyNames != nil,
		s.DependentRequired != nil, s.DependentSchemas != nil, s.DependencySchemas != nil,
		s.DependencyStrings != nil, s.UnevaluatedItems != nil, s.UnevaluatedProperties != nil,
		s.Contains != nil, s.PrefixItems != nil, s.ItemsArray != nil, s.AdditionalItems != nil,
		s.UniqueItems, s.MinProperties != nil, s.MaxProperties != nil, s.MultipleOf != nil,
		s.Const != nil, s.MinContains != nil, s.MaxContains != nil, len(s.Extra) > 0,
	} {
		if set {
			return true
		}
	}
	return false
}

// typeBits are the bits of each JSON type's name; a number admits integers too.
var typeBits = map[string]uint8{"null": tNull, "boolean": tBool, "integer": tInteger, "number": tNumber | tInteger,
	"string": tString, "array": tArray, "object": tObject}

// quickTypes are the JSON types s admits, as bits (all of them when it names none); false for
// a type name JSON Schema does not have.
func quickTypes(s *Schema) (uint8, bool) {
	ts := types(s)
	if len(ts) == 0 {
		return tAny, true
	}
	var out uint8
	for _, t := range ts {
		b, ok := typeBits[t]
		if !ok {
			return 0, false
		}
		out |= b
	}
	return out, true
}

// compileString sets the node's string constraints: a string enum, format, length, pattern.
func (n *qnode) compileString(s *Schema) bool {
	n.minLen, n.maxLen = orNone(s.MinLength), orNone(s.MaxLength)
	return n.compileEnum(s.Enum) && n.compileFormat(s.Format) && n.compilePattern(s.Pattern)
}

// compileEnum keeps an enum of strings; one with any other value is left to the full path.
func (n *qnode) compileEnum(enum []any) bool {
	if enum == nil {
		return true
	}
	for _, e := range enum {
		str, ok := e.(string)
		if !ok {
			return false
		}
		n.enum = append(n.enum, str)
	}
	n.types &= tString
	return true
}

func (n *qnode) compileFormat(format string) bool {
	if format == "" {
		return true
	}
	f, err := compileJSON([]byte(`{"format":` + strconv.Quote(format) + `}`))
	n.format = f
	return err == nil
}

func (n *qnode) compilePattern(pattern string) bool {
	if pattern == "" {
		return true
	}
	re, err := regexp.Compile(pattern)
	n.pattern = re
	return err == nil
}

func (n *qnode) compileBounds(s *Schema) {
	n.min, n.max = bound(s.Minimum, -1), bound(s.Maximum, 1)
	n.exMin, n.exMax = bound(s.ExclusiveMinimum, -1), bound(s.ExclusiveMaximum, 1)
}

// bound is a bound's value, or the infinity of sign inf when there is none.
func bound(p *float64, inf int) float64 {
	if p == nil {
		return math.Inf(inf)
	}
	return *p
}

// orNone is a count's limit, or -1 when there is none.
func orNone(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// compileArray sets the node's array constraints: item counts and the items' schema.
func (n *qnode) compileArray(s *Schema) bool {
	n.minItems, n.maxItems = orNone(s.MinItems), orNone(s.MaxItems)
	var ok bool
	n.items, ok = qcompile(s.Items, false)
	return ok
}

// compileObject sets the node's object constraints: at most 64 properties (one bit each, in
// name order), the required ones, and additional properties. Defaults are applied at the root
// only.
func (n *qnode) compileObject(s *Schema, root bool) bool {
	if len(s.Properties) > 64 {
		return false
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	return n.compileProps(s.Properties, names, root) && n.compileRequired(names, s.Required) &&
		n.compileAdditional(s.AdditionalProperties)
}

func (n *qnode) compileProps(props map[string]*Schema, names []string, root bool) bool {
	for i, name := range names {
		ps := props[name]
		if ps.Default != nil && !root {
			return false
		}
		pn, ok := qcompile(ps, false)
		if !ok {
			return false
		}
		n.props = append(n.props, qprop{name: name, node: pn, bit: 1 << uint(i)})
	}
	return true
}

func (n *qnode) compileRequired(names, required []string) bool {
	for _, r := range required {
		i := slices.Index(names, r)
		if i < 0 {
			return false // a required property without a schema: rare, leave it to the full path
		}
		n.required |= 1 << uint(i)
	}
	return true
}

func (n *qnode) compileAdditional(add *Schema) bool {
	if isFalse(add) {
		n.closed = true
		return true
	}
	var ok bool
	n.additional, ok = qcompile(add, false)
	return ok
}
