package schema

import (
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strconv"
	"unicode/utf8"

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

	min, max, exMin, exMax             float64
	hasMin, hasMax, hasExMin, hasExMax bool

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
	q := &quick{root: root}
	for _, p := range root.props {
		if d := s.Properties[p.name].Default; d != nil {
			q.defaults = append(q.defaults, rootDefault{name: p.name, value: d, bit: p.bit})
		}
	}
	return q
}

func qcompile(s *Schema, root bool) (*qnode, bool) {
	if s == nil {
		return nil, true
	}
	if isFalse(s) || quickUnsupported(s) {
		return nil, false
	}
	n := &qnode{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	var ok bool
	if n.types, ok = quickTypes(s); !ok {
		return nil, false
	}
	if !n.compileScalar(s) || !n.compileArray(s) || !n.compileObject(s, root) {
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

// compileScalar sets the node's string and number constraints: a string enum, format, length,
// pattern, bounds.
func (n *qnode) compileScalar(s *Schema) bool {
	if s.Enum != nil {
		for _, e := range s.Enum {
			str, ok := e.(string)
			if !ok {
				return false
			}
			n.enum = append(n.enum, str)
		}
		n.types &= tString
	}
	if s.Format != "" {
		f, err := compileJSON([]byte(`{"format":` + strconv.Quote(s.Format) + `}`))
		if err != nil {
			return false
		}
		n.format = f
	}
	if s.MinLength != nil {
		n.minLen = *s.MinLength
	}
	if s.MaxLength != nil {
		n.maxLen = *s.MaxLength
	}
	if s.Pattern != "" {
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			return false
		}
		n.pattern = re
	}
	setF := func(p *float64, dst *float64, has *bool) {
		if p != nil {
			*dst, *has = *p, true
		}
	}
	setF(s.Minimum, &n.min, &n.hasMin)
	setF(s.Maximum, &n.max, &n.hasMax)
	setF(s.ExclusiveMinimum, &n.exMin, &n.hasExMin)
	setF(s.ExclusiveMaximum, &n.exMax, &n.hasExMax)
	return true
}

// compileArray sets the node's array constraints: item counts and the items' schema.
func (n *qnode) compileArray(s *Schema) bool {
	if s.MinItems != nil {
		n.minItems = *s.MinItems
	}
	if s.MaxItems != nil {
		n.maxItems = *s.MaxItems
	}
	if s.Items != nil {
		items, ok := qcompile(s.Items, false)
		if !ok {
			return false
		}
		n.items = items
	}
	return true
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
	for i, name := range names {
		ps := s.Properties[name]
		if ps.Default != nil && !root {
			return false
		}
		pn, ok := qcompile(ps, false)
		if !ok {
			return false
		}
		n.props = append(n.props, qprop{name: name, node: pn, bit: 1 << uint(i)})
	}
	for _, r := range s.Required {
		i := slices.Index(names, r)
		if i < 0 {
			return false // a required property without a schema: rare, leave it to the full path
		}
		n.required |= 1 << uint(i)
	}
	if s.AdditionalProperties == nil {
		return true
	}
	if isFalse(s.AdditionalProperties) {
		n.closed = true
		return true
	}
	add, ok := qcompile(s.AdditionalProperties, false)
	n.additional = add
	return ok
}

// QuickCheck reports whether raw is certainly a JSON object that satisfies the schema, has no
// meta-field (no property starting with "_") and needs no default below the root. When it does,
// it returns raw with the root's missing defaults added. When it returns false nothing is
// known: decode, apply defaults and validate as usual.
func (c *Compiled) QuickCheck(raw []byte) ([]byte, bool) {
	q := c.quick
	if q == nil {
		return nil, false
	}
	sc := scanner{b: raw}
	sc.ws()
	if sc.i >= len(sc.b) || sc.b[sc.i] != '{' {
		return nil, false
	}
	seen, ok := sc.object(q.root, 0)
	if !ok {
		return nil, false
	}
	sc.ws()
	if sc.i != len(sc.b) {
		return nil, false
	}
	for _, d := range q.defaults {
		if seen&d.bit == 0 {
			return insertDefaults(raw, q.defaults, seen), true
		}
	}
	return raw, true
}

// insertDefaults appends the missing root defaults before raw's closing brace.
func insertDefaults(raw []byte, defs []rootDefault, seen uint64) []byte {
	end := len(raw) - 1
	for raw[end] != '}' {
		end--
	}
	body := raw[:end]
	empty := true
	for i := len(body) - 1; i >= 0; i-- {
		if c := body[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			empty = c == '{'
			break
		}
	}
	out := make([]byte, 0, len(raw)+64)
	out = append(out, body...)
	for _, d := range defs {
		if seen&d.bit != 0 {
			continue
		}
		if !empty {
			out = append(out, ',')
		}
		empty = false
		out = strconv.AppendQuote(out, d.name)
		out = append(out, ':')
		out = append(out, d.value...)
	}
	return append(out, '}')
}

// maxQuickDepth bounds recursion; deeper input is left to the full path.
const maxQuickDepth = 256

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value checks the value at the cursor against n (nil: any value).
func (s *scanner) value(n *qnode, depth int) bool {
	if depth > maxQuickDepth {
		return false
	}
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	types := tAny
	if n != nil {
		types = n.types
	}
	switch c := s.b[s.i]; {
	case c == '{':
		if types&tObject == 0 {
			return false
		}
		_, ok := s.object(n, depth)
		return ok
	case c == '[':
		return types&tArray != 0 && s.array(n, depth)
	case c == '"':
		str, escaped, ok := s.str()
		if !ok || types&tString == 0 {
			return false
		}
		return n == nil || n.checkString(str, escaped)
	case c == 't':
		return types&tBool != 0 && s.literal("true")
	case c == 'f':
		return types&tBool != 0 && s.literal("false")
	case c == 'n':
		return types&tNull != 0 && s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		num, integral, ok := s.number()
		if !ok {
			return false
		}
		return n == nil || n.checkNumber(num, integral)
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// object checks an object at the cursor and returns the bits of the declared properties seen.
func (s *scanner) object(n *qnode, depth int) (uint64, bool) {
	s.i++ // {
	var seen uint64
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return 0, n == nil || n.required == 0
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return 0, false
		}
		key, escaped, ok := s.str()
		if !ok || escaped || len(key) == 0 || key[0] == '_' {
			return 0, false
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return 0, false
		}
		s.i++
		var child *qnode
		if n != nil {
			p := n.prop(key)
			switch {
			case p != nil:
				if seen&p.bit != 0 {
					return 0, false // duplicate key: decoders disagree on which wins
				}
				seen |= p.bit
				child = p.node
			case n.closed:
				return 0, false
			default:
				child = n.additional
			}
		}
		if !s.value(child, depth+1) {
			return 0, false
		}
		s.ws()
		if s.i >= len(s.b) {
			return 0, false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			if n != nil && seen&n.required != n.required {
				return 0, false
			}
			return seen, true
		default:
			return 0, false
		}
	}
}

func (n *qnode) prop(key []byte) *qprop {
	for i := range n.props {
		if n.props[i].name == string(key) {
			return &n.props[i]
		}
	}
	return nil
}

func (s *scanner) array(n *qnode, depth int) bool {
	s.i++ // [
	var items *qnode
	if n != nil {
		items = n.items
	}
	count := 0
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
	} else {
		for {
			if !s.value(items, depth+1) {
				return false
			}
			count++
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			if s.b[s.i] == ']' {
				s.i++
				break
			}
			if s.b[s.i] != ',' {
				return false
			}
			s.i++
		}
	}
	if n == nil {
		return true
	}
	return (n.minItems < 0 || count >= n.minItems) && (n.maxItems < 0 || count <= n.maxItems)
}

// str scans a string at the cursor and returns its raw contents (without quotes) and whether
// it contains escapes (in which case the raw bytes are not the value).
func (s *scanner) str() ([]byte, bool, bool) {
	s.i++ // opening quote
	start := s.i
	escaped := false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			if !utf8.Valid(raw) {
				return nil, false, false
			}
			return raw, escaped, true
		case c == '\\':
			escaped = true
			if !s.escape() {
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			s.i++
		}
	}
	return nil, false, false
}

