package openapi

import (
	"fmt"
	"maps"
	"mime"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/quiverhq/quiver"
)

// param is one parameter of an operation, as a tool's argument.
type param struct {
	arg     string // the argument's name in the tool's input
	name    string // the parameter's name in the request
	in      string // path, query, header or cookie
	style   string
	explode bool
	content bool // described by content (JSON) rather than a schema: sent as JSON text
	// nonEmpty: a required query parameter that does not allow an empty value, refused as ""
	// or [] before the request is sent (a path parameter never takes one).
	nonEmpty bool
}

// body is an operation's request body, as a tool's argument.
type body struct {
	arg         string
	contentType string // a JSON media type, or application/x-www-form-urlencoded
}

// inputs is what a tool takes and how each part is sent.
type inputs struct {
	schema []byte // JSON, decoded once the tool's size is known to be within the cap
	params []param
	body   *body
}

// reservedHeaders are headers a parameter may not set: the specification ignores the first
// three as parameters, and the others are the transport's or the credentials'.
var reservedHeaders = []string{"Accept", "Content-Type", "Authorization", "Host", "Content-Length", "Transfer-Encoding",
	"Connection", "Cookie", "Proxy-Authorization", "Te", "Trailer", "Upgrade"}

var unsafeArg = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// inputs assembles an operation's argument schema from its parameters (the path item's, which
// the operation's own override) and its request body.
// A parameter that would carry a credential (reserved) is not offered.
func (b *builder) inputs(item *openapi3.PathItem, op *openapi3.Operation, reserved map[string]bool) (*inputs, string, error) {
	conv := newConverter(b.doc, request, b.cache(request))
	a := &argsSchema{props: map[string]any{}, used: map[string]bool{}}
	in := &inputs{}
	if err := a.addParams(conv, in, operationParams(item, op), reserved); err != nil {
		return nil, "", err
	}
	if rb := op.RequestBody; rb != nil && rb.Value != nil {
		skip, err := a.addBody(conv, in, rb.Value)
		if skip != "" || err != nil {
			return nil, skip, err
		}
	}
	if n := conv.defsSize(); n > MaxSchemaBytes {
		return nil, fmt.Sprintf("the schemas it refers to are %d bytes as JSON, over the %d a tool may have", n, MaxSchemaBytes), nil
	}
	root := map[string]any{"type": "object", "properties": a.props, "additionalProperties": false}
	if len(a.required) > 0 {
		root["required"] = a.required
	}
	conv.defsInto(root)
	raw, err := encodeSchema(root)
	if err != nil {
		return nil, "", fmt.Errorf("input schema: %w", err)
	}
	in.schema = raw
	return in, "", nil
}

// operationParams are the parameters of an operation: its path item's, overridden by its own
// of the same place and name.
func operationParams(item *openapi3.PathItem, op *openapi3.Operation) []*openapi3.Parameter {
	var all []*openapi3.Parameter
	seen := map[string]int{}
	for _, list := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		for _, pr := range list {
			p := pr.Value
			if p == nil {
				continue
			}
			key := p.In + "\x00" + p.Name
			if i, ok := seen[key]; ok {
				all[i] = p
				continue
			}
			seen[key] = len(all)
			all = append(all, p)
		}
	}
	return all
}

// argsSchema is the argument schema of an operation as it is assembled.
type argsSchema struct {
	props    map[string]any
	required []any
	used     map[string]bool // argument names taken
}

// addParams offers each parameter but those that would carry a credential as an argument
// (named after the parameter, with its place before it when two places share the name).
func (a *argsSchema) addParams(conv *converter, in *inputs, all []*openapi3.Parameter, reserved map[string]bool) error {
	names := map[string]int{}
	for _, p := range all {
		names[p.Name]++
	}
	for _, p := range all {
		if isReserved(p, reserved) {
			continue
		}
		arg := p.Name
		if names[p.Name] > 1 {
			arg = p.In + "_" + p.Name
		}
		pr, err := a.addParam(conv, p, argName(arg, a.used))
		if err != nil {
			return err
		}
		in.params = append(in.params, pr)
	}
	return nil
}

