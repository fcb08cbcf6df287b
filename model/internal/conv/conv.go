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
		if err := checkTurnRole(i, m); err != nil {
			return nil, err
		}
		out = append(out, m)
		if m.Role != model.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		results, next, err := turnResults(msgs, i)
		if err != nil {
			return nil, err
		}
		out = append(out, answers(m.ToolCalls, results)...)
		i = next - 1
	}
	return out, nil
}

// checkTurnRole checks the role of message i, which starts a turn: a tool message there
// answers no call.
func checkTurnRole(i int, m model.Message) error {
	switch m.Role {
	case model.RoleUser, model.RoleAssistant:
		return nil
	case model.RoleTool:
		return fmt.Errorf("message %d: a tool result for call %q follows no assistant message that made the call", i, m.ToolCallID)
	}
	return fmt.Errorf("message %d: unknown role %q (want user, assistant or tool)", i, m.Role)
}

// turnResults are the tool messages after message i, the assistant's, by call, each answering
// a call it made, once; next is the index of the message after them.
func turnResults(msgs []model.Message, i int) (results map[string]model.Message, next int, err error) {
	results = map[string]model.Message{}
	j := i + 1
	for ; j < len(msgs) && msgs[j].Role == model.RoleTool; j++ {
		r := msgs[j]
		if !hasCall(msgs[i].ToolCalls, r.ToolCallID) {
			return nil, 0, fmt.Errorf("message %d: tool result for call %q, which message %d did not make", j, r.ToolCallID, i)
		}
		if _, dup := results[r.ToolCallID]; dup {
			return nil, 0, fmt.Errorf("message %d: a second result for call %q", j, r.ToolCallID)
		}
		results[r.ToolCallID] = r
	}
	return results, j, nil
}

// answers are the results of calls, in their order; a call without one gets an error result
// saying so.
func answers(calls []model.ToolCall, results map[string]model.Message) []model.Message {
	out := make([]model.Message, 0, len(calls))
	for _, c := range calls {
		r, ok := results[c.ID]
		if !ok {
			r = model.Message{Role: model.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Text: Unanswered, IsError: true}
		}
		if r.ToolName == "" {
			r.ToolName = c.Name
		}
		out = append(out, r)
	}
	return out
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
	s := strings.Map(func(r rune) rune {
		if isNameRune(r) {
			return r
		}
		return '_'
	}, name)
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

func isNameRune(r rune) bool {
	return r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
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
	return &model.APIError{Provider: provider, StatusCode: status, Type: typ, Message: msg, Err: err, Hint: statusHint(status, keyVar)}
}

// statusHint says what to look at after an HTTP error status.
func statusHint(status int, keyVar string) string {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		if keyVar != "" {
			return "check the API key in " + keyVar
		}
		return "the server wants an API key"
	case status == http.StatusNotFound:
		return "check the model name and the base URL"
	case status == http.StatusTooManyRequests:
		return "rate limited; try again later"
	case status >= 500:
		return "the provider failed; try again later"
	}
	return ""
}
