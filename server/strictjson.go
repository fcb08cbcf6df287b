package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
)

// The API validates a request body with exact keys, then decodes it with encoding/json, which
// matches a struct's fields case-insensitively and lets the last of two equal keys win:
// {"name":"x","role":"viewer","Role":"admin"} passed validation as a viewer and made an admin
// key. strictBodies makes what is decoded exactly what was validated: it refuses, with a 400
// naming the key, a body that gives a key twice in one object, or a key that names a field of the type
// it is decoded into only up to case. Free-form values (json.RawMessage, maps, any) keep
// their keys as given, so there only repeats are refused: "a" and "A" are different keys of a
// tool's arguments. encoding/json reports neither, so the keys are walked here.

// bodyTypes maps an operation's id to the Go type its JSON body is decoded into.
var bodyTypes sync.Map // string -> reflect.Type

// register is huma.Register, remembering the type of the operation's body for strictBodies.
func register[I, O any](api huma.API, op huma.Operation, handler func(context.Context, *I) (*O, error)) {
	if f, ok := reflect.TypeFor[I]().FieldByName("Body"); ok {
		bodyTypes.Store(op.OperationID, f.Type)
	}
	huma.Register(api, op, handler)
}

// strictBodies is the API's middleware that refuses ambiguous keys (see above) before huma
// validates the body.
func strictBodies(api huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		t, ok := bodyTypes.Load(ctx.Operation().OperationID)
		r, _ := humago.Unwrap(ctx)
		if !ok || r == nil || r.Body == nil || r.Body == http.NoBody {
			next(ctx)
			return
		}
		// huma picks the body's format from a loose reading of the Content-Type (the part
		// after a "+" up to a ";", parameters unchecked), so "application/json; x" is read as
		// JSON: a body of any type but a well-formed JSON one is refused here, never read
		// unchecked.
		if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
			_ = huma.WriteErr(api, ctx, http.StatusUnsupportedMediaType, fmt.Sprintf(
				"the Content-Type %q is not one the API reads: send application/json (a charset parameter may follow) or a +json type", truncate(ct, 100)))
			return
		}
		limit := ctx.Operation().MaxBodyBytes
		if limit <= 0 {
			limit = 1 << 20 // huma's default
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		rest := r.Body
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), rest), rest}
		if d, ok := ctx.Operation().Metadata[bodyTooLarge].(*huma.ErrorDetail); ok && err == nil && int64(len(body)) > limit {
			_ = huma.WriteErr(api, ctx, http.StatusRequestEntityTooLarge, d.Message, d)
			return
		}
		if err != nil || int64(len(body)) > limit {
			next(ctx) // huma says what is wrong with it
			return
		}
		if err := checkKeys(body, t.(reflect.Type)); err != nil {
			_ = huma.WriteErr(api, ctx, http.StatusBadRequest, "the request body has an ambiguous key", err)
			return
		}
		next(ctx)
	}
}

// bodyTooLarge is the key of an operation's Metadata whose *huma.ErrorDetail refuses a body
// over its MaxBodyBytes in the operation's own words (huma's name only the limit).
const bodyTooLarge = "quiver.bodyTooLarge"

// isJSON reports whether a Content-Type is JSON (application/json or any +json type); an
// empty one counts, since the API then reads the body as JSON.
func isJSON(contentType string) bool {
	if contentType == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// keyError is a refused key: a 400 problem naming it.
type keyError struct{ loc, msg string }

func (e *keyError) Error() string  { return e.loc + ": " + e.msg }
func (e *keyError) GetStatus() int { return http.StatusBadRequest }

// ErrorDetail makes huma name the key in the problem's errors.
func (e *keyError) ErrorDetail() *huma.ErrorDetail {
	return &huma.ErrorDetail{Location: e.loc, Message: e.msg}
}

// checkKeys walks data as it would be decoded into a value of type t and returns a *keyError
// for its first repeated or miscased key. A body that is not JSON, or nests deeper than
// encoding/json reads, is left to the decoder, which says why.
func checkKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers are only skipped
	var found *keyError
	if walkKeys(dec, t, "body", 0, &found); found != nil {
		return found
	}
	return nil // the keys are fine, or it is not JSON: json.Unmarshal says what is wrong
}

