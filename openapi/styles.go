package openapi

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// A parameter's value in its style (OpenAPI's style and explode, after RFC 6570): the text of
// a path segment, a header or a cookie, and the pairs of a query.

// scalar is a primitive value as text.
func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		if x {
			return "true"
		}
		return "false"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// scalars are the items of a list as text.
func scalars(list []any) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = scalar(e)
	}
	return out
}

// keyValues are an object's keys and values as text, in key order: key, value, key, value...
func keyValues(obj map[string]any) []string {
	out := make([]string, 0, 2*len(obj))
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		out = append(out, k, scalar(obj[k]))
	}
	return out
}

// pairs joins each key with its value: key=value, in key order.
func pairs(obj map[string]any) []string {
	out := make([]string, 0, len(obj))
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		out = append(out, k+"="+scalar(obj[k]))
	}
	return out
}

// simple is the simple style (RFC 6570 {var} and {var*}): an array's items and an object's
// keys and values joined by commas (key=value with explode). A parameter described by content
// is its JSON text.
func simple(v any, explode, content bool, raw json.RawMessage) string {
	if content {
		return string(raw)
	}
	switch x := v.(type) {
	case []any:
		return strings.Join(scalars(x), ",")
	case map[string]any:
		if explode {
			return strings.Join(pairs(x), ",")
		}
		return strings.Join(keyValues(x), ",")
	}
	return scalar(v)
}

// pathValue is a path parameter's text in its style (simple, label or matrix; RFC 6570's
// {x}, {.x} and {;x}, exploded or not), each value escaped so that it stays within its part
// of the path and only the style's separators are the path's. (The path they make is checked
// for dot segments once every parameter is in it: see dotSegment.)
func pathValue(p param, v any, raw json.RawMessage) (string, error) {
	items, isObject := pathItems(p, v, raw)
	if len(items) == 0 || len(items) == 1 && items[0] == "" {
		return "", errors.New("an empty value cannot be a part of a path")
	}
	pp := pathParts{esc: make([]string, len(items)), pairs: isObject, explode: p.explode}
	for i, it := range items {
		pp.esc[i] = escapeValue(it)
	}
	switch p.style {
	case "label":
		return "." + pp.joined("."), nil
	case "matrix":
		return pp.matrix(escapeValue(p.name), len(items) > 1 || isList(v)), nil
	}
	return pp.joined(","), nil
}

// pathItems are the values of a path parameter in order, and whether they are an object's,
// as key, value, key, value...
func pathItems(p param, v any, raw json.RawMessage) ([]string, bool) {
	switch x := v.(type) {
	case []any:
		return scalars(x), false
	case map[string]any:
		return keyValues(x), true
	}
	if p.content {
		return []string{string(raw)}, false
	}
	return []string{scalar(v)}, false
}

// pathParts are the escaped values of a path parameter, and how its style joins them.
type pathParts struct {
	esc            []string
	pairs, explode bool // an object's keys and values; a style with *
}

// joined is the values with sep between them (commas unless exploded); exploded pairs are
// key=value.
func (pp pathParts) joined(sep string) string {
	if !pp.explode {
		return strings.Join(pp.esc, ",")
	}
	if !pp.pairs {
		return strings.Join(pp.esc, sep)
	}
	kv := make([]string, 0, len(pp.esc)/2)
	for i := 0; i+1 < len(pp.esc); i += 2 {
		kv = append(kv, pp.esc[i]+"="+pp.esc[i+1])
	}
	return strings.Join(kv, sep)
}

// matrix is the matrix style ({;x}) of a parameter named name; many says whether it has
// several values (or is a list), each of which explode names.
func (pp pathParts) matrix(name string, many bool) string {
	switch {
	case pp.explode && pp.pairs:
		return ";" + pp.joined(";")
	case pp.explode && many:
		parts := make([]string, len(pp.esc))
		for i, e := range pp.esc {
			parts[i] = name + "=" + e
		}
		return ";" + strings.Join(parts, ";")
	}
	return ";" + name + "=" + strings.Join(pp.esc, ",")
}

func isList(v any) bool { _, ok := v.([]any); return ok }

// escapeValue percent-encodes all but RFC 3986's unreserved characters, as RFC 6570 expands
// {x}, {.x} and {;x}: "=", "&", ",", ";" and "/" in a value are then never the path's own.
func escapeValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; isUnreserved(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// isUnreserved reports whether c is one of RFC 3986's unreserved characters.
func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0
}

// queryValue adds a query parameter in its style: form (exploded: a pair per item or key),
// spaceDelimited, pipeDelimited or deepObject.
func queryValue(q url.Values, p param, v any, raw json.RawMessage) {
	if p.content {
		q.Add(p.name, string(raw))
		return
	}
	switch x := v.(type) {
	case []any:
		queryList(q, p, x)
	case map[string]any:
		queryObject(q, p, x)
	default:
		q.Add(p.name, scalar(v))
	}
}

// delimiters are what the delimited styles put between values; the others put commas.
var delimiters = map[string]string{"spaceDelimited": " ", "pipeDelimited": "|"}

func queryList(q url.Values, p param, list []any) {
	sep := delimiters[p.style]
	if p.explode && sep == "" {
		for _, e := range list {
			q.Add(p.name, scalar(e))
		}
		return
	}
	q.Add(p.name, strings.Join(scalars(list), cmp.Or(sep, ",")))
}

func queryObject(q url.Values, p param, obj map[string]any) {
	switch {
	case p.style == "deepObject":
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			q.Add(p.name+"["+k+"]", scalar(obj[k]))
		}
	case p.explode:
		// The keys were checked against the operation's other query parameters and the
		// credentials' (see caller.request).
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			q.Add(k, scalar(obj[k]))
		}
	default:
		q.Add(p.name, strings.Join(keyValues(obj), cmp.Or(delimiters[p.style], ",")))
	}
}
