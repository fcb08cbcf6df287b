// Package anthropic is the model.Model for Anthropic's Messages API, built on the official
// SDK (github.com/anthropics/anthropic-sdk-go). Importing it registers the provider
// "anthropic" with model.Open (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL).
//
// Structured output (Request.Output) is asked for with a tool: the output schema becomes the
// input schema of one more tool, named Request.OutputName, that the model is made to call
// (tool_choice "tool", or "any" when it may call other tools first), and the call's input is
// the Response's Text. Tool input schemas accept any JSON Schema and work on every Claude
// model that uses tools, where the API's own JSON output format accepts only a subset of
// JSON Schema and only on recent models.
package anthropic

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/internal/conv"
	"github.com/quiverhq/quiver/schema"
)

// DefaultMaxTokens bounds a reply when neither the Request nor Options do: the Messages API
// requires a bound, and every Claude model accepts this one.
const DefaultMaxTokens = 4096

// Options configures a Model.
type Options struct {
	APIKey string
	// BaseURL defaults to Anthropic's API.
	BaseURL string
	// HTTPClient sends the requests; nil uses http.DefaultClient.
	HTTPClient *http.Client
	// Retries is as in model.Config: 0 means model.DefaultRetries, negative means none.
	Retries int
	// MaxTokens is the bound used when a Request sets none; 0 means DefaultMaxTokens.
	MaxTokens int
	// KeyVar names the variable the key came from, for the hint on a 401.
	KeyVar string
}

// Model is a Claude model.
type Model struct {
	name      string
	key       string
	keyVar    string
	maxTokens int
	msgs      anthropic.MessageService
}

// New returns the model called name (for example "claude-sonnet-4-5").
func New(name string, o Options) (*Model, error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("anthropic: no model name")
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	// Explicit options only: anthropic.NewClient would also read ANTHROPIC_* variables and
	// profile files, and configuration should come from one place.
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithMaxRetries(model.Config{Retries: o.Retries}.MaxRetries()),
		option.WithAPIKey(o.APIKey),
	}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	} else {
		opts = append(opts, option.WithEnvironmentProduction())
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	return &Model{name: name, key: o.APIKey, keyVar: o.KeyVar, maxTokens: o.MaxTokens, msgs: anthropic.NewMessageService(opts...)}, nil
}

// Name is "anthropic:model".
func (m *Model) Name() string { return "anthropic:" + m.name }

// Dialect is schema.Anthropic.
func (m *Model) Dialect() schema.Dialect { return schema.Anthropic }

// Generate sends one Messages request, streaming when onDelta is not nil.
func (m *Model) Generate(ctx context.Context, req *model.Request, onDelta func(model.Delta)) (*model.Response, error) {
	p, out, err := m.params(req)
	if err != nil {
		return nil, err
	}
	if onDelta == nil {
		msg, err := m.msgs.New(ctx, p)
		if err != nil {
			return nil, m.fail(ctx, err)
		}
		var acc accumulator
		for _, b := range msg.Content {
			acc.blocks = append(acc.blocks, &block{kind: b.Type, id: b.ID, name: b.Name, text: b.Text, input: []byte(b.Input)})
		}
		acc.stop = string(msg.StopReason)
		acc.usage = model.Usage{InputTokens: msg.Usage.InputTokens, OutputTokens: msg.Usage.OutputTokens}
		return acc.response(out)
	}
	stream := m.msgs.NewStreaming(ctx, p)
	defer stream.Close()
	acc := accumulator{out: out, onDelta: onDelta}
	for stream.Next() {
		acc.add(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return nil, m.fail(ctx, err)
	}
	return acc.response(out)
}

func (m *Model) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", m.Name(), ctx.Err())
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		var body struct {
			Error struct{ Type, Message string }
		}
		_ = json.Unmarshal([]byte(ae.RawJSON()), &body)
		status := ae.StatusCode
		if status < 400 { // an error event in a stream arrives on a 200 reply
			status = map[string]int{"overloaded_error": 529, "rate_limit_error": 429, "api_error": 500}[body.Error.Type]
		}
		return conv.APIError("anthropic", status, body.Error.Type, body.Error.Message, err, m.key, m.keyVar)
	}
	return fmt.Errorf("%s: %w", m.Name(), err)
}

