package quiver_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// M1: the code behind a tool is bound by its definition, never chosen by a call. A call that
// carries _activity (in its arguments, or among a composed answer's meta-fields) is refused
// with an error result that says what is wrong (_activity), where (the call to which tool, the
// pointer /_activity) and what the call may carry instead (the tool's arguments, and the
// underscore fields accepted for that tool at this dispatcher); nothing runs.
func TestCallActivityRefused(t *testing.T) {
	var ran []string
	record := func(label string) quiver.ToolFunc {
		return func(_ context.Context, args json.RawMessage) (any, error) {
			ran = append(ran, label)
			return label + " ran", nil
		}
	}
	latent, err := quiver.ParseSchemaTool([]byte(`{"description":"The model rates a text.","_tool":"rate",
		"properties":{"text":{"type":"string"},"_output":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	bound, err := quiver.ParseSchemaTool([]byte(`{"description":"Bound by its definition.","_tool":"bound","_activity":"shared",
		"properties":{"text":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t,
		rawTool(t, "echo", `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`, record("echo")),
		rawTool(t, "bare", "", record("bare")),
		rawTool(t, "stateful", `{"type":"object","properties":{"text":{"type":"string"}}}`, record("stateful"),
			func(s *quiver.Spec) { s.MetaFields = []string{schema.OutputPathField} }),
		latent, bound,
	)
	for name, fn := range map[string]quiver.ToolFunc{"shared": record("shared"), "evil": record("evil")} {
		if err := reg.RegisterActivity(name, fn); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		dispatch *quiver.Dispatcher
		call     quiver.Call
		allowed  []string // the underscore fields the error must list
		absent   []string // and must not
		args     string   // the arguments summary it must quote
	}{
		{name: "in a tool's arguments", call: quiver.Call{Name: "echo", Args: json.RawMessage(`{"text":"hi","_activity":"evil"}`)},
			allowed: []string{schema.ReasoningField}, absent: []string{schema.OutputField, schema.OutputPathField}, args: "text (string, required)"},
		{name: "a tool without arguments", call: quiver.Call{Name: "bare", Args: json.RawMessage(`{"_activity":"evil"}`)},
			allowed: []string{schema.ReasoningField}, args: "no properties"},
		{name: "null counts: the key is there", call: quiver.Call{Name: "echo", Args: json.RawMessage(`{"text":"hi","_activity":null}`)},
			allowed: []string{schema.ReasoningField}, args: "text"},
		{name: "a bound schema tool", call: quiver.Call{Name: "bound", Args: json.RawMessage(`{"text":"hi","_activity":"evil"}`)},
			allowed: []string{schema.ReasoningField}, absent: []string{schema.OutputField}, args: "text"},
		{name: "a latent tool lists _output", call: quiver.Call{Name: "rate", Args: json.RawMessage(`{"text":"hi","_output":3,"_activity":"evil"}`)},
			allowed: []string{schema.ReasoningField, schema.OutputField}, args: "text"},
		{name: "the tool's meta-fields listed", call: quiver.Call{Name: "stateful", Args: json.RawMessage(`{"text":"hi","_activity":"evil"}`)},
			allowed: []string{schema.ReasoningField, schema.OutputPathField}, absent: []string{schema.InstanceField}, args: "text"},
		{name: "the dispatcher's meta-fields listed", dispatch: &quiver.Dispatcher{Registry: reg, MetaFields: []string{schema.InstanceField}},
			call:    quiver.Call{Name: "echo", Args: json.RawMessage(`{"text":"hi","_activity":"evil"}`)},
			allowed: []string{schema.ReasoningField, schema.InstanceField}, absent: []string{schema.OutputPathField}, args: "text"},
		// A composed answer's meta-fields arrive in Meta (ParseComposed), beside arguments
		// that would pass the fast path on their own.
		{name: "in a composed answer's meta-fields", call: composedCall(t, `{"calls":[{"_tool":"echo","text":"hi","_activity":"evil"}],"output":null}`),
			allowed: []string{schema.ReasoningField}, args: "text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran = nil
			d := tt.dispatch
			if d == nil {
				d = &quiver.Dispatcher{Registry: reg}
			}
			r := dispatchCall(t, context.Background(), d, tt.call)
			wantError(t, r, quiver.CodeInvalidArguments, "the call to "+tt.call.Name+" sets _activity in its arguments",
				"bound by the tool's definition", "Remove _activity", tt.args)
			for _, f := range tt.allowed {
				wantError(t, r, quiver.CodeInvalidArguments, f)
			}
			for _, f := range tt.absent {
				if containsWord(r.Error, f) {
					t.Errorf("the error lists %s, which this call may not carry: %s", f, r.Error)
				}
			}
			if !slices.ContainsFunc(r.Problems, func(p schema.Problem) bool { return p.Pointer == "/_activity" }) {
				t.Errorf("problems %v lack /_activity", r.Problems)
			}
			if len(ran) != 0 {
				t.Errorf("ran %v for a refused call", ran)
			}
		})
	}
	// Without _activity each of them runs its own code.
	d := &quiver.Dispatcher{Registry: reg}
	wantSuccess(t, dispatch(t, d, "echo", `{"text":"hi"}`))
	wantSuccess(t, dispatch(t, d, "bound", `{"text":"hi"}`))
	if !slices.Equal(ran, []string{"echo", "shared"}) {
		t.Errorf("ran %v", ran)
	}
}

func composedCall(t *testing.T, doc string) quiver.Call {
	t.Helper()
	calls, _, err := quiver.ParseComposed([]byte(doc))
	if err != nil || len(calls) != 1 {
		t.Fatalf("ParseComposed: %v %v", calls, err)
	}
	if _, ok := calls[0].Meta[schema.ActivityField]; !ok {
		t.Fatalf("the parsed call lost _activity: %+v", calls[0])
	}
	return calls[0]
}

// containsWord reports whether field appears in s as a whole field name, not as the start of a
// longer one (_output in _outputPath).
func containsWord(s, field string) bool {
	for i := 0; i+len(field) <= len(s); i++ {
		if s[i:i+len(field)] != field {
			continue
		}
		end := i + len(field)
		if end == len(s) || !(s[end] == '_' || s[end] >= 'a' && s[end] <= 'z' || s[end] >= 'A' && s[end] <= 'Z') {
			return true
		}
	}
	return false
}