// isReserved reports whether a parameter would set what the transport or the credentials set.
func isReserved(p *openapi3.Parameter, reserved map[string]bool) bool {
	return p.In == openapi3.ParameterInHeader && slices.ContainsFunc(reservedHeaders, func(h string) bool { return strings.EqualFold(h, p.Name) }) ||
		reserved[p.In+"\x00"+strings.ToLower(p.Name)]
}

// addParam offers parameter p as the argument arg, and returns how it is sent.
func (a *argsSchema) addParam(conv *converter, p *openapi3.Parameter, arg string) (param, error) {
	s, isContent, err := paramSchema(conv, p)
	if err != nil {
		return param{}, fmt.Errorf("parameter %s (in %s): %w", p.Name, p.In, err)
	}
	if p.Description != "" && s["description"] == nil {
		s["description"] = p.Description
	}
	nonEmpty := p.In == openapi3.ParameterInQuery && p.Required && !p.AllowEmptyValue
	if nonEmpty && s["type"] == "array" {
		// An empty list sends no value (or an empty one): the parameter would be missing.
		if n, _ := s["minItems"].(float64); n < 1 {
			s["minItems"] = 1
		}
	}
	a.props[arg] = s
	if p.Required || p.In == openapi3.ParameterInPath {
		a.required = append(a.required, arg)
	}
	sm, err := p.SerializationMethod()
	if err != nil {
		return param{}, fmt.Errorf("parameter %s: %w", p.Name, err)
	}
	return param{arg: arg, name: p.Name, in: p.In, style: sm.Style, explode: sm.Explode, content: isContent,
		nonEmpty: nonEmpty}, nil
}

// addBody offers the request body as the argument body (request_body when a parameter took
// that name); skip says why the operation cannot be a tool (a required body Quiver cannot send).
func (a *argsSchema) addBody(conv *converter, in *inputs, rb *openapi3.RequestBody) (skip string, _ error) {
	mt, media := bodyMedia(rb.Content)
	if media == nil {
		if rb.Required {
			return fmt.Sprintf("its request body is %s; only JSON and form bodies are sent", mediaTypes(rb.Content)), nil
		}
		return "", nil
	}
	s, err := conv.convert(media.Schema)
	if err != nil {
		return "", fmt.Errorf("request body: %w", err)
	}
	if d := rb.Description; d != "" && s["description"] == nil {
		s["description"] = d
	}
	arg := "body"
	if a.used[arg] {
		arg = argName("request_body", a.used)
	}
	a.used[arg] = true
	a.props[arg] = s
	if rb.Required {
		a.required = append(a.required, arg)
	}
	in.body = &body{arg: arg, contentType: mt}
	return "", nil
}

// argName makes a parameter's name a valid, unused argument name: what providers refuse in a
// property name becomes _, and a leading _ (which marks Quiver's meta-fields) gets a p before it.
func argName(name string, used map[string]bool) string {
	a := unsafeArg.ReplaceAllString(name, "_")
	if a == "" || strings.HasPrefix(a, "_") {
		a = "p" + a
	}
	if len(a) > 60 {
		a = a[:60]
	}
	base := a
	for n := 2; used[a]; n++ {
		a = base + "_" + strconv.Itoa(n)
	}
	used[a] = true
	return a
}

// paramSchema is a parameter's schema: its own, or that of its JSON content.
func paramSchema(conv *converter, p *openapi3.Parameter) (map[string]any, bool, error) {
	if p.Schema != nil {
		s, err := conv.convert(p.Schema)
		return s, false, err
	}
	if _, media := bodyMedia(p.Content); media != nil {
		s, err := conv.convert(media.Schema)
		return s, true, err
	}
	return map[string]any{"type": "string"}, false, nil
}

