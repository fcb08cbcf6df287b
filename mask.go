package quiver

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/quiverhq/quiver/schema"
)

// mask is the text that replaces a secret value, or any form of one.
const mask = "[REDACTED]"

// minFormLen is the length under which a form derived from a secret (an encoding, not the
// value itself) is not masked: a base64 fragment or a reversed value of two or three
// characters turns up in ordinary text, and masking it would corrupt results without hiding
// anything worth hiding. The value itself is masked whatever its length.
const minFormLen = 4

// A masker replaces a set of secrets, in every form secretForms lists, with the mask.
// It is built once per call, when the call's secrets are resolved, and then serves the result,
// the arguments and every progress or log message of the call.
type masker struct {
	forms []string // longest first: at any position the longest form that matches is masked

	once sync.Once
	repl *strings.Replacer
}

// newMasker returns a masker for values and for everything the inherited maskers mask (a call
// made from inside a tool must not reveal what the calling tool may not).
func newMasker(inherited []*masker, values []string) *masker {
	var forms []string
	for _, m := range inherited {
		forms = append(forms, m.forms...)
	}
	for _, v := range values {
		forms = append(forms, secretForms(v)...)
	}
	// Longest first, so that where several forms match at one position the longest is
	// masked: a secret containing another, or a padded encoding extending an unpadded one,
	// is masked whole (strings.Replacer prefers the earlier of its patterns, as replaceByIndex does).
	slices.SortFunc(forms, func(a, b string) int {
		return cmp.Or(len(b)-len(a), strings.Compare(a, b))
	})
	return &masker{forms: slices.Compact(forms)}
}

// secretReplacer returns the masker of a call's secrets, nil when it has none.
func secretReplacer(ms []*masker) *masker {
	switch len(ms) {
	case 0:
		return nil
	case 1:
		return ms[0]
	}
	return newMasker(ms, nil)
}

// secretForms lists the forms of s that masking catches: s itself and the encodings a careless
// tool produces. A tool that wants to leak a secret can always transform it some other way;
// docs/guides/go-library.md (Secret masking) says what is and is not promised.
//
// They are computed on every call that resolves a secret, so they are written into one buffer
// and sliced out of one string: a few allocations rather than one or two per form.
func secretForms(s string) []string {
	if s == "" {
		return nil
	}
	raw := []byte(s)
	f := formWriter{buf: make([]byte, 0, 20*len(s)+16), ends: make([]int, 0, 24)}
	f.add(s)
	if needsJSONEscape(s) {
		f.add(jsonEscaped(s, true))
		f.add(jsonEscaped(s, false))
	}
	f.buf = appendUEscaped(f.buf, s, "0123456789abcdef")
	f.end()
	f.buf = appendUEscaped(f.buf, s, "0123456789ABCDEF")
	f.end()

	// Base64, standard and URL-safe, padded and not, of s alone and of s inside a larger blob
	// at each of the three offsets into a 3-byte group.
	b64 := f.count()
	f.buf = base64.StdEncoding.AppendEncode(f.buf, raw)
	f.end()
	f.again(b64, func(b []byte) []byte { return bytes.TrimRight(b, "=") })
	shifted := make([]byte, 2+len(raw)) // two zero bytes, then s
	copy(shifted[2:], raw)
	for offset := range 3 {
		f.appendBase64Core(shifted[2-offset:], offset)
	}
	for i := b64; i < b64+5; i++ { // the five above
		f.again(i, urlSafeBase64)
	}

	hexForm := f.count()
	f.buf = hex.AppendEncode(f.buf, raw)
	f.end()
	f.again(hexForm, upperHex)

	q := url.QueryEscape(s)
	f.add(q)
	f.add(strings.ReplaceAll(q, "+", "%20")) // QueryEscape turns a literal + into %2B: every + is a space
	f.add(url.PathEscape(s))
	f.buf = appendURIComponent(f.buf, s)
	f.end()

	for i := len(s); i > 0; {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		f.buf = utf8.AppendRune(f.buf, r)
		i -= size
	}
	f.end()
	return f.result()
}

