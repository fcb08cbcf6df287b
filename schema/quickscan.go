package schema

import (
	"bytes"
	"math"
	"strconv"
	"unicode/utf8"
)

// QuickCheck reports whether raw is certainly a JSON object that satisfies the schema, has no
// meta-field (no property starting with "_") and needs no default below the root. When it does,
// it returns raw with the root's missing defaults added. When it returns false nothing is
// known: decode, apply defaults and validate as usual.
func (c *Compiled) QuickCheck(raw []byte) ([]byte, bool) {
	q := c.quick
	if q == nil {
		return nil, false
	}
	seen, ok := q.scan(raw)
	if !ok {
		return nil, false
	}
	if q.missesDefault(seen) {
		return insertDefaults(raw, q.defaults, seen), true
	}
	return raw, true
}

// scan checks that raw is one object that satisfies the root, and returns the bits of the
// root's properties it has.
func (q *quick) scan(raw []byte) (uint64, bool) {
	sc := scanner{b: raw}
	if !sc.at('{') {
		return 0, false
	}
	seen, ok := sc.object(q.root, 0)
	sc.ws()
	return seen, ok && sc.i == len(sc.b)
}

func (q *quick) missesDefault(seen uint64) bool {
	for _, d := range q.defaults {
		if seen&d.bit == 0 {
			return true
		}
	}
	return false
}

// insertDefaults appends the missing root defaults before raw's closing brace.
func insertDefaults(raw []byte, defs []rootDefault, seen uint64) []byte {
	body := raw[:bytes.LastIndexByte(raw, '}')]
	empty := hasNoMember(body)
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

// hasNoMember reports whether body, an object without its closing brace, has no member yet.
func hasNoMember(body []byte) bool {
	i := len(body) - 1
	for i >= 0 && isSpace(body[i]) {
		i--
	}
	return i < 0 || body[i] == '{'
}

// maxQuickDepth bounds recursion; deeper input is left to the full path.
const maxQuickDepth = 256

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) && isSpace(s.b[s.i]) {
		s.i++
	}
}

// isSpace reports whether c is whitespace JSON allows between tokens.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// peek reports whether c is at the cursor.
func (s *scanner) peek(c byte) bool {
	return s.i < len(s.b) && s.b[s.i] == c
}

// at skips whitespace and reports whether c is at the cursor.
func (s *scanner) at(c byte) bool {
	s.ws()
	return s.peek(c)
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
	switch s.b[s.i] {
	case '{':
		return s.objectValue(n, depth)
	case '[':
		return s.array(n, depth)
	case '"':
		return s.stringValue(n)
	case 't':
		return s.literal("true", tBool, n)
	case 'f':
		return s.literal("false", tBool, n)
	case 'n':
		return s.literal("null", tNull, n)
	}
	// Anything else is a number or not JSON, which number tells apart.
	return s.numberValue(n)
}

// admits reports whether n admits a JSON type; nil admits all of them.
func (n *qnode) admits(t uint8) bool {
	return n == nil || n.types&t != 0
}

// literal checks the literal lit, of type t, at the cursor against n.
func (s *scanner) literal(lit string, t uint8, n *qnode) bool {
	if !n.admits(t) || len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

func (s *scanner) objectValue(n *qnode, depth int) bool {
	if !n.admits(tObject) {
		return false
	}
	_, ok := s.object(n, depth)
	return ok
}

// object checks an object at the cursor and returns the bits of the declared properties seen.
func (s *scanner) object(n *qnode, depth int) (uint64, bool) {
	s.i++ // {
	if s.at('}') {
		s.i++
		return 0, n.hasRequired(0)
	}
	var seen uint64
	for {
		key, ok := s.key()
		if !ok {
			return 0, false
		}
		child, ok := n.member(key, &seen)
		if !ok || !s.value(child, depth+1) {
			return 0, false
		}
		switch closed, ok := s.next('}'); {
		case !ok:
			return 0, false
		case closed:
			return seen, n.hasRequired(seen)
		}
	}
}

// key scans a member's key and the colon after it. Keys with escapes are left to the full
// path, and so are empty keys and meta-fields.
func (s *scanner) key() ([]byte, bool) {
	if !s.at('"') {
		return nil, false
	}
	key, escaped, ok := s.str()
	if !ok || escaped || len(key) == 0 || key[0] == '_' || !s.at(':') {
		return nil, false
	}
	s.i++
	return key, true
}

// next scans what follows a member or an element: a comma (more follow) or the closing
// bracket, reporting which.
func (s *scanner) next(close byte) (closed, ok bool) {
	s.ws()
	if s.i >= len(s.b) {
		return false, false
	}
	c := s.b[s.i]
	s.i++
	return c == close, c == close || c == ','
}

// member is the schema the value of key must meet (nil: any), marking a declared property
// seen; false when the key may not appear, or appears twice.
func (n *qnode) member(key []byte, seen *uint64) (*qnode, bool) {
	if n == nil {
		return nil, true
	}
	p := n.prop(key)
	switch {
	case p == nil:
		return n.additional, !n.closed
	case *seen&p.bit != 0:
		return nil, false // duplicate key: decoders disagree on which wins
	}
	*seen |= p.bit
	return p.node, true
}

func (n *qnode) prop(key []byte) *qprop {
	for i := range n.props {
		if n.props[i].name == string(key) {
			return &n.props[i]
		}
	}
	return nil
}

func (n *qnode) hasRequired(seen uint64) bool {
	return n == nil || seen&n.required == n.required
}

// array checks an array at the cursor against n.
func (s *scanner) array(n *qnode, depth int) bool {
	if !n.admits(tArray) {
		return false
	}
	s.i++ // [
	var items *qnode
	if n != nil {
		items = n.items
	}
	count, ok := s.elements(items, depth)
	return ok && (n == nil || within(count, n.minItems, n.maxItems))
}

// elements checks the elements of the array at the cursor against items and counts them.
func (s *scanner) elements(items *qnode, depth int) (int, bool) {
	if s.at(']') {
		s.i++
		return 0, true
	}
	for count := 1; ; count++ {
		if !s.value(items, depth+1) {
			return 0, false
		}
		switch closed, ok := s.next(']'); {
		case !ok:
			return 0, false
		case closed:
			return count, true
		}
	}
}

// within reports whether v is within the limits min and max (-1: none).
func within(v, min, max int) bool {
	return (min < 0 || v >= min) && (max < 0 || v <= max)
}

func (s *scanner) stringValue(n *qnode) bool {
	str, escaped, ok := s.str()
	if !ok || !n.admits(tString) {
		return false
	}
	return n == nil || n.checkString(str, escaped)
}

// str scans a string at the cursor and returns its raw contents (without quotes) and whether
// it contains escapes (in which case the raw bytes are not the value).
func (s *scanner) str() ([]byte, bool, bool) {
	s.i++ // opening quote
	start := s.i
	escaped := false
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			return raw, escaped, utf8.Valid(raw)
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
		return s.unicodeEscape()
	}
	return false
}

