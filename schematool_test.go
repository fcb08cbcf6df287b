package quiver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
)

const sentimentDoc = `{
  "type": "object",
  "description": "Analyzes text sentiment",
  "properties": {
    "_tool": {"type": "string", "const": "sentiment_analysis"},
    "text": {"type": "string", "description": "Text to analyze", "maxLength": 200},
    "_output": {"type": "object", "properties": {"sentiment": {"type": "string", "enum": ["positive", "negative", "neutral"]}},
                "required": ["sentiment"], "additionalProperties": false}
  },
  "required": ["text", "_output"]
}`

func TestParseSchemaToolDefinition(t *testing.T) {
	tests := []struct {
		name         string
		doc          string
		wantName     string
		wantDesc     string
		wantActivity string
		wantProps    []string // input properties, nil for no input schema
		wantRequired []string
		wantOutput   bool
		wantVars     []quiver.Variable
	}{
		{name: "const _tool and _output", doc: sentimentDoc, wantName: "sentiment_analysis", wantDesc: "Analyzes text sentiment",
			wantProps: []string{"text"}, wantRequired: []string{"text"}, wantOutput: true},
		{name: "top-level _tool and _activity, title as description",
			doc:      `{"_tool":"summarize","_activity":"summarizer","title":"Summarizes","properties":{"text":{"type":"string"}}}`,
			wantName: "summarize", wantDesc: "Summarizes", wantActivity: "summarizer", wantProps: []string{"text"}},
		{name: "const _activity",
			doc:      `{"description":"d","properties":{"_tool":{"const":"t1"},"_activity":{"const":"a1"},"x":{"type":"integer"}}}`,
			wantName: "t1", wantDesc: "d", wantActivity: "a1", wantProps: []string{"x"}},
		{name: "no parameters", doc: `{"description":"Rolls a die","properties":{"_tool":{"const":"roll"},"_output":{"type":"integer"}}}`,
			wantName: "roll", wantDesc: "Rolls a die", wantOutput: true},
		{name: "variables list",
			doc: `{"description":"d","_tool":"v1","variables":[{"name":"region","type":"text","required":true,"description":"where"},
			       {"name":"token","type":"secret"}],"properties":{"q":{"type":"string"}}}`,
			wantName: "v1", wantDesc: "d", wantProps: []string{"q"},
			wantVars: []quiver.Variable{{Name: "region", Type: quiver.VarText, Required: true, Description: "where"},
				{Name: "token", Type: quiver.VarSecret}}},
		{name: "tenvs",
			doc: `{"description":"d","_tool":"v2","tenvs":{"type":"object","properties":{
			       "vectorStoreId":{"type":"string","description":"store"},
			       "apiKey":{"type":"string","format":"password"}},"required":["vectorStoreId"]}}`,
			wantName: "v2", wantDesc: "d",
			wantVars: []quiver.Variable{{Name: "apiKey", Type: quiver.VarSecret},
				{Name: "vectorStoreId", Type: quiver.VarText, Required: true, Description: "store"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, err := quiver.ParseSchemaTool([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			s := tool.Spec()
			if s.Name != tt.wantName || s.Description != tt.wantDesc || s.Activity != tt.wantActivity {
				t.Errorf("name %q desc %q activity %q", s.Name, s.Description, s.Activity)
			}
			if !tool.SchemaOnly() {
				t.Error("a schema tool has code")
			}
			if tt.wantProps == nil {
				if s.InputSchema != nil {
					t.Errorf("input schema %v, want none", s.InputSchema)
				}
			} else {
				if s.InputSchema == nil {
					t.Fatal("no input schema")
				}
				var props []string
				for k := range s.InputSchema.Properties {
					props = append(props, k)
				}
				if !reflect.DeepEqual(props, tt.wantProps) {
					t.Errorf("input properties %v, want %v", props, tt.wantProps)
				}
				if len(s.InputSchema.Required) != len(tt.wantRequired) || (len(tt.wantRequired) > 0 && !reflect.DeepEqual(s.InputSchema.Required, tt.wantRequired)) {
					t.Errorf("required %v, want %v", s.InputSchema.Required, tt.wantRequired)
				}
				raw, _ := json.Marshal(s.InputSchema)
				if strings.Contains(string(raw), `"_`) || strings.Contains(string(raw), "variables") || strings.Contains(string(raw), "tenvs") {
					t.Errorf("meta-fields leaked into the input schema: %s", raw)
				}
			}
			if (s.OutputSchema != nil) != tt.wantOutput {
				t.Errorf("output schema %v, want present=%v", s.OutputSchema, tt.wantOutput)
			}
			if len(s.Variables) != len(tt.wantVars) || (len(tt.wantVars) > 0 && !reflect.DeepEqual(s.Variables, tt.wantVars)) {
				t.Errorf("variables %+v\nwant %+v", s.Variables, tt.wantVars)
			}
		})
	}
}

func TestParseSchemaToolErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"not JSON", `{`, "schema tool"},
		{"no name", `{"description":"d","properties":{"x":{"type":"string"}}}`, "no name"},
		{"non-string const name", `{"description":"d","properties":{"_tool":{"const":5}}}`, "no name"},
		{"no description", `{"_tool":"x"}`, "description is empty"},
		{"non-object root", `{"_tool":"x","description":"d","type":"array"}`, `root must have type "object"`},
		{"bad variables", `{"_tool":"x","description":"d","variables":[{"name":"a","type":"blob"}]}`, "neither text nor secret"},
		{"bad tenvs", `{"_tool":"x","description":"d","tenvs":{"type":"string"}}`, "tenvs"},
		{"bad output schema", `{"_tool":"x","description":"d","properties":{"_output":{"type":"object","pattern":"("}}}`, "output schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := quiver.ParseSchemaTool([]byte(tt.doc))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

// TestSchemaToolActivities checks M1: the tool's own _activity, else the activity registered
// under its name, else latent (the model's _output, checked against the output schema).
func TestSchemaToolActivities(t *testing.T) {
	parse := func(doc string) *quiver.Tool {
		tool, err := quiver.ParseSchemaTool([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		return tool
	}
	reg := newRegistry(t,
		parse(sentimentDoc),
		parse(`{"description":"Bound by _activity","_tool":"bound","_activity":"shared_code","properties":{"text":{"type":"string"}}}`),
		parse(`{"description":"Bound by name","_tool":"by_name","properties":{"text":{"type":"string"}}}`),
		parse(`{"description":"Named activity missing","_tool":"dangling","_activity":"not_registered","properties":{"text":{"type":"string"}}}`),
		parse(`{"description":"Activity result checked","_tool":"checked","_activity":"bad_output",
		        "properties":{"_output":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}}`),
		parse(`{"description":"Latent without output schema","_tool":"free","properties":{"q":{"type":"string"}}}`),
	)
	var ranWith []string
	activity := func(label string) quiver.ToolFunc {
		return func(_ context.Context, args json.RawMessage) (any, error) {
			ranWith = append(ranWith, label+" "+string(args))
			return label + " ran", nil
		}
	}
	for name, fn := range map[string]quiver.ToolFunc{
		"shared_code": activity("shared_code"),
		"by_name":     activity("by_name"),
		// "bound" also has an activity under its own name, which its _activity overrides.
		"bound":      activity("wrong"),
		"evil":       activity("evil"),
		"bad_output": returning(map[string]any{"n": "not a number"}, nil),
	} {
		if err := reg.RegisterActivity(name, fn); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.RegisterActivity("evil", activity("again")); err == nil {
		t.Error("a duplicate activity was accepted")
	}
	if err := reg.RegisterActivity("", activity("x")); err == nil {
		t.Error("an activity without a name was accepted")
	}
	if err := reg.RegisterActivity("x", nil); err == nil {
		t.Error("an activity without code was accepted")
	}
	d := &quiver.Dispatcher{Registry: reg}

	tests := []struct {
		name   string
		tool   string
		args   string
		latent bool
		text   string      // success text
		value  string      // success value
		code   quiver.Code // error code
		errHas string      // error substring
		ran    string      // activity invocation expected, "" for none
	}{
		{name: "own _activity wins over name", tool: "bound", args: `{"text":"hi"}`, text: "shared_code ran", ran: `shared_code {"text":"hi"}`},
		{name: "activity under the tool's name", tool: "by_name", args: `{"text":"hi"}`, text: "by_name ran", ran: `by_name {"text":"hi"}`},
		// A call cannot choose the code that runs it: refused, and nothing runs.
		{name: "call's _activity refused (bound)", tool: "bound", args: `{"text":"hi","_activity":"evil"}`,
			code: quiver.CodeInvalidArguments, errHas: "sets _activity in its arguments"},
		{name: "call's _activity refused (latent)", tool: "sentiment_analysis", latent: true,
			args: `{"text":"good","_activity":"evil","_output":{"sentiment":"positive"}}`, code: quiver.CodeInvalidArguments, errHas: "_output"},
		{name: "latent returns _output", tool: "sentiment_analysis", latent: true,
			args: `{"text":"great day","_output":{"sentiment":"positive"}}`, value: `{"sentiment":"positive"}`},
		{name: "latent bad _output", tool: "sentiment_analysis", latent: true,
			args: `{"text":"x","_output":{"sentiment":"ecstatic"}}`, code: quiver.CodeInvalidOutput, errHas: "/sentiment"},
		{name: "latent _output of wrong type", tool: "sentiment_analysis", latent: true,
			args: `{"text":"x","_output":"positive"}`, code: quiver.CodeInvalidOutput, errHas: "_output"},
		{name: "latent missing _output", tool: "sentiment_analysis", latent: true,
			args: `{"text":"x"}`, code: quiver.CodeInvalidArguments, errHas: "_output"},
		{name: "latent null _output", tool: "sentiment_analysis", latent: true,
			args: `{"text":"x","_output":null}`, code: quiver.CodeInvalidArguments, errHas: "_output"},
		{name: "latent still validates arguments", tool: "sentiment_analysis", latent: true,
			args: `{"text":5,"_output":{"sentiment":"neutral"}}`, code: quiver.CodeInvalidArguments, errHas: "/text"},
		{name: "latent without output schema", tool: "free", latent: true, args: `{"q":"x","_output":[1,2]}`, value: `[1,2]`},
		// A tool that names code is never latent: the model cannot invent what the code returns.
		{name: "dangling _activity is an error", tool: "dangling", args: `{"text":"x","_output":"done"}`,
			code: quiver.CodeToolError, errHas: `activity "not_registered" is not registered`},
		{name: "activity output checked", tool: "checked", code: quiver.CodeInvalidOutput, errHas: "/n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ranWith = nil
			tool, ok := reg.Lookup(tt.tool)
			if !ok {
				t.Fatalf("%s not registered", tt.tool)
			}
			if got := reg.Latent(tool); got != tt.latent {
				t.Errorf("Latent = %v, want %v", got, tt.latent)
			}
			r := dispatch(t, d, tt.tool, tt.args)
			switch {
			case tt.code != "":
				wantError(t, r, tt.code, tt.errHas)
			case tt.value != "":
				wantSuccess(t, r)
				if !jsonEqual(t, r.Value, []byte(tt.value)) {
					t.Errorf("value %s, want %s", r.Value, tt.value)
				}
			default:
				wantSuccess(t, r)
				if r.Text != tt.text {
					t.Errorf("text %q, want %q", r.Text, tt.text)
				}
			}
			var want []string
			if tt.ran != "" {
				want = []string{tt.ran}
			}
			if !reflect.DeepEqual(ranWith, want) {
				t.Errorf("activities ran %q, want %q", ranWith, want)
			}
		})
	}
}

func TestSchemaToolVariablesReachActivity(t *testing.T) {
	tool, err := quiver.ParseSchemaTool([]byte(`{"description":"Looks up a store","_tool":"lookup",
		"tenvs":{"type":"object","properties":{"storeId":{"type":"string"},"apiKey":{"type":"string","x-secret":true}},
		"required":["storeId","apiKey"]},"properties":{"q":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, tool)
	if err := reg.RegisterActivity("lookup", func(ctx context.Context, _ json.RawMessage) (any, error) {
		store, _ := quiver.Var(ctx, "storeId")
		key, _ := quiver.Var(ctx, "apiKey")
		return "store=" + store + " key=" + key, nil
	}); err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: reg, Resolver: quiver.Layered{Thread: quiver.Vars{"storeId": "vs_1", "apiKey": "sk-live-999"}}}
	r := dispatch(t, d, "lookup", `{"q":"x"}`)
	wantSuccess(t, r)
	if r.Text != "store=vs_1 key=[REDACTED]" {
		t.Errorf("text %q", r.Text)
	}
	d = &quiver.Dispatcher{Registry: reg}
	wantError(t, dispatch(t, d, "lookup", `{"q":"x"}`), quiver.CodeMissingVariable, "storeId", "apiKey")
}

// ParseSchemaSpec is the reader stored tools use: the same document as a registry file's, with
// or without a name. (The doors that read it are held to one outcome by
// cmd/quiver's TestSchemaToolDocumentEveryDoor.)
func TestParseSchemaSpec(t *testing.T) {
	spec, err := quiver.ParseSchemaSpec([]byte(`{"type":"object","description":"Looks up weather",
		"properties":{"_tool":{"const":"weather"},"city":{"type":"string"},"_output":{"type":"object","properties":{"t":{"type":"number"}}},
		"_delegate":{"type":"object"},"_outputPath":{"type":"string"}},
		"required":["city","_tool"],
		"variables":[{"name":"API_KEY","type":"secret","required":true}],
		"annotations":{"openWorldHint":true,"title":"T"}}`))
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(spec.InputSchema)
	if spec.Name != "weather" || spec.Description != "Looks up weather" || spec.OutputSchema == nil ||
		len(spec.Variables) != 1 || spec.Variables[0].Type != quiver.VarSecret ||
		string(in) != `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}` {
		t.Errorf("parsed %+v, input %s", spec, in)
	}
	if fmt.Sprint(spec.MetaFields) != "[_outputPath _delegate]" {
		t.Errorf("meta-fields %v", spec.MetaFields)
	}
	if a := spec.Annotations; a.Title != "T" || a.OpenWorldHint == nil || !*a.OpenWorldHint || a.ReadOnlyHint != nil {
		t.Errorf("annotations = %+v", a)
	}
	tenvs, err := quiver.ParseSchemaSpec([]byte(`{"type":"object","tenvs":{"type":"object","properties":{"TOKEN":{"type":"string","format":"password"}}}}`))
	if err != nil || len(tenvs.Variables) != 1 || tenvs.Variables[0].Type != quiver.VarSecret || tenvs.InputSchema != nil || tenvs.Name != "" {
		t.Errorf("tenvs: %+v, %v", tenvs, err)
	}
}

// Each refusal of ParseSchemaSpec says what is wrong, where, and what is allowed, in the
// author's terms.
func TestParseSchemaSpecRefusals(t *testing.T) {
	for doc, want := range map[string]string{
		`[1]`: `the schema is not a JSON Schema object: got an array; want an object like {"type": "object", "properties": {...}}`,
		`{`:   `the schema is not a JSON Schema object: not valid JSON: unexpected end of JSON input`,
		`{"properties":{"a":5}}`: `the schema is not a JSON Schema object: "properties" (or a schema inside it) holds a JSON number ` +
			`where a schema (an object, or true or false) belongs`,
		`{"variables":"x"}`: `variables: want a list of declarations like [{"name": "API_KEY", "type": "secret"}], ` +
			`or a tenvs object schema like {"type": "object", "properties": {"API_KEY": {"type": "string"}}}; got a string ("x")`,
		`{"variables":[{"name":"A","type":"magic"}]}`: `variables: variable "A": type "magic" is neither text nor secret`,
		`{"variables":[{"type":"text"}]}`:             `variables: variable 0 has no name`,
		`{"tenvs":[{"name":"A"},{"name":"A"}]}`:       `tenvs: variable "A" is declared twice`,
		`{"tenvs":{"type":"string"}}`:                 `tenvs: must be an object schema with properties`,
		`{"annotations":{"readOnlyHint":"true"}}`:     `annotations: readOnlyHint must be true or false`,
	} {
		if _, err := quiver.ParseSchemaSpec([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSchemaSpec(%s) = %v, want an error with %q", doc, err, want)
		}
	}
}