// formWriter collects forms in one buffer; ends[i] is where form i ends.
type formWriter struct {
	buf  []byte
	ends []int
}

func (f *formWriter) end() { f.ends = append(f.ends, len(f.buf)) }

func (f *formWriter) add(s string) {
	f.buf = append(f.buf, s...)
	f.end()
}

func (f *formWriter) count() int { return len(f.ends) }

func (f *formWriter) start(i int) int {
	if i == 0 {
		return 0
	}
	return f.ends[i-1]
}

// again adds a copy of form i as edit changes it, in place or by cutting it short.
func (f *formWriter) again(i int, edit func([]byte) []byte) {
	start := len(f.buf)
	f.buf = append(f.buf, f.buf[f.start(i):f.ends[i]]...)
	f.buf = f.buf[:start+len(edit(f.buf[start:]))]
	f.end()
}

// result returns the distinct forms, the first (the value itself) whatever its length and the
// others only from minFormLen on.
func (f *formWriter) result() []string {
	all := string(f.buf)
	out := make([]string, 0, len(f.ends))
	for i, e := range f.ends {
		form := all[f.start(i):e]
		if i == 0 || len(form) >= minFormLen && !slices.Contains(out, form) {
			out = append(out, form)
		}
	}
	return out
}

// appendBase64Core appends the base64 characters that encode shifted[offset:], and nothing
// else, when it starts offset bytes (0, 1 or 2) into a 3-byte group, as it does when it is
// embedded in a larger base64 blob: the characters that also encode the bytes before or after
// it depend on them and are left out. No encoding package offers this; scanners for leaked
// keys compute it the same way. shifted starts with offset zero bytes.
func (f *formWriter) appendBase64Core(shifted []byte, offset int) {
	start := len(f.buf)
	f.buf = base64.RawStdEncoding.AppendEncode(f.buf, shifted)
	// Characters 0 and 1 of a group share bits with byte 0, characters 0 to 2 with byte 1.
	skip := [3]int{0, 2, 3}[offset]
	// A character is the secret's alone only if all six of its bits are.
	end := start + 8*len(shifted)/6
	if end <= start+skip {
		f.buf = f.buf[:start]
	} else {
		n := copy(f.buf[start:], f.buf[start+skip:end])
		f.buf = f.buf[:start+n]
	}
	f.end()
}

func upperHex(b []byte) []byte {
	for i, c := range b {
		if 'a' <= c && c <= 'f' {
			b[i] = c - 'a' + 'A'
		}
	}
	return b
}

func urlSafeBase64(b []byte) []byte {
	for i, c := range b {
		switch c {
		case '+':
			b[i] = '-'
		case '/':
			b[i] = '_'
		}
	}
	return b
}

// needsJSONEscape reports whether a JSON encoder could write s other than as it is; most
// secrets are printable ASCII without quotes or backslashes, and skip the encoder.
func needsJSONEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || strings.IndexByte(`"\<>&`, c) >= 0 {
			return true
		}
	}
	return false
}

// jsonEscaped is s as it appears between the quotes of a JSON string, with or without the
// HTML escapes (\u003c for <) that encoding/json adds by default.
func jsonEscaped(s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		return ""
	}
	out := bytes.TrimSpace(b.Bytes())
	return string(out[1 : len(out)-1])
}

// appendUEscaped writes every character of s as a JSON \u escape (a UTF-16 surrogate pair
// outside the Basic Multilingual Plane), which no encoder does by itself but a tool escaping
// "just in case" does; JSON allows either case for the hex digits.
func appendUEscaped(b []byte, s, digits string) []byte {
	unit := func(u rune) {
		b = append(b, '\\', 'u', digits[u>>12&0xf], digits[u>>8&0xf], digits[u>>4&0xf], digits[u&0xf])
	}
	for _, r := range s {
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			unit(r1)
			unit(r2)
		} else {
			unit(r)
		}
	}
	return b
}

// appendURIComponent escapes s as JavaScript's encodeURIComponent does, which differs from
// url.QueryEscape and url.PathEscape in the characters it leaves alone (!'()* and no others
// beyond the unreserved ones) and in writing a space as %20.
func appendURIComponent(b []byte, s string) []byte {
	const upperhex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b = append(b, c)
		} else {
			b = append(b, '%', upperhex[c>>4], upperhex[c&0xf])
		}
	}
	return b
}

