package quiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// Seed 003 §8.3 (SPEC T6): implementations warn about non-conforming names, they do not reject
// them. Path-like, spaced, punctuated and unicode names, and names over a provider's 64 or 128
// characters up to MaxNameBytes, are registered with a warning in the log and can be called;
// only hostile input is refused, with an error that says what is wrong and states the rule:
// an empty or blank name, one that is not UTF-8, one holding control characters (they would
// forge log lines and prompt text), and one over MaxNameBytes.
func TestRegistryNames(t *testing.T) {
	tests := []struct {
		name string
		why  string // "" : accepted
	}{
		{"get_weather", ""},
		{"everything.echo", ""},
		{"github/create_issue", ""},
		{"getWeather", ""},
		{"../../evil", ""},
		{"..", ""},
		{".hidden", ""},
		{"/etc/passwd", ""},
		{"a//b", ""},
		{`..\..\evil`, ""},
		{"bad name!", ""},
		{"look up: weather?", ""},
		{"semi;colon", ""},
		{"100% off?", ""},
		{"名前", ""},
		{"café ☕", ""},
		{" padded ", ""},
		{strings.Repeat("a", 129), ""},
		{strings.Repeat("a", quiver.MaxNameBytes), ""},
		{strings.Repeat("名", quiver.MaxNameBytes/3), ""}, // 510 bytes
		{"", "empty"},
		{" ", "only whitespace"},
		{" \u00a0\u3000 ", "only whitespace"},
		{"bad\xffname", "not valid UTF-8"},
		{"tab\tname", "U+0009"},
		{"new\nline", "U+000A"},
		{"fake\rlog", "U+000D"},
		{"esc\x1b[31m", "U+001B"},
		{"nul\x00", "U+0000"},
		{"del\x7f", "U+007F"},
		{"c1\u0085", "U+0085"},
		{strings.Repeat("a", quiver.MaxNameBytes+1), "513 bytes long"},
		{strings.Repeat("名", quiver.MaxNameBytes/3+1), "513 bytes long"},
	}
	for _, tt := range tests {
		t.Run(strings.ToValidUTF8(tt.name, "?"), func(t *testing.T) {
			var buf bytes.Buffer
			r := &quiver.Registry{Logger: slog.New(slog.NewTextHandler(&buf, nil))}
			checkErr := quiver.CheckName(tt.name)
			if tt.name == "" {
				// No tool has an empty name to register: NewTool refuses it first.
				ok := func(context.Context, json.RawMessage) (any, error) { return "ok", nil }
				if _, err := quiver.NewTool(quiver.Spec{Name: "", Description: "d"}, ok); err == nil || !strings.Contains(err.Error(), "empty") {
					t.Error("NewTool accepted an empty name")
				}
				if checkErr == nil || !strings.Contains(checkErr.Error(), tt.why) || !strings.Contains(checkErr.Error(), quiver.NameRule) {
					t.Errorf("CheckName(\"\") = %v", checkErr)
				}
				return
			}
			err := r.Register(textTool(tt.name, "ok"), textTool("other_tool", "ok"))
			if tt.why == "" {
				if err != nil || checkErr != nil {
					t.Fatalf("refused: %v / %v", err, checkErr)
				}
				if _, found := r.Lookup(tt.name); !found {
					t.Fatal("not registered")
				}
				if tt.name != "get_weather" {
					log := buf.String()
					if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "naming convention") {
						t.Errorf("no warning logged for a non-conforming name: %q", log)
					}
					if quiver.NameWarning(tt.name) == "" {
						t.Error("NameWarning says nothing")
					}
				}
				res := dispatch(t, &quiver.Dispatcher{Registry: r}, tt.name, "{}")
				wantSuccess(t, res)
				return
			}
			if err == nil || checkErr == nil {
				t.Fatalf("accepted (Register: %v, CheckName: %v)", err, checkErr)
			}
			for _, e := range []error{err, checkErr} {
				if !strings.Contains(e.Error(), tt.why) || !strings.Contains(e.Error(), quiver.NameRule) {
					t.Errorf("error %q does not say %q and state the rule", e, tt.why)
				}
				if strings.ContainsAny(e.Error(), "\n\r\x1b\x00") || len(e.Error()) > 600 {
					t.Errorf("error %q carries the hostile name as it is", e)
				}
			}
			if len(r.Tools()) != 0 {
				t.Errorf("the batch was partly registered: %v", names(r.Tools()))
			}
		})
	}
}

// Examples in the system prompt name each tool as the provider is offered it, so that a model
// reads the name it can call.
func TestRenderExamplesForMappedNames(t *testing.T) {
	tool, err := quiver.NewFunc("look up: weather?", "Looks up the weather.", func(context.Context, struct{}) (string, error) { return "sunny", nil },
		quiver.WithExamples(quiver.Example{Args: json.RawMessage(`{}`), Result: json.RawMessage(`"sunny"`)}))
	if err != nil {
		t.Fatal(err)
	}
	r := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	if err := r.Register(tool); err != nil {
		t.Fatal(err)
	}
	tools := r.Tools()
	set, err := schema.Render(schema.OpenAI, quiver.ToolSchemas(r, tools))
	if err != nil {
		t.Fatal(err)
	}
	want := "Examples of tool calls:\n- look_up__weather_ {} -> \"sunny\"\n"
	if got := quiver.RenderExamplesFor(set, tools); got != want {
		t.Errorf("RenderExamplesFor = %q, want %q", got, want)
	}
	if got := quiver.RenderExamples(tools); !strings.Contains(got, "- look up: weather? {}") {
		t.Errorf("RenderExamples = %q, want the registered name", got)
	}
}
