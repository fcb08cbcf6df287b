package openai_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/internal/wiretest"
	"github.com/quiverhq/quiver/schema"
)

// L2 for OpenAI: the composed {calls, output} schema travels as response_format json_schema
// unchanged (seed 002's closed output and _tool consts, _reasoningForCall only where enabled),
// strict when it obeys strict mode as written, in both dialects, and the model's document
// comes back as the response's text.
func TestComposedSchemaOnTheWire(t *testing.T) {
	for _, c := range wiretest.ComposedCases(t) {
		for _, d := range []schema.Dialect{schema.OpenAI, schema.OpenAIStrict} {
			t.Run(c.Name+"/"+string(d), func(t *testing.T) {
				body := strings.Replace(completion, `"content":"Calling."`, `"content":`+strconv.Quote(c.Answer), 1)
				body = strings.Replace(body, `"finish_reason":"tool_calls"`, `"finish_reason":"stop"`, 1)
				// The reply is a document, not a native call: no tool_calls.
				if i, j := strings.Index(body, `"tool_calls":[`), strings.Index(body, `"refusal"`); i >= 0 && j > i {
					body = body[:i] + body[j:]
				}
				srv := wiretest.New(t, wiretest.Reply{Body: body})
				resp, err := newModel(t, srv.URL, d).Generate(context.Background(), &model.Request{
					Messages: []model.Message{{Role: model.RoleUser, Text: "Greet Ada."}}, Output: c.Schema}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Text != c.Answer || len(resp.ToolCalls) != 0 {
					t.Errorf("text %q calls %v, want the document %s", resp.Text, resp.ToolCalls, c.Answer)
				}
				var sent struct {
					ResponseFormat struct {
						Type       string
						JSONSchema struct {
							Name   string
							Strict bool
							Schema json.RawMessage
						} `json:"json_schema"`
					} `json:"response_format"`
					Tools []any
				}
				remarshal(t, srv.Last(t).JSON(t), &sent)
				rf := sent.ResponseFormat
				if rf.Type != "json_schema" || rf.JSONSchema.Name != "output" || len(sent.Tools) != 0 {
					t.Errorf("response_format %+v, tools %v", rf, sent.Tools)
				}
				if got, want := canon(t, rf.JSONSchema.Schema), canon(t, mustJSON(t, c.Schema)); got != want {
					t.Errorf("schema sent:\n got %s\nwant %s", got, want)
				}
				if rf.JSONSchema.Strict != c.StrictReady {
					t.Errorf("strict %v, want %v", rf.JSONSchema.Strict, c.StrictReady)
				}
				if rf.JSONSchema.Strict {
					// Strict mode would reject a schema its rules rewrite: the one sent is
					// already in strict form.
					var s schema.Schema
					if err := json.Unmarshal(rf.JSONSchema.Schema, &s); err != nil {
						t.Fatal(err)
					}
					st, notes, err := schema.Strict(&s)
					if err != nil || len(notes) > 0 || canon(t, mustJSON(t, st)) != canon(t, rf.JSONSchema.Schema) {
						t.Errorf("sent as strict, but strict mode rewrites it (%v, notes %v)", err, notes)
					}
				}
				wiretest.CheckComposed(t, c, rf.JSONSchema.Schema)
			})
		}
	}
}