// bodyMedia picks the media type a request is sent as: JSON first, then a form.
func bodyMedia(content openapi3.Content) (string, *openapi3.MediaType) {
	var form *openapi3.MediaType
	for _, mt := range slices.Sorted(maps.Keys(content)) {
		base, _, err := mime.ParseMediaType(mt)
		if err != nil {
			continue
		}
		switch {
		case isJSON(base):
			return base, content[mt]
		case base == "application/x-www-form-urlencoded":
			form = content[mt]
		}
	}
	if form != nil {
		return "application/x-www-form-urlencoded", form
	}
	return "", nil
}

func isJSON(mediaType string) bool {
	return mediaType == "application/json" || strings.HasSuffix(mediaType, "+json")
}

func mediaTypes(content openapi3.Content) string {
	keys := slices.Sorted(maps.Keys(content))
	if len(keys) == 0 {
		return "without a media type"
	}
	return strings.Join(keys, " or ")
}

// outputSchema is the schema of the operation's success answer when the operation has one
// success answer (one 2xx status, or 2XX) and it is JSON: with several, or one without
// content, an answer that is right by the document could fail the check.
func (b *builder) outputSchema(op *openapi3.Operation) ([]byte, error) {
	media := successMedia(op)
	if media == nil {
		return nil, nil
	}
	conv := newConverter(b.doc, response, b.cache(response))
	s, err := conv.convert(media.Schema)
	if err != nil {
		return nil, fmt.Errorf("success answer: %w", err)
	}
	if len(s) == 0 || conv.defsSize() > MaxSchemaBytes {
		return nil, nil // too large to check answers against: none declared
	}
	conv.defsInto(s)
	return encodeSchema(s)
}

// successMedia is the JSON content of the operation's success answer, with its schema; nil
// unless the operation has one success answer and it is that.
func successMedia(op *openapi3.Operation) *openapi3.MediaType {
	success := successAnswers(op)
	if len(success) != 1 {
		return nil
	}
	mt, found := bodyMedia(success[0].Value.Content)
	if found == nil || !isJSON(mt) || found.Schema == nil {
		return nil
	}
	return found
}

// successAnswers are the operation's answers of a 2xx status.
func successAnswers(op *openapi3.Operation) []*openapi3.ResponseRef {
	if op.Responses == nil {
		return nil
	}
	var success []*openapi3.ResponseRef
	for code, rr := range op.Responses.Map() {
		if strings.HasPrefix(code, "2") && rr != nil && rr.Value != nil {
			success = append(success, rr)
		}
	}
	return success
}

// cache is the source's components converted in one direction.
func (b *builder) cache(dir direction) *components {
	if b.components[dir] == nil {
		b.components[dir] = newComponents()
	}
	return b.components[dir]
}

// credential is one security scheme of a requirement, with the variable holding its secret.
type credential struct {
	scheme   *openapi3.SecurityScheme
	variable string
	// connection, when set, is where the credential comes from instead of variable: the
	// calling person's token, with scopes.
	connection *Connection
}

// security is the operation's security requirements as alternatives of credentials (an empty
// alternative: none needed), and the variables they read. A requirement naming a scheme
// Quiver cannot send is left out of the alternatives.
func (b *builder) security(op *openapi3.Operation) ([][]credential, []quiver.Variable, error) {
	reqs := b.doc.Security
	if op.Security != nil {
		reqs = *op.Security
	}
	var alts [][]credential
	for _, req := range reqs {
		alt, usable, err := b.alternative(req)
		if err != nil {
			return nil, nil, err
		}
		if usable {
			alts = append(alts, alt)
		}
	}
	if len(reqs) > 0 && len(alts) == 0 {
		return nil, nil, fmt.Errorf("no security requirement of the operation can be met: Quiver sends bearer, basic and API key credentials")
	}
	return alts, b.credentialVariables(alts), nil
}

