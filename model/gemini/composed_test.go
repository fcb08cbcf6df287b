package gemini_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/internal/wiretest"
	"github.com/quiverhq/quiver/schema"
)

// geminiKeywords are the JSON Schema keywords Gemini documents for responseJsonSchema, with the
// annotations it reads.
var geminiKeywords = []string{"$defs", "$ref", "additionalProperties", "anyOf", "description", "enum", "format",
	"items", "maxItems", "maximum", "minItems", "minimum", "prefixItems", "properties", "required", "title", "type"}

// L2 for Gemini: the composed {calls, output} schema travels as responseJsonSchema in the
// keywords Gemini documents: each _tool const becomes a one-value enum (the same constraint),
// nothing else changes, and what it accepts and refuses is what Compose meant.
func TestComposedSchemaOnTheWire(t *testing.T) {
	for _, c := range wiretest.ComposedCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			srv := wiretest.New(t, wiretest.Reply{Body: `{"candidates":[{"content":{"parts":[{"text":` + strconv.Quote(c.Answer) +
				`}],"role":"model"},"finishReason":"STOP"}]}`})
			resp, err := newModel(t, srv.URL, "gemini-2.5-flash").Generate(context.Background(), &model.Request{
				Messages: []model.Message{{Role: model.RoleUser, Text: "Greet Ada."}}, Output: c.Schema}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != c.Answer || len(resp.ToolCalls) != 0 {
				t.Errorf("text %q calls %v, want the document %s", resp.Text, resp.ToolCalls, c.Answer)
			}
			var sent struct {
				GenerationConfig struct {
					ResponseMimeType   string
					ResponseJsonSchema json.RawMessage
				}
				Tools []any
			}
			if err := json.Unmarshal(srv.Last(t).Body, &sent); err != nil {
				t.Fatal(err)
			}
			gc := sent.GenerationConfig
			if gc.ResponseMimeType != "application/json" || len(sent.Tools) != 0 {
				t.Fatalf("config %+v, tools %v", gc, sent.Tools)
			}
			if got, want := canon(t, gc.ResponseJsonSchema), canon(t, mustJSON(t, schema.ConstAsEnum(c.Schema))); got != want {
				t.Errorf("responseJsonSchema:\n got %s\nwant %s", got, want)
			}
			for _, k := range wiretest.Keywords(t, gc.ResponseJsonSchema) {
				if !slices.Contains(geminiKeywords, k) {
					t.Errorf("responseJsonSchema uses %q, which Gemini does not document: %s", k, gc.ResponseJsonSchema)
				}
			}
			wiretest.CheckComposed(t, c, gc.ResponseJsonSchema)
		})
	}
}
