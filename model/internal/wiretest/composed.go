package wiretest

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/quiverhq/quiver/schema"
)

// ComposedCase is a composed {calls, output} schema (schema.Compose) as an agent
// sends it to a provider for structured output, with answers the schema must accept and
// refuse however the provider carries it. The same cases run against every provider's
// request, so that each one is shown to send a schema that still means what Compose meant.
type ComposedCase struct {
	Name   string
	Schema *schema.Schema
	// Answer is a model's answer that the provider's reply carries back.
	Answer string
	// Valid and Invalid are answers the schema as sent must accept and refuse.
	Valid, Invalid []string
	// StrictReady says whether the schema already obeys OpenAI's strict rules as written
	// (every property required, every object closed), so that OpenAI may be asked for strict
	// mode without rewriting it.
	StrictReady bool
}

func mustSchema(t testing.TB, doc string) *schema.Schema {
	t.Helper()
	s := new(schema.Schema)
	if err := json.Unmarshal([]byte(doc), s); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return s
}

// ComposedCases returns the plain case (one tool, an object output), a richer set (reasoning,
// a latent tool, meta-fields) and a text output.
func ComposedCases(t testing.TB) []ComposedCase {
	t.Helper()
	greet := mustSchema(t, `{"type":"object","properties":{"userName":{"type":"string"}},"required":["userName"]}`)
	summary := mustSchema(t, `{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}`)
	point := mustSchema(t, `{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}`)
	compose := func(tools []schema.ToolSchema, output *schema.Schema) *schema.Schema {
		s, err := schema.Compose(tools, output)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return []ComposedCase{
		{
			Name:   "one tool and an object output",
			Schema: compose([]schema.ToolSchema{{Name: "greetUser", Description: "Greets a user.", Input: greet}}, summary),
			Answer: `{"calls":[{"_tool":"greetUser","userName":"Ada"}],"output":null}`,
			Valid: []string{
				`{"calls":[{"_tool":"greetUser","userName":"Ada"}],"output":null}`,
				`{"calls":[],"output":{"summary":"Greeted Ada."}}`,
				`{"calls":[{"_tool":"greetUser","userName":"Ada"}],"output":{"summary":"Greeting Ada."}}`,
			},
			Invalid: []string{
				`{"calls":[],"output":{"summary":"s","extra":1}}`,                                            // output closed
				`{"calls":[{"_tool":"greetUser","userName":"Ada","_reasoningForCall":"why"}],"output":null}`, // not enabled
				`{"calls":[{"_tool":"greetUser","userName":"Ada","_activity":"evil"}],"output":null}`,        // never offered
				`{"calls":[{"_tool":"nobody","userName":"Ada"}],"output":null}`,                              // unknown tool
				`{"calls":[]}`, // output required
			},
			StrictReady: true,
		},
		{
			Name: "reasoning, a latent tool and a meta-field",
			Schema: compose([]schema.ToolSchema{
				{Name: "greetUser", Description: "Greets a user.", Input: greet, Reasoning: true},
				{Name: "now", Description: "Tells the time.", Reasoning: true},
				{Name: "guess_point", Description: "The model guesses a point.", Output: point, Latent: true, Reasoning: true},
				{Name: "plan", Description: "Plans.", Input: greet, MetaFields: []string{schema.OutputPathField}},
			}, point),
			Answer: `{"calls":[{"_tool":"now","_reasoningForCall":"The user asked the time."}],"output":null}`,
			Valid: []string{
				`{"calls":[{"_tool":"now","_reasoningForCall":"The user asked the time."}],"output":null}`,
				`{"calls":[{"_tool":"guess_point","_reasoningForCall":"r","_output":{"x":1,"y":2}},` +
					`{"_tool":"plan","userName":"Ada","_outputPath":"/plan"}],"output":null}`,
				`{"calls":[],"output":{"x":1,"y":2}}`,
			},
			Invalid: []string{
				`{"calls":[{"_tool":"now","_reasoningForCall":7}],"output":null}`,
				`{"calls":[{"_tool":"plan","userName":"Ada","_reasoningForCall":"not offered here"}],"output":null}`,
				`{"calls":[{"_tool":"now","_activity":"evil"}],"output":null}`,
				`{"calls":[{"_tool":"guess_point"}],"output":null}`, // a latent call carries its _output
				`{"calls":[],"output":{"x":1,"y":2,"z":3}}`,
			},
			StrictReady: false, // optional properties (_reasoningForCall, _outputPath)
		},
		{
			Name:   "text output",
			Schema: compose([]schema.ToolSchema{{Name: "greetUser", Description: "Greets a user.", Input: greet}}, nil),
			Answer: `{"calls":[],"output":"Hello."}`,
			Valid: []string{
				`{"calls":[],"output":"Hello."}`,
				`{"calls":[{"_tool":"greetUser","userName":"Ada"}],"output":null}`,
			},
			Invalid: []string{
				`{"calls":[],"output":{"text":"Hello."}}`,
			},
			StrictReady: true,
		},
	}
}

// CheckComposed checks a composed schema as a provider's request carries it: an object
// schema that compiles and accepts and refuses what the case says.
func CheckComposed(t testing.TB, c ComposedCase, sent json.RawMessage) {
	t.Helper()
	var s schema.Schema
	if err := json.Unmarshal(sent, &s); err != nil {
		t.Fatalf("the schema sent does not decode: %v\n%s", err, sent)
	}
	if s.Type != "object" {
		t.Errorf("the schema sent is not an object schema: %s", sent)
	}
	compiled, err := schema.Compile(&s)
	if err != nil {
		t.Fatalf("the schema sent does not compile: %v\n%s", err, sent)
	}
	for _, doc := range c.Valid {
		if err := compiled.Validate(decodeDoc(t, doc)); err != nil {
			t.Errorf("the schema sent refuses %s: %v", doc, err)
		}
	}
	for _, doc := range c.Invalid {
		if compiled.Validate(decodeDoc(t, doc)) == nil {
			t.Errorf("the schema sent accepts %s", doc)
		}
	}
}

func decodeDoc(t testing.TB, doc string) any {
	t.Helper()
	v, err := schema.Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Keywords lists the keywords of every schema in doc (a JSON Schema as plain JSON), sorted
// and each once, descending through properties, $defs, items and the like.
func Keywords(t testing.TB, doc json.RawMessage) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	seen := keywordSet{}
	seen.visit(v)
	return slices.Sorted(maps.Keys(seen))
}

// keywordSet collects the keywords of schemas.
type keywordSet map[string]bool

// visit adds the keywords of s and of the schemas in it.
func (seen keywordSet) visit(s any) {
	m, ok := s.(map[string]any)
	if !ok {
		return
	}
	for k, e := range m {
		seen[k] = true
		switch k {
		case "properties", "$defs", "definitions", "patternProperties":
			named, _ := e.(map[string]any)
			for _, sub := range named {
				seen.visit(sub)
			}
		case "items", "additionalProperties", "not", "if", "then", "else":
			seen.visit(e)
		case "anyOf", "oneOf", "allOf", "prefixItems":
			list, _ := e.([]any)
			for _, sub := range list {
				seen.visit(sub)
			}
		}
	}
}
