package agent_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
)

// L4 in native tool calling: a prompt with reasoning_for_call offers _reasoningForCall on every
// tool in every dialect; the model's reasoning is stored with the call, kept out of the
// arguments the tool gets, and sent back to the model as it wrote it.
func TestReasoningForCallInNativeToolCalling(t *testing.T) {
	for _, d := range []schema.Dialect{schema.OpenAI, schema.Anthropic, schema.Gemini} {
		for _, strict := range []bool{false, true} {
			if strict && d != schema.OpenAI {
				continue
			}
			name := string(d)
			if strict {
				name += "-strict"
			}
			t.Run(name, func(t *testing.T) {
				args := `{"text":"hi","_reasoningForCall":"the user asked for an echo"}`
				if strict {
					args = `{"_reasoningForCall":"the user asked for an echo","text":"hi"}`
				}
				m := &turnModel{dialect: d, turns: []model.Response{
					{ToolCalls: calls(call("r1", "echo", args))},
					{Text: "done"},
				}}
				p := &agent.Prompt{Name: "p", Tools: []string{"echo"}, ReasoningForCall: true, Strict: strict}
				f := newFixture(t, m, p)
				if _, err := f.r.Run(ctx, f.th, f.agent, "echo hi"); err != nil {
					t.Fatal(err)
				}
				first := m.reqs[0]
				if first.Tools == nil || len(first.Tools.Tools) != 1 ||
					!strings.Contains(string(first.Tools.Tools[0].Parameters), schema.ReasoningField) {
					t.Fatalf("the tools offered lack %s: %+v", schema.ReasoningField, first.Tools)
				}
				if got := f.ran.list(); len(got) != 1 || got[0] != "echo:hi" {
					t.Fatalf("the tool ran with %v", got)
				}
				hist, err := f.th.History(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var stored *store.ToolCall
				for _, msg := range hist {
					for i := range msg.ToolCalls {
						stored = &msg.ToolCalls[i]
					}
				}
				if stored == nil || stored.Reasoning != "the user asked for an echo" || strings.Contains(string(stored.Args), schema.ReasoningField) {
					t.Fatalf("stored call %+v", stored)
				}
				second := m.lastRequest()
				var sent json.RawMessage
				for _, msg := range second.Messages {
					for _, c := range msg.ToolCalls {
						sent = c.Args
					}
				}
				var back map[string]any
				if err := json.Unmarshal(sent, &back); err != nil || back[schema.ReasoningField] != "the user asked for an echo" || back["text"] != "hi" {
					t.Fatalf("the history sent back %s", sent)
				}
			})
		}
	}
	// Without the option the tools stay as defined.
	m := &turnModel{turns: []model.Response{{Text: "done"}}}
	f := newFixture(t, m, &agent.Prompt{Name: "p", Tools: []string{"echo"}})
	if _, err := f.r.Run(ctx, f.th, f.agent, "hi"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(m.reqs[0].Tools.Tools[0].Parameters), schema.ReasoningField) {
		t.Fatalf("%s offered without reasoning_for_call", schema.ReasoningField)
	}
}

// X4: the calls of one model turn are bounded; those past the bound are answered with an
// error result that says so, and never run.
func TestMaxCallsPerStep(t *testing.T) {
	tests := []struct {
		name    string
		limit   int // the prompt's; 0 means the default
		calls   int
		wantRan int
	}{
		{"under the limit", 3, 3, 3},
		{"over the limit", 3, 5, 3},
		{"default limit", 0, agent.DefaultMaxCallsPerStep + 2, agent.DefaultMaxCallsPerStep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs []model.ToolCall
			for i := range tt.calls {
				cs = append(cs, call(fmt.Sprintf("c%d", i), "echo", fmt.Sprintf(`{"text":"%d"}`, i)))
			}
			m := &turnModel{turns: []model.Response{{ToolCalls: cs}, {Text: "done"}}}
			f := newFixture(t, m, &agent.Prompt{Name: "p", Tools: []string{"echo"}, MaxCallsPerStep: tt.limit})
			out, err := f.r.Run(ctx, f.th, f.agent, "go")
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != agent.RunFinished || out.Text != "done" {
				t.Fatalf("Run = %+v", out)
			}
			if got := len(f.ran.list()); got != tt.wantRan {
				t.Fatalf("%d calls ran, want %d", got, tt.wantRan)
			}
			results := f.results(t)
			if len(results) != tt.calls {
				t.Fatalf("%d calls answered, want all %d", len(results), tt.calls)
			}
			for i := tt.wantRan; i < tt.calls; i++ {
				r := results[fmt.Sprintf("c%d", i)]
				if r == nil || r.Code != quiver.CodeTooManyCalls || !strings.Contains(r.Error, "over the limit of") {
					t.Errorf("call c%d: %+v", i, r)
				}
			}
		})
	}
	p := &agent.Prompt{Name: "p", MaxCallsPerStep: -1}
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "max_calls_per_step") {
		t.Errorf("a negative max_calls_per_step was accepted: %v", err)
	}
}
