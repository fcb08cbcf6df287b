// Package gemini is the model.Model for the Gemini API (generateContent), built on the
// official SDK (google.golang.org/genai). Importing it registers the provider "gemini" with
// model.Open (GEMINI_API_KEY or GOOGLE_API_KEY, GEMINI_BASE_URL).
//
// Gemini often gives function calls no id: each such call gets one made up here, starting
// with MadeUpIDPrefix, and made-up ids are left out when the call and its result are sent
// back, where Gemini pairs them by order and name as it does its own.
package gemini

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/genai"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/internal/conv"
	"github.com/quiverhq/quiver/schema"
)

// MadeUpIDPrefix starts the ids made up for calls Gemini gave none.
const MadeUpIDPrefix = "gemini_call_"

// skipSignature is the value Gemini documents for function calls whose thought signature was
// not kept (a conversation from another model): Gemini 3 rejects a call without one.
var skipSignature = []byte("skip_thought_signature_validator")

// Options configures a Model.
type Options struct {
	APIKey string
	// BaseURL defaults to the Gemini API.
	BaseURL string
	// HTTPClient sends the requests; nil uses a new http.Client.
	HTTPClient *http.Client
	// Retries is as in model.Config: 0 means model.DefaultRetries, negative means none.
	Retries int
	// NewID makes up an id for a call Gemini gave none; nil makes random ones. Replays and
	// tests pass a deterministic one.
	NewID func() string
	// KeyVar names the variable the key came from, for the hint on a 401.
	KeyVar string
}

// Model is a Gemini model.
type Model struct {
	name   string
	key    string
	keyVar string
	newID  func() string
	models *genai.Models
}

// New returns the model called name (for example "gemini-2.5-flash").
func New(name string, o Options) (*Model, error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("gemini: no model name")
	}
	if o.APIKey == "" {
		return nil, errors.New("gemini: no API key")
	}
	cc := &genai.ClientConfig{APIKey: o.APIKey, Backend: genai.BackendGeminiAPI, HTTPClient: o.HTTPClient,
		HTTPOptions: genai.HTTPOptions{BaseURL: o.BaseURL}}
	if n := (model.Config{Retries: o.Retries}).MaxRetries(); n > 0 {
		attempts := int32(n + 1)
		cc.HTTPOptions.RetryOptions = &genai.HTTPRetryOptions{Attempts: &attempts}
	}
	c, err := genai.NewClient(context.Background(), cc)
	if err != nil {
		// The SDK's message prints its whole configuration, key included: never pass it on.
		return nil, errors.New("gemini: the client could not be made; check GEMINI_BASE_URL")
	}
	if o.NewID == nil {
		o.NewID = randomID
	}
	return &Model{name: name, key: o.APIKey, keyVar: o.KeyVar, newID: o.NewID, models: c.Models}, nil
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return MadeUpIDPrefix + hex.EncodeToString(b)
}

// Name is "gemini:model".
func (m *Model) Name() string { return "gemini:" + m.name }

// Dialect is schema.Gemini.
func (m *Model) Dialect() schema.Dialect { return schema.Gemini }

// Generate sends one generateContent request, streaming when onDelta is not nil.
func (m *Model) Generate(ctx context.Context, req *model.Request, onDelta func(model.Delta)) (*model.Response, error) {
	contents, cfg, err := m.request(req)
	if err != nil {
		return nil, err
	}
	var acc accumulator
	if onDelta == nil {
		r, err := m.models.GenerateContent(ctx, m.name, contents, cfg)
		if err != nil {
			return nil, m.fail(ctx, err)
		}
		acc.add(r, nil)
	} else {
		for r, err := range m.models.GenerateContentStream(ctx, m.name, contents, cfg) {
			if err != nil {
				return nil, m.fail(ctx, err)
			}
			acc.add(r, onDelta)
		}
		if ctx.Err() != nil {
			return nil, m.fail(ctx, ctx.Err())
		}
	}
	return acc.response(m.newID)
}

func (m *Model) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", m.Name(), ctx.Err())
	}
	var ae genai.APIError
	if errors.As(err, &ae) {
		return conv.APIError("gemini", ae.Code, ae.Status, ae.Message, err, m.key, m.keyVar)
	}
	return fmt.Errorf("%s: %w", m.Name(), err)
}

