package agent_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
)

// L2, L4: in composed mode the model is asked for seed 002's schema: the output closed, and
// _reasoningForCall on every call item only when the prompt sets reasoning_for_call (off by
// default, as in native tool calling).
func TestComposedSchemaFollowsThePrompt(t *testing.T) {
	out := &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"answer": {Type: "string"}}, Required: []string{"answer"}}
	for _, reasoning := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "reasoning_for_call"}[reasoning], func(t *testing.T) {
			m := &turnModel{turns: []model.Response{{Text: `{"calls":[],"output":{"answer":"hi"}}`}}}
			f := newFixture(t, m, &agent.Prompt{Name: "p", Tools: []string{"echo", "finish"}, Output: out, ReasoningForCall: reasoning})
			if _, err := f.r.Run(ctx, f.th, f.agent, "say hi"); err != nil {
				t.Fatal(err)
			}
			sent := m.lastRequest().Output
			if sent == nil {
				t.Fatal("no composed schema sent")
			}
			if o := sent.Properties["output"]; o == nil || !strings.Contains(mustMarshal(t, o), `"additionalProperties":false`) {
				t.Errorf("output not closed: %s", mustMarshal(t, o))
			}
			items := sent.Properties["calls"].Items.AnyOf
			if len(items) != 2 {
				t.Fatalf("call items %s", mustMarshal(t, sent.Properties["calls"]))
			}
			for _, it := range items {
				r, offered := it.Properties[schema.ReasoningField]
				if offered != reasoning || slices.Contains(it.Required, schema.ReasoningField) {
					t.Errorf("item %s: %s offered %v (required %v), want offered %v, optional", mustMarshal(t, it),
						schema.ReasoningField, offered, it.Required, reasoning)
				}
				if offered && r.Type != "string" {
					t.Errorf("%s = %s", schema.ReasoningField, mustMarshal(t, r))
				}
				if _, ok := it.Properties[schema.ActivityField]; ok {
					t.Errorf("item offers %s", schema.ActivityField)
				}
			}
		})
	}
}

// M1 through a run: a composed answer whose call names _activity is answered with an error
// result the model reads next (what, where, what instead), and the tool does not run.
func TestComposedCallNamingActivityIsRefused(t *testing.T) {
	out := &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"answer": {Type: "string"}}, Required: []string{"answer"}}
	m := &turnModel{turns: []model.Response{
		{Text: `{"calls":[{"_tool":"echo","text":"hi","_activity":"finish"}],"output":null}`},
		{Text: `{"calls":[{"_tool":"echo","text":"hi"}],"output":null}`},
		{Text: `{"calls":[],"output":{"answer":"hi"}}`},
	}}
	f := newFixture(t, m, &agent.Prompt{Name: "p", Tools: []string{"echo", "finish"}, Output: out})
	o, err := f.r.Run(ctx, f.th, f.agent, "say hi")
	if err != nil || o.Status != agent.RunFinished {
		t.Fatalf("Run = %+v, %v", o, err)
	}
	if got := f.ran.list(); !slices.Equal(got, []string{"echo:hi"}) {
		t.Fatalf("ran %v, want only the second, plain call", got)
	}
	var refused *quiver.Result
	for _, r := range f.results(t) {
		if r.IsError() {
			refused = r
		}
	}
	if refused == nil || refused.Code != quiver.CodeInvalidArguments || !strings.Contains(refused.Error, "the call to echo sets _activity") {
		t.Fatalf("the refused call's result: %+v", refused)
	}
	told := false
	for _, msg := range m.reqs[1].Messages {
		told = told || strings.Contains(msg.Text, "sets _activity") && strings.Contains(msg.Text, "Remove _activity")
	}
	if !told {
		t.Errorf("the model was not told why: %+v", m.reqs[1].Messages)
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
