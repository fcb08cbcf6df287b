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
	data, err := c.readAnswer(resp)
	if err != nil {
		return nil, err
	}
	status := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, c.failed(status, data)
	}
	return answer(status, resp.Header.Get("Content-Type"), data), nil
}

// readAnswer reads the answer's body, up to the source's limit.
func (c *caller) readAnswer(resp *http.Response) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %v", c.method, c.path, withoutURL(err))
	}
	if int64(len(data)) > c.maxBytes {
		return nil, fmt.Errorf("%s %s: the answer is larger than %d bytes, the limit of the source %s", c.method, c.path, c.maxBytes, c.source)
	}
	return data, nil
}

// failed is the error of an answer whose status is not 2xx, quoting the start of its body.
func (c *caller) failed(status string, data []byte) error {
	excerpt := strings.ToValidUTF8(string(data[:min(len(data), errorExcerpt)]), "?")
	if excerpt != "" {
		excerpt = ": " + excerpt
	}
	return fmt.Errorf("%s %s: the service answered %s%s", c.method, c.path, status, excerpt)
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
	case isText(mt) && utf8.Valid(data):
		return string(data)
	}
	return fmt.Sprintf("%s: %d bytes of %s", status, len(data), cmp.Or(mt, "unknown type"))
}

// isText reports whether an answer of media type mt ("": none said) may be text.
func isText(mt string) bool {
	return strings.HasPrefix(mt, "text/") || mt == "" || strings.HasSuffix(mt, "+xml") || mt == "application/xml"
}

// request builds the HTTP request of a call.
func (c *caller) request(ctx context.Context, in map[string]json.RawMessage) (*http.Request, error) {
	parts, err := c.parts(in)
	if err != nil {
		return nil, err
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

// parts puts each argument of a parameter where the parameter goes.
func (c *caller) parts(in map[string]json.RawMessage) (*requestParts, error) {
	parts := &requestParts{path: c.path, query: url.Values{}, header: http.Header{}}
	for _, p := range c.params {
		raw, ok := in[p.arg]
		if !ok {
			continue
		}
		if err := c.addParam(parts, p, raw); err != nil {
			return nil, err
		}
	}
	return parts, nil
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
			return quiver.Fail(quiver.CodeInvalidArguments, "argument %s (the path parameter %s): %v", p.arg, p.name, err)
		}
		parts.path = strings.ReplaceAll(parts.path, "{"+p.name+"}", s)
	case "query":
		if list, isList := v.([]any); p.nonEmpty && (v == "" || isList && len(list) == 0) {
			return quiver.Fail(quiver.CodeInvalidArguments, "argument %s: the query parameter %s is required and may not be empty: give its value", p.arg, p.name)
		}
		if err := c.checkQueryKeys(p, v); err != nil {
			return err
		}
		queryValue(parts.query, p, v, raw)
	case "header":
		parts.header.Set(p.name, simple(v, p.explode, p.content, raw))
	case "cookie":
		parts.cookies = append(parts.cookies, p.name+"="+url.QueryEscape(simple(v, false, p.content, raw)))
	}
	return nil
}

// checkQueryKeys checks that an object whose keys become query names (form, exploded) takes
// none the operation's other query parameters or the credentials have.
func (c *caller) checkQueryKeys(p param, v any) error {
	obj, ok := v.(map[string]any)
	if !ok || !p.explode || p.style == "deepObject" || p.content {
		return nil
	}
	for k := range obj {
		if c.reservedQuery[strings.ToLower(k)] {
			return quiver.Fail(quiver.CodeInvalidArguments,
				"argument %s: the key %q is another query parameter's or a credential's; it cannot be sent as one of %s's", p.arg, k, p.arg)
		}
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
	var unconnected error // a person's connection an alternative needs and they have not made
	anonymous := false
	for _, alt := range c.auth {
		if len(alt) == 0 {
			anonymous = true // {}: none needed, if no alternative with credentials is met
			continue
		}
		values, unset, err := credentialValues(ctx, alt)
		if _, ok := errors.AsType[*quiver.AuthorizationRequiredError](err); ok {
			unconnected = cmp.Or(unconnected, err)
			continue
		}
		if err != nil {
			return err
		}
		if len(unset) > 0 {
			missing = appendNew(missing, unset...)
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
	if unconnected != nil && len(missing) == 0 {
		return unconnected
	}
	return quiver.Fail(quiver.CodeMissingVariable, "%s %s needs credentials: set the secret variable %s", c.method, c.path,
		strings.Join(missing, " or "))
}

// credentialValues are the values of a security alternative's credentials, and the variables
// of it that are not set; a person's token of a connection they have not made is an
// *quiver.AuthorizationRequiredError.
func credentialValues(ctx context.Context, alt []credential) (values, unset []string, err error) {
	values = make([]string, len(alt))
	for i, cr := range alt {
		if cr.connection != nil {
			if values[i], err = quiver.UserToken(ctx, cr.connection.Provider, cr.connection.Scopes...); err != nil {
				return nil, nil, err
			}
			continue
		}
		v, set := quiver.Var(ctx, cr.variable)
		if !set || v == "" {
			unset = append(unset, cr.variable)
		}
		values[i] = v
	}
	return values, unset, nil
}

// appendNew appends to list the names it does not hold yet.
func appendNew(list []string, names ...string) []string {
	for _, n := range names {
		if !slices.Contains(list, n) {
			list = append(list, n)
		}
	}
	return list
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
		for _, v := range formValues(obj[k]) {
			form.Add(k, v)
		}
	}
	return []byte(form.Encode()), nil
}

// formValues are a form field's values: a list's items, or the one value.
func formValues(v any) []string {
	if list, ok := v.([]any); ok {
		return scalars(list)
	}
	return []string{scalar(v)}
}

// newClient is the HTTP client of a source's tools: its timeout, and redirects followed only
// to the source's servers, never from https to http, at most MaxRedirects.
func newClient(src Source, servers []*url.URL) *http.Client {
	return &http.Client{
		Transport:     transport(src),
		Timeout:       cmp.Or(src.Timeout, DefaultTimeout),
		CheckRedirect: redirectPolicy(cmp.Or(src.MaxRedirects, DefaultMaxRedirects)).check,
	}
}

// redirectPolicy follows at most its number of redirects (none when negative), within the
// origin and never from https to http.
type redirectPolicy int

func (limit redirectPolicy) check(req *http.Request, via []*http.Request) error {
	if limit < 0 || len(via) > int(limit) {
		return fmt.Errorf("more than %d redirects", max(int(limit), 0))
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return errors.New("redirected from https to http: refused")
	}
	// Only within the origin: an API key in a header of its own (X-API-Key) would go along to
	// another host, which Go strips only for Authorization and Cookie.
	if req.URL.Scheme != via[0].URL.Scheme || req.URL.Host != via[0].URL.Host {
		return fmt.Errorf("redirected to another host (%s): refused, a source's calls stay with the server they were sent to", req.URL.Host)
	}
	return nil
}
