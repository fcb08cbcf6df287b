// Package openapi turns the operations of an OpenAPI document (3.0 or 3.1, JSON or YAML) into
// Quiver tools: one tool per operation, whose arguments are the operation's parameters and
// request body and whose call is an HTTP request to the service. The tools go through the
// dispatcher like any other, so every call is validated, governed, confirmed where configured
// and recorded.
//
// What a call may reach is bounded: only the document's servers (or the ones the source
// names) are called, and a redirect is followed only to one of them; a call has a timeout, and
// an answer larger than the cap is refused. Credentials come from variables, one per security
// scheme, never from the model: they are secret variables, so the dispatcher masks them in
// everything a call returns.
//
// Documents are read with github.com/getkin/kin-openapi, which reads both versions of the
// format, resolves $refs inside the document and checks the document against the
// specification; the project already uses it to check its own API's document.
package openapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/quiverhq/quiver"
)

// Defaults of a Source's bounds.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultMaxRedirects     = 3
	// MaxDocumentBytes is the largest document Load reads.
	MaxDocumentBytes = 16 << 20
	// MaxOperations is the most tools one source makes unless it raises its cap
	// (Source.MaxOperations): select some with Operations, or raise it.
	MaxOperations = 1000
	// MaxDocumentOperations is the most operations a document may have, selected or not, and
	// the most a source's cap may be raised to. Ten times MaxOperations leaves room for the
	// largest public documents (GitHub's has a little over 1,200).
	MaxDocumentOperations = 10 * MaxOperations
	// MaxDocumentValues is the most values (objects, arrays, strings, numbers, booleans and
	// nulls; a YAML alias counting as what it repeats) a document may hold unless the Source
	// says fewer (MaxValues): the loader builds up to a kilobyte and a half for each. A
	// document of MaxDocumentBytes written as real ones are holds fewer than half as many.
	MaxDocumentValues = 1 << 20
	// MaxMappingMembers is the most members one mapping of a YAML document may have: YAML's
	// decoder compares each key of a mapping with every other (JSON's keeps them in a map).
	MaxMappingMembers = 10_000
	// MaxFlowValues is the most values one flow collection ({...} or [...]) of a YAML document
	// may hold, what it holds included: the YAML parser holds a flow collection's tokens until
	// it ends, at several hundred bytes each. (A JSON document is read by JSON's decoder.)
	MaxFlowValues = 10_000
	// MaxSchemaBytes caps one tool's schemas (input and output, their $defs included, as
	// JSON): an operation over it is left out. MaxSourceSchemaBytes caps a source's in all,
	// for each MaxOperations (or part of it) of the source's cap of operations.
	// Each tool's schemas are compiled on their own, so a document whose components are
	// referred to by many operations would otherwise cost their size times the operations.
	MaxSchemaBytes       = 512 << 10
	MaxSourceSchemaBytes = 4 << 20
)