// alternative is the credentials of one security requirement; false when Quiver cannot send
// one of them.
func (b *builder) alternative(req openapi3.SecurityRequirement) ([]credential, bool, error) {
	var alt []credential
	for _, name := range slices.Sorted(maps.Keys(req)) {
		ref := b.doc.Components.SecuritySchemes[name]
		if ref == nil || ref.Value == nil {
			return nil, false, fmt.Errorf("security scheme %q is not in the document's components", name)
		}
		if !sendable(ref.Value) {
			return nil, false, nil
		}
		if conn, ok := b.src.Connections[name]; ok {
			if !bearerLike(ref.Value) {
				return nil, false, fmt.Errorf("security scheme %q is %s: only a bearer, OAuth 2 or OpenID Connect scheme takes a person's connection", name, schemeText(ref.Value))
			}
			if len(conn.Scopes) == 0 {
				conn.Scopes = req[name]
			}
			alt = append(alt, credential{scheme: ref.Value, connection: &conn})
			continue
		}
		alt = append(alt, credential{scheme: ref.Value, variable: b.variableFor(name)})
	}
	return alt, true, nil
}

// credentialVariables are the variables the alternatives read, each once: required when there
// is one alternative.
func (b *builder) credentialVariables(alts [][]credential) []quiver.Variable {
	var vars []quiver.Variable
	declared := map[string]bool{}
	for _, alt := range alts {
		for _, c := range alt {
			if c.connection != nil || declared[c.variable] {
				continue
			}
			declared[c.variable] = true
			vars = append(vars, quiver.Variable{Name: c.variable, Type: quiver.VarSecret, Required: len(alts) == 1,
				Description: fmt.Sprintf("The credential of %s's security scheme %s.", b.src.Name, schemeText(c.scheme))})
		}
	}
	return vars
}

// sendable reports whether Quiver can send a scheme's credential: HTTP bearer and basic, an
// API key in a header, the query or a cookie, and the access token of OAuth 2 or OpenID
// Connect as a bearer token.
func sendable(s *openapi3.SecurityScheme) bool {
	switch s.Type {
	case "http":
		return strings.EqualFold(s.Scheme, "bearer") || strings.EqualFold(s.Scheme, "basic")
	case "apiKey":
		return s.Name != "" && (s.In == "header" || s.In == "query" || s.In == "cookie")
	case "oauth2", "openIdConnect":
		return true
	}
	return false
}

// bearerLike reports whether a scheme's credential is a bearer token a person's connection
// gives: HTTP bearer, OAuth 2, OpenID Connect.
func bearerLike(s *openapi3.SecurityScheme) bool {
	return s.Type == "oauth2" || s.Type == "openIdConnect" || (s.Type == "http" && strings.EqualFold(s.Scheme, "bearer"))
}

func schemeText(s *openapi3.SecurityScheme) string {
	switch s.Type {
	case "http":
		if strings.EqualFold(s.Scheme, "basic") {
			return "(HTTP basic: user:password)"
		}
		return "(a bearer token)"
	case "apiKey":
		return fmt.Sprintf("(an API key, sent in the %s %s)", s.In, s.Name)
	}
	return "(an access token, sent as a bearer token)"
}

// variableFor is the variable holding a scheme's secret: the source's mapping, else the
// source's and the scheme's names in capitals.
func (b *builder) variableFor(scheme string) string {
	if v := b.src.Credentials[scheme]; v != "" {
		return v
	}
	return strings.ToUpper(unsafeName.ReplaceAllString(b.src.Name+"_"+scheme, "_"))
}

// reservedForCredentials are the header and query names the credentials of alts use: a
// parameter of the same name is not offered to the model, so that it cannot replace them.
func reservedForCredentials(alts [][]credential) map[string]bool {
	out := map[string]bool{}
	for _, alt := range alts {
		for _, c := range alt {
			if c.scheme.Type == "apiKey" {
				out[c.scheme.In+"\x00"+strings.ToLower(c.scheme.Name)] = true
			}
		}
	}
	return out
}
