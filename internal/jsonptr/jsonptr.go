// Package jsonptr parses JSON Pointers (RFC 6901) and sets values at them in decoded JSON
// documents: what a call's _outputPath names in a thread's state. The quiver
// package uses it to refuse a malformed pointer before a tool runs, the store to write one.
//
// Written here because no well-kept library does only this: the JSON Schema validator
// resolves pointers inside schemas, not in documents to be written, and a pointer has a
// dozen lines of rules.
package jsonptr

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on a pointer, so that a hostile one costs little to refuse.
const (
	MaxBytes    = 512
	MaxSegments = 32
)

// ErrSyntax is a pointer that is not well formed.
var ErrSyntax = errors.New("malformed JSON Pointer")

// Parse splits pointer p into its member names, unescaped (~1 is "/", ~0 is "~"). The
// pointer must name a member, not the whole document ("" and "/" are refused), and every
// segment must be a non-empty name: "/plan//steps" is almost surely a mistake, and an empty
// name is no place to keep anything. A pointer is valid UTF-8 without control characters:
// PostgreSQL refuses a NUL in text, and no member worth naming has one.
func Parse(p string) ([]string, error) {
	switch {
	case p == "":
		return nil, fmt.Errorf("%w: the empty pointer names the whole state; name a member, like /plan", ErrSyntax)
	case len(p) > MaxBytes:
		return nil, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrSyntax, len(p), MaxBytes)
	case p[0] != '/':
		return nil, fmt.Errorf("%w %q: it must start with /, like /plan/steps", ErrSyntax, p)
	}
	if !utf8.ValidString(p) {
		return nil, fmt.Errorf("%w: it is not valid UTF-8", ErrSyntax)
	}
	if i := strings.IndexFunc(p, unicode.IsControl); i >= 0 {
		return nil, fmt.Errorf("%w %q: a control character at byte %d; a path names members with printable text", ErrSyntax, p, i)
	}
	raw := strings.Split(p[1:], "/")
	if len(raw) > MaxSegments {
		return nil, fmt.Errorf("%w %q: %d segments, over the limit of %d", ErrSyntax, p, len(raw), MaxSegments)
	}
	segs := make([]string, len(raw))
	for i, s := range raw {
		if s == "" {
			return nil, fmt.Errorf("%w %q: segment %d is empty", ErrSyntax, p, i+1)
		}
		if strings.Contains(s, "~") {
			var b strings.Builder
			for j := 0; j < len(s); j++ {
				if s[j] != '~' {
					b.WriteByte(s[j])
					continue
				}
				if j+1 == len(s) || (s[j+1] != '0' && s[j+1] != '1') {
					return nil, fmt.Errorf("%w %q: ~ must be followed by 0 (for ~) or 1 (for /)", ErrSyntax, p)
				}
				b.WriteByte("~/"[s[j+1]-'0'])
				j++
			}
			s = b.String()
		}
		segs[i] = s
	}
	return segs, nil
}

// Format is the pointer to segs, escaped: Parse(Format(segs)) is segs.
func Format(segs []string) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(s))
	}
	return b.String()
}

// PathError is a pointer that cannot be written in a document: it crosses a value that is
// not an object.
type PathError struct {
	Pointer string // the whole pointer
	At      string // the prefix of it that holds the non-object
	Kind    string // what is there: "a string", "an array", ...
}

func (e *PathError) Error() string {
	return fmt.Sprintf("%s goes through %s, which holds %s, not an object", e.Pointer, e.At, e.Kind)
}

// Lookup reports whether doc (a decoded JSON object) has a value at segs. A prefix that holds
// something other than an object is a *PathError.
func Lookup(doc map[string]any, segs []string) (bool, error) {
	cur := doc
	for i, s := range segs {
		v, ok := cur[s]
		if !ok {
			return false, nil
		}
		if i == len(segs)-1 {
			return true, nil
		}
		next, ok := v.(map[string]any)
		if !ok {
			return false, &PathError{Pointer: Format(segs), At: Format(segs[:i+1]), Kind: Kind(v)}
		}
		cur = next
	}
	return false, nil
}

// Set puts v at segs in doc, creating the objects on the way that do not exist. The caller
// checks with Lookup first that nothing is there; a prefix holding something other than an
// object is a *PathError.
func Set(doc map[string]any, segs []string, v any) error {
	cur := doc
	for i, s := range segs[:len(segs)-1] {
		next, ok := cur[s]
		if !ok {
			m := map[string]any{}
			cur[s] = m
			cur = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			return &PathError{Pointer: Format(segs), At: Format(segs[:i+1]), Kind: Kind(next)}
		}
		cur = m
	}
	cur[segs[len(segs)-1]] = v
	return nil
}

// Kind names the JSON type of a decoded value, for error messages.
func Kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a number"
}

// Overlap reports whether one of the pointers a and b names a place inside the other (or the
// same place): writing both would put one value inside the other.
func Overlap(a, b []string) bool {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
