// Package model is the small interface between Quiver's agent loop and a language model
// provider. Each provider lives in its own package (model/openai, which also serves every
// OpenAI-compatible server, model/anthropic, model/gemini, and model/scripted for tests and
// offline demos) and translates a provider-neutral Request into its official SDK's types.
//
// The loop renders the tool set in the provider's Dialect once per run; a Model only sends
// what it is given and maps the reply back into a Response. Tool names in a Request and a
// Response are the names the provider sees (ToolSet.Outbound and ToolSet.Inbound map them);
// arguments are passed through as the model wrote them.
package model

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/quiverhq/quiver/schema"
)

// Model is one configured provider and model name.
type Model interface {
	// Name identifies the model, as "provider:model" (for example "openai:gpt-4.1-mini").
	Name() string
	// Dialect is the dialect the provider's tool definitions are written in.
	Dialect() schema.Dialect
	// Generate sends one request and returns the model's turn. When the provider streams,
	// onDelta (which may be nil) is called with each piece of text as it arrives, in order,
	// on the calling goroutine. A cancelled ctx aborts the request.
	Generate(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error)
}

// Role is who a message is from.
type Role string

// Message roles. A system prompt is Request.System, not a message.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Request is one turn's input.
type Request struct {
	// System is the system prompt (with examples and other instructions already added).
	System   string
	Messages []Message
	// Tools is the tool set rendered in the model's Dialect; nil or empty offers no tools.
	Tools *schema.ToolSet
	// Output, when set, asks for structured output in this JSON Schema (for example the
	// composed {calls, output} schema): the reply's Text is then a JSON document.
	Output *schema.Schema
	// OutputName names the output schema where a provider requires a name; default "output".
	OutputName string
	// MaxTokens bounds the reply; zero lets the provider package choose a default.
	MaxTokens int
	// Temperature, when set, overrides the provider's default.
	Temperature *float64
}

// Message is one entry of the conversation sent to the model.
type Message struct {
	Role Role
	// Text is a user or assistant message's text, or a tool message's result text.
	Text string
	// Images are base64-free raw image bytes attached to a user or tool message.
	Images []Image
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall
	// ToolCallID, ToolName and IsError belong to a tool message: the call it answers (every
	// call of an assistant message must be answered before the next user or assistant
	// message), the provider-facing name of the tool, and whether the result is an error.
	ToolCallID string
	ToolName   string
	IsError    bool
}

// Image is an image given to the model.
type Image struct {
	MIMEType string
	Data     []byte
}

// ToolCall is a call the model asked for.
type ToolCall struct {
	// ID is the provider's call id; a provider that has none (Gemini) gets one made up by its
	// package, unique within the Response.
	ID   string
	Name string
	// Args is the JSON the model wrote, unchanged, even when it is not valid JSON: the
	// dispatcher rejects it with an error result the model can read.
	Args json.RawMessage
	// Signature is opaque provider state that must travel back with the call in later
	// requests (Gemini's thought signature, which Gemini 3 requires for function calling).
	// Store it with the call and send it back unchanged; most providers leave it empty.
	Signature []byte `json:",omitempty"`
}

// Response is the model's turn.
type Response struct {
	Text      string
	ToolCalls []ToolCall
	// StopReason is the provider's own reason the turn ended (for example "stop", "end_turn",
	// "tool_calls", "max_tokens"), for logs and events.
	StopReason string
	Usage      Usage
}

// Usage counts the tokens of one turn, as the provider reported them.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Delta is a piece of a streamed reply.
type Delta struct {
	Text string
}

// ErrNotConfigured reports a provider that lacks what it needs to run (an API key, a base
// URL). Its message says exactly what to set.
var ErrNotConfigured = errors.New("model: not configured")
