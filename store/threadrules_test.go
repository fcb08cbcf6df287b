package store

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestCheckMessage: the rules every writer of messages applies to each message by itself.
func TestCheckMessage(t *testing.T) {
	call := []ToolCall{{ID: "c1", Name: "add", Args: json.RawMessage(`{"a":1}`)}}
	for _, tc := range []struct {
		name string
		m    *Message
		ok   bool
	}{
		{"user", &Message{Role: RoleUser, Content: "hi"}, true},
		{"system of this thread", &Message{Role: RoleSystem, ThreadID: "thr_1"}, true},
		{"assistant with a call", &Message{Role: RoleAssistant, ToolCalls: call}, true},
		{"call without arguments", &Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "now"}}}, true},
		{"tool result", &Message{Role: RoleTool, ToolCallID: "c1", ToolName: "add", Result: &ToolResult{Status: "success"}}, true},
		{"tool message without a result", &Message{Role: RoleTool, ToolCallID: "c1"}, true},
		{"nil", nil, false},
		{"unknown role", &Message{Role: "robot"}, false},
		{"no role", &Message{}, false},
		{"another thread", &Message{Role: RoleUser, ThreadID: "thr_2"}, false},
		{"calls on a user message", &Message{Role: RoleUser, ToolCalls: call}, false},
		{"calls on a tool message", &Message{Role: RoleTool, ToolCallID: "c1", ToolCalls: call}, false},
		{"call without an id", &Message{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "add"}}}, false},
		{"call without a name", &Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1"}}}, false},
		{"arguments that are not JSON", &Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "add", Args: json.RawMessage(`{nope`)}}}, false},
		{"tool message without a call id", &Message{Role: RoleTool, Result: &ToolResult{}}, false},
		{"call id on an assistant message", &Message{Role: RoleAssistant, ToolCallID: "c1"}, false},
		{"tool name on a user message", &Message{Role: RoleUser, ToolName: "add"}, false},
		{"result on a user message", &Message{Role: RoleUser, Result: &ToolResult{}}, false},
	} {
		err := CheckMessage("thr_1", tc.m)
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
}
