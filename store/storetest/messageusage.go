package storetest

import (
	"errors"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// testMessageUsage (issue 50): the usage of the model request that wrote an assistant message
// (model, tokens, duration) comes back as it was appended, from a read and from
// UpdateMessage; a message without one reads back without one; only an assistant message may
// carry one.
func testMessageUsage(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	usage := &store.ModelUsage{Model: "openai:gpt-5-mini", InputTokens: 1234, OutputTokens: 56, DurationMS: 812.5}
	mustAppend(t, s, th.ID, &store.Message{Role: store.RoleUser, Content: "hi"},
		&store.Message{Role: store.RoleAssistant, Content: "calling", Usage: usage,
			ToolCalls: []store.ToolCall{{ID: "call_u1", Name: "echo"}}},
		&store.Message{Role: store.RoleTool, ToolCallID: "call_u1", ToolName: "echo", Result: &store.ToolResult{Status: "success", Text: "ok"}},
		&store.Message{Role: store.RoleAssistant, Content: "no usage recorded"})
	msgs := all(t, s, ws, th.ID)
	if len(msgs) != 4 {
		t.Fatalf("got %d messages, want 4", len(msgs))
	}
	if got := msgs[1].Usage; got == nil || *got != *usage {
		t.Fatalf("assistant message's usage = %+v, want %+v", got, usage)
	}
	for _, i := range []int{0, 2, 3} {
		if msgs[i].Usage != nil {
			t.Errorf("message %d (%s) has usage %+v, want none", i, msgs[i].Role, msgs[i].Usage)
		}
	}
	up, err := s.UpdateMessage(ctx, ws, th.ID, msgs[1].ID, func(m *store.Message) error {
		m.Content = "calling (edited)"
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateMessage: %v", err)
	}
	if up.Usage == nil || *up.Usage != *usage {
		t.Fatalf("updated message's usage = %+v, want %+v", up.Usage, usage)
	}
	if got := all(t, s, ws, th.ID)[1].Usage; got == nil || *got != *usage {
		t.Fatalf("usage after an update = %+v, want %+v", got, usage)
	}
	for _, role := range []store.Role{store.RoleUser, store.RoleSystem} {
		err := s.Append(ctx, ws, th.ID, &store.Message{Role: role, Content: "x", Usage: usage})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("usage on a %s message: %v, want ErrInvalid", role, err)
		}
	}
}
