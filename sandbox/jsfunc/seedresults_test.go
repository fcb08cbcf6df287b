package jsfunc_test

import (
	"context"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
)

// Issue 49: seed 001's error convention. A function returning an object whose only key is
// error, a string, fails the call with that message (code tool_error), in either form of the
// code and whether or not the tool declares an output schema; any other shape keeps its plain
// meaning as a value.
func TestSeedErrorConvention(t *testing.T) {
	weather := `{"type": "object", "required": ["temperature"], "properties": {"temperature": {"type": "number"}}}`
	tests := []struct {
		name, code, output string
		wantErr            string // the error the model reads; "" for a success
		wantValue          string // the structured value of a success
	}{
		{"the seed's error", `export default () => ({ error: 'API returned 401 — check API key configuration' })`, "",
			"API returned 401 — check API key configuration", ""},
		{"the seed's error from execute", `export async function execute(state, args) { return { error: 'quota exceeded' } }`, "",
			"quota exceeded", ""},
		{"an error of a tool with an output schema", `export default () => ({ error: 'no station' })`, weather, "no station", ""},
		{"an undefined key is no key", `export default () => ({ error: 'gone', detail: undefined })`, "", "gone", ""},
		{"an empty error", `export default () => ({ error: '' })`, "", `tool returns returned an error without a message ({ error: "" })`, ""},
		// Other shapes are values, as before.
		{"an error that is a number", `export default () => ({ error: 5 })`, "", "", `{"error":5}`},
		{"an error beside another key", `export default () => ({ error: "x", other: 1 })`, "", "", `{"error":"x","other":1}`},
		{"an error that is null", `export default () => ({ error: null })`, "", "", `{"error":null}`},
		{"an error that is an object", `export default () => ({ error: {message: "x"} })`, "", "", `{"error":{"message":"x"}}`},
		{"a list holding the shape", `export default () => ([{ error: "x" }])`, "", "", `[{"error":"x"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def := jsfunc.Definition{Name: "returns", Code: tt.code}
			if tt.output != "" {
				def.OutputSchema = mustSchemaT(t, tt.output)
			}
			r := call(t, dispatcherOf(t, nil, jsTool(t, def)), context.Background(), quiver.Call{Name: "returns"})
			if tt.wantErr != "" {
				if !r.IsError() || r.Code != quiver.CodeToolError || r.Error != tt.wantErr || r.ModelText() != "Error: "+tt.wantErr {
					t.Fatalf("result %+v, want the error %q (tool_error)", r, tt.wantErr)
				}
				return
			}
			if r.IsError() || !sameJSON(r.Value, tt.wantValue) {
				t.Fatalf("result %+v, want the value %s", r, tt.wantValue)
			}
		})
	}
}

// Issue 49: seed 003's ToolResult whose result is the JSON text of a value the tool's output
// schema validates is that value (the text kept as the model's text); a result that is not JSON
// or does not validate is no value, and the call fails as before.
func TestToolResultJSONValue(t *testing.T) {
	weather := `{"type": "object", "required": ["temperature"], "properties": {"temperature": {"type": "number"}, "conditions": {"type": "string"}}}`
	const noValue = "declares an output schema but returned no structured value"
	tests := []struct {
		name, result, output string
		wantText, wantValue  string // for a success
		wantErr              string // for a failure
	}{
		{"the seed's JSON text", `JSON.stringify({ temperature: 72, conditions: 'sunny' })`, weather,
			`{"temperature":72,"conditions":"sunny"}`, `{"temperature":72,"conditions":"sunny"}`, ""},
		{"indented JSON text", `JSON.stringify({ temperature: 72 }, null, 2)`, weather,
			"{\n  \"temperature\": 72\n}", `{"temperature":72}`, ""},
		{"a number schema", `"42"`, `{"type": "integer"}`, "42", "42", ""},
		{"no schema: text alone", `JSON.stringify({ temperature: 72 })`, "", `{"temperature":72}`, "", ""},
		{"text that is not JSON", `"sunny, 72F"`, weather, "", "", noValue},
		{"JSON the schema refuses", `JSON.stringify({ temperature: 'hot' })`, weather, "", "", noValue},
		{"JSON with more after it", `'{"temperature": 72} {"temperature": 73}'`, weather, "", "", noValue},
		{"no result", `undefined`, weather, "", "", noValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def := jsfunc.Definition{Name: "weather",
				Code: "export async function execute(state, args) { return { status: 'success', result: " + tt.result + " } }"}
			if tt.output != "" {
				def.OutputSchema = mustSchemaT(t, tt.output)
			}
			r := call(t, dispatcherOf(t, nil, jsTool(t, def)), context.Background(), quiver.Call{Name: "weather"})
			if tt.wantErr != "" {
				if !r.IsError() || r.Code != quiver.CodeInvalidOutput || r.Error != "tool weather "+tt.wantErr {
					t.Fatalf("result %+v, want the invalid_output error %q", r, tt.wantErr)
				}
				return
			}
			if r.IsError() || r.Text != tt.wantText {
				t.Fatalf("result %+v, want the text %q", r, tt.wantText)
			}
			if tt.wantValue == "" && r.Value != nil || tt.wantValue != "" && string(r.Value) != tt.wantValue {
				t.Fatalf("value %s, want %s", r.Value, tt.wantValue)
			}
			if r.ModelText() != tt.wantText {
				t.Errorf("the model reads %q, want the tool's text %q", r.ModelText(), tt.wantText)
			}
		})
	}
}
