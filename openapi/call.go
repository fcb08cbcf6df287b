package openapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/quiverhq/quiver"
)

// caller sends one operation's requests.
type caller struct {
	source, method, path string
	servers              []*url.URL
	client               *http.Client
	params               []param
	body                 *body
	auth                 [][]credential
	maxBytes             int64
	// reservedQuery are the query names (lower case) an exploded object's keys may not take:
	// the operation's query parameters and the credentials'.
	reservedQuery map[string]bool
}

// errorExcerpt is how much of an error answer's body a failed call's message quotes.
const errorExcerpt = 2048

// call is the tool's function: the validated arguments become a request, and its answer the
// result (an error result for any status but 2xx).
func (c *caller) call(ctx context.Context, args json.RawMessage) (any, error) {
	var in map[string]json.RawMessage
	if len(args) > 0 {
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, quiver.Fail(quiver.CodeInvalidArguments, "the arguments are not a JSON object: %v", err)
		}
	}
	req, err := c.request(ctx, in)
	if err != nil {
		return nil, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, c.sendError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %v", c.method, c.path, withoutURL(err))
	}
	if int64(len(data)) > c.maxBytes {
		return nil, fmt.Errorf("%s %s: the answer is larger than %d bytes, the limit of the source %s", c.method, c.path, c.maxBytes, c.source)
	}
	status := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		excerpt := strings.ToValidUTF8(string(data[:min(len(data), errorExcerpt)]), "?")
		if excerpt != "" {
			excerpt = ": " + excerpt
		}
		return nil, fmt.Errorf("%s %s: the service answered %s%s", c.method, c.path, status, excerpt)
	}
	return answer(status, resp.Header.Get("Content-Type"), data), nil
}

// answer is a success answer as a result: JSON as a structured value, text as text, and
// anything else described (its bytes are no use to a model).
func answer(status, contentType string, data []byte) any {
	if len(bytes.TrimSpace(data)) == 0 {
		return status
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case (isJSON(mt) || mt == "") && json.Valid(data):
		return json.RawMessage(data)
	case (strings.HasPrefix(mt, "text/") || mt == "" || strings.HasSuffix(mt, "+xml") || mt == "application/xml") && utf8.Valid(data):
		return string(data)
	}
	return fmt.Sprintf("%s: %d bytes of %s", status, len(data), cmp.Or(mt, "unknown type"))
}

// request builds the HTTP request of a call.
func (c *caller) request(ctx context.Context, in map[string]json.RawMessage) (*http.Request, error) {
	parts := requestParts{path: c.path, query: url.Values{}, header: http.Header{}}
	for _, p := range c.params {
		if raw, ok := in[p.arg]; ok {
			if err := c.addParam(&parts, p, raw); err != nil {
				return nil, err
			}
		}
	}
	u, err := c.target(parts.path)
	if err != nil {
		return nil, err
	}
	payload, err := c.payload(in, parts.header)
	if err != nil {
		return nil, err
	}
	if err := c.authorize(ctx, parts.query, parts.header, &parts.cookies); err != nil {
		return nil, err
	}
	u.RawQuery = parts.query.Encode()
	req, err := http.NewRequestWithContext(ctx, c.method, u.String(), payload)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v", c.method, c.path, withoutURL(err))
	}
	req.Header = parts.header
	req.Header.Set("Accept", "application/json, */*;q=0.5")
	req.Header.Set("User-Agent", "quiver-openapi")
	if len(parts.cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(parts.cookies, "; "))
	}
	return req, nil
}

// requestParts are what a call's parameters make of its request.
type requestParts struct {
	path    string
	query   url.Values
	header  http.Header
	cookies []string
}

// addParam puts the argument raw of parameter p where the parameter goes.
func (c *caller) addParam(parts *requestParts, p param, raw json.RawMessage) error {
	v, err := decode(raw)
	if err != nil {
		return quiver.Fail(quiver.CodeInvalidArguments, "argument %s: %v", p.arg, err)
	}
	switch p.in {
	case "path":
		s, err := pathValue(p, v, raw)
		if err != nil {
			return quiver.Fail(quiver.CodeInvalidArguments, "argument %s: %v", p.arg, err)
		}
		parts.path = strings.ReplaceAll(parts.path, "{"+p.name+"}", s)
	case "query":
		if obj, ok := v.(map[string]any); ok && p.explode && p.style != "deepObject" && !p.content {
			for k := range obj {
				if c.reservedQuery[strings.ToLower(k)] {
					return quiver.Fail(quiver.CodeInvalidArguments,
						"argument %s: the key %q is another query parameter's or a credential's; it cannot be sent as one of %s's", p.arg, k, p.arg)
				}
			}
		}
		queryValue(parts.query, p, v, raw)
	case "header":
		parts.header.Set(p.name, simple(v, p.explode, p.content, raw))
	case "cookie":
		parts.cookies = append(parts.cookies, p.name+"="+url.QueryEscape(simple(v, false, p.content, raw)))
	}
	return nil
}

