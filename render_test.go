package quiver_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// renderDispatcher offers get_weather (code), classify (latent), ping (no arguments) and a
// denied admin_wipe.
func renderDispatcher(t testing.TB) *quiver.Dispatcher {
	t.Helper()
	weather := quiver.Func("get_weather", "Returns the weather.", func(_ context.Context, a struct {
		City string `json:"city" description:"City name"`
		Unit string `json:"unit,omitempty" enum:"c,f"`
	}) (string, error) {
		return "sunny", nil
	}, quiver.WithExamples(quiver.Example{Args: json.RawMessage(`{ "city": "Paris" }`), Result: json.RawMessage(`"sunny"`)}))
	classify, err := quiver.ParseSchemaTool([]byte(`{"description":"Classifies text","_tool":"classify",
		"properties":{"text":{"type":"string"},"_output":{"type":"object","properties":{"label":{"type":"string"}},"required":["label"]}},
		"required":["text"]}`))
	if err != nil {
		t.Fatal(err)
	}
	ping := quiver.Func("ping", "Answers pong.", func(context.Context, struct{}) (string, error) { return "pong", nil },
		quiver.WithExamples(quiver.Example{}))
	wipe := quiver.Func("admin_wipe", "Wipes everything.", func(context.Context, struct{}) (string, error) { return "", nil },
		quiver.WithExamples(quiver.Example{Args: json.RawMessage(`{}`)}))
	return &quiver.Dispatcher{Registry: newRegistry(t, weather, classify, ping, wipe), Policy: quiver.Policy{Deny: []string{"admin_*"}}}
}

func TestRender(t *testing.T) {
	d := renderDispatcher(t)
	for _, dialect := range schema.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			set, err := d.Render(dialect)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			params := map[string]string{}
			for _, rt := range set.Tools {
				got = append(got, rt.Canonical)
				params[rt.Canonical] = string(rt.Parameters)
			}
			if want := []string{"classify", "get_weather", "ping"}; !reflect.DeepEqual(got, want) {
				t.Errorf("rendered %v, want %v (the denied tool must not appear)", got, want)
			}
			if !strings.Contains(params["classify"], `"_output"`) {
				t.Errorf("latent tool lacks _output: %s", params["classify"])
			}
			if strings.Contains(params["get_weather"], `"_output"`) {
				t.Errorf("tool with code asks for _output: %s", params["get_weather"])
			}
			if !strings.Contains(params["get_weather"], `"city"`) {
				t.Errorf("get_weather parameters %s", params["get_weather"])
			}
			wire, err := json.Marshal(set)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(wire), "admin_wipe") {
				t.Errorf("wire form shows the denied tool: %s", wire)
			}
			for _, name := range []string{"classify", "get_weather", "ping"} {
				if !strings.Contains(string(wire), `"`+name+`"`) {
					t.Errorf("wire form lacks %s", name)
				}
			}
		})
	}
	// A tool without arguments is offered an empty object.
	set, err := d.Render(schema.OpenAI)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range set.Tools {
		if rt.Canonical == "ping" && !jsonEqual(t, rt.Parameters, []byte(`{"type":"object","properties":{}}`)) {
			t.Errorf("ping parameters %s", rt.Parameters)
		}
	}
	if _, err := d.Render("cohere"); err == nil {
		t.Error("unknown dialect rendered")
	}
}