// maxKeyDepth is encoding/json's own nesting limit: a deeper body is refused by the decoder.
const maxKeyDepth = 10000

var (
	errTooDeep = errors.New("nested too deep")
	errFound   = errors.New("a refused key") // stops the walk once found is set
)

// walkKeys reads one value from dec, to be decoded into t (nil: free-form) at loc, and sets
// *found to its first refused key.
func walkKeys(dec *json.Decoder, t reflect.Type, loc string, depth int, found **keyError) error {
	if depth > maxKeyDepth {
		return errTooDeep
	}
	t = decodedType(t)
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		var fields *structFields
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fields = fieldsOf(t)
			case reflect.Map:
				elem = t.Elem()
			}
		}
		seen := map[string]string{} // the key (folded, for a struct) -> the key as given
		for dec.More() {
			tk, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := tk.(string)
			at := loc
			if showable(key) {
				at = loc + "." + key
			}
			same := key
			if fields != nil {
				same = foldKey(key)
			}
			if first, ok := seen[same]; ok {
				*found = &keyError{at, fmt.Sprintf("the key %s appears twice in one object: give each key once", quote(key))}
				if first != key {
					*found = &keyError{at, fmt.Sprintf("the keys %s and %s differ only in case: give each key once, spelled as documented", quote(first), quote(key))}
				}
				return errFound
			}
			seen[same] = key
			next := elem
			if fields != nil {
				if ft, ok := fields.exact[key]; ok {
					next = ft
				} else if name, ok := fields.folded[foldKey(key)]; ok {
					*found = &keyError{at, fmt.Sprintf("unknown key %s: keys are case-sensitive; the field is %s", quote(key), quote(name))}
					return errFound
				}
			}
			if err := walkKeys(dec, next, at, depth+1, found); err != nil {
				return err
			}
		}
		_, err := dec.Token() // }
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walkKeys(dec, elem, loc+"["+strconv.Itoa(i)+"]", depth+1, found); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ]
		return err
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// decodedType is what encoding/json decodes into for t: the type pointers point to, or nil
// for a free-form value (an interface, or a type that decodes itself, json.RawMessage among
// them).
func decodedType(t reflect.Type) reflect.Type {
	for t != nil {
		if t.Kind() == reflect.Interface || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
			return nil
		}
		if t.Kind() != reflect.Pointer {
			return t
		}
		t = t.Elem()
	}
	return nil
}

// structFields are the JSON keys of a struct type, as encoding/json names them.
type structFields struct {
	exact  map[string]reflect.Type // key -> the field's type
	folded map[string]string       // folded key -> key
}

var fieldCache sync.Map // reflect.Type -> *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{exact: map[string]reflect.Type{}, folded: map[string]string{}}
	addFields(f, t, 0)
	fieldCache.Store(t, f)
	return f
}

// addFields adds t's fields, and those its untagged embedded structs promote, to f. A name
// given at a shallower depth wins, as in encoding/json.
func addFields(f *structFields, t reflect.Type, depth int) {
	if depth > 8 {
		return
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				addFields(f, et, depth+1)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, ok := f.exact[name]; ok && depth > 0 {
			continue
		}
		f.exact[name] = ft
		f.folded[foldKey(name)] = name
	}
}

// foldKey maps a key to the same string as every key encoding/json would match it with: each
// rune becomes the least of its case-folding orbit (K, k and the Kelvin sign fold alike).
func foldKey(key string) string {
	ascii := true
	for i := 0; i < len(key); i++ {
		if key[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToUpper(key)
	}
	var b strings.Builder
	for _, r := range key {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// showable reports whether a key may stand in a location: short, printable text.
func showable(key string) bool {
	return key != "" && len(key) <= 64 && utf8.ValidString(key) &&
		!strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '.' || r == '[' })
}

// quote quotes a key for a message, shortened when long.
func quote(key string) string {
	if len(key) > 64 {
		key = strings.ToValidUTF8(key[:64], "") + "..."
	}
	return strconv.Quote(key)
}

// truncate cuts s to n bytes at most: a refusal must not echo a whole header back.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
