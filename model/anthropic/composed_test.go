package anthropic_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/internal/wiretest"
)

// L2 for Anthropic: the composed {calls, output} schema is the input_schema of the one output
// tool the model is made to call, unchanged and unwrapped (its root is an object), and the
// document the model writes as that tool's input comes back as the response's text.
func TestComposedSchemaOnTheWire(t *testing.T) {
	for _, c := range wiretest.ComposedCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			content := `{"type":"tool_use","id":"toolu_9","name":"output","input":` + c.Answer + `}`
			srv := wiretest.New(t, wiretest.Reply{Body: message(content, "tool_use")})
			resp, err := newModel(t, srv.URL).Generate(context.Background(), &model.Request{
				Messages: []model.Message{{Role: model.RoleUser, Text: "Greet Ada."}}, Output: c.Schema}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if canon(t, resp.Text) != canon(t, c.Answer) || len(resp.ToolCalls) != 0 {
				t.Errorf("text %q calls %v, want the document %s", resp.Text, resp.ToolCalls, c.Answer)
			}
			var sent struct {
				ToolChoice json.RawMessage `json:"tool_choice"`
				Tools      []struct {
					Name        string
					InputSchema json.RawMessage `json:"input_schema"`
				}
			}
			if err := json.Unmarshal(srv.Last(t).Body, &sent); err != nil {
				t.Fatal(err)
			}
			if canon(t, sent.ToolChoice) != canon(t, `{"name":"output","type":"tool"}`) || len(sent.Tools) != 1 || sent.Tools[0].Name != "output" {
				t.Fatalf("tool_choice %s, tools %+v", sent.ToolChoice, sent.Tools)
			}
			in := sent.Tools[0].InputSchema
			if got, want := canon(t, in), canon(t, mustJSON(t, c.Schema)); got != want {
				t.Errorf("input_schema:\n got %s\nwant %s", got, want)
			}
			wiretest.CheckComposed(t, c, in)
		})
	}
}