// Source is an OpenAPI document and how its operations become tools.
type Source struct {
	// Name prefixes the tools: the operation listPets of the source "petstore" is the tool
	// petstore.listPets. Letters, digits, _ and -, at most 32 characters.
	Name string
	// Document is the OpenAPI document, JSON or YAML (see Load). It must be self-contained: a
	// $ref to another file or URL is refused, so that reading it reaches nothing else.
	Document []byte
	// Location is where Document was read from (a file or a URL), named in errors; a server
	// URL in the document that is relative is resolved against it when it is a URL.
	Location string
	// Servers are the base URLs the tools may call: the first is called (an operation's own
	// servers are not used), and a redirect is followed only within the origin (scheme, host
	// and port) of the request it answers, so that no credential travels to another host.
	// Empty: the document's servers (their variables at their defaults).
	Servers []string
	// Operations selects the operations that become tools: an operationId, "tag:NAME" or
	// "METHOD /path" (as written in the document) each. Empty: all of them.
	Operations []string
	// Credentials maps the name of a security scheme of the document to the variable that holds
	// its secret: a bearer token, an API key, or "user:password" for basic. A scheme left out
	// reads the variable named after the source and the scheme in capitals
	// (petstore and api_key: PETSTORE_API_KEY).
	Credentials map[string]string
	// Connections maps the name of a security scheme of the document (bearer, OAuth 2 or
	// OpenID Connect) to a provider of users' connections: the tools send the calling
	// person's access token there (quiver.UserToken), and a person who has not connected is
	// asked to (authorization_required). A scheme in Connections reads no variable.
	Connections map[string]Connection
	// Timeout bounds a call (DefaultTimeout when zero).
	Timeout time.Duration
	// MaxResponseBytes caps the body of an answer (DefaultMaxResponseBytes when zero).
	MaxResponseBytes int64
	// MaxRedirects is how many redirects a call follows (DefaultMaxRedirects when zero;
	// negative: none).
	MaxRedirects int
	// Transport sends the requests (http.DefaultTransport when nil); tests and proxies set it.
	Transport http.RoundTripper
	// PublicOnly refuses connections to addresses that are not public (loopback, private,
	// link-local, shared, multicast, unspecified), checked on the address dialled, so that a
	// public name resolving to an internal address is refused too; except the hosts listed in
	// Internal ("host" or "host:port"). For documents a workspace imports, whose servers its
	// members choose. It applies when Transport is nil.
	PublicOnly bool
	Internal   []string
	// MaxValues is the most values the document may hold: MaxDocumentValues when zero, and
	// never more. A server reading documents that others write sets fewer, to bound what one
	// import costs it (see MaxDocumentValues).
	MaxValues int
	// MaxOperations is the most operations the source selects (MaxOperations when zero, never
	// more than MaxDocumentOperations): a document, or a selection, of more is refused once
	// its text is counted, before anything is built of it.
	MaxOperations int
	// Strict makes an answer that does not match the document's schema of it a failed call.
	// Off (the default), such an answer is passed through with a warning in the result's
	// meta: the service answered, and the document that describes it is at fault.
	Strict bool
	// Settings are the names the errors give the source's settings: the configuration file's
	// (servers, operations, max_operations) when empty. A command line names its flags.
	Settings Settings
}

// Connection is a provider of users' connections a security scheme's token comes from.
type Connection struct {
	// Provider names the workspace's provider (see platform/connect).
	Provider string `json:"provider" yaml:"provider"`
	// Scopes the token must have; none: those the operation's requirement names for the
	// scheme.
	Scopes []string `json:"scopes,omitempty" yaml:"scopes,omitempty"`
}

// Settings names a source's settings as the door that sets them calls them, for its errors.
type Settings struct {
	Servers, Operations, MaxOperations string
}

// names are the settings' names, the configuration file's where s leaves one empty.
func (s Settings) names() Settings {
	return Settings{Servers: cmp.Or(s.Servers, "servers"), Operations: cmp.Or(s.Operations, "operations"),
		MaxOperations: cmp.Or(s.MaxOperations, "max_operations")}
}

// maxOperations is the source's cap of operations.
func (src Source) maxOperations() int {
	if src.MaxOperations <= 0 {
		return MaxOperations
	}
	return min(src.MaxOperations, MaxDocumentOperations)
}

// maxSchemaBytes caps the source's tools' schemas in all: MaxSourceSchemaBytes for each
// MaxOperations (or part of it) of its cap.
func (src Source) maxSchemaBytes() int {
	return MaxSourceSchemaBytes * ((src.maxOperations() + MaxOperations - 1) / MaxOperations)
}

// limits are what the source's document may hold.
func (src Source) limits() limits {
	values := MaxDocumentValues
	if src.MaxValues > 0 {
		values = min(src.MaxValues, MaxDocumentValues)
	}
	return limits{values: values, members: MaxMappingMembers, flow: MaxFlowValues, operations: MaxDocumentOperations,
		selected: src.maxOperations(), selectors: src.Operations, settings: src.Settings.names()}
}

// Skipped is an operation of the document that did not become a tool, and why.
type Skipped struct {
	Operation string // "METHOD /path"
	Reason    string
}

// Import is what Tools made of a source.
type Import struct {
	Tools   []*quiver.Tool
	Skipped []Skipped
}

