package schema

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Dialect names a way of offering tools to a model or client.
type Dialect string

// The dialects Quiver renders.
const (
	// OpenAI is chat-completions function calling without strict mode: the schema as written.
	OpenAI Dialect = "openai"
	// OpenAIStrict is function calling with strict: true. Every property is required, optional
	// ones become nullable, every object has additionalProperties: false, and keywords strict
	// mode rejects are moved into the description. Maps become lists of key/value entries and
	// free-form values become JSON text; [ToolSet.Inbound] turns the model's answer back.
	OpenAIStrict Dialect = "openai-strict"
	// Anthropic is the Messages API tools shape (input_schema, root type object).
	Anthropic Dialect = "anthropic"
	// Gemini is a FunctionDeclaration with Gemini's OpenAPI-subset schema: refs inlined, type
	// unions turned into nullable or anyOf, unsupported keywords moved into the description,
	// maps as key/value entries, free-form values as JSON text.
	Gemini Dialect = "gemini"
	// MCP is the Model Context Protocol tools/list shape (inputSchema, outputSchema).
	MCP Dialect = "mcp"
)

// Dialects lists every dialect, in the order the CLI documents them.
var Dialects = []Dialect{OpenAI, OpenAIStrict, Anthropic, Gemini, MCP}

// ParseDialect returns the dialect named s.
func ParseDialect(s string) (Dialect, error) {
	for _, d := range Dialects {
		if string(d) == s {
			return d, nil
		}
	}
	names := make([]string, len(Dialects))
	for i, d := range Dialects {
		names[i] = string(d)
	}
	return "", fmt.Errorf("unknown dialect %q (allowed: %s)", s, strings.Join(names, ", "))
}

// ToolSchema is what a dialect needs to know about one tool.
type ToolSchema struct {
	Name        string
	Description string
	Input       *Schema // nil: the tool takes no arguments
	Output      *Schema // nil: no declared output
	// Latent marks a tool the model executes itself: its arguments gain an _output property
	// (the Output schema) that the model fills with the result.
	Latent bool
	// Reasoning offers the model an optional _reasoningForCall string in the arguments (in
	// Render and in Compose alike), to explain the call; the dispatcher stores it with the
	// call and never passes it on. Off, the model is not asked for it.
	Reasoning bool
	// MetaFields are the meta-fields of schema.MetaFields the model is offered for this tool
	// (those the tool or the agent enables), as optional properties after the arguments.
	MetaFields []string
	// ProviderName, when set, is the name model providers are offered the tool under (a
	// governance rule's provider_name), as given: Render uses it in every dialect but MCP
	// (whose clients see the tool's own name) and maps a call of it back to Name. It must be
	// one every model provider accepts (see [CheckProviderName]) and no other tool's: Render
	// refuses a collision rather than rename either tool. Compose ignores it (the composed
	// schema's _tool names each tool by its own name).
	ProviderName string
}

// RenderedTool is one tool as a provider sees it.
type RenderedTool struct {
	// Name is the name the provider sees; Canonical is the registered name it maps back to.
	Name      string
	Canonical string
	// Description is the tool's description, with any constraint the dialect cannot express
	// appended in words.
	Description string
	// Parameters is the argument schema in the dialect (nil only for Gemini tools without
	// arguments, which must omit it).
	Parameters json.RawMessage
	// Output is the output schema (MCP only, and only when it is an object schema).
	Output json.RawMessage
	// Strict reports whether OpenAI strict mode applies to this tool. A tool whose schema
	// uses what strict mode cannot express (allOf, not, if/then/else, deeper than 10 levels)
	// is sent non-strict, and StrictFallback says why.
	Strict         bool
	StrictFallback string

	input   *Schema // the canonical input schema, for Inbound
	rewrote bool    // the dialect changed the shape of values (nulls, maps, JSON text)
}

// ToolSet is a set of tools rendered in one dialect, with the mapping between provider-facing
// and canonical names.
type ToolSet struct {
	Dialect Dialect
	Tools   []RenderedTool
	byName  map[string]int
}