// escape checks the escape sequence at the cursor (a backslash) and moves past it.
func (s *scanner) escape() bool {
	if s.i+1 >= len(s.b) {
		return false
	}
	switch s.b[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return true
	case 'u':
		if s.i+6 > len(s.b) {
			return false
		}
		for _, h := range s.b[s.i+2 : s.i+6] {
			if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
				return false
			}
		}
		s.i += 6
		return true
	}
	return false
}

func (n *qnode) checkString(raw []byte, escaped bool) bool {
	if escaped {
		// The raw bytes are not the value: only constraint-free strings pass.
		return n.minLen < 0 && n.maxLen < 0 && n.pattern == nil && n.enum == nil && n.format == nil
	}
	if n.format != nil && n.format.Validate(string(raw)) != nil {
		return false
	}
	if n.minLen >= 0 || n.maxLen >= 0 {
		l := utf8.RuneCount(raw)
		if (n.minLen >= 0 && l < n.minLen) || (n.maxLen >= 0 && l > n.maxLen) {
			return false
		}
	}
	if n.pattern != nil && !n.pattern.Match(raw) {
		return false
	}
	if n.enum != nil {
		for _, e := range n.enum {
			if e == string(raw) {
				return true
			}
		}
		return false
	}
	return true
}

// number scans a JSON number at the cursor, returning its value and whether it is integral.
func (s *scanner) number() (float64, bool, bool) {
	start := s.i
	if s.b[s.i] == '-' {
		s.i++
	}
	digits := func() int {
		d := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			d++
		}
		return d
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		return 0, false, false
	}
	integral := true
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		integral = false
		if digits() == 0 {
			return 0, false, false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false, false // exponents are rare in calls; the full path handles them exactly
	}
	text := s.b[start:s.i]
	if len(text) > 15 {
		// Up to 15 significant digits a decimal survives the trip through float64, so its
		// comparisons with a bound are exact; beyond, the full path compares exactly.
		return 0, false, false
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return 0, false, false
	}
	if !integral {
		integral = f == math.Trunc(f)
	}
	return f, integral, true
}

func (n *qnode) checkNumber(f float64, integral bool) bool {
	if n.types&tNumber == 0 {
		if n.types&tInteger == 0 || !integral {
			return false
		}
	}
	if n.hasMin && !(f >= n.min) || n.hasMax && !(f <= n.max) ||
		n.hasExMin && !(f > n.exMin) || n.hasExMax && !(f < n.exMax) {
		return false
	}
	return true
}