var sourceName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Tools reads the source's document and makes a tool of each operation it selects. An
// operation that cannot be a tool (a request body that is neither JSON nor a form, a schema
// that does not compile, a security scheme Quiver cannot send) is listed in Skipped with the
// reason; a selector of Operations that matches no operation is an error, as is a document
// that cannot be read as OpenAPI 3.
func Tools(ctx context.Context, src Source) (*Import, error) {
	if !sourceName.MatchString(src.Name) {
		return nil, fmt.Errorf("openapi: source name %q: use 1 to 32 letters, digits, _ and -", src.Name)
	}
	where := cmp.Or(src.Location, src.Name)
	doc, err := parse(ctx, src.Document, src.limits())
	if err != nil {
		return nil, fmt.Errorf("openapi: %s: %w", where, err)
	}
	servers, err := serverURLs(src, doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: %s: %w", where, err)
	}
	// Counted, and the selection checked, before any tool is made.
	if err := checkSelection(doc, src.limits()); err != nil {
		return nil, fmt.Errorf("openapi: %s: %w", where, err)
	}
	if err := checkConnections(doc, src.Connections); err != nil {
		return nil, fmt.Errorf("openapi: %s: %w", where, err)
	}
	b := &builder{ctx: ctx, src: src, doc: doc, servers: servers, names: map[string]int{}}
	b.client = newClient(src, servers)
	sel := newSelector(src.Operations)
	im, err := b.build(sel)
	if err != nil {
		return nil, err
	}
	if limit := src.maxSchemaBytes(); b.schemaBytes > limit {
		names := src.Settings.names()
		return nil, fmt.Errorf("openapi: %s: the tools' schemas are larger than %d bytes in all, the most for a cap of %d operations: "+
			"select fewer operations with %s", where, limit, src.maxOperations(), names.Operations)
	}
	if missing := sel.unmatched(); len(missing) > 0 {
		return nil, fmt.Errorf("openapi: %s: no operation matches %s of %s; name an operationId, tag:NAME or METHOD /path of the document",
			where, strings.Join(missing, ", "), src.Settings.names().Operations)
	}
	return im, nil
}

// checkConnections refuses connections that name a scheme the document does not have, or a
// provider that is no provider's name.
func checkConnections(doc *openapi3.T, conns map[string]Connection) error {
	for _, scheme := range slices.Sorted(maps.Keys(conns)) {
		if doc.Components == nil || doc.Components.SecuritySchemes[scheme] == nil {
			return fmt.Errorf("connections names the security scheme %q, which the document does not have", scheme)
		}
		if p := conns[scheme].Provider; !providerName.MatchString(p) {
			return fmt.Errorf("connections of %q: %q is not a provider's name (1 to 64 characters of a-z, 0-9, _ and -)", scheme, p)
		}
	}
	return nil
}

var providerName = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// build makes the tools of the operations sel selects, in the document's order, stopping
// once their schemas pass the source's cap. It works in two steps, so that the document is
// no longer held while the tools' schemas are compiled (which costs as much memory again):
// each operation's spec and caller first, then each tool.
func (b *builder) build(sel *selector) (*Import, error) {
	var made []madeOp
paths:
	for _, path := range b.doc.Paths.InMatchingOrder() {
		item := b.doc.Paths.Value(path)
		for _, method := range methods {
			op := item.GetOperation(method)
			if op == nil || !sel.selects(method, path, op.OperationID, op.Tags) {
				continue
			}
			m, err := b.prepare(method, path, item, op)
			if err != nil {
				return nil, err
			}
			made = append(made, m)
			if b.schemaBytes > b.src.maxSchemaBytes() {
				break paths
			}
		}
	}
	b.doc, b.components = nil, [2]*components{}
	return b.finishAll(made)
}

// madeOp is an operation on its way to a tool: its spec and caller, or why it cannot be one.
type madeOp struct {
	operation     string // "METHOD /path"
	spec          quiver.Spec
	input, output []byte // the spec's schemas, as JSON until decoded
	call          quiver.ToolFunc
	reason        string
}

// prepare makes the spec and caller of one operation, or says why it cannot be a tool.
func (b *builder) prepare(method, path string, item *openapi3.PathItem, op *openapi3.Operation) (madeOp, error) {
	if err := b.ctx.Err(); err != nil {
		return madeOp{}, err // the request it is read for ended
	}
	m, reason, err := b.operation(method, path, item, op)
	if err != nil {
		reason = "the document describes it in a way Quiver cannot use: " + err.Error()
	}
	m.operation, m.reason = method+" "+path, reason
	return m, nil
}