// Render renders tools in dialect d. Names a provider would reject (spaces, punctuation,
// other scripts, too long) are mapped to names it accepts, distinct from every other name of
// the set; a tool given a provider name (ToolSchema.ProviderName) is offered under it, and one
// that collides with another tool's is an error; [ToolSet.Inbound] maps them back. The
// mapping depends on the set of names alone, not on the order of tools, so the same set is
// offered under the same names in every process.
func Render(d Dialect, tools []ToolSchema) (*ToolSet, error) {
	rule, ok := nameRules[d]
	if !ok {
		_, err := ParseDialect(string(d))
		return nil, err
	}
	names, preferred := providerNames(d, tools)
	toProvider, _, err := mapNames(rule, names, preferred)
	if err != nil {
		return nil, err
	}
	ts := &ToolSet{Dialect: d, Tools: make([]RenderedTool, len(tools)), byName: make(map[string]int, len(tools))}
	for i, t := range tools {
		t = withCallFields(t)
		rt, err := renderTool(d, t)
		if err != nil {
			return nil, fmt.Errorf("schema: render %s for %s: %w", t.Name, d, err)
		}
		rt.Name, rt.Canonical, rt.input = toProvider[t.Name], t.Name, t.Input
		ts.Tools[i] = rt
		ts.byName[rt.Name] = i
	}
	return ts, nil
}

// providerNames are the tools' names and, in a model provider's dialect, the provider names
// they are given (ToolSchema.ProviderName) by name.
func providerNames(d Dialect, tools []ToolSchema) (names []string, preferred map[string]string) {
	names = make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
		if t.ProviderName != "" && d != MCP {
			if preferred == nil {
				preferred = map[string]string{}
			}
			preferred[t.Name] = t.ProviderName
		}
	}
	return names, preferred
}

// nameRules are the rules for tool names of each dialect.
var nameRules = map[Dialect]nameRule{
	OpenAI: ruleOpenAI, OpenAIStrict: ruleOpenAI, Anthropic: ruleOpenAI, Gemini: ruleGemini, MCP: ruleMCP,
}

// withCallFields adds to t's input the fields the tool's kind asks the model for: a latent
// tool's output, the reasoning for a call, meta-fields.
func withCallFields(t ToolSchema) ToolSchema {
	if t.Latent {
		t.Input = withOutputField(t.Input, t.Output)
	}
	if t.Reasoning {
		t.Input = withReasoningField(t.Input)
	}
	t.Input = withMetaFields(t.Input, t.MetaFields)
	return t
}

var emptyObject = json.RawMessage(`{"type":"object","properties":{}}`)

func renderTool(d Dialect, t ToolSchema) (RenderedTool, error) {
	rt := RenderedTool{Description: t.Description}
	var err error
	switch d {
	case OpenAI, Anthropic:
		rt.Parameters, err = plainParameters(t.Input)
	case MCP:
		err = rt.renderMCP(t)
	case OpenAIStrict:
		err = rt.renderStrict(t)
	case Gemini:
		err = rt.renderGemini(t)
	}
	return rt, err
}

func (rt *RenderedTool) renderMCP(t ToolSchema) error {
	var err error
	if rt.Parameters, err = plainParameters(t.Input); err != nil {
		return err
	}
	if t.Output != nil && schemaType(t.Output) == "object" {
		rt.Output, err = marshalClean(t.Output)
	}
	return err
}

func (rt *RenderedTool) renderStrict(t ToolSchema) error {
	s, notes, err := strict(t.Input)
	if err != nil {
		// Strict mode is per function: send this one non-strict rather than fail the set.
		rt.StrictFallback = err.Error()
		rt.Parameters, err = plainParameters(t.Input)
		return err
	}
	rt.Strict, rt.rewrote = true, true
	rt.Description = withNotes(t.Description, notes)
	rt.Parameters, err = json.Marshal(s)
	return err
}

func (rt *RenderedTool) renderGemini(t ToolSchema) error {
	if t.Input == nil || len(t.Input.Properties) == 0 {
		return nil // Gemini rejects an object schema without properties: omit parameters.
	}
	g, err := gemini(&geminiDoc{root: t.Input, left: geminiMaxNodes}, t.Input, 0)
	if err != nil {
		return err
	}
	rt.rewrote = true
	rt.Parameters, err = json.Marshal(g)
	return err
}

