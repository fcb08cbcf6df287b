package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	validator "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/quiverhq/quiver/internal/schemastat"
)

// Compiled is a schema resolved and compiled once, ready to validate many values concurrently.
type Compiled struct {
	source   *Schema
	json     json.RawMessage
	compiled *validator.Schema
	defaults *defaultsNode // nil when the schema declares no default anywhere
	quick    *quick        // nil when the fast path does not cover the schema
	// costly is the schema's graph when one value could cost the validator more than the
	// schema has nodes (a definition named from several places, or a recursion): each value is
	// then counted before it is checked (see MaxValidationSteps). nil otherwise.
	costly *graph
}

// Compile checks s, compiles it for validation, and checks every default it declares against
// the schema of the value it defaults. Formats (date-time, email, uuid, ...) are asserted, not
// merely annotated, so that a model gets told when a date is not a date. A schema over the
// bounds MaxSchemaNodes, MaxSchemaVisits or MaxRecursiveNodes is refused with an error that
// names the bound and the place.
func Compile(s *Schema) (*Compiled, error) {
	return CompileContext(context.Background(), s)
}

// CompileContext is Compile for a schema compiled on behalf of a request: it stops with the
// context's error when ctx ends. The bounds are the same. With a CompileCache in ctx
// (WithCompileCache), a schema whose JSON was compiled before is not compiled again.
func CompileContext(ctx context.Context, s *Schema) (*Compiled, error) {
	if s == nil {
		return nil, errors.New("schema: compile: nil schema")
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("schema: compile: %w", err)
	}
	cache := cacheOf(ctx)
	if cache == nil {
		return compile(ctx, s, raw)
	}
	if c := cache.get(raw); c != nil {
		return c, nil
	}
	c, err := compile(ctx, s, raw)
	if err == nil {
		cache.put(raw, c)
	}
	return c, err
}

// CompileJSON parses a JSON Schema document and compiles it.
func CompileJSON(doc []byte) (*Compiled, error) {
	return CompileJSONContext(context.Background(), doc)
}

// CompileJSONContext is CompileJSON for a document compiled on behalf of a request (see
// CompileContext).
func CompileJSONContext(ctx context.Context, doc []byte) (*Compiled, error) {
	var s Schema
	if err := json.Unmarshal(doc, &s); err != nil {
		return nil, fmt.Errorf("schema: parse: %w", err)
	}
	return CompileContext(ctx, &s)
}

const resourceURL = "quiver:///schema.json"

// compile checks the document's graph against the bounds before the validator compiles it
// (the validator cannot be stopped midway, and its work on a recursion grows with the square of
// the recursion's nodes), then builds the defaults, each schema once.
func compile(ctx context.Context, s *Schema, raw []byte) (*Compiled, error) {
	schemastat.Compilations.Add(1)
	doc, err := validator.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema: compile: %w", err)
	}
	g, err := newGraph(ctx, doc)
	if err != nil {
		return nil, err
	}
	groups, err := g.compileGroups(&builder{ctx: ctx, g: g})
	if err != nil {
		return nil, err
	}
	vc, compiled, err := compileWrapped(ctx, g, groups, g.wrap(doc))
	if err != nil {
		return nil, err
	}
	c := &Compiled{source: s, json: raw, compiled: compiled}
	if g.recursive || g.visits > g.reachable {
		c.costly = g
	}
	check := func(at *node, name string, value any) error {
		return checkDefault(vc, g, at, name, value)
	}
	if c.defaults, err = buildDefaults(ctx, g, check); err != nil {
		return nil, err
	}
	g.dropDocument()
	c.quick = buildQuick(s)
	return c, nil
}

// newCompiler is the validator's compiler as every schema is compiled.
func newCompiler() *validator.Compiler {
	c := validator.NewCompiler()
	c.DefaultDraft(validator.Draft2020)
	c.AssertFormat()
	// No loader: a schema may only refer to itself, never to a file or URL.
	c.UseLoader(noLoader{})
	return c
}