// methods are the HTTP methods an operation may have, in the order tools are made.
var methods = []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodOptions,
	http.MethodHead, http.MethodPatch, http.MethodTrace}

// parse reads a document, once counted within lim (see scanDocument). References to other
// documents are refused: the loader would otherwise read files or fetch URLs a document
// names. The document is not validated as a whole: real documents often break a rule of the
// specification somewhere (a keyword their generator adds, an example that does not match),
// and one operation's flaw should not cost the others. Each operation is checked as its tool
// is made instead (see Tools).
func parse(ctx context.Context, data []byte, lim limits) (*openapi3.T, error) {
	if len(data) == 0 {
		return nil, errors.New("the document is empty")
	}
	if len(data) > MaxDocumentBytes {
		return nil, fmt.Errorf("the document is larger than %d bytes", MaxDocumentBytes)
	}
	isJSON, err := scanDocument(data, lim)
	if err != nil {
		return nil, err
	}
	doc, err := load(ctx, data, isJSON)
	if err != nil {
		return nil, fmt.Errorf("not a readable OpenAPI document: %w", err)
	}
	if err := checkDocument(doc); err != nil {
		return nil, err
	}
	if doc.Components == nil {
		doc.Components = &openapi3.Components{}
	}
	return doc, nil
}

// checkDocument checks that doc is OpenAPI 3 and has paths.
func checkDocument(doc *openapi3.T) error {
	if doc.OpenAPI == "" || !strings.HasPrefix(doc.OpenAPI, "3.") {
		return fmt.Errorf("openapi version %q: only OpenAPI 3.0 and 3.1 documents are read (convert a Swagger 2.0 document first)", doc.OpenAPI)
	}
	if doc.Paths == nil || doc.Paths.Len() == 0 {
		return errors.New("the document has no paths")
	}
	return nil
}

// load reads a document with the loader, which follows no reference to another document.
func load(ctx context.Context, data []byte, isJSON bool) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.Context = ctx
	loader.IsExternalRefsAllowed = false
	if isJSON {
		return loadJSON(loader, data)
	}
	return loader.LoadFromData(data)
}

// loadJSON reads a JSON document as JSON. The loader's LoadFromData parses every document as
// YAML first, and YAML's parser holds a JSON document's one long flow of tokens at several
// times the memory (five times the peak heap, measured on a 2.6 MB document).
func loadJSON(loader *openapi3.Loader, data []byte) (*openapi3.T, error) {
	doc := &openapi3.T{}
	if err := json.Unmarshal(data, doc); err != nil {
		return nil, err
	}
	if err := loader.ResolveRefsIn(doc, nil); err != nil {
		return nil, err
	}
	return doc, nil
}

// serverURLs are the base URLs a source's tools may call: its own, else the document's.
func serverURLs(src Source, doc *openapi3.T) ([]*url.URL, error) {
	raw := src.Servers
	if len(raw) == 0 {
		raw = documentServers(doc)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("the document names no server; give the base URL of the service with %s", src.Settings.names().Servers)
	}
	var base *url.URL // what a relative server URL is relative to: where the document was read
	if u, err := url.Parse(src.Location); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		base = u
	}
	out := make([]*url.URL, 0, len(raw))
	for _, s := range raw {
		u, err := serverURL(s, base)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// documentServers are the URLs of the document's servers.
func documentServers(doc *openapi3.T) []string {
	var raw []string
	for _, s := range doc.Servers {
		if s != nil {
			raw = append(raw, expandServer(s))
		}
	}
	return raw
}

// serverURL is the base URL s, resolved against base when relative and base is known, without
// a trailing slash.
func serverURL(s string, base *url.URL) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("server %q is not a URL: %v", s, err)
	}
	if !u.IsAbs() && base != nil {
		u = base.ResolveReference(u)
	}
	if err := checkServer(s, u); err != nil {
		return nil, err
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// checkServer checks that u, the URL of server s, is an absolute http or https URL with
// nothing but a path after its host.
func checkServer(s string, u *url.URL) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("server %q: give an absolute http or https URL", s)
	case u.User != nil:
		return fmt.Errorf("server %q: credentials in the URL are refused; use the source's credentials", s)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("server %q: a base URL has no query or fragment", s)
	}
	return nil
}

