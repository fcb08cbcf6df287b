// Package openai is the model.Model for OpenAI chat completions, built on the official SDK
// (github.com/openai/openai-go/v3). With a base URL it serves every OpenAI-compatible server
// too: Ollama, vLLM, llama.cpp.
//
// Importing it registers three providers with model.Open: "openai" (OPENAI_API_KEY,
// OPENAI_BASE_URL), "ollama" (OLLAMA_HOST, default http://127.0.0.1:11434, no key) and
// "openai-compatible" (OPENAI_BASE_URL required, OPENAI_API_KEY if the server wants one).
package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/internal/conv"
	"github.com/quiverhq/quiver/schema"
)

// DefaultBaseURL is OpenAI's own API.
const DefaultBaseURL = "https://api.openai.com/v1"

// Options configures a Model.
type Options struct {
	// Provider is the first half of Name(): "openai" unless set ("ollama", "openai-compatible").
	Provider string
	// APIKey is sent as a bearer token; servers that want none (Ollama) leave it empty.
	APIKey string
	// BaseURL is where the chat completions endpoint lives; default DefaultBaseURL.
	BaseURL string
	// HTTPClient sends the requests; nil uses http.DefaultClient.
	HTTPClient *http.Client
	// Retries is as in model.Config: 0 means model.DefaultRetries, negative means none.
	Retries int
	// Dialect is schema.OpenAI or schema.OpenAIStrict. The default is strict for provider
	// "openai" and plain for other servers, which often ignore or reject strict mode.
	Dialect schema.Dialect
	// KeyVar names the variable the key came from, for the hint on a 401.
	KeyVar string
}

// Model is an OpenAI chat completions model.
type Model struct {
	name     string
	provider string
	dialect  schema.Dialect
	key      string
	keyVar   string
	official bool // provider "openai": max_completion_tokens, where other servers read max_tokens
	chat     openai.ChatCompletionService
}

// New returns the model called name (for example "gpt-4.1-mini" or "llama3.2").
func New(name string, o Options) (*Model, error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("openai: no model name")
	}
	if o.Provider == "" {
		o.Provider = "openai"
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultBaseURL
	}
	official := o.Provider == "openai"
	switch o.Dialect {
	case "":
		o.Dialect = schema.OpenAI
		if official {
			o.Dialect = schema.OpenAIStrict
		}
	case schema.OpenAI, schema.OpenAIStrict:
	default:
		return nil, fmt.Errorf("openai: dialect %q: want %s or %s", o.Dialect, schema.OpenAI, schema.OpenAIStrict)
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	// The service is built from explicit options only, not openai.NewClient, which would also
	// read OPENAI_* variables: an OpenAI key must never be sent to an Ollama or vLLM URL.
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithBaseURL(o.BaseURL),
		option.WithMaxRetries(model.Config{Retries: o.Retries}.MaxRetries()),
	}
	if o.APIKey != "" {
		opts = append(opts, option.WithAPIKey(o.APIKey))
	}
	return &Model{
		name: name, provider: o.Provider, dialect: o.Dialect, key: o.APIKey, keyVar: o.KeyVar,
		official: official, chat: openai.NewChatCompletionService(opts...),
	}, nil
}

// Name is "provider:model".
func (m *Model) Name() string { return m.provider + ":" + m.name }

// Dialect is openai-strict for provider "openai", openai for other servers, unless Options
// said otherwise.
func (m *Model) Dialect() schema.Dialect { return m.dialect }

// Generate sends one chat completion request, streaming when onDelta is not nil.
func (m *Model) Generate(ctx context.Context, req *model.Request, onDelta func(model.Delta)) (*model.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	if onDelta == nil {
		c, err := m.chat.New(ctx, params)
		if err != nil {
			return nil, m.fail(ctx, err)
		}
		return m.response(c)
	}
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	stream := m.chat.NewStreaming(ctx, params)
	defer stream.Close()
	var acc accumulator
	for stream.Next() {
		acc.add(stream.Current(), onDelta)
	}
	if err := stream.Err(); err != nil {
		return nil, m.fail(ctx, err)
	}
	return acc.response(), nil
}

