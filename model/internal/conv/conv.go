// Package conv holds what every provider package does the same way: making sure every tool
// call of the conversation is answered, choosing safe arguments to send back, and turning an
// SDK's HTTP error into a model.APIError that names the fix and never a secret.
package conv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
)

// Unanswered is the result text given to a call the conversation holds no result for.
const Unanswered = "No result was recorded for this call; it may not have run."

// Answer returns msgs with each assistant message's calls followed by exactly one tool message
// per call, in the order of the calls: providers reject a call left unanswered, so a missing
// result becomes an error result saying so. A tool message that answers no call before it is
// an error: it would be rejected by every provider.
func Answer(msgs []model.Message) ([]model.Message, error) {
	out := make([]model.Message, 0, len(msgs))
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case model.RoleUser, model.RoleAssistant:
		case model.RoleTool:
			return nil, fmt.Errorf("message %d: a tool result for call %q follows no assistant message that made the call", i, m.ToolCallID)
		default:
			return nil, fmt.Errorf("message %d: unknown role %q (want user, assistant or tool)", i, m.Role)
		}
		out = append(out, m)
		if m.Role != model.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		results := map[string]model.Message{}
		j := i + 1
		for ; j < len(msgs) && msgs[j].Role == model.RoleTool; j++ {
			r := msgs[j]
			if !hasCall(m.ToolCalls, r.ToolCallID) {
				return nil, fmt.Errorf("message %d: tool result for call %q, which message %d did not make", j, r.ToolCallID, i)
			}
			if _, dup := results[r.ToolCallID]; dup {
				return nil, fmt.Errorf("message %d: a second result for call %q", j, r.ToolCallID)
			}
			results[r.ToolCallID] = r
		}
		for _, c := range m.ToolCalls {
			r, ok := results[c.ID]
			if !ok {
				r = model.Message{Role: model.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Text: Unanswered, IsError: true}
			}
			if r.ToolName == "" {
				r.ToolName = c.Name
			}
			out = append(out, r)
		}
		i = j - 1
	}
	return out, nil
}

func hasCall(calls []model.ToolCall, id string) bool {
	for _, c := range calls {
		if c.ID == id {
			return true
		}
	}
	return false
}

// ObjectArgs returns args when it is a JSON object, else {}: providers that take arguments as
// an object reject anything else in the history, and the dispatcher has already answered such
// a call with an error result the model can read.
func ObjectArgs(args json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(args)
	if len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t
	}
	return json.RawMessage(`{}`)
}

// CheckTools reports a tool set rendered for a dialect the provider cannot send.
func CheckTools(provider string, ts *schema.ToolSet, ok ...schema.Dialect) error {
	if ts == nil || len(ts.Tools) == 0 {
		return nil
	}
	for _, d := range ok {
		if ts.Dialect == d {
			return nil
		}
	}
	return fmt.Errorf("%s: the tools are rendered for %s; render them with the model's Dialect() (%s)", provider, ts.Dialect, ok[0])
}

// OutputName is a name for the output schema that providers accept: letters, digits, _ and -.
func OutputName(req *model.Request) string {
	name := req.OutputName
	if name == "" {
		return "output"
	}
	var b strings.Builder
	for _, r := range name {
		if r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// APIError builds the model.APIError for an HTTP error reply. The provider's message is cut
// short and scrubbed of the key in case the server echoed it.
func APIError(provider string, status int, typ, msg string, err error, key, keyVar string) *model.APIError {
	msg = strings.Join(strings.Fields(msg), " ")
	if key != "" {
		msg = strings.ReplaceAll(msg, key, "[redacted]")
	}
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	e := &model.APIError{Provider: provider, StatusCode: status, Type: typ, Message: msg, Err: err}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		if keyVar != "" {
			e.Hint = "check the API key in " + keyVar
		} else {
			e.Hint = "the server wants an API key"
		}
	case status == http.StatusNotFound:
		e.Hint = "check the model name and the base URL"
	case status == http.StatusTooManyRequests:
		e.Hint = "rate limited; try again later"
	case status >= 500:
		e.Hint = "the provider failed; try again later"
	}
	return e
}
