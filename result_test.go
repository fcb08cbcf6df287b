package quiver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
)

func TestResultNormalisation(t *testing.T) {
	png := []byte{0x89, 'P', 'N', 'G'}
	tests := []struct {
		name     string
		value    any
		err      error
		status   quiver.Status
		code     quiver.Code
		text     string
		value2   string // JSON value expected
		contents int
		errHas   string
	}{
		{name: "string", value: "hello", status: quiver.StatusSuccess, text: "hello"},
		{name: "empty string", value: "", status: quiver.StatusSuccess},
		{name: "nil", value: nil, status: quiver.StatusSuccess},
		{name: "*Result", value: &quiver.Result{Text: "t", Value: json.RawMessage(`{"a":1}`)}, status: quiver.StatusSuccess, text: "t", value2: `{"a":1}`},
		{name: "nil *Result", value: (*quiver.Result)(nil), status: quiver.StatusSuccess},
		{name: "Result value", value: quiver.Result{Text: "v"}, status: quiver.StatusSuccess, text: "v"},
		{name: "*Result with error only", value: &quiver.Result{Error: "quota"}, status: quiver.StatusError, code: quiver.CodeToolError, errHas: "quota"},
		{name: "*Result error keeps code", value: quiver.Errorf(quiver.CodeInvalidArguments, "bad %s", "x"), status: quiver.StatusError,
			code: quiver.CodeInvalidArguments, errHas: "bad x"},
		{name: "*Result error without text", value: &quiver.Result{Status: quiver.StatusError}, status: quiver.StatusError,
			code: quiver.CodeToolError, errHas: "without saying why"},
		{name: "*Result unknown status", value: &quiver.Result{Status: "maybe"}, status: quiver.StatusError, code: quiver.CodeToolError,
			errHas: "invalid result"},
		{name: "*Result invalid value", value: &quiver.Result{Value: json.RawMessage(`{x`)}, status: quiver.StatusError, code: quiver.CodeToolError,
			errHas: "not valid JSON"},
		// Metadata reaches MCP as _meta, an object, and the API as meta: an object too.
		{name: "*Result with meta", value: &quiver.Result{Text: "t", Meta: json.RawMessage(`{"duration_ms":1.5}`)}, status: quiver.StatusSuccess, text: "t"},
		{name: "*Result meta an array", value: &quiver.Result{Text: "t", Meta: json.RawMessage(`[1]`)}, status: quiver.StatusError, code: quiver.CodeToolError,
			errHas: "meta is not a JSON object"},
		{name: "*Result meta null", value: &quiver.Result{Text: "t", Meta: json.RawMessage(`null`)}, status: quiver.StatusError, code: quiver.CodeToolError,
			errHas: "meta is not a JSON object"},
		{name: "*Result meta invalid", value: &quiver.Result{Text: "t", Meta: json.RawMessage(`{"a":`)}, status: quiver.StatusError, code: quiver.CodeToolError,
			errHas: "meta is not a JSON object"},
		{name: "Text helper", value: quiver.Text("plain"), status: quiver.StatusSuccess, text: "plain"},
		{name: "Content", value: quiver.TextContent("c"), status: quiver.StatusSuccess, contents: 1},
		{name: "[]Content", value: []quiver.Content{quiver.TextContent("a"), quiver.ImageContent(png, "image/png")},
			status: quiver.StatusSuccess, contents: 2},
		{name: "audio content", value: quiver.Content{Type: quiver.ContentAudio, Data: "AAAA", MimeType: "audio/wav"},
			status: quiver.StatusSuccess, contents: 1},
		{name: "resource content", value: quiver.Content{Type: quiver.ContentResource, URI: "file:///a.txt", Text: "a"},
			status: quiver.StatusSuccess, contents: 1},
		{name: "image with bad base64", value: quiver.Content{Type: quiver.ContentImage, Data: "not base64!", MimeType: "image/png"},
			status: quiver.StatusError, code: quiver.CodeToolError, errHas: "content[0]"},
		{name: "image without MIME type", value: []quiver.Content{quiver.TextContent("x"), {Type: quiver.ContentImage, Data: "AAAA"}},
			status: quiver.StatusError, code: quiver.CodeToolError, errHas: "content[1]"},
		{name: "resource without URI", value: quiver.Content{Type: quiver.ContentResource}, status: quiver.StatusError,
			code: quiver.CodeToolError, errHas: "uri"},
		{name: "unknown content type", value: quiver.Content{Type: "video"}, status: quiver.StatusError, code: quiver.CodeToolError,
			errHas: `unknown type "video"`},
		{name: "json.RawMessage valid", value: json.RawMessage(`[1,"two",null]`), status: quiver.StatusSuccess, value2: `[1,"two",null]`},
		{name: "json.RawMessage invalid", value: json.RawMessage(`{"a":`), status: quiver.StatusError, code: quiver.CodeToolError,
			errHas: "not valid JSON"},
		{name: "struct", value: struct {
			A int    `json:"a"`
			B string `json:"b,omitempty"`
		}{A: 1}, status: quiver.StatusSuccess, value2: `{"a":1}`},
		{name: "map", value: map[string]any{"k": []int{1}}, status: quiver.StatusSuccess, value2: `{"k":[1]}`},
		{name: "number", value: 3.5, status: quiver.StatusSuccess, value2: `3.5`},
		{name: "bool", value: true, status: quiver.StatusSuccess, value2: `true`},
		{name: "unencodable chan", value: make(chan int), status: quiver.StatusError, code: quiver.CodeToolError, errHas: "cannot be encoded as JSON"},
		{name: "unencodable func in struct", value: struct{ F func() }{F: func() {}}, status: quiver.StatusError, code: quiver.CodeToolError,
			errHas: "cannot be encoded"},
		{name: "Go error", err: errors.New("db timeout"), status: quiver.StatusError, code: quiver.CodeToolError, errHas: "db timeout"},
		{name: "error wins over value", value: "ignored", err: errors.New("failed"), status: quiver.StatusError, code: quiver.CodeToolError,
			errHas: "failed"},
		{name: "Fail code", err: quiver.Fail(quiver.CodeInvalidArguments, "city %q unknown", "Xyz"), status: quiver.StatusError,
			code: quiver.CodeInvalidArguments, errHas: `city "Xyz" unknown`},
		{name: "wrapped Fail", err: fmt.Errorf("lookup: %w", quiver.Fail(quiver.CodeDenied, "no access")), status: quiver.StatusError,
			code: quiver.CodeDenied, errHas: "lookup: no access"},
		{name: "deadline exceeded", err: context.DeadlineExceeded, status: quiver.StatusError, code: quiver.CodeTimeout},
		{name: "wrapped deadline", err: fmt.Errorf("http: %w", context.DeadlineExceeded), status: quiver.StatusError, code: quiver.CodeTimeout},
		{name: "canceled", err: context.Canceled, status: quiver.StatusError, code: quiver.CodeCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &quiver.Dispatcher{Registry: newRegistry(t, rawTool(t, "t", "", returning(tt.value, tt.err)))}
			r := dispatch(t, d, "t", "")
			if r.Status != tt.status || r.Code != tt.code {
				t.Fatalf("status %q code %q (%s), want %q %q", r.Status, r.Code, r.Error, tt.status, tt.code)
			}
			if r.Text != tt.text {
				t.Errorf("text %q, want %q", r.Text, tt.text)
			}
			if tt.value2 == "" && len(r.Value) > 0 {
				t.Errorf("unexpected value %s", r.Value)
			}
			if tt.value2 != "" && !jsonEqual(t, r.Value, []byte(tt.value2)) {
				t.Errorf("value %s, want %s", r.Value, tt.value2)
			}
			if len(r.Content) != tt.contents {
				t.Errorf("%d content items, want %d", len(r.Content), tt.contents)
			}
			if tt.status == quiver.StatusError && (r.Error == "" || !strings.Contains(r.Error, tt.errHas)) {
				t.Errorf("error %q does not contain %q", r.Error, tt.errHas)
			}
			if tt.status == quiver.StatusSuccess && r.Error != "" {
				t.Errorf("success with error text %q", r.Error)
			}
			if _, err := json.Marshal(r); err != nil {
				t.Errorf("result cannot be encoded: %v", err)
			}
		})
	}
}