func (m *Model) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", m.Name(), ctx.Err())
	}
	var ae *openai.Error
	if errors.As(err, &ae) {
		typ := ae.Type
		if typ == "" {
			typ = ae.Code
		}
		return conv.APIError(m.provider, ae.StatusCode, typ, ae.Message, err, m.key, m.keyVar)
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		return fmt.Errorf("%s: the stream reported an error: %s", m.Name(), conv.APIError(m.provider, 0, "", se.Message, nil, m.key, "").Message)
	}
	return fmt.Errorf("%s: %w", m.Name(), err)
}

func (m *Model) response(c *openai.ChatCompletion) (*model.Response, error) {
	if len(c.Choices) == 0 {
		return nil, fmt.Errorf("%s: the reply has no choices", m.Name())
	}
	ch := c.Choices[0]
	r := &model.Response{
		Text:       ch.Message.Content,
		StopReason: ch.FinishReason,
		Usage:      model.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens},
	}
	if r.Text == "" && ch.Message.Refusal != "" {
		r.Text = ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue // custom tools are never offered
		}
		r.ToolCalls = append(r.ToolCalls, model.ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: json.RawMessage(tc.Function.Arguments)})
	}
	return r, nil
}

func (m *Model) params(req *model.Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(m.name)}
	if err := conv.CheckTools("openai", req.Tools, schema.OpenAI, schema.OpenAIStrict); err != nil {
		return p, err
	}
	msgs, err := messages(req)
	if err != nil {
		return p, fmt.Errorf("%s: %w", m.Name(), err)
	}
	p.Messages = msgs
	p.Tools = functionTools(req.Tools)
	if req.Output != nil {
		f, err := responseFormat(req)
		if err != nil {
			return p, fmt.Errorf("%s: %w", m.Name(), err)
		}
		p.ResponseFormat.OfJSONSchema = f
	}
	m.sampling(&p, req)
	return p, nil
}

// functionTools are the rendered tools as function tools.
func functionTools(tools *schema.ToolSet) []openai.ChatCompletionToolUnionParam {
	if tools == nil {
		return nil
	}
	var out []openai.ChatCompletionToolUnionParam
	for _, t := range tools.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: parameters(t.Parameters)}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		if tools.Dialect == schema.OpenAIStrict {
			fn.Strict = openai.Bool(t.Strict)
		}
		out = append(out, openai.ChatCompletionFunctionTool(fn))
	}
	return out
}

// sampling sets the request's bounds on tokens and its temperature.
func (m *Model) sampling(p *openai.ChatCompletionNewParams, req *model.Request) {
	if req.MaxTokens > 0 {
		if m.official {
			p.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
		} else {
			p.MaxTokens = openai.Int(int64(req.MaxTokens)) // what Ollama and llama.cpp read
		}
	}
	if req.Temperature != nil {
		p.Temperature = openai.Float(*req.Temperature)
	}
}

var emptyParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// parameters keeps the rendered schema as it is: each top-level value travels as raw JSON, so
// property order (which steers the order the model writes arguments in) survives.
func parameters(raw json.RawMessage) shared.FunctionParameters {
	if len(raw) == 0 {
		raw = emptyParameters
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		_ = json.Unmarshal(emptyParameters, &top)
	}
	out := make(shared.FunctionParameters, len(top))
	for k, v := range top {
		out[k] = v
	}
	return out
}

// responseFormat asks for JSON in req.Output's schema, strict when the schema already obeys
// strict mode's rules as written: rewriting it for strict mode would change the shape of the
// answer (nulls, entries) behind the caller's back.
func responseFormat(req *model.Request) (*shared.ResponseFormatJSONSchemaParam, error) {
	clean := *req.Output
	clean.Schema, clean.ID = "", ""
	raw, err := json.Marshal(&clean)
	if err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	f := &shared.ResponseFormatJSONSchemaParam{JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
		Name: conv.OutputName(req), Schema: json.RawMessage(raw),
	}}
	f.JSONSchema.Strict = openai.Bool(strictAsIs(req.Output, raw))
	return f, nil
}