// Replace returns s with every form of every secret masked, and s itself (not a copy) when
// there is nothing to mask, which is the common case: it allocates nothing then.
func (m *masker) Replace(s string) string {
	out, _ := m.replace(s)
	return out
}

// replace masks s and reports whether it changed. At each position the longest form that
// matches there is masked, and the text goes on after it.
func (m *masker) replace(s string) (string, bool) {
	switch {
	case s == "" || len(m.forms) == 0:
		return s, false
	case len(m.forms) <= indexLimit || len(s) < trieMinText:
		return replaceByIndex(s, m.forms)
	}
	return m.replaceByTrie(s)
}

// Searching a text for each form in turn with strings.Index, which uses vector instructions,
// costs about 0.15 ns a byte per form; a strings.Replacer's one pass over it about 3 ns a byte
// whatever the number of forms, after it has built its trie: 3 µs for the 9 forms of a plain
// API key, 15 µs for 18, 25 to 50 µs for 29 (BenchmarkMaskForms). A masker lives for one call,
// so the trie is built on every call that uses it: only for many forms (several secrets) and
// a long text does it pay. One secret has at most 22 forms.
const (
	indexLimit  = 24
	trieMinText = 16 << 10
)

// replaceByIndex masks forms (longest first) in s. next[i] is where forms[i] next occurs at or
// after pos, -1 if nowhere; a form is searched for again only when a match has passed its next
// occurrence, and from the end of that match, so its searches cover the text once however
// many matches there are.
func replaceByIndex(s string, forms []string) (string, bool) {
	found := false
	for _, f := range forms {
		if strings.Contains(s, f) {
			found = true
			break
		}
	}
	if !found {
		return s, false // the common case, without allocating
	}
	next := make([]int, len(forms))
	for i, f := range forms {
		next[i] = strings.Index(s, f)
	}
	b := make([]byte, 0, len(s))
	pos := 0
	for {
		at, n := -1, 0
		for i, f := range forms {
			if next[i] >= 0 && next[i] < pos { // inside the last match: look again after it
				next[i] = strings.Index(s[pos:], f)
				if next[i] >= 0 {
					next[i] += pos
				}
			}
			// Strictly earlier only: at a tie the longer form, seen first, stays.
			if next[i] >= 0 && (at < 0 || next[i] < at) {
				at, n = next[i], len(f)
			}
		}
		if at < 0 {
			break
		}
		b = append(append(b, s[pos:at]...), mask...)
		pos = at + n
	}
	return string(append(b, s[pos:]...)), true
}

// replaceByTrie masks the forms in s with a strings.Replacer, built on first use.
func (m *masker) replaceByTrie(s string) (string, bool) {
	if s == "" {
		return s, false
	}
	m.once.Do(m.build)
	w := writerPool.Get().(*maskWriter)
	w.src, w.same, w.buf = s, false, w.buf[:0]
	_, _ = m.repl.WriteString(w, s)
	out, changed := s, true
	if w.same {
		changed = false
	} else {
		out = string(w.buf)
	}
	w.src = ""
	if cap(w.buf) <= 64<<10 {
		writerPool.Put(w)
	}
	return out, changed
}

func (m *masker) build() {
	pairs := make([]string, 0, 2*len(m.forms))
	for _, f := range m.forms {
		pairs = append(pairs, f, mask)
	}
	m.repl = strings.NewReplacer(pairs...)
}

// maskWriter receives what a strings.Replacer writes. A Replacer writes a text without a match
// in one piece, so that piece is recognised and the text returned as it was, where
// Replacer.Replace would copy it.
type maskWriter struct {
	src  string
	same bool // everything written so far is src, in one piece
	buf  []byte
}

var writerPool = sync.Pool{New: func() any { return new(maskWriter) }}

func (w *maskWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		w.flush()
		w.buf = append(w.buf, p...)
	}
	return len(p), nil
}