func TestAttachments(t *testing.T) {
	tests := []struct {
		name   string
		att    quiver.Attachment
		errHas string // "" for valid
	}{
		{"new attachment", quiver.Attachment{Name: "chart.png", MimeType: "image/png", Data: "iVBORw0KGgo=", Width: 10, Height: 5}, ""},
		{"reference", quiver.Attachment{ID: "fil_1", Type: "file", Path: "/attachments/chart.png", Name: "chart.png",
			MimeType: "image/png", Size: 1234, Description: "a chart"}, ""},
		{"mime with parameters", quiver.Attachment{Name: "a.txt", MimeType: "text/plain; charset=utf-8", Data: "aGk="}, ""},
		{"bad base64", quiver.Attachment{Name: "a.png", MimeType: "image/png", Data: "%%%not base64"}, "base64"},
		{"traversal", quiver.Attachment{ID: "f", Type: "file", Path: "/attachments/../etc/passwd", Name: "passwd", MimeType: "text/plain"}, "not clean"},
		{"leading traversal", quiver.Attachment{ID: "f", Type: "file", Path: "/../etc", Name: "etc", MimeType: "text/plain"}, "not clean"},
		{"relative path", quiver.Attachment{ID: "f", Type: "file", Path: "attachments/a.png", Name: "a.png", MimeType: "image/png"}, "absolute"},
		{"backslash path", quiver.Attachment{ID: "f", Type: "file", Path: `/attachments\a.png`, Name: "a.png", MimeType: "image/png"}, "separator"},
		{"name with slash", quiver.Attachment{Name: "../a.png", MimeType: "image/png", Data: "AAAA"}, "name"},
		{"name with backslash", quiver.Attachment{Name: `a\b.png`, MimeType: "image/png", Data: "AAAA"}, "name"},
		{"empty name", quiver.Attachment{MimeType: "image/png", Data: "AAAA"}, "name"},
		{"bad MIME type", quiver.Attachment{Name: "a", MimeType: "not a mime", Data: "AAAA"}, "mimeType"},
		{"negative size", quiver.Attachment{Name: "a", MimeType: "image/png", Data: "AAAA", Width: -1}, "negative"},
		{"new with path", quiver.Attachment{Name: "a", MimeType: "image/png", Data: "AAAA", Path: "/attachments/a"}, "must not have an id or path"},
		{"reference without type", quiver.Attachment{ID: "f", Path: "/a", Name: "a", MimeType: "image/png"}, `type "file"`},
		{"reference without id", quiver.Attachment{Type: "file", Path: "/a", Name: "a", MimeType: "image/png"}, "id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.att
			err := a.Validate()
			if tt.errHas == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.errHas)
			}
			if a.IsRef() != (a.Data == "") {
				t.Error("IsRef disagrees with Data")
			}
			// Through the dispatcher, an invalid attachment makes the result an error.
			res := &quiver.Result{Text: "see attached", Attachments: []quiver.Attachment{tt.att}}
			d := &quiver.Dispatcher{Registry: newRegistry(t, rawTool(t, "t", "", returning(res, nil)))}
			r := dispatch(t, d, "t", "{}")
			if tt.errHas == "" {
				wantSuccess(t, r)
				if len(r.Attachments) != 1 || r.Attachments[0] != tt.att {
					t.Errorf("attachment changed: %+v", r.Attachments)
				}
				return
			}
			wantError(t, r, quiver.CodeToolError, "attachment[0]", tt.errHas)
		})
	}
}