func strictAsIs(s *schema.Schema, raw []byte) bool {
	st, notes, err := schema.Strict(s)
	if err != nil || len(notes) > 0 {
		return false
	}
	b, err := json.Marshal(st)
	if err != nil {
		return false
	}
	var x, y any
	return json.Unmarshal(raw, &x) == nil && json.Unmarshal(b, &y) == nil && equalJSON(x, y)
}

func equalJSON(x, y any) bool {
	a, _ := json.Marshal(x) // maps marshal with sorted keys: equal values, equal bytes
	b, _ := json.Marshal(y)
	return string(a) == string(b)
}

// errorPrefix marks an error result: chat completions have no is_error flag, so the model
// learns of the failure from the text.
const errorPrefix = "Error: "

func messages(req *model.Request) ([]openai.ChatCompletionMessageParamUnion, error) {
	msgs, err := conv.Answer(req.Messages)
	if err != nil {
		return nil, err
	}
	var c chat
	if req.System != "" {
		c.out = append(c.out, openai.SystemMessage(req.System))
	}
	for _, msg := range msgs {
		if msg.Role != model.RoleTool {
			c.flushImages()
		}
		switch msg.Role {
		case model.RoleUser:
			c.out = append(c.out, userMessage(msg))
		case model.RoleAssistant:
			c.out = append(c.out, assistantMessage(msg, req.Tools))
		case model.RoleTool:
			c.addResult(msg)
		}
	}
	c.flushImages()
	return c.out, nil
}

// chat is a conversation as it is mapped, and the images of the tool results of the turn.
type chat struct {
	out        []openai.ChatCompletionMessageParamUnion
	toolImages []openai.ChatCompletionContentPartUnionParam
}

// flushImages adds the images of the turn's tool results. Tool messages carry text only:
// images a tool returned follow its results as a user message, once every call of the turn
// is answered.
func (c *chat) flushImages() {
	if len(c.toolImages) > 0 {
		c.out = append(c.out, openai.UserMessage(c.toolImages))
		c.toolImages = nil
	}
}

// addResult adds a tool result, its images kept for after the turn's results.
func (c *chat) addResult(msg model.Message) {
	text := msg.Text
	if msg.IsError {
		text = errorPrefix + text
	}
	c.out = append(c.out, openai.ToolMessage(text, msg.ToolCallID))
	if len(msg.Images) > 0 {
		c.toolImages = append(c.toolImages, openai.TextContentPart(fmt.Sprintf("Images returned by tool call %s:", msg.ToolCallID)))
		c.toolImages = append(c.toolImages, images(msg.Images)...)
	}
}

func userMessage(msg model.Message) openai.ChatCompletionMessageParamUnion {
	if len(msg.Images) == 0 {
		return openai.UserMessage(msg.Text)
	}
	var parts []openai.ChatCompletionContentPartUnionParam
	if msg.Text != "" {
		parts = append(parts, openai.TextContentPart(msg.Text))
	}
	parts = append(parts, images(msg.Images)...)
	return openai.UserMessage(parts)
}

func assistantMessage(msg model.Message, tools *schema.ToolSet) openai.ChatCompletionMessageParamUnion {
	a := openai.ChatCompletionAssistantMessageParam{}
	if msg.Text != "" || len(msg.ToolCalls) == 0 {
		a.Content.OfString = openai.String(msg.Text)
	}
	for _, c := range msg.ToolCalls {
		a.ToolCalls = append(a.ToolCalls, toolCall(c, tools))
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

// toolCall is a call under the name the provider knows its tool by.
func toolCall(c model.ToolCall, tools *schema.ToolSet) openai.ChatCompletionMessageToolCallUnionParam {
	name := c.Name
	if tools != nil {
		name = tools.Outbound(name)
	}
	args := string(c.Args)
	if args == "" {
		args = "{}"
	}
	return openai.ChatCompletionMessageToolCallUnionParam{
		OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID:       c.ID,
			Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: name, Arguments: args},
		},
	}
}

func images(imgs []model.Image) []openai.ChatCompletionContentPartUnionParam {
	parts := make([]openai.ChatCompletionContentPartUnionParam, 0, len(imgs))
	for _, img := range imgs {
		url := "data:" + img.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
		parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}))
	}
	return parts
}
