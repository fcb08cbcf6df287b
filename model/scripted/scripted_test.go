package scripted_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/schema"
)

func echoTools(t *testing.T) *schema.ToolSet {
	t.Helper()
	ts, err := schema.Render(schema.OpenAI, []schema.ToolSchema{{Name: "everything.echo", Input: &schema.Schema{Type: "object",
		Properties: map[string]*schema.Schema{"message": {Type: "string"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestLoadAndPlay(t *testing.T) {
	m, err := scripted.Load("testdata/echo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ts := echoTools(t)
	req := &model.Request{Tools: ts, Messages: []model.Message{{Role: model.RoleUser, Text: "echo hi"}}}
	var deltas []string
	r1, err := m.Generate(context.Background(), req, func(d model.Delta) { deltas = append(deltas, d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.ToolCalls) != 1 || r1.ToolCalls[0].ID != "call_1_1" || r1.ToolCalls[0].Name != "everything_echo" ||
		string(r1.ToolCalls[0].Args) != `{"message":"hi"}` || r1.StopReason != "tool_calls" {
		t.Fatalf("turn 1: %+v", r1)
	}
	if strings.Join(deltas, "|") != "Let |me |echo |that." {
		t.Errorf("deltas %q", deltas)
	}
	// The loop maps the provider-facing name back to the registered one.
	if name, _, ok := ts.Inbound(r1.ToolCalls[0].Name, r1.ToolCalls[0].Args); !ok || name != "everything.echo" {
		t.Errorf("Inbound = %q %v", name, ok)
	}
	req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, ToolCalls: r1.ToolCalls},
		model.Message{Role: model.RoleTool, ToolCallID: "call_1_1", Text: "hi"})
	r2, err := m.Generate(context.Background(), req, nil)
	if err != nil || r2.Text != "The echo said hi." || r2.StopReason != "stop" || m.Remaining() != 0 {
		t.Fatalf("turn 2: %+v %v", r2, err)
	}
	if _, err := m.Generate(context.Background(), req, nil); !errors.Is(err, scripted.ErrExhausted) || !strings.Contains(err.Error(), "2 turns") {
		t.Errorf("past the end: %v", err)
	}
}

func TestExpectations(t *testing.T) {
	yes := true
	result := []model.Message{{Role: model.RoleUser, Text: "go"}, {Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c"}}},
		{Role: model.RoleTool, ToolCallID: "c", Text: "fine"}}
	tests := []struct {
		name   string
		expect scripted.Expect
		req    model.Request
		want   string // "" means the turn plays
	}{
		{"tool offered", scripted.Expect{Tools: []string{"everything.echo"}}, model.Request{}, `expected tool "everything.echo"`},
		{"system", scripted.Expect{SystemContains: "brief"}, model.Request{System: "Be brief."}, ""},
		{"system missing", scripted.Expect{SystemContains: "brief"}, model.Request{}, "system prompt"},
		{"user", scripted.Expect{UserContains: "go"}, model.Request{Messages: result}, ""},
		{"no result", scripted.Expect{ResultContains: "x"}, model.Request{}, "there is none"},
		{"result text", scripted.Expect{ResultContains: "boom"}, model.Request{Messages: result}, `it is "fine"`},
		{"result error flag", scripted.Expect{ResultIsError: &yes}, model.Request{Messages: result}, "error flag"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A conversation holding a model turn gets the script's next turn: put one before.
			var turns []scripted.Turn
			for _, msg := range tc.req.Messages {
				if msg.Role == model.RoleAssistant {
					turns = append(turns, scripted.Turn{Text: "earlier"})
				}
			}
			turns = append(turns, scripted.Turn{Expect: &tc.expect, Text: "ok"})
			m := scripted.Turns(turns...)
			r, err := m.Generate(context.Background(), &tc.req, nil)
			if tc.want == "" {
				if err != nil || r.Text != "ok" {
					t.Errorf("%+v %v", r, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), fmt.Sprintf("turn %d", len(turns))) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestTurnKinds(t *testing.T) {
	tests := []struct {
		name     string
		turn     scripted.Turn
		wantText string
		wantArgs string
		wantErr  string
	}{
		{"output", scripted.Turn{Output: map[string]any{"calls": []any{}, "output": "done"}}, `{"calls":[],"output":"done"}`, "", ""},
		{"raw args", scripted.Turn{Calls: []scripted.Call{{Name: "x", RawArgs: `{"a":`}}}, "", `{"a":`, ""},
		{"no args", scripted.Turn{Calls: []scripted.Call{{Name: "x"}}}, "", `{}`, ""},
		{"fail", scripted.Turn{Fail: "HTTP 429"}, "", "", "HTTP 429"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := scripted.Turns(tc.turn).Generate(context.Background(), &model.Request{}, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v", err)
				}
				return
			}
			if err != nil || r.Text != tc.wantText {
				t.Fatalf("%+v %v", r, err)
			}
			if tc.wantArgs != "" && string(r.ToolCalls[0].Args) != tc.wantArgs {
				t.Errorf("args %s", r.ToolCalls[0].Args)
			}
		})
	}
}

func TestBadScripts(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"misspelt key", "turns:\n  - txt: hi\n", "field txt not found"},
		{"empty turn", "turns:\n  - {}\n", "turn 1 has no text"},
		{"nameless call", `{"turns":[{"calls":[{"args":{}}]}]}`, "call 1 has no name"},
		{"both args", `{"turns":[{"calls":[{"name":"x","args":{},"raw_args":"{}"}]}]}`, "both args and raw_args"},
		{"bad dialect", "dialect: cobol\nturns: []\n", "unknown dialect"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scripted.Parse("s.yaml", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := scripted.Load("testdata/missing.yaml"); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := scripted.Turns(scripted.Turn{Text: "hi"})
	if _, err := m.Generate(ctx, &model.Request{}, nil); !errors.Is(err, context.Canceled) || m.Remaining() != 1 {
		t.Errorf("err = %v, remaining %d", err, m.Remaining())
	}
}

// TestResumedConversationGetsTheNextTurn: a fresh Model (another process) given a conversation
// that already holds a model turn plays the second turn, not the first.
func TestResumedConversationGetsTheNextTurn(t *testing.T) {
	m := scripted.Turns(scripted.Turn{Text: "first"}, scripted.Turn{Text: "second"})
	req := &model.Request{Messages: []model.Message{
		{Role: model.RoleUser, Text: "hi"}, {Role: model.RoleAssistant, Text: "first"}, {Role: model.RoleUser, Text: "and?"}}}
	r, err := m.Generate(context.Background(), req, nil)
	if err != nil || r.Text != "second" {
		t.Fatalf("Generate = %+v, %v; want the second turn", r, err)
	}
	if _, err := m.Generate(context.Background(), req, nil); !errors.Is(err, scripted.ErrExhausted) {
		t.Fatalf("after the last turn: %v", err)
	}
}