// expandServer is a server's URL with its variables at their defaults.
func expandServer(s *openapi3.Server) string {
	u := s.URL
	for name, v := range s.Variables {
		if v != nil {
			u = strings.ReplaceAll(u, "{"+name+"}", v.Default)
		}
	}
	return u
}

// selector picks operations by the Source's Operations, and remembers which selectors matched.
type selector struct {
	all     bool
	matched map[string]bool
	order   []string
}

func newSelector(ops []string) *selector {
	s := &selector{all: len(ops) == 0, matched: map[string]bool{}}
	for _, o := range ops {
		o = strings.TrimSpace(o)
		if _, dup := s.matched[o]; !dup && o != "" {
			s.matched[o] = false
			s.order = append(s.order, o)
		}
	}
	return s
}

// selects reports whether the operation of method and path, of id and tags, is selected.
func (s *selector) selects(method, path, id string, tags []string) bool {
	if s.all {
		return true
	}
	keys := []string{method + " " + path, strings.ToLower(method) + " " + path}
	if id != "" {
		keys = append(keys, id)
	}
	for _, t := range tags {
		keys = append(keys, "tag:"+t)
	}
	hit := false
	for _, k := range keys {
		if _, ok := s.matched[k]; ok {
			s.matched[k] = true
			hit = true
		}
	}
	return hit
}

func (s *selector) unmatched() []string {
	var out []string
	for _, o := range s.order {
		if !s.matched[o] {
			out = append(out, fmt.Sprintf("%q", o))
		}
	}
	return out
}

// builder makes the tools of one source.
type builder struct {
	ctx     context.Context // the request the source is read for: compiling stops when it ends
	src     Source
	doc     *openapi3.T
	servers []*url.URL
	client  *http.Client
	names   map[string]int // tool names given so far, for uniqueness
	// components are the components converted so far, per direction: each once per source.
	components [2]*components
	// schemaBytes counts the tools' schemas so far (see MaxSourceSchemaBytes).
	schemaBytes int
}

// operation makes the spec and caller of one operation, or says why it cannot be a tool.
func (b *builder) operation(method, path string, item *openapi3.PathItem, op *openapi3.Operation) (madeOp, string, error) {
	auth, vars, err := b.security(op)
	if err != nil {
		return madeOp{}, err.Error(), nil
	}
	in, reason, err := b.inputs(item, op, reservedForCredentials(auth))
	if err != nil || reason != "" {
		return madeOp{}, reason, err
	}
	output, reason, err := b.outputRaw(method, op, in.schema)
	if err != nil || reason != "" {
		return madeOp{}, reason, err
	}
	c := &caller{source: b.src.Name, method: method, path: path, servers: b.servers, client: b.client,
		params: in.params, body: in.body, auth: auth, maxBytes: cmp.Or(b.src.MaxResponseBytes, DefaultMaxResponseBytes),
		reservedQuery: reservedQuery(in.params, auth)}
	spec := quiver.Spec{
		Name:        b.toolName(method, path, op),
		Description: description(b.src.Name, method, path, op),
		Variables:   vars,
		Timeout:     cmp.Or(b.src.Timeout, DefaultTimeout),
		Imported:    true,
		Annotations: annotations(method, op),
		Source:      quiver.SourceOpenAPI + ":" + b.src.Name,
		// The document describes the service's answers; the service is what answers.
		OutputAdvisory: !b.src.Strict,
		Connections:    connectionNeeds(auth),
	}
	return madeOp{spec: spec, call: c.call, input: in.schema, output: output}, "", nil
}

// connectionNeeds are the connections a tool cannot be called without: those of its one way
// in, when it has one (with another, a person without the connection may use that).
func connectionNeeds(auth [][]credential) []quiver.ConnectionNeed {
	if len(auth) != 1 {
		return nil
	}
	var out []quiver.ConnectionNeed
	for _, cr := range auth[0] {
		if cr.connection != nil {
			out = append(out, quiver.ConnectionNeed{Provider: cr.connection.Provider, Scopes: cr.connection.Scopes})
		}
	}
	return out
}

