package jsfunc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/sandbox"
	"github.com/quiverhq/quiver/schema"
)

// The keys of a ToolResult, and of its two kinds of attachments (a new one and a reference).
var (
	toolResultKeys = []string{"status", "result", "error", "stack", "attachments"}
	newAttachment  = []string{"name", "mimeType", "data", "width", "height", "description"}
	attachmentRef  = []string{"id", "type", "path", "name", "mimeType", "size", "width", "height", "description"}
)

// toolResultFields returns the fields of v when it is a ToolResult: a JSON object whose status
// is "success" or "error" and whose every key is one of toolResultKeys. Any other value (an
// object with another key or status included) is not one, and keeps its plain meaning.
func toolResultFields(v json.RawMessage) (map[string]json.RawMessage, bool) {
	if len(v) == 0 || v[0] != '{' {
		return nil, false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(v, &fields) != nil {
		return nil, false
	}
	for k := range fields {
		if !slices.Contains(toolResultKeys, k) {
			return nil, false
		}
	}
	var status string
	if json.Unmarshal(fields["status"], &status) != nil || (status != "success" && status != "error") {
		return nil, false
	}
	return fields, true
}

// toolResult reads a ToolResult into the call's result, as a Go tool's quiver.Result: the
// dispatcher then checks its attachments (quiver.Attachment.Validate) and the recorder stores
// the new ones in the thread's file system. A field of the wrong type is an error result.
func (f *function) toolResult(fields map[string]json.RawMessage, res *sandbox.Result) *quiver.Result {
	r := &quiver.Result{Status: quiver.StatusSuccess}
	var status string
	_ = json.Unmarshal(fields["status"], &status) // checked by toolResultFields
	if status == "error" {
		r.Status, r.Code = quiver.StatusError, quiver.CodeToolError
	}
	var stack string
	err := firstError(
		optionalString(fields, "result", &r.Text),
		optionalString(fields, "error", &r.Error),
		optionalString(fields, "stack", &stack),
		func() error {
			var err error
			r.Attachments, err = attachments(fields["attachments"])
			return err
		}())
	if err != nil {
		return quiver.Errorf(quiver.CodeToolError, "tool %s returned a ToolResult that is not valid: %v", f.name, err)
	}
	if r.IsError() {
		// The stack and the console output, for people: the model reads the error.
		r.Stack = strings.TrimSpace(stack + "\n" + debugText(res))
	} else {
		r.Value = f.structured(r.Text)
	}
	return r
}

// structured is the value a successful ToolResult's result stands for when the tool declares
// an output schema and the result is the JSON text of a value that schema validates (seed 003
// returns JSON.stringify(value) as the result); nil otherwise, so that the result stays text
// and the dispatcher says, as it always has, that no structured value came back.
func (f *function) structured(text string) json.RawMessage {
	out := f.tool.CompiledOutput()
	if out == nil || text == "" {
		return nil
	}
	v, err := schema.Decode([]byte(text))
	if err != nil || out.Validate(v) != nil {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(text)) != nil {
		return nil
	}
	return b.Bytes()
}

// errorObject reports whether v is seed 001's error convention, an object whose only key is
// error, a string ({ error: "API returned 401" }), and returns the string. Any other shape
// ({error: 5}, {error: "x", other: 1}) is not, and keeps its plain meaning as a value.
func errorObject(v json.RawMessage) (string, bool) {
	if len(v) == 0 || v[0] != '{' {
		return "", false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(v, &fields) != nil || len(fields) != 1 {
		return "", false
	}
	raw, ok := fields["error"]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var msg string
	if json.Unmarshal(raw, &msg) != nil {
		return "", false
	}
	return msg, true
}

// errorObjectResult is the error result of seed 001's { error: msg }.
func (f *function) errorObjectResult(msg string, res *sandbox.Result) *quiver.Result {
	if msg == "" {
		msg = fmt.Sprintf("tool %s returned an error without a message ({ error: \"\" })", f.name)
	}
	return &quiver.Result{Status: quiver.StatusError, Code: quiver.CodeToolError, Error: msg, Stack: debugText(res)}
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// optionalString reads fields[key] into dst: a string, or absent (null counts as absent).
func optionalString(fields map[string]json.RawMessage, key string, dst *string) error {
	raw, ok := fields[key]
	if !ok || string(raw) == "null" {
		return nil
	}
	if json.Unmarshal(raw, dst) != nil {
		return fmt.Errorf("%s must be a string, got %s", key, kind(raw))
	}
	return nil
}

// attachments reads a ToolResult's attachments: a list of new attachments (they have data)
// and references to files of the thread (they have none).
func attachments(raw json.RawMessage) ([]quiver.Attachment, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, fmt.Errorf("attachments must be a list, got %s", kind(raw))
	}
	out := make([]quiver.Attachment, len(items))
	for i, item := range items {
		if err := readAttachment(item, &out[i]); err != nil {
			return nil, fmt.Errorf("attachments[%d]%w", i, err)
		}
	}
	return out, nil
}

// readAttachment reads one item of a ToolResult's attachments into a; its errors begin where
// the item's index ends (" must be...", ".name must be...").
func readAttachment(item json.RawMessage, a *quiver.Attachment) error {
	var fields map[string]json.RawMessage
	if item[0] != '{' || json.Unmarshal(item, &fields) != nil {
		return fmt.Errorf(" must be an object, got %s", kind(item))
	}
	allowed, what := attachmentRef, "a reference to a file of the thread (no data) has "
	if d, ok := fields["data"]; ok && string(d) != "null" {
		allowed, what = newAttachment, "a new attachment (with data) has "
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		v := fields[k]
		if !slices.Contains(allowed, k) {
			return fmt.Errorf(" has an unknown key %q: %s%s", k, what, strings.Join(allowed, ", "))
		}
		if string(v) == "null" {
			continue
		}
		if err := attachmentField(a, k, v); err != nil {
			return fmt.Errorf(".%s %v", k, err)
		}
	}
	return nil
}

// attachmentField sets the field k of a, one of the keys an attachment may have, from v.
func attachmentField(a *quiver.Attachment, k string, v json.RawMessage) error {
	switch k {
	case "name":
		return str(v, &a.Name)
	case "mimeType":
		return str(v, &a.MimeType)
	case "data":
		return str(v, &a.Data)
	case "description":
		return str(v, &a.Description)
	case "id":
		return str(v, &a.ID)
	case "type":
		return str(v, &a.Type)
	case "path":
		return str(v, &a.Path)
	case "size":
		return whole(v, &a.Size)
	case "width", "height":
		var n int64
		if err := whole(v, &n); err != nil {
			return err
		}
		if n > 1<<31-1 {
			return fmt.Errorf("must be at most %d, got %d", 1<<31-1, n)
		}
		if k == "width" {
			a.Width = int(n)
		} else {
			a.Height = int(n)
		}
	}
	return nil
}

func str(raw json.RawMessage, dst *string) error {
	if json.Unmarshal(raw, dst) != nil {
		return fmt.Errorf("must be a string, got %s", kind(raw))
	}
	return nil
}

// whole reads a non-negative whole number.
func whole(raw json.RawMessage, dst *int64) error {
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		return fmt.Errorf("must be a number, got %s", kind(raw))
	}
	if f < 0 || f != float64(int64(f)) || f > 1<<53 {
		return fmt.Errorf("must be a whole number of at least 0, got %s", raw)
	}
	*dst = int64(f)
	return nil
}

// kind names a JSON value's type, for error messages.
func kind(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
