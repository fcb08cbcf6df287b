package store

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits on the paths of a thread's file system.
const (
	// MaxPathBytes is the longest path accepted, in bytes.
	MaxPathBytes = 1024
	// MaxNameBytes is the longest segment (file or directory name) of a path, in bytes.
	MaxNameBytes = 255
)

// PathError reports a path that breaks a rule of the thread file system. It wraps
// ErrInvalid, so errors.Is(err, ErrInvalid) holds for it.
type PathError struct {
	// Path is the offending path, as given.
	Path string
	// Rule says which rule it breaks, in words meant for the person or model that wrote it.
	Rule string
}

// Error names the path (quoted, shortened when long) and the rule.
func (e *PathError) Error() string {
	p := e.Path
	if len(p) > 120 {
		n := 120
		for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(p[n]); i++ { // do not split a rune
			n--
		}
		p = p[:n]
		return fmt.Sprintf("store: path %q... (%d bytes): %s", p, len(e.Path), e.Rule)
	}
	return fmt.Sprintf("store: path %q: %s", p, e.Rule)
}

// Unwrap returns ErrInvalid.
func (e *PathError) Unwrap() error { return ErrInvalid }

// CheckPath checks a path of a thread's file system and returns a *PathError naming
// the first rule it breaks, or nil. A valid path:
//
//   - is absolute: it starts with "/", the root of the thread's file system (which is not the
//     host's: nothing outside the thread can be named);
//   - is clean: no "." or ".." segment (so no way out of the root), no empty segment ("//"),
//     no trailing "/" except for the root "/" itself;
//   - is valid UTF-8 of at most MaxPathBytes bytes, each segment at most MaxNameBytes;
//   - contains no NUL, no other ASCII control character (newlines and tabs in names break
//     line-oriented tools) and no backslash (the separator is "/" alone, so a Windows-style
//     path is never taken for a name).
//
// Paths are taken as they are, never repaired: "/a/./b" is refused, not read as "/a/b".
func CheckPath(p string) error {
	bad := func(format string, args ...any) error {
		return &PathError{Path: p, Rule: fmt.Sprintf(format, args...)}
	}
	switch {
	case p == "":
		return bad("is empty; paths start with / (the root of the thread's file system)")
	case len(p) > MaxPathBytes:
		return bad("is %d bytes long, over the %d byte limit", len(p), MaxPathBytes)
	case !utf8.ValidString(p):
		return bad("is not valid UTF-8")
	case strings.IndexByte(p, 0) >= 0:
		return bad("contains a NUL byte")
	case strings.IndexByte(p, '\\') >= 0:
		return bad("contains a backslash; the separator is / and names cannot contain \\")
	case p[0] != '/':
		return bad("is relative; paths are absolute in the thread's file system and start with /")
	case p == "/":
		return nil
	case p[len(p)-1] == '/':
		return bad("ends with /; write the path without the trailing slash")
	}
	for _, c := range []byte(p) {
		if c < 0x20 || c == 0x7f {
			return bad("contains the control character %q", rune(c))
		}
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		switch {
		case seg == "":
			return bad("has an empty segment (a doubled /)")
		case seg == ".":
			return bad(`has a "." segment; write the path without it`)
		case seg == "..":
			return bad(`has a ".." segment; paths cannot step out of a directory, let alone the thread's file system`)
		case len(seg) > MaxNameBytes:
			return bad("has a segment of %d bytes, over the %d byte limit for a name", len(seg), MaxNameBytes)
		}
	}
	return nil
}

// ParentDir returns the directory holding the entry at p, a path CheckPath accepts: "/" for
// "/a" (and for "/" itself), "/a" for "/a/b".
func ParentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// BaseName returns the last segment of p, a path CheckPath accepts: "b" for "/a/b", "/" for the
// root.
func BaseName(p string) string {
	if p == "/" {
		return "/"
	}
	return p[strings.LastIndexByte(p, '/')+1:]
}

// InDir reports whether p is dir or inside it (at any depth); both are paths CheckPath
// accepts. InDir("/a/b", "/a") is true, InDir("/ab", "/a") is false.
func InDir(p, dir string) bool {
	if dir == "/" || p == dir {
		return true
	}
	return strings.HasPrefix(p, dir) && len(p) > len(dir) && p[len(dir)] == '/'
}

// Ancestors returns the directories above p, a path CheckPath accepts, from the top down and
// without the root: ["/a", "/a/b"] for "/a/b/c", none for "/a".
func Ancestors(p string) []string {
	var out []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}