// output describes the tool that carries structured output.
type output struct {
	name    string
	wrapped bool // the schema was not an object: the answer is the input's "value"
}

func (m *Model) params(req *model.Request) (anthropic.MessageNewParams, *output, error) {
	p := m.baseParams(req)
	if err := conv.CheckTools("anthropic", req.Tools, schema.Anthropic); err != nil {
		return p, nil, err
	}
	msgs, err := messages(req)
	if err != nil {
		return p, nil, fmt.Errorf("%s: %w", m.Name(), err)
	}
	p.Messages = msgs
	if req.Tools != nil {
		for _, t := range req.Tools.Tools {
			p.Tools = append(p.Tools, tool(t.Name, t.Description, t.Parameters))
		}
	}
	if req.Output == nil {
		return p, nil, nil
	}
	out, err := m.addOutput(&p, req)
	return p, out, err
}

// baseParams are the request's parameters but its messages and tools.
func (m *Model) baseParams(req *model.Request) anthropic.MessageNewParams {
	p := anthropic.MessageNewParams{Model: anthropic.Model(m.name), MaxTokens: int64(m.maxTokens)}
	if req.MaxTokens > 0 {
		p.MaxTokens = int64(req.MaxTokens)
	}
	if req.Temperature != nil {
		p.Temperature = anthropic.Float(*req.Temperature)
	}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	return p
}

// addOutput adds the tool that carries structured output, and has the model call a tool.
func (m *Model) addOutput(p *anthropic.MessageNewParams, req *model.Request) (*output, error) {
	out := &output{name: conv.OutputName(req)}
	if req.Tools != nil {
		if _, clash := req.Tools.Lookup(out.name); clash {
			return nil, fmt.Errorf("%s: the output name %q is also a tool's name; set Request.OutputName to another", m.Name(), out.name)
		}
	}
	raw, wrapped, err := outputInput(req.Output)
	if err != nil {
		return nil, fmt.Errorf("%s: output schema: %w", m.Name(), err)
	}
	out.wrapped = wrapped
	p.Tools = append(p.Tools, tool(out.name, "Give your answer: its input is your final output, in this schema.", raw))
	if len(p.Tools) > 1 {
		p.ToolChoice.OfAny = &anthropic.ToolChoiceAnyParam{}
	} else {
		p.ToolChoice = anthropic.ToolChoiceParamOfTool(out.name)
	}
	return out, nil
}

// outputInput is the input schema of the output's tool: the output schema, or an object that
// wraps it as its value when it is not an object (wrapped).
func outputInput(s *schema.Schema) (raw json.RawMessage, wrapped bool, err error) {
	clean := *s
	clean.Schema, clean.ID = "", ""
	if raw, err = json.Marshal(&clean); err != nil {
		return nil, false, err
	}
	if clean.Type == "object" {
		return raw, false, nil
	}
	return []byte(`{"type":"object","properties":{"value":` + string(raw) + `},"required":["value"]}`), true, nil
}

// tool keeps the rendered schema as it is: properties and every other keyword travel as raw
// JSON, so property order and keywords the SDK has no field for survive.
func tool(name, desc string, params json.RawMessage) anthropic.ToolUnionParam {
	t := anthropic.ToolParam{Name: name, InputSchema: inputSchema(params)}
	if desc != "" {
		t.Description = anthropic.String(desc)
	}
	return anthropic.ToolUnionParam{OfTool: &t}
}

