package quiver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/quiverhq/quiver/schema"
)

// Status is the outcome of a call.
type Status string

// The two statuses a result can have.
const (
	StatusSuccess Status = "success"
	StatusError   Status = "error"
)

// Code classifies an error result so that callers (the agent loop, an API client) can act on
// it without parsing text.
type Code string

// Error codes set by the dispatcher. A handler's own error has CodeToolError.
const (
	CodeUnknownTool          Code = "unknown_tool"
	CodeInvalidJSON          Code = "invalid_json"
	CodeInvalidArguments     Code = "invalid_arguments"
	CodePolicyDenied         Code = "policy_denied"
	CodeConfirmationRequired Code = "confirmation_required"
	CodeDenied               Code = "denied"
	CodeMissingVariable      Code = "missing_variable"
	CodeVariableError        Code = "variable_error"
	CodeTimeout              Code = "timeout"
	CodeCancelled            Code = "cancelled"
	CodePanic                Code = "panic"
	CodeToolError            Code = "tool_error"
	CodeInvalidOutput        Code = "invalid_output"
	CodeClientTool           Code = "client_tool"
	CodeRejected             Code = "rejected"
	// CodeResultTooLarge: a success whose structured value did not fit the result limit
	// (Dispatcher.MaxResultBytes) while its tool declares an output schema.
	CodeResultTooLarge Code = "result_too_large"
	// CodeTooManyCalls: the model asked for more calls in one step than the run allows; the
	// calls past the limit were not run.
	CodeTooManyCalls Code = "too_many_calls"
	// CodeStateConflict: the call's output could not be written where its _outputPath says
	// (a path already written, one through a value that is not an object, a state grown too
	// large); nothing was written.
	CodeStateConflict Code = "state_conflict"
	// CodeNotEntitled: the caller may not call the tool (Dispatcher.Entitled), or no tool of
	// that name is there for them: the two are answered alike, so that a caller cannot learn
	// of a tool hidden from it.
	CodeNotEntitled Code = "not_entitled"
	// CodeRateLimited: a limit on how often the caller may call (per second, minute or hour)
	// is reached; the call did not run, and the error says when to try again.
	CodeRateLimited Code = "rate_limited"
	// CodeQuotaExhausted: a daily quota of calls is used up; the call did not run, and the
	// error says when to try again.
	CodeQuotaExhausted Code = "quota_exhausted"
	// CodeBudgetExhausted: a bound on the model tokens or cost of the caller's runs is
	// reached; an agent run stops, resumably, until it has room again.
	CodeBudgetExhausted Code = "budget_exhausted"
)