// unicodeEscape checks a \uXXXX escape at the cursor and moves past it.
func (s *scanner) unicodeEscape() bool {
	if s.i+6 > len(s.b) {
		return false
	}
	for _, h := range s.b[s.i+2 : s.i+6] {
		if !isHex(h) {
			return false
		}
	}
	s.i += 6
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (n *qnode) checkString(raw []byte, escaped bool) bool {
	if escaped {
		// The raw bytes are not the value: only constraint-free strings pass.
		return !n.constrainsStrings()
	}
	return n.formatOK(raw) && n.lengthOK(raw) && (n.pattern == nil || n.pattern.Match(raw)) && n.inEnum(raw)
}

func (n *qnode) constrainsStrings() bool {
	return n.minLen >= 0 || n.maxLen >= 0 || n.pattern != nil || n.enum != nil || n.format != nil
}

func (n *qnode) formatOK(raw []byte) bool {
	return n.format == nil || n.format.Validate(string(raw)) == nil
}

// lengthOK checks raw's length, counting its runes only when there is a bound.
func (n *qnode) lengthOK(raw []byte) bool {
	return n.minLen < 0 && n.maxLen < 0 || within(utf8.RuneCount(raw), n.minLen, n.maxLen)
}

func (n *qnode) inEnum(raw []byte) bool {
	if n.enum == nil {
		return true
	}
	for _, e := range n.enum {
		if e == string(raw) {
			return true
		}
	}
	return false
}

func (s *scanner) numberValue(n *qnode) bool {
	num, integral, ok := s.number()
	if !ok {
		return false
	}
	return n == nil || n.checkNumber(num, integral)
}

// number scans a JSON number at the cursor, returning its value and whether it is integral.
func (s *scanner) number() (float64, bool, bool) {
	start := s.i
	if s.peek('-') {
		s.i++
	}
	if !s.integer() {
		return 0, false, false
	}
	integral, ok := s.fraction()
	if !ok || s.peek('e') || s.peek('E') {
		return 0, false, false // exponents are rare in calls; the full path handles them exactly
	}
	return parseNumber(s.b[start:s.i], integral)
}

// integer scans a number's integer part: a lone zero, or digits.
func (s *scanner) integer() bool {
	if s.peek('0') {
		s.i++
		return true
	}
	return s.digits() > 0
}

// fraction scans a number's fraction if it has one, reporting whether it had none.
func (s *scanner) fraction() (integral, ok bool) {
	if !s.peek('.') {
		return true, true
	}
	s.i++
	return false, s.digits() > 0
}

func (s *scanner) digits() int {
	d := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		d++
	}
	return d
}

// parseNumber is the value of a number's text, and whether it is integral (integral says
// whether the text had no fraction).
func parseNumber(text []byte, integral bool) (float64, bool, bool) {
	if len(text) > 15 {
		// Up to 15 significant digits a decimal survives the trip through float64, so its
		// comparisons with a bound are exact; beyond, the full path compares exactly.
		return 0, false, false
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return 0, false, false
	}
	return f, integral || f == math.Trunc(f), true
}

func (n *qnode) checkNumber(f float64, integral bool) bool {
	return n.admitsNumber(integral) && n.inBounds(f)
}

// admitsNumber reports whether n admits a number, given whether it is integral.
func (n *qnode) admitsNumber(integral bool) bool {
	return n.types&tNumber != 0 || integral && n.types&tInteger != 0
}

func (n *qnode) inBounds(f float64) bool {
	return f >= n.min && f <= n.max && f > n.exMin && f < n.exMax
}
