package conv_test

import (
	"strings"
	"testing"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/internal/conv"
)

func TestAnswer(t *testing.T) {
	call := func(ids ...string) model.Message {
		m := model.Message{Role: model.RoleAssistant}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, model.ToolCall{ID: id, Name: "t" + id})
		}
		return m
	}
	res := func(id string) model.Message {
		return model.Message{Role: model.RoleTool, ToolCallID: id, Text: "r" + id}
	}
	user := model.Message{Role: model.RoleUser, Text: "u"}
	tests := []struct {
		name string
		in   []model.Message
		want string // ids of results in order, "!" for made up; or the error
	}{
		{"in order", []model.Message{user, call("1", "2"), res("1"), res("2")}, "1 2"},
		{"reordered", []model.Message{user, call("1", "2"), res("2"), res("1"), user}, "1 2"},
		{"missing", []model.Message{user, call("1", "2"), res("2"), user}, "1! 2"},
		{"none at the end", []model.Message{user, call("1")}, "1!"},
		{"duplicate", []model.Message{call("1"), res("1"), res("1")}, "a second result"},
		{"stranger", []model.Message{call("1"), res("9")}, "did not make"},
		{"orphan", []model.Message{user, res("1")}, "follows no assistant"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := conv.Answer(tc.in)
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want %q", err, tc.want)
				}
				return
			}
			var got []string
			for _, m := range out {
				if m.Role == model.RoleTool {
					id := m.ToolCallID
					if m.Text == conv.Unanswered && m.IsError && m.ToolName == "t"+id {
						id += "!"
					}
					got = append(got, id)
				}
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("results %v, want %s", got, tc.want)
			}
		})
	}
}

func TestObjectArgs(t *testing.T) {
	tests := []struct{ in, want string }{{`{"a":1}`, `{"a":1}`}, {` {"a":1} `, `{"a":1}`}, {`{"a":`, `{}`}, {`[1]`, `{}`}, {``, `{}`}}
	for _, tc := range tests {
		if got := string(conv.ObjectArgs([]byte(tc.in))); got != tc.want {
			t.Errorf("ObjectArgs(%q) = %s", tc.in, got)
		}
	}
}