func (m *Model) request(req *model.Request) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	cfg := generationConfig(req)
	if err := conv.CheckTools("gemini", req.Tools, schema.Gemini); err != nil {
		return nil, nil, err
	}
	if req.Tools != nil && len(req.Tools.Tools) > 0 {
		decls, err := m.declarations(req.Tools)
		if err != nil {
			return nil, nil, err
		}
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	}
	if req.Output != nil {
		// Gemini documents enum, not const, in responseJsonSchema; the two are equivalent.
		clean := *schema.ConstAsEnum(req.Output)
		clean.Schema, clean.ID = "", ""
		raw, err := json.Marshal(&clean)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: output schema: %w", m.Name(), err)
		}
		cfg.ResponseMIMEType = "application/json"
		cfg.ResponseJsonSchema = json.RawMessage(raw)
	}
	contents, err := m.contents(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", m.Name(), err)
	}
	return contents, cfg, nil
}

// generationConfig is the request's configuration but its tools and output.
func generationConfig(req *model.Request) *genai.GenerateContentConfig {
	cfg := &genai.GenerateContentConfig{}
	if req.System != "" {
		cfg.SystemInstruction = &genai.Content{Parts: []*genai.Part{{Text: req.System}}}
	}
	if req.MaxTokens > 0 {
		cfg.MaxOutputTokens = int32(min(req.MaxTokens, 1<<31-1))
	}
	if req.Temperature != nil {
		t := float32(*req.Temperature)
		cfg.Temperature = &t
	}
	return cfg
}

// declarations are the rendered tools as function declarations. The gemini dialect is
// Gemini's own Schema (OpenAPI subset, propertyOrdering).
func (m *Model) declarations(tools *schema.ToolSet) ([]*genai.FunctionDeclaration, error) {
	var decls []*genai.FunctionDeclaration
	for _, t := range tools.Tools {
		fd := &genai.FunctionDeclaration{Name: t.Name, Description: t.Description}
		if t.Parameters != nil {
			fd.Parameters = &genai.Schema{}
			if err := json.Unmarshal(t.Parameters, fd.Parameters); err != nil {
				return nil, fmt.Errorf("%s: tool %s: parameters: %w", m.Name(), t.Name, err)
			}
		}
		decls = append(decls, fd)
	}
	return decls, nil
}

// contents maps the conversation: a turn's calls are one model content, and their results
// one user content of functionResponse parts right after it, as Gemini pairs them.
func (m *Model) contents(req *model.Request) ([]*genai.Content, error) {
	msgs, err := conv.Answer(req.Messages)
	if err != nil {
		return nil, err
	}
	var out turns
	for _, msg := range msgs {
		switch msg.Role {
		case model.RoleUser:
			out.add(genai.RoleUser, append(textPart(msg.Text), blobs(msg.Images)...))
		case model.RoleAssistant:
			out.add(genai.RoleModel, append(textPart(msg.Text), m.callParts(msg.ToolCalls, req.Tools)...))
		case model.RoleTool:
			out.add(genai.RoleUser, append([]*genai.Part{resultPart(msg, req.Tools)}, blobs(msg.Images)...))
		}
	}
	return out, nil
}

// turns are the contents of a conversation as they are mapped.
type turns []*genai.Content

// add adds parts of role: to the last content when it has the role.
func (t *turns) add(role string, parts []*genai.Part) {
	if len(parts) == 0 {
		return
	}
	if n := len(*t); n > 0 && (*t)[n-1].Role == role {
		(*t)[n-1].Parts = append((*t)[n-1].Parts, parts...)
		return
	}
	*t = append(*t, &genai.Content{Role: role, Parts: parts})
}

// textPart is a part of text, none for no text.
func textPart(text string) []*genai.Part {
	if text == "" {
		return nil
	}
	return []*genai.Part{{Text: text}}
}

