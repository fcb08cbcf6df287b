package schema

import (
	"bytes"
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
}

// Compile checks s, compiles it for validation, and checks every default it declares against
// the schema of the value it defaults. Formats (date-time, email, uuid, ...) are asserted, not
// merely annotated, so that a model gets told when a date is not a date.
func Compile(s *Schema) (*Compiled, error) {
	if s == nil {
		return nil, errors.New("schema: compile: nil schema")
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("schema: compile: %w", err)
	}
	compiled, err := compileJSON(raw)
	if err != nil {
		return nil, err
	}
	c := &Compiled{source: s, json: raw, compiled: compiled}
	c.defaults, err = buildDefaults(s, s, 0)
	if err != nil {
		return nil, err
	}
	c.quick = buildQuick(s)
	return c, nil
}

// CompileJSON parses a JSON Schema document and compiles it.
func CompileJSON(doc []byte) (*Compiled, error) {
	var s Schema
	if err := json.Unmarshal(doc, &s); err != nil {
		return nil, fmt.Errorf("schema: parse: %w", err)
	}
	return Compile(&s)
}

const resourceURL = "quiver:///schema.json"

func compileJSON(raw []byte) (*validator.Schema, error) {
	schemastat.Compilations.Add(1)
	doc, err := validator.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema: compile: %w", err)
	}
	c := validator.NewCompiler()
	c.DefaultDraft(validator.Draft2020)
	c.AssertFormat()
	// No loader: a schema may only refer to itself, never to a file or URL.
	c.UseLoader(noLoader{})
	if err := c.AddResource(resourceURL, doc); err != nil {
		return nil, fmt.Errorf("schema: compile: %w", err)
	}
	compiled, err := c.Compile(resourceURL)
	if err != nil {
		return nil, fmt.Errorf("schema: compile: %s", strings.ReplaceAll(err.Error(), resourceURL, "schema"))
	}
	return compiled, nil
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