func TestCompose(t *testing.T) {
	d := renderDispatcher(t)
	tests := []struct {
		name   string
		output *schema.Schema
	}{
		{"text output", nil},
		{"structured output", mustSchema(t, `{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := d.Compose(tt.output)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			doc := string(raw)
			for _, want := range []string{`"calls"`, `"output"`, `"get_weather"`, `"classify"`, `"ping"`, `"_output"`} {
				if !strings.Contains(doc, want) {
					t.Errorf("composed schema lacks %s", want)
				}
			}
			// A dispatcher enables no _reasoningForCall: an agent asks for it (reasoning_for_call).
			if strings.Contains(doc, `"_reasoningForCall"`) {
				t.Error("the composed schema offers _reasoningForCall unasked")
			}
			if strings.Contains(doc, "admin_wipe") {
				t.Error("composed schema offers the denied tool")
			}
			// A model answer in the composed shape validates and parses.
			c, err := schema.Compile(s)
			if err != nil {
				t.Fatal(err)
			}
			output := `"done"`
			if tt.output != nil {
				output = `{"answer":"42"}`
			}
			answer := `{"calls":[{"_tool":"get_weather","city":"Oslo"},
				{"_tool":"classify","text":"hi","_output":{"label":"greeting"}}],"output":` + output + `}`
			v, err := schema.Decode([]byte(answer))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(v); err != nil {
				t.Fatalf("a well-formed answer fails the composed schema: %v", err)
			}
			calls, out, err := quiver.ParseComposed([]byte(answer))
			if err != nil {
				t.Fatal(err)
			}
			if len(calls) != 2 || !jsonEqual(t, out, []byte(output)) {
				t.Fatalf("calls %+v output %s", calls, out)
			}
			// The parsed calls dispatch.
			for _, call := range calls {
				wantSuccess(t, dispatchCall(t, context.Background(), d, call))
			}
			bad, err := schema.Decode([]byte(`{"calls":[{"_tool":"admin_wipe"}],"output":null}`))
			if err != nil {
				t.Fatal(err)
			}
			if c.Validate(bad) == nil {
				t.Error("the composed schema accepts a call to the denied tool")
			}
		})
	}
}

func TestParseComposed(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		calls   []quiver.Call
		output  string
		wantErr string
	}{
		{name: "calls only", doc: `{"calls":[{"_tool":"a","x":1}],"output":null}`,
			calls: []quiver.Call{{Name: "a", Args: json.RawMessage(`{"x":1}`)}}},
		{name: "output only", doc: `{"calls":[],"output":{"answer":"yes"}}`, output: `{"answer":"yes"}`},
		{name: "output without calls field", doc: `{"output":"text answer"}`, output: `"text answer"`},
		{name: "both, with meta-fields", doc: `{"calls":[{"_tool":"b","_reasoningForCall":"why not","q":"z","_output":{"r":1},
			"_outputPath":"/p","_instance":"i"}],"output":"partial"}`, output: `"partial"`,
			calls: []quiver.Call{{Name: "b", Args: json.RawMessage(`{"q":"z"}`), Reasoning: "why not", Output: json.RawMessage(`{"r":1}`),
				Meta: map[string]json.RawMessage{"_outputPath": json.RawMessage(`"/p"`), "_instance": json.RawMessage(`"i"`)}}}},
		{name: "non-string reasoning kept as JSON", doc: `{"calls":[{"_tool":"a","_reasoningForCall":{"k":1}}]}`,
			calls: []quiver.Call{{Name: "a", Args: json.RawMessage(`{}`), Reasoning: `{"k":1}`}}},
		{name: "several calls keep order", doc: `{"calls":[{"_tool":"c"},{"_tool":"a"},{"_tool":"b"}]}`,
			calls: []quiver.Call{{Name: "c", Args: json.RawMessage(`{}`)}, {Name: "a", Args: json.RawMessage(`{}`)}, {Name: "b", Args: json.RawMessage(`{}`)}}},
		{name: "not JSON", doc: `{"calls":`, wantErr: "composed answer"},
		{name: "not an object", doc: `[1]`, wantErr: "composed answer"},
		{name: "call not an object", doc: `{"calls":[5]}`, wantErr: "composed answer"},
		{name: "call without _tool", doc: `{"calls":[{"x":1}]}`, wantErr: "call 0 has no _tool"},
		{name: "empty _tool", doc: `{"calls":[{"_tool":""}]}`, wantErr: "call 0 has no _tool"},
		{name: "non-string _tool", doc: `{"calls":[{"_tool":"a"},{"_tool":7}]}`, wantErr: "call 1 has no _tool"},
		{name: "neither", doc: `{"calls":[],"output":null}`, wantErr: "neither calls nor output"},
		{name: "empty object", doc: `{}`, wantErr: "neither calls nor output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, out, err := quiver.ParseComposed([]byte(tt.doc))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.output == "" && out != nil || tt.output != "" && !jsonEqual(t, out, []byte(tt.output)) {
				t.Errorf("output %s, want %s", out, tt.output)
			}
			if len(calls) != len(tt.calls) {
				t.Fatalf("calls %+v, want %+v", calls, tt.calls)
			}
			for i, c := range calls {
				w := tt.calls[i]
				if c.Name != w.Name || c.Reasoning != w.Reasoning || !jsonEqual(t, c.Args, w.Args) {
					t.Errorf("call %d = %+v, want %+v", i, c, w)
				}
				if (len(w.Output) > 0 || len(c.Output) > 0) && !jsonEqual(t, c.Output, w.Output) {
					t.Errorf("call %d output %s, want %s", i, c.Output, w.Output)
				}
				if len(c.Meta) != len(w.Meta) {
					t.Errorf("call %d meta %v, want %v", i, c.Meta, w.Meta)
				}
				for k, v := range w.Meta {
					if !jsonEqual(t, c.Meta[k], v) {
						t.Errorf("call %d meta %s = %s, want %s", i, k, c.Meta[k], v)
					}
				}
			}
		})
	}
}

func TestRenderExamples(t *testing.T) {
	d := renderDispatcher(t)
	got := quiver.RenderExamples(d.Tools())
	want := "Examples of tool calls:\n" +
		`- get_weather {"city":"Paris"} -> "sunny"` + "\n" +
		"- ping {}\n"
	if got != want {
		t.Errorf("RenderExamples =\n%s\nwant\n%s", got, want)
	}
	if got := quiver.RenderExamples([]*quiver.Tool{textTool("plain", "")}); got != "" {
		t.Errorf("no examples rendered as %q", got)
	}
	if got := quiver.RenderExamples(nil); got != "" {
		t.Errorf("nil tools rendered as %q", got)
	}
}

func TestToolSchemas(t *testing.T) {
	d := renderDispatcher(t)
	got := quiver.ToolSchemas(d.Registry, d.Tools())
	latent := map[string]bool{}
	for _, ts := range got {
		latent[ts.Name] = ts.Latent
		if ts.Description == "" {
			t.Errorf("%s has no description", ts.Name)
		}
	}
	if want := map[string]bool{"classify": true, "get_weather": false, "ping": false}; !reflect.DeepEqual(latent, want) {
		t.Errorf("latent %v, want %v", latent, want)
	}
	// Binding an activity makes the tool non-latent, and it stops asking for _output.
	if err := d.Registry.RegisterActivity("classify", returning(map[string]string{"label": "x"}, nil)); err != nil {
		t.Fatal(err)
	}
	set, err := d.Render(schema.Anthropic)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range set.Tools {
		if rt.Canonical == "classify" && strings.Contains(string(rt.Parameters), "_output") {
			t.Errorf("bound tool still asks for _output: %s", rt.Parameters)
		}
	}
}