// compileJSON compiles a small document of the package's own (a format for the fast path).
func compileJSON(raw []byte) (*validator.Schema, error) {
	schemastat.Compilations.Add(1)
	doc, err := validator.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema: compile: %w", err)
	}
	c := newCompiler()
	if err := c.AddResource(resourceURL, doc); err != nil {
		return nil, fmt.Errorf("schema: compile: %w", err)
	}
	compiled, err := c.Compile(resourceURL)
	if err != nil {
		return nil, fmt.Errorf("schema: compile: %s", cleanError(err))
	}
	return compiled, nil
}

// checkDefault validates a property's default against the property's schema, compiled at its
// place in the document (so that its $refs resolve as everywhere else): a default that would
// fail validation is a bug in the tool definition, found at definition time rather than on
// the first call.
func checkDefault(vc *validator.Compiler, g *graph, at *node, name string, value any) error {
	sub, err := vc.Compile(fragmentURL(at.loc))
	if err != nil {
		return fmt.Errorf("schema: default of %q: %s", name, cleanError(err))
	}
	if err := g.validationCost(at, value, MaxValidationSteps); err != nil {
		return fmt.Errorf("schema: default of %q: %w", name, err)
	}
	if err := (&Compiled{compiled: sub}).Validate(value); err != nil {
		return fmt.Errorf("schema: default of %q does not satisfy its own schema: %w", name, err)
	}
	return nil
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema references are not allowed (%s)", url)
}

// Schema returns the schema c was compiled from. Callers must not modify it.
func (c *Compiled) Schema() *Schema { return c.source }

// JSON returns the schema as JSON. Callers must not modify it.
func (c *Compiled) JSON() json.RawMessage { return c.json }

// HasDefaults reports whether the schema declares any default that ApplyDefaults could insert.
func (c *Compiled) HasDefaults() bool { return c.defaults != nil }

// Validate checks a decoded JSON value (as returned by [Decode]) against the schema. The error,
// if any, is a *ValidationError listing every problem with its JSON pointer.
func (c *Compiled) Validate(v any) error {
	if c.costly != nil {
		if err := c.costly.validationCost(c.costly.root, v, MaxValidationSteps); err != nil {
			return &ValidationError{Problems: []Problem{{Pointer: "", Message: err.Error()}}}
		}
	}
	err := c.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *validator.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	return &ValidationError{Problems: problems(ve)}
}

// Decode parses JSON into the generic form Validate and ApplyDefaults work on: objects are
// map[string]any, arrays []any, numbers json.Number (so large integers keep their precision).
// Trailing data after the value is an error.
func Decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, describeSyntax(err, data)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the JSON value at offset %d", dec.InputOffset())
	}
	return v, nil
}

// describeSyntax turns a decoding error into a message that says where the JSON broke without
// repeating the input, which may be large or hostile.
func describeSyntax(err error, data []byte) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at offset %d: %s", se.Offset, se.Error())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("invalid JSON: unexpected end of input after %d bytes", len(data))
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// ValidationError lists every way a value fails its schema.
type ValidationError struct {
	Problems []Problem
}

// Problem is one failed constraint: where (a JSON pointer into the value, "" for the root) and
// what is wrong, e.g. {"/days", "maximum 14, got 30"}.
type Problem struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// String renders the problem as "/pointer: message" ("/" for the root).
func (p Problem) String() string {
	ptr := p.Pointer
	if ptr == "" {
		ptr = "/"
	}
	return ptr + ": " + p.Message
}

// Error joins every problem with "; ".
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

// pointer renders an instance location as an RFC 6901 JSON pointer.
func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		tok = strings.ReplaceAll(tok, "~", "~0")
		b.WriteString(strings.ReplaceAll(tok, "/", "~1"))
	}
	return b.String()
}

// quoteValue renders a value in an error message, cut short so a huge argument is not echoed.
func quoteValue(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = strconv.Quote(truncate(x, 60))
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case nil:
		return "null"
	default:
		s = fmt.Sprint(x)
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