// target is the URL of the call's path, with its arguments in, on the first server: refused
// when an argument left a parameter unfilled or would take the request out of the server's
// path.
func (c *caller) target(path string) (*url.URL, error) {
	base := c.servers[0]
	if strings.ContainsAny(path, "{}") {
		return nil, quiver.Fail(quiver.CodeInvalidArguments, "the path %s still has a parameter no argument gave", path)
	}
	if seg := dotSegment(path); seg != "" {
		return nil, quiver.Fail(quiver.CodeInvalidArguments, "the path arguments make %s, which holds the dot segment %q: refused, it would climb out of %s", path, seg, c.path)
	}
	u, err := url.Parse(base.String() + path)
	if err != nil || u.Host != base.Host || u.Scheme != base.Scheme || !strings.HasPrefix(u.EscapedPath(), base.EscapedPath()) {
		return nil, quiver.Fail(quiver.CodeInvalidArguments, "the path arguments do not make a path of %s", base.Redacted())
	}
	return u, nil
}

// payload is the call's body, encoded as the operation takes it (nil without one), with its
// Content-Type set in header.
func (c *caller) payload(in map[string]json.RawMessage, header http.Header) (io.Reader, error) {
	if c.body == nil {
		return nil, nil
	}
	raw, ok := in[c.body.arg]
	if !ok {
		return nil, nil
	}
	b, err := encodeBody(c.body.contentType, raw)
	if err != nil {
		return nil, quiver.Fail(quiver.CodeInvalidArguments, "argument %s: %v", c.body.arg, err)
	}
	header.Set("Content-Type", c.body.contentType)
	return bytes.NewReader(b), nil
}

// authorize adds the credentials of the first security alternative whose variables are all
// set; none needed when an alternative is empty or the operation has no requirement.
func (c *caller) authorize(ctx context.Context, query url.Values, header http.Header, cookies *[]string) error {
	if len(c.auth) == 0 {
		return nil
	}
	var missing []string
	anonymous := false
	for _, alt := range c.auth {
		if len(alt) == 0 {
			anonymous = true // {}: none needed, if no alternative with credentials is met
			continue
		}
		values := make([]string, len(alt))
		ok := true
		for i, cr := range alt {
			v, set := quiver.Var(ctx, cr.variable)
			if !set || v == "" {
				ok = false
				if !slices.Contains(missing, cr.variable) {
					missing = append(missing, cr.variable)
				}
				continue
			}
			values[i] = v
		}
		if !ok {
			continue
		}
		for i, cr := range alt {
			send(cr.scheme.Type, cr.scheme.Scheme, cr.scheme.In, cr.scheme.Name, values[i], query, header, cookies)
		}
		return nil
	}
	if anonymous {
		return nil
	}
	return quiver.Fail(quiver.CodeMissingVariable, "%s %s needs credentials: set the secret variable %s", c.method, c.path,
		strings.Join(missing, " or "))
}

// send puts one credential where its scheme says.
func send(typ, scheme, in, name, value string, query url.Values, header http.Header, cookies *[]string) {
	switch {
	case typ == "http" && strings.EqualFold(scheme, "basic"):
		header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(value)))
	case typ == "apiKey" && in == "header":
		header.Set(name, value)
	case typ == "apiKey" && in == "query":
		query.Set(name, value)
	case typ == "apiKey" && in == "cookie":
		*cookies = append(*cookies, name+"="+url.QueryEscape(value))
	default: // bearer, oauth2, openIdConnect
		header.Set("Authorization", "Bearer "+value)
	}
}

// sendError explains a request that got no answer, without its URL: the query may hold an API
// key.
func (c *caller) sendError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s %s: %w", c.method, c.path, withoutURL(err))
	}
	return fmt.Errorf("%s %s: %v", c.method, c.path, withoutURL(err))
}

// withoutURL is err without the *url.Error wrapping that names the request's URL.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// decode reads an argument's JSON value, keeping numbers as written.
func decode(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

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

// simple is the simple style (RFC 6570 {var} and {var*}): an array's items and an object's
// keys and values joined by commas (key=value with explode). A parameter described by content
// is its JSON text.
func simple(v any, explode, content bool, raw json.RawMessage) string {
	if content {
		return string(raw)
	}
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = scalar(e)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if explode {
				parts = append(parts, k+"="+scalar(x[k]))
			} else {
				parts = append(parts, k, scalar(x[k]))
			}
		}
		return strings.Join(parts, ",")
	}
	return scalar(v)
}