// outputRaw is a tool's output schema as JSON (nil for none), its input schema being inRaw, or
// why it cannot have them. They are decoded once the document is dropped (see finish): held
// decoded, the schemas of a thousand tools would cost as much as the document.
func (b *builder) outputRaw(method string, op *openapi3.Operation, inRaw []byte) (outRaw []byte, reason string, err error) {
	// Only an operation that changes nothing declares what it answers: the dispatcher checks
	// a result against its output schema, and a service whose answer strays from its document
	// after a POST took effect must not make the call look failed (and be made again).
	if method == http.MethodGet || method == http.MethodHead {
		if outRaw, err = b.outputSchema(op); err != nil {
			return nil, "", err
		}
	}
	// Counted whether the tool is made or not: a document of many operations over the cap
	// costs their encoding, which the source's cap bounds too.
	size := len(inRaw) + len(outRaw)
	b.schemaBytes += size
	if size > MaxSchemaBytes {
		return nil, fmt.Sprintf("its schemas are %d bytes as JSON, over the %d a tool may have", size, MaxSchemaBytes), nil
	}
	return outRaw, "", nil
}

// decodeSchemas puts a prepared operation's schemas, decoded, in its spec.
func (m *madeOp) decodeSchemas() error {
	var err error
	if m.spec.InputSchema, err = decodeSchema(m.input); err != nil {
		return fmt.Errorf("input schema: %w", err)
	}
	if m.spec.OutputSchema, err = decodeSchema(m.output); err != nil {
		return fmt.Errorf("output schema: %w", err)
	}
	m.input, m.output = nil, nil
	return nil
}

// reservedQuery are the query names (lower case) an exploded object's keys may not take: the
// operation's query parameters and the credentials'.
func reservedQuery(params []param, auth [][]credential) map[string]bool {
	out := map[string]bool{}
	for _, p := range params {
		if p.in == "query" {
			out[strings.ToLower(p.name)] = true
		}
	}
	for key := range reservedForCredentials(auth) {
		if in, name, _ := strings.Cut(key, "\x00"); in == "query" {
			out[name] = true
		}
	}
	return out
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// toolName is the source's name, a dot and the operation's id (or its method and path),
// with what providers refuse replaced by _, unique in the source.
func (b *builder) toolName(method, path string, op *openapi3.Operation) string {
	base := op.OperationID
	if base == "" {
		base = strings.ToLower(method) + "_" + path
	}
	base = strings.Trim(unsafeName.ReplaceAllString(base, "_"), "_")
	if base == "" {
		base = strings.ToLower(method)
	}
	// 64 characters in all where possible (OpenAI's and Anthropic's limit, which the
	// providers' mapping would otherwise cut and hash).
	if max := 64 - len(b.src.Name) - 1; len(base) > max && max >= 16 {
		base = base[:max]
	}
	name := b.src.Name + "." + base
	for n := 2; b.names[name] > 0; n++ {
		name = fmt.Sprintf("%s.%s_%d", b.src.Name, base, n)
	}
	b.names[name]++
	return name
}

// description is the operation's summary and description, else what it is.
func description(source, method, path string, op *openapi3.Operation) string {
	var parts []string
	for _, p := range []string{op.Summary, op.Description} {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("Calls %s %s of %s.", method, path, source))
	}
	if op.Deprecated {
		parts = append(parts, "Deprecated by the service.")
	}
	return strings.Join(parts, "\n\n")
}

// annotations are what an operation's method says about it: GET, HEAD and OPTIONS read;
// PUT and DELETE are idempotent, DELETE destructive. Every call reaches another system.
func annotations(method string, op *openapi3.Operation) quiver.Annotations {
	a := quiver.Annotations{Title: strings.TrimSpace(op.Summary), OpenWorldHint: quiver.Hint(true)}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		a.ReadOnlyHint, a.IdempotentHint = quiver.Hint(true), quiver.Hint(true)
	case http.MethodPut:
		a.ReadOnlyHint, a.IdempotentHint = quiver.Hint(false), quiver.Hint(true)
	case http.MethodDelete:
		a.ReadOnlyHint, a.IdempotentHint, a.DestructiveHint = quiver.Hint(false), quiver.Hint(true), quiver.Hint(true)
	default:
		a.ReadOnlyHint = quiver.Hint(false)
	}
	return a
}