// inputSchema is a tool's schema with its properties and required in the SDK's fields, and
// the other keywords as they are.
func inputSchema(params json.RawMessage) anthropic.ToolInputSchemaParam {
	var top map[string]json.RawMessage
	if json.Unmarshal(params, &top) != nil {
		top = nil
	}
	in := anthropic.ToolInputSchemaParam{ExtraFields: map[string]any{}}
	for k, v := range top {
		switch k {
		case "type":
		case "properties":
			in.Properties = v
		case "required":
			_ = json.Unmarshal(v, &in.Required)
		default:
			in.ExtraFields[k] = v
		}
	}
	if in.Properties == nil {
		in.Properties = json.RawMessage(`{}`)
	}
	return in
}

// messages maps the conversation: tool results become tool_result blocks of a user message
// (all of one turn's in the one user message that follows it, as the API requires), and
// messages of the same role next to each other merge, since roles must alternate.
func messages(req *model.Request) ([]anthropic.MessageParam, error) {
	msgs, err := conv.Answer(req.Messages)
	if err != nil {
		return nil, err
	}
	var t turns
	for _, msg := range msgs {
		switch msg.Role {
		case model.RoleUser:
			t.add(anthropic.MessageParamRoleUser, userBlocks(msg))
		case model.RoleAssistant:
			t.add(anthropic.MessageParamRoleAssistant, assistantBlocks(msg, req.Tools))
		case model.RoleTool:
			t.add(anthropic.MessageParamRoleUser, []anthropic.ContentBlockParamUnion{{OfToolResult: toolResult(msg)}})
		}
	}
	return t, nil
}

// turns are the messages of a conversation as they are mapped.
type turns []anthropic.MessageParam

// add adds blocks of role: to the last message when it has the role, since roles must
// alternate.
func (t *turns) add(role anthropic.MessageParamRole, blocks []anthropic.ContentBlockParamUnion) {
	if len(blocks) == 0 {
		return
	}
	if n := len(*t); n > 0 && (*t)[n-1].Role == role {
		(*t)[n-1].Content = append((*t)[n-1].Content, blocks...)
		return
	}
	*t = append(*t, anthropic.MessageParam{Role: role, Content: blocks})
}

func userBlocks(msg model.Message) []anthropic.ContentBlockParamUnion {
	var blocks []anthropic.ContentBlockParamUnion
	if msg.Text != "" { // the API rejects empty text blocks
		blocks = append(blocks, anthropic.NewTextBlock(msg.Text))
	}
	for _, img := range msg.Images {
		blocks = append(blocks, anthropic.NewImageBlockBase64(img.MIMEType, base64.StdEncoding.EncodeToString(img.Data)))
	}
	return blocks
}

// assistantBlocks are an assistant's text and calls, each call under the name the provider
// knows its tool by.
func assistantBlocks(msg model.Message, tools *schema.ToolSet) []anthropic.ContentBlockParamUnion {
	var blocks []anthropic.ContentBlockParamUnion
	if msg.Text != "" {
		blocks = append(blocks, anthropic.NewTextBlock(msg.Text))
	}
	for _, c := range msg.ToolCalls {
		name := c.Name
		if tools != nil {
			name = tools.Outbound(name)
		}
		blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, conv.ObjectArgs(c.Args), name))
	}
	return blocks
}

func toolResult(msg model.Message) *anthropic.ToolResultBlockParam {
	r := &anthropic.ToolResultBlockParam{ToolUseID: msg.ToolCallID, IsError: anthropic.Bool(msg.IsError)}
	text := msg.Text
	if text == "" && (msg.IsError || len(msg.Images) == 0) {
		text = "(no output)" // an error result must have content, and text blocks must not be empty
	}
	if text != "" {
		r.Content = append(r.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: text}})
	}
	for _, img := range msg.Images {
		r.Content = append(r.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: &anthropic.ImageBlockParam{
			Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
				Data: base64.StdEncoding.EncodeToString(img.Data), MediaType: anthropic.Base64ImageSourceMediaType(img.MIMEType)}}}})
	}
	return r
}