// Result is what every call yields: a status, text for the model, an optional structured
// value, and on failure an error message and optionally a stack that is never shown to the model.
type Result struct {
	Status Status `json:"status"`
	// Text is the result as the model reads it. When empty, the model is shown Value, or the
	// text of Content.
	Text string `json:"result,omitempty"`
	// Value is the structured result, validated against the tool's output schema.
	Value json.RawMessage `json:"value,omitempty"`
	// Error says what went wrong, worded so the model can correct itself.
	Error string `json:"error,omitempty"`
	Code  Code   `json:"code,omitempty"`
	// Problems lists each invalid argument with its JSON pointer (CodeInvalidArguments).
	Problems []schema.Problem `json:"problems,omitempty"`
	// Stack is for people debugging a failure; it never reaches the model.
	Stack       string       `json:"stack,omitempty"`
	Content     []Content    `json:"content,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
	// Meta is a JSON object of facts about how the call ran that are not its answer (how long
	// code ran, what it printed to its console), for the people and programs that read the
	// result: the model is never shown it, so what it must read belongs in Text or Error.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// IsError reports whether r is an error result.
func (r *Result) IsError() bool { return r.Status == StatusError }

// ModelText is the text a model is given for r: the result on success, "Error: ..." on failure.
// The stack is never included.
func (r *Result) ModelText() string {
	if r.IsError() {
		return "Error: " + r.Error
	}
	if r.Text != "" {
		return r.Text
	}
	if len(r.Value) > 0 {
		return string(r.Value)
	}
	var parts []string
	for _, c := range r.Content {
		if c.Type == ContentText {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Errorf returns an error result with the given code and message.
func Errorf(code Code, format string, args ...any) *Result {
	return &Result{Status: StatusError, Code: code, Error: fmt.Sprintf(format, args...)}
}

// Text returns a success result with the given text.
func Text(s string) *Result { return &Result{Status: StatusSuccess, Text: s} }

// ContentType is the kind of a content item.
type ContentType string

// Content types. Audio and resource follow MCP's content model.
const (
	ContentText     ContentType = "text"
	ContentImage    ContentType = "image"
	ContentAudio    ContentType = "audio"
	ContentResource ContentType = "resource"
)

// Content is one item of a result's content: text, or base64 data with a MIME type.
type Content struct {
	Type     ContentType `json:"type"`
	Text     string      `json:"text,omitempty"`
	Data     string      `json:"data,omitempty"` // base64
	MimeType string      `json:"mimeType,omitempty"`
	URI      string      `json:"uri,omitempty"` // resource only
}

// TextContent returns a text content item.
func TextContent(s string) Content { return Content{Type: ContentText, Text: s} }

// ImageContent returns an image content item holding data.
func ImageContent(data []byte, mimeType string) Content {
	return Content{Type: ContentImage, Data: base64.StdEncoding.EncodeToString(data), MimeType: mimeType}
}

// Attachment is a file a tool returns: either new data (Data set, stored by the runtime
// under /attachments/ in the thread's file system) or a reference to a file already stored
// there (Type "file" with ID and Path), which passes through unchanged.
type Attachment struct {
	ID          string `json:"id,omitempty"`
	Type        string `json:"type,omitempty"` // "file" for references
	Path        string `json:"path,omitempty"`
	Name        string `json:"name"`
	MimeType    string `json:"mimeType"`
	Data        string `json:"data,omitempty"` // base64, new attachments only
	Size        int64  `json:"size,omitempty"`
	Width       int    `json:"width,omitempty"`
	Height      int    `json:"height,omitempty"`
	Description string `json:"description,omitempty"`
}

// IsRef reports whether a refers to an existing file rather than carrying new data.
func (a *Attachment) IsRef() bool { return a.Data == "" }

// MaxAttachmentBytes caps the decoded size of one new attachment.
const MaxAttachmentBytes = 32 << 20

// Validate checks a: a name without path separators, a MIME type, and either valid base64 data
// or a reference whose path is a clean absolute path inside the thread's file system.
func (a *Attachment) Validate() error {
	if a.Name == "" || strings.ContainsAny(a.Name, "/\\\x00") {
		return fmt.Errorf("name %q must be a non-empty file name without / \\ or NUL", truncate(a.Name, 60))
	}
	if _, _, err := mime.ParseMediaType(a.MimeType); err != nil {
		return fmt.Errorf("mimeType %q is not a MIME type (like image/png)", truncate(a.MimeType, 60))
	}
	if a.Width < 0 || a.Height < 0 || a.Size < 0 {
		return errors.New("width, height and size must not be negative")
	}
	if !a.IsRef() {
		if a.Path != "" || a.ID != "" {
			return errors.New("a new attachment (with data) must not have an id or path; the runtime assigns them")
		}
		n := base64.StdEncoding.DecodedLen(len(a.Data))
		if n > MaxAttachmentBytes {
			return fmt.Errorf("data is about %d bytes, over the %d byte limit", n, MaxAttachmentBytes)
		}
		if _, err := base64.StdEncoding.DecodeString(a.Data); err != nil {
			return fmt.Errorf("data is not valid standard base64: %v", err)
		}
		return nil
	}
	if a.Type != "file" {
		return fmt.Errorf("a reference must have type \"file\", got %q", truncate(a.Type, 20))
	}
	if a.ID == "" {
		return errors.New("a reference must have an id")
	}
	return CheckPath(a.Path)
}

// CheckPath checks a path in a thread's file system: absolute, clean (no . or ..
// segments, no doubled slashes), valid UTF-8, no NUL, at most 1024 bytes.
func CheckPath(p string) error {
	switch {
	case p == "":
		return errors.New("path is empty")
	case len(p) > 1024:
		return fmt.Errorf("path is %d bytes, over the 1024 byte limit", len(p))
	case !utf8.ValidString(p) || strings.ContainsRune(p, 0):
		return errors.New("path must be valid UTF-8 without NUL")
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q must be absolute in the thread's file system (start with /)", truncate(p, 80))
	case strings.Contains(p, "\\"):
		return fmt.Errorf("path %q must use / as separator", truncate(p, 80))
	case path.Clean(p) != p:
		return fmt.Errorf("path %q is not clean (no ., .. or doubled /); did you mean %q?", truncate(p, 80), truncate(path.Clean(p), 80))
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("path %q contains a control character", truncate(p, 80))
	}
	// The same rules as store.CheckPath, which the thread file system enforces: a reference
	// that passes here is one the store accepts.
	for seg := range strings.SplitSeq(p[1:], "/") {
		if len(seg) > 255 {
			return fmt.Errorf("path %q has a segment of %d bytes, over the 255 byte limit", truncate(p, 80), len(seg))
		}
	}
	return nil
}

// normalize turns whatever a handler returned into a Result: a *Result or Result as is, a
// string as text, Content items as content, json.RawMessage as a structured value, any other
// value as its JSON encoding; a non-nil error makes it an error result. Results the handler
// built itself go through checkResult; those built here are well-formed by construction.
func normalize(v any, err error) *Result {
	r := build(v, err)
	switch v.(type) {
	case *Result, Result, Content, []Content:
		if err == nil {
			if cerr := checkResult(r); cerr != nil {
				return Errorf(CodeToolError, "the tool returned an invalid result: %v", cerr)
			}
		}
	}
	return r
}

func build(v any, err error) *Result {
	if err != nil {
		return errorResult(err)
	}
	switch x := v.(type) {
	case nil:
		return &Result{Status: StatusSuccess}
	case *Result:
		if x == nil {
			return &Result{Status: StatusSuccess}
		}
		r := *x
		if r.Status == "" {
			r.Status = StatusSuccess
			if r.Error != "" {
				r.Status = StatusError
			}
		}
		if r.Status == StatusError && r.Code == "" {
			r.Code = CodeToolError
		}
		return &r
	case Result:
		return build(&x, nil)
	case string:
		return &Result{Status: StatusSuccess, Text: x}
	case Content:
		return &Result{Status: StatusSuccess, Content: []Content{x}}
	case []Content:
		return &Result{Status: StatusSuccess, Content: x}
	case json.RawMessage:
		if !json.Valid(x) {
			return Errorf(CodeToolError, "the tool returned a json.RawMessage that is not valid JSON")
		}
		return &Result{Status: StatusSuccess, Value: x}
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return Errorf(CodeToolError, "the tool returned a %T that cannot be encoded as JSON: %v", v, err)
		}
		return &Result{Status: StatusSuccess, Value: b}
	}
}

// ToolError is an error that carries the code of the error result it becomes. Handlers return
// one, through [Fail], to classify a failure (CodeInvalidArguments for a value the schema could
// not rule out, say).
type ToolError struct {
	Code    Code
	Message string
}

// Error returns the message.
func (e *ToolError) Error() string { return e.Message }

// Fail returns a *ToolError with the given code and message.
func Fail(code Code, format string, args ...any) error {
	return &ToolError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func errorResult(err error) *Result {
	code := CodeToolError
	var te *ToolError
	if are, ok := errors.AsType[*AuthorizationRequiredError](err); ok {
		return authorizationResult(are)
	}
	switch {
	case errors.As(err, &te):
		code = te.Code
	case errors.Is(err, context.DeadlineExceeded):
		code = CodeTimeout
	case errors.Is(err, context.Canceled):
		code = CodeCancelled
	}
	return &Result{Status: StatusError, Code: code, Error: err.Error()}
}

// checkResult validates what a handler produced: status, content items and attachments.
func checkResult(r *Result) error {
	if r.Status != StatusSuccess && r.Status != StatusError {
		return fmt.Errorf("status %q is neither success nor error", truncate(string(r.Status), 20))
	}
	if r.Status == StatusError && r.Error == "" {
		r.Error = "the tool failed without saying why"
	}
	if r.Value != nil && !json.Valid(r.Value) {
		return errors.New("value is not valid JSON")
	}
	if r.Meta != nil && !isJSONObject(r.Meta) {
		return errors.New("meta is not a JSON object")
	}
	for i, c := range r.Content {
		switch c.Type {
		case ContentText:
		case ContentImage, ContentAudio:
			if _, err := base64.StdEncoding.DecodeString(c.Data); err != nil || c.MimeType == "" {
				return fmt.Errorf("content[%d]: %s needs base64 data and a mimeType", i, c.Type)
			}
		case ContentResource:
			if c.URI == "" {
				return fmt.Errorf("content[%d]: resource needs a uri", i)
			}
		default:
			return fmt.Errorf("content[%d]: unknown type %q (text, image, audio, resource)", i, truncate(string(c.Type), 20))
		}
	}
	for i := range r.Attachments {
		if err := r.Attachments[i].Validate(); err != nil {
			return fmt.Errorf("attachment[%d]: %w", i, err)
		}
	}
	return nil
}

// isJSONObject reports whether b is one valid JSON object: what MCP's _meta and the API's
// meta are, so that a tool's metadata reaches every door in the same shape.
func isJSONObject(b []byte) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(b, &obj) == nil && obj != nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