func (w *maskWriter) WriteString(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	if !w.same && len(w.buf) == 0 && s == w.src {
		w.same = true
		return len(s), nil
	}
	w.flush()
	w.buf = append(w.buf, s...)
	return len(s), nil
}

// flush copies the piece that was not copied, now that more follows it.
func (w *maskWriter) flush() {
	if w.same {
		w.buf = append(w.buf, w.src...)
		w.same = false
	}
}

// redact masks the call's secrets in everything r carries that could reach a model, a log or
// a person: text, structured value, error, stack, problems, content and attachment
// metadata, the result's metadata, and the data of content and attachments.
func redact(r *Result, m *masker) {
	r.Text = m.Replace(r.Text)
	r.Error = m.Replace(r.Error)
	r.Stack = m.Replace(r.Stack)
	if _, changed := m.replace(string(r.Code)); changed {
		r.Code = CodeToolError // a code is an identifier, not a place for a masked secret
	}
	if len(r.Value) > 0 {
		r.Value = redactJSON(r.Value, m)
	}
	if len(r.Meta) > 0 {
		r.Meta = redactJSON(r.Meta, m)
	}
	// The slices may be shared with the handler (a *Result it keeps): write into copies.
	r.Problems = slices.Clone(r.Problems)
	for i := range r.Problems {
		p := &r.Problems[i]
		p.Pointer, p.Message = m.Replace(p.Pointer), m.Replace(p.Message)
	}
	r.Content = slices.Clone(r.Content)
	for i := range r.Content {
		c := &r.Content[i]
		c.Text, c.URI, c.MimeType = m.Replace(c.Text), m.Replace(c.URI), m.Replace(c.MimeType)
		c.Data = redactBase64(c.Data, m)
	}
	r.Attachments = slices.Clone(r.Attachments)
	for i := range r.Attachments {
		a := &r.Attachments[i]
		a.Name, a.Description, a.Path = m.Replace(a.Name), m.Replace(a.Description), m.Replace(a.Path)
		a.ID, a.Type, a.MimeType = m.Replace(a.ID), m.Replace(a.Type), m.Replace(a.MimeType)
		a.Data = redactBase64(a.Data, m)
	}
}

// redactBase64 masks secrets inside base64 data (a file a tool returns may embed one, in any
// of the forms a text may).
func redactBase64(data string, m *masker) string {
	if data == "" {
		return data
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return data // invalid data is refused by checkResult before it gets here
	}
	masked, changed := m.replace(string(raw))
	if !changed {
		return data
	}
	return base64.StdEncoding.EncodeToString([]byte(masked))
}

// redactJSON masks secrets in a JSON value. Inside JSON a secret may be written with any
// escapes, and replacing text could break the value's syntax, so the value is decoded and the
// secrets are replaced in its strings, keys and numbers (a number holding a secret becomes a
// string). A value without secrets is returned as it was.
func redactJSON(raw json.RawMessage, m *masker) json.RawMessage {
	if bytes.IndexByte(raw, '\\') < 0 {
		// Without escapes every string, key and number of the value is a piece of its text,
		// so a text without a form of a secret is a value without one, and decoding it (the
		// bulk of the cost) can be skipped.
		if _, changed := m.replace(string(raw)); !changed {
			return raw
		}
	}
	v, err := schema.Decode(raw)
	if err != nil {
		// Not JSON (results are checked before they get here): mask it as text.
		return json.RawMessage(m.Replace(string(raw)))
	}
	v, changed := redactValue(v, m)
	if !changed {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`"` + mask + `"`)
	}
	return b
}

func redactValue(v any, m *masker) (any, bool) {
	switch x := v.(type) {
	case string:
		return m.replace(x)
	case json.Number:
		if s, changed := m.replace(string(x)); changed {
			return s, true
		}
	case []any:
		changed := false
		for i, e := range x {
			var c bool
			x[i], c = redactValue(e, m)
			changed = changed || c
		}
		return x, changed
	case map[string]any:
		out := make(map[string]any, len(x))
		changed := false
		for k, e := range x {
			e, c := redactValue(e, m)
			mk, ck := m.replace(k)
			out[mk] = e
			changed = changed || c || ck
		}
		return out, changed
	}
	return v, false
}