// plainParameters is the input schema as written, minus document-level keywords providers do
// not need; a tool without arguments gets an empty object schema.
func plainParameters(s *Schema) (json.RawMessage, error) {
	if s == nil {
		return emptyObject, nil
	}
	if s.Properties == nil && schemaType(s) == "object" {
		// OpenAI rejects an object schema without properties ("object schema missing
		// properties"), as MCP servers often write {"type":"object"}; an empty map means the same.
		c := *s
		c.Properties = map[string]*Schema{}
		s = &c
	}
	return marshalClean(s)
}

func marshalClean(s *Schema) (json.RawMessage, error) {
	if s.Schema == "" && s.ID == "" {
		return json.Marshal(s)
	}
	c := *s
	c.Schema, c.ID = "", ""
	return json.Marshal(&c)
}

func withNotes(desc string, notes []string) string {
	if len(notes) == 0 {
		return desc
	}
	slices.Sort(notes)
	notes = slices.Compact(notes)
	return strings.TrimSpace(desc + " (Constraints: " + strings.Join(notes, "; ") + ".)")
}

// Lookup returns the tool the provider calls name.
func (ts *ToolSet) Lookup(name string) (*RenderedTool, bool) {
	i, ok := ts.byName[name]
	if !ok {
		return nil, false
	}
	return &ts.Tools[i], true
}

// Outbound returns the name the provider knows the tool registered as canonical by, for
// writing a conversation's earlier calls and results back to the provider; a name not in the
// set (a tool removed since the call was made) is returned unchanged.
func (ts *ToolSet) Outbound(canonical string) string {
	for i := range ts.Tools {
		if ts.Tools[i].Canonical == canonical {
			return ts.Tools[i].Name
		}
	}
	return canonical
}

// Inbound maps a call as the provider sent it back to Quiver's terms: the canonical tool name,
// and arguments in the tool's own schema (nulls the dialect added for optional properties
// removed, key/value entries turned back into maps, JSON text back into values). Arguments
// that are not a JSON object are returned unchanged for the dispatcher to reject. An unknown
// name is returned unchanged with ok false.
func (ts *ToolSet) Inbound(name string, args []byte) (canonical string, out []byte, ok bool) {
	rt, found := ts.Lookup(name)
	if !found {
		return name, args, false
	}
	if !rt.rewrote || rt.input == nil {
		return rt.Canonical, args, true
	}
	v, err := Decode(args)
	if err != nil {
		return rt.Canonical, args, true
	}
	if _, isObject := v.(map[string]any); !isObject {
		return rt.Canonical, args, true
	}
	v = inbound(newInboundDoc(rt.input), rt.input, v, 0)
	b, err := json.Marshal(v)
	if err != nil {
		return rt.Canonical, args, true
	}
	return rt.Canonical, b, true
}

// MarshalJSON renders the set in the provider's wire shape: the value of the request's tools
// field (OpenAI, Anthropic, Gemini) or of the tools/list result (MCP).
func (ts *ToolSet) MarshalJSON() ([]byte, error) {
	out := make([]any, 0, len(ts.Tools))
	for _, t := range ts.Tools {
		if w := ts.wire(t); w != nil {
			out = append(out, w)
		}
	}
	if ts.Dialect == Gemini {
		return json.Marshal([]any{map[string]any{"functionDeclarations": out}})
	}
	return json.Marshal(out)
}

// wire is one tool in the provider's wire shape; nil in a dialect that has none.
func (ts *ToolSet) wire(t RenderedTool) map[string]any {
	switch ts.Dialect {
	case OpenAI, OpenAIStrict:
		fn := map[string]any{"name": t.Name, "description": t.Description, "parameters": t.Parameters}
		if ts.Dialect == OpenAIStrict {
			fn["strict"] = t.Strict
		}
		return map[string]any{"type": "function", "function": fn}
	case Anthropic:
		return map[string]any{"name": t.Name, "description": t.Description, "input_schema": t.Parameters}
	case Gemini:
		fd := map[string]any{"name": t.Name, "description": t.Description}
		if t.Parameters != nil {
			fd["parameters"] = t.Parameters
		}
		return fd
	case MCP:
		m := map[string]any{"name": t.Name, "description": t.Description, "inputSchema": t.Parameters}
		if t.Output != nil {
			m["outputSchema"] = t.Output
		}
		return m
	}
	return nil
}