// callParts are an assistant's calls, each under the name the provider knows its tool by.
func (m *Model) callParts(calls []model.ToolCall, tools *schema.ToolSet) []*genai.Part {
	var parts []*genai.Part
	for i, c := range calls {
		// The SDK carries arguments as Go maps both ways, so integers beyond 2^53 are
		// rounded: a limit of the SDK, not of the API.
		args := map[string]any{}
		_ = json.Unmarshal(conv.ObjectArgs(c.Args), &args)
		p := &genai.Part{FunctionCall: &genai.FunctionCall{ID: sentID(c.ID), Name: outbound(tools, c.Name), Args: args},
			ThoughtSignature: c.Signature}
		if p.ThoughtSignature == nil && i == 0 && strings.HasPrefix(m.name, "gemini-3") {
			p.ThoughtSignature = skipSignature
		}
		parts = append(parts, p)
	}
	return parts
}

// resultPart is a tool's result as a functionResponse part.
func resultPart(msg model.Message, tools *schema.ToolSet) *genai.Part {
	key := "output"
	if msg.IsError {
		key = "error" // the key Gemini reads as a failed call
	}
	return &genai.Part{FunctionResponse: &genai.FunctionResponse{
		ID: sentID(msg.ToolCallID), Name: outbound(tools, msg.ToolName), Response: map[string]any{key: msg.Text}}}
}

// outbound is the name the provider knows a tool by.
func outbound(tools *schema.ToolSet, name string) string {
	if tools != nil {
		return tools.Outbound(name)
	}
	return name
}

func sentID(id string) string {
	if strings.HasPrefix(id, MadeUpIDPrefix) {
		return ""
	}
	return id
}

func blobs(imgs []model.Image) []*genai.Part {
	var parts []*genai.Part
	for _, img := range imgs {
		parts = append(parts, &genai.Part{InlineData: &genai.Blob{MIMEType: img.MIMEType, Data: img.Data}})
	}
	return parts
}

// accumulator builds a Response from one reply or from streamed chunks.
type accumulator struct {
	text  strings.Builder
	calls []model.ToolCall
	stop  string
	usage model.Usage
	seen  bool
}

func (a *accumulator) add(r *genai.GenerateContentResponse, onDelta func(model.Delta)) {
	if r == nil {
		return
	}
	a.seen = true
	if u := r.UsageMetadata; u != nil {
		// Thinking is billed as output: count it with the reply.
		a.usage = model.Usage{InputTokens: int64(u.PromptTokenCount), OutputTokens: int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount)}
	}
	if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
		a.stop = "BLOCKED: " + string(r.PromptFeedback.BlockReason)
	}
	if len(r.Candidates) > 0 && r.Candidates[0] != nil {
		a.candidate(r.Candidates[0], onDelta)
	}
}

// candidate adds the first candidate of a reply: its finish reason and its parts but
// thoughts.
func (a *accumulator) candidate(c *genai.Candidate, onDelta func(model.Delta)) {
	if c.FinishReason != "" {
		a.stop = string(c.FinishReason)
	}
	if c.Content == nil {
		return
	}
	for _, p := range c.Content.Parts {
		switch {
		case p == nil || p.Thought:
		case p.FunctionCall != nil:
			a.calls = append(a.calls, functionCall(p))
		case p.Text != "":
			a.text.WriteString(p.Text)
			if onDelta != nil {
				onDelta(model.Delta{Text: p.Text})
			}
		}
	}
}

func functionCall(p *genai.Part) model.ToolCall {
	args, err := json.Marshal(p.FunctionCall.Args)
	if err != nil || p.FunctionCall.Args == nil {
		args = []byte("{}")
	}
	return model.ToolCall{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Args: args, Signature: p.ThoughtSignature}
}

func (a *accumulator) response(newID func() string) (*model.Response, error) {
	if !a.seen {
		return nil, errors.New("gemini: the reply was empty")
	}
	r := &model.Response{Text: a.text.String(), StopReason: a.stop, Usage: a.usage, ToolCalls: a.calls}
	used := map[string]bool{}
	for i := range r.ToolCalls {
		id := r.ToolCalls[i].ID
		for n := 0; id == "" || used[id]; n++ {
			id = newID()
			if n > 2 { // a NewID that repeats itself must not loop forever
				id = fmt.Sprintf("%s%d_%d", MadeUpIDPrefix, i, n)
			}
		}
		used[id] = true
		r.ToolCalls[i].ID = id
	}
	return r, nil
}