// pathValue is a path parameter's text in its style (simple, label or matrix; RFC 6570's
// {x}, {.x} and {;x}, exploded or not), each value escaped so that it stays within its part
// of the path and only the style's separators are the path's. (The path they make is checked
// for dot segments once every parameter is in it: see dotSegment.)
func pathValue(p param, v any, raw json.RawMessage) (string, error) {
	var items []string // the values in order; an object's as key, value, key, value...
	pairs := false
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			items = append(items, scalar(e))
		}
	case map[string]any:
		pairs = true
		for _, k := range slices.Sorted(maps.Keys(x)) {
			items = append(items, k, scalar(x[k]))
		}
	default:
		if p.content {
			items = []string{string(raw)}
		} else {
			items = []string{scalar(v)}
		}
	}
	if len(items) == 0 || len(items) == 1 && items[0] == "" {
		return "", errors.New("an empty value cannot be a part of a path")
	}
	esc := make([]string, len(items))
	for i, it := range items {
		esc[i] = escapeValue(it)
	}
	name := escapeValue(p.name)
	// joined is the values with sep between them; exploded pairs are key=value.
	joined := func(sep string) string {
		if !pairs || !p.explode {
			return strings.Join(esc, map[bool]string{true: sep, false: ","}[p.explode])
		}
		kv := make([]string, 0, len(esc)/2)
		for i := 0; i+1 < len(esc); i += 2 {
			kv = append(kv, esc[i]+"="+esc[i+1])
		}
		return strings.Join(kv, sep)
	}
	switch p.style {
	case "label":
		return "." + joined("."), nil
	case "matrix":
		switch {
		case p.explode && pairs:
			return ";" + joined(";"), nil
		case p.explode && len(items) > 1 || p.explode && isList(v):
			parts := make([]string, len(esc))
			for i, e := range esc {
				parts[i] = name + "=" + e
			}
			return ";" + strings.Join(parts, ";"), nil
		}
		return ";" + name + "=" + strings.Join(esc, ","), nil
	}
	return joined(","), nil
}

func isList(v any) bool { _, ok := v.([]any); return ok }

// escapeValue percent-encodes all but RFC 3986's unreserved characters, as RFC 6570 expands
// {x}, {.x} and {;x}: "=", "&", ",", ";" and "/" in a value are then never the path's own.
func escapeValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// dotSegment returns the first segment of path that is "." or "..", as sent or once a
// service (or a proxy before it) decodes %2F and %5C before routing, "" when none: such a
// path climbs out of the operation's.
func dotSegment(path string) string {
	for _, seg := range strings.Split(path, "/") {
		decoded, err := url.PathUnescape(seg)
		if err != nil {
			decoded = seg
		}
		for _, part := range append([]string{seg}, strings.FieldsFunc(decoded, func(r rune) bool { return r == '/' || r == '\\' })...) {
			if part == "." || part == ".." {
				return part
			}
		}
	}
	return ""
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
		sep := map[string]string{"spaceDelimited": " ", "pipeDelimited": "|"}[p.style]
		if p.explode && sep == "" {
			for _, e := range x {
				q.Add(p.name, scalar(e))
			}
			return
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = scalar(e)
		}
		q.Add(p.name, strings.Join(parts, cmp.Or(sep, ",")))
	case map[string]any:
		switch {
		case p.style == "deepObject":
			for _, k := range slices.Sorted(maps.Keys(x)) {
				q.Add(p.name+"["+k+"]", scalar(x[k]))
			}
		case p.explode:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				q.Add(k, scalar(x[k]))
			}
			// The keys were checked against the operation's other query parameters and the
			// credentials' (see caller.request).
		default:
			parts := make([]string, 0, 2*len(x))
			for _, k := range slices.Sorted(maps.Keys(x)) {
				parts = append(parts, k, scalar(x[k]))
			}
			sep := map[string]string{"spaceDelimited": " ", "pipeDelimited": "|"}[p.style]
			q.Add(p.name, strings.Join(parts, cmp.Or(sep, ",")))
		}
	default:
		q.Add(p.name, scalar(v))
	}
}

// encodeBody is a request body in its media type.
func encodeBody(contentType string, raw json.RawMessage) ([]byte, error) {
	if isJSON(contentType) {
		return raw, nil
	}
	v, err := decode(raw)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("a form body is an object")
	}
	form := url.Values{}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		switch x := obj[k].(type) {
		case []any:
			for _, e := range x {
				form.Add(k, scalar(e))
			}
		default:
			form.Add(k, scalar(x))
		}
	}
	return []byte(form.Encode()), nil
}

// newClient is the HTTP client of a source's tools: its timeout, and redirects followed only
// to the source's servers, never from https to http, at most MaxRedirects.
func newClient(src Source, servers []*url.URL) *http.Client {
	maxRedirects := cmp.Or(src.MaxRedirects, DefaultMaxRedirects)
	return &http.Client{
		Transport: transport(src),
		Timeout:   cmp.Or(src.Timeout, DefaultTimeout),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if maxRedirects < 0 || len(via) > maxRedirects {
				return fmt.Errorf("more than %d redirects", max(maxRedirects, 0))
			}
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return errors.New("redirected from https to http: refused")
			}
			// Only within the origin: an API key in a header of its own (X-API-Key) would go
			// along to another host, which Go strips only for Authorization and Cookie.
			if req.URL.Scheme != via[0].URL.Scheme || req.URL.Host != via[0].URL.Host {
				return fmt.Errorf("redirected to another host (%s): refused, a source's calls stay with the server they were sent to", req.URL.Host)
			}
			return nil
		},
	}
}