func TestCheckPath(t *testing.T) {
	tests := []struct {
		path   string
		errHas string
	}{
		{"/", ""},
		{"/attachments/a.png", ""},
		{"/a/b/c.txt", ""},
		{"/dir with space/é.txt", ""},
		{"/.hidden", ""},
		{"", "empty"},
		{"a/b", "absolute"},
		{"./a", "absolute"},
		{"/a/../b", "not clean"},
		{"/..", "not clean"},
		{"/../etc/passwd", "not clean"},
		{"/a/./b", "not clean"},
		{"/a//b", "not clean"},
		{"/a/", "not clean"},
		{`/a\..\b`, "separator"},
		{"/a\x00b", "NUL"},
		{"/a\xffb", "UTF-8"},
		{"/" + strings.Repeat("a", 1024), "1024"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			err := quiver.CheckPath(tt.path)
			if tt.errHas == "" {
				if err != nil {
					t.Errorf("CheckPath(%q) = %v", tt.path, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("CheckPath(%q) = %v, want error containing %q", tt.path, err, tt.errHas)
			}
			if err != nil && len(err.Error()) > 400 {
				t.Errorf("error too long: %d bytes", len(err.Error()))
			}
		})
	}
	// The suggestion for an unclean path is the cleaned path.
	if err := quiver.CheckPath("/a/b/../c"); err == nil || !strings.Contains(err.Error(), `did you mean "/a/c"`) {
		t.Errorf("CheckPath suggestion: %v", err)
	}
}

func TestModelText(t *testing.T) {
	tests := []struct {
		name string
		r    quiver.Result
		want string
	}{
		{"text", quiver.Result{Status: quiver.StatusSuccess, Text: "t", Value: json.RawMessage(`1`)}, "t"},
		{"value", quiver.Result{Status: quiver.StatusSuccess, Value: json.RawMessage(`{"a":1}`)}, `{"a":1}`},
		{"content", quiver.Result{Status: quiver.StatusSuccess, Content: []quiver.Content{
			quiver.TextContent("one"), quiver.ImageContent([]byte{1}, "image/png"), quiver.TextContent("two")}}, "one\ntwo"},
		{"empty", quiver.Result{Status: quiver.StatusSuccess}, ""},
		{"error", quiver.Result{Status: quiver.StatusError, Error: "bad", Stack: "goroutine 1 [running]", Text: "partial"}, "Error: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.ModelText(); got != tt.want {
				t.Errorf("ModelText = %q, want %q", got, tt.want)
			}
		})
	}
	r := quiver.Errorf(quiver.CodeTimeout, "took %d s", 3)
	if !r.IsError() || r.Code != quiver.CodeTimeout || r.Error != "took 3 s" {
		t.Errorf("Errorf = %+v", r)
	}
	var te *quiver.ToolError
	if err := quiver.Fail(quiver.CodeDenied, "no %s", "way"); !errors.As(err, &te) || te.Code != quiver.CodeDenied || err.Error() != "no way" {
		t.Errorf("Fail = %#v", err)
	}
}
