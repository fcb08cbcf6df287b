package store_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// TestStoredResultHoldsTheModelTextOnce: the text a tool message's content holds is left out
// of the stored result, whichever field it comes from, and reading puts it back exactly.
func TestStoredResultHoldsTheModelTextOnce(t *testing.T) {
	big := strings.Repeat("x<y>&\"z\"\n", 20000) // 180 KB, with what JSON escapes
	value := `{"a": [1, 2], "s": "` + strings.Repeat("v", 100000) + `"}`
	tests := []struct {
		name    string
		content string
		result  store.ToolResult
		// once: the stored result leaves the content's text out.
		once bool
	}{
		{"error", "Error: " + big, store.ToolResult{Status: "error", Code: "tool_error", Error: big, Stack: "at f (x.js:1)"}, true},
		{"text", big, store.ToolResult{Status: "success", Text: big, Value: json.RawMessage(`{"n":1}`)}, true},
		{"value, as written", value, store.ToolResult{Status: "success", Value: json.RawMessage(value)}, true},
		{"content text items", big + "\n\n" + "b\nc",
			store.ToolResult{Status: "success", Content: mustJSON(t, []map[string]string{
				{"type": "text", "text": big}, {"type": "image", "data": "iVBORw0K", "mimeType": "image/png"},
				{"type": "text"}, {"type": "text", "text": "b\nc"}})}, true},
		{"content that is not the items' text", "something else",
			store.ToolResult{Status: "success", Content: mustJSON(t, []map[string]string{{"type": "text", "text": "a"}})}, false},
		{"an error that is not the content", "Error: other", store.ToolResult{Status: "error", Error: "boom"}, false},
		{"no content", "", store.ToolResult{Status: "success", Text: "t"}, false},
		{"content without the prefix", big, store.ToolResult{Status: "error", Error: big}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stored, err := store.EncodeResult(tc.content, &tc.result)
			if err != nil {
				t.Fatal(err)
			}
			if once := len(stored) < len(tc.content)/2; once != tc.once {
				t.Errorf("stored result of %d bytes with content of %d bytes: left out %v, want %v", len(stored), len(tc.content), once, tc.once)
			}
			got, err := store.DecodeResult(tc.content, stored)
			if err != nil {
				t.Fatal(err)
			}
			if !sameResult(t, got, &tc.result) {
				t.Errorf("read back %+v\nwant %+v", abbrev(got), abbrev(&tc.result))
			}
		})
	}
}

// TestStoredResultReadsEarlierRows: a result stored whole (before results left their model
// text to the content) reads as it was, and a damaged marker is an error, not a wrong result.
func TestStoredResultReadsEarlierRows(t *testing.T) {
	got, err := store.DecodeResult("Error: boom", []byte(`{"status":"error","error":"boom","code":"tool_error"}`))
	if err != nil || got.Error != "boom" || got.Status != "error" || got.Code != "tool_error" {
		t.Fatalf("earlier row: %+v, %v", got, err)
	}
	for _, bad := range []string{
		`{"status":"success","in_content":"elsewhere"}`,
		`{"status":"success","in_content":"content","content":[{"type":"text"}],"text_lens":[5]}`,
		`{"status":"success","in_content":"content","content":[{"type":"text"}],"text_lens":[1,1]}`,
	} {
		if r, err := store.DecodeResult("abc", []byte(bad)); err == nil {
			t.Errorf("%s read as %+v, want an error", bad, r)
		}
	}
}

// TestStoredResultRefusesInvalidValue: leaving a value out must not let invalid JSON in.
func TestStoredResultRefusesInvalidValue(t *testing.T) {
	if _, err := store.EncodeResult("{not json", &store.ToolResult{Status: "success", Value: json.RawMessage("{not json")}); err == nil {
		t.Fatal("an invalid value was stored")
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameResult compares two results, their JSON fields as JSON values.
func sameResult(t *testing.T, a, b *store.ToolResult) bool {
	t.Helper()
	x, y := *a, *b
	for _, f := range [][2]*json.RawMessage{{&x.Value, &y.Value}, {&x.Content, &y.Content}, {&x.Attachments, &y.Attachments}, {&x.Problems, &y.Problems}} {
		if !jsonSame(t, *f[0], *f[1]) {
			return false
		}
		*f[0], *f[1] = nil, nil
	}
	return reflect.DeepEqual(x, y)
}

func jsonSame(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%.80s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%.80s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

func abbrev(r *store.ToolResult) store.ToolResult {
	c := *r
	short := func(s string) string {
		if len(s) > 40 {
			return s[:40] + "..."
		}
		return s
	}
	c.Text, c.Error = short(c.Text), short(c.Error)
	c.Value, c.Content = bytes.Clone(c.Value[:min(len(c.Value), 40)]), bytes.Clone(c.Content[:min(len(c.Content), 40)])
	return c
}
