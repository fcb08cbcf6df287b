package quiver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
)

func TestAnnotationsOfAFuncTool(t *testing.T) {
	a := quiver.Annotations{Title: "Clock", ReadOnlyHint: quiver.Hint(true), OpenWorldHint: quiver.Hint(false)}
	tool := quiver.Func("now", "Tells the time.", func(context.Context, struct{}) (string, error) { return "noon", nil },
		quiver.WithAnnotations(a))
	*a.ReadOnlyHint = false // the tool keeps its own copy
	got := tool.Spec().Annotations
	if got.Title != "Clock" || got.ReadOnlyHint == nil || !*got.ReadOnlyHint || got.OpenWorldHint == nil || *got.OpenWorldHint ||
		got.DestructiveHint != nil || got.IdempotentHint != nil {
		t.Errorf("annotations = %+v", got)
	}
	renamed, err := tool.As("clock_now", "Tells the time, renamed.")
	if err != nil {
		t.Fatal(err)
	}
	if r := renamed.Spec().Annotations; r.Title != "Clock" || r.ReadOnlyHint == nil {
		t.Errorf("a renamed tool lost its annotations: %+v", r)
	}
	// Unset and false differ, and both survive JSON.
	b, _ := json.Marshal(got)
	if string(b) != `{"title":"Clock","readOnlyHint":true,"openWorldHint":false}` {
		t.Errorf("JSON = %s", b)
	}
}

func TestSchemaToolAnnotations(t *testing.T) {
	tool, err := quiver.ParseSchemaTool([]byte(`{"type": "object", "description": "Looks up.",
		"properties": {"_tool": {"const": "lookup"}, "q": {"type": "string"}},
		"annotations": {"readOnlyHint": true, "idempotentHint": false, "title": "Look up"}}`))
	if err != nil {
		t.Fatal(err)
	}
	a := tool.Spec().Annotations
	if a.Title != "Look up" || a.ReadOnlyHint == nil || !*a.ReadOnlyHint || a.IdempotentHint == nil || *a.IdempotentHint ||
		a.DestructiveHint != nil || a.OpenWorldHint != nil {
		t.Errorf("annotations = %+v", a)
	}
	// They are not an argument keyword.
	if b, _ := json.Marshal(tool.Spec().InputSchema); strings.Contains(string(b), "annotations") || strings.Contains(string(b), "readOnlyHint") {
		t.Errorf("the input schema carries the annotations: %s", b)
	}
}

// Hostile or mistaken annotations are refused, saying what is wrong, never read as nothing.
func TestAnnotationsBadInput(t *testing.T) {
	cases := []struct {
		ann, want string
	}{
		{`{"readOnlyHint": "yes"}`, `readOnlyHint must be true or false (leave it out to say nothing), got a string ("yes")`},
		{`{"destructiveHint": 1}`, `destructiveHint must be true or false`},
		{`{"idempotentHint": null}`, `idempotentHint must be true or false (leave it out to say nothing), got null`},
		{`{"openWorldHint": {"v": true}}`, `openWorldHint must be true or false`},
		{`{"title": 5}`, `title must be a string, got a number (5)`},
		{`{"title": null}`, `title must be a string, got null`},
		{`{"readonlyHint": true}`, `unknown key "readonlyHint"; the keys are title, readOnlyHint, destructiveHint, idempotentHint, openWorldHint`},
		{`["readOnlyHint"]`, `annotations must be an object`},
		{`true`, `annotations must be an object`},
		{`"readOnlyHint"`, `annotations must be an object`},
	}
	for _, c := range cases {
		if _, err := quiver.ParseAnnotations([]byte(c.ann)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseAnnotations(%s) = %v, want an error with %q", c.ann, err, c.want)
		}
		doc := `{"type": "object", "description": "d", "properties": {"_tool": {"const": "t"}}, "annotations": ` + c.ann + `}`
		if _, err := quiver.ParseSchemaTool([]byte(doc)); err == nil || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), `schema tool "t"`) {
			t.Errorf("ParseSchemaTool with annotations %s: %v, want an error naming the tool with %q", c.ann, err, c.want)
		}
	}
	// A decoded value (a YAML definition's) is read the same way.
	if _, err := quiver.ParseAnnotations(map[string]any{"readOnlyHint": "true"}); err == nil {
		t.Error(`ParseAnnotations(map{"readOnlyHint": "true"}) accepted a string`)
	}
	if a, err := quiver.ParseAnnotations(map[string]any{"readOnlyHint": false}); err != nil || a.ReadOnlyHint == nil || *a.ReadOnlyHint {
		t.Errorf("ParseAnnotations(map{readOnlyHint: false}) = %+v, %v", a, err)
	}
	if a, err := quiver.ParseAnnotations([]byte(`{}`)); err != nil || !a.IsZero() {
		t.Errorf("ParseAnnotations({}) = %+v, %v", a, err)
	}
}
