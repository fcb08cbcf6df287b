package quiver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/internal/backendtest"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

const (
	limitWS  = "wsp_limit"
	huge     = 5_000_000
	resultMB = quiver.DefaultMaxResultBytes
	// slack is what the limit lets through on top of itself: the markers and notes, and the
	// JSON framing of what is stored.
	slack = 8 << 10
)

var hugeText = strings.Repeat("x", huge)

// limitTools are tools that return far more than the result limit, one way each, as the
// tools of issue 11 did (run_code's `throw new Error("x".repeat(5e6))`).
func limitTools(t testing.TB) *quiver.Registry {
	type none struct{}
	result := func(name string, r *quiver.Result) *quiver.Tool {
		return quiver.Func(name, "returns a fixed result", func(context.Context, none) (*quiver.Result, error) { return r, nil })
	}
	png := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	items := make([]quiver.Content, 10_000)
	for i := range items {
		items[i] = quiver.TextContent(fmt.Sprintf("%01000d", i))
	}
	problems := make([]schema.Problem, 200_000)
	for i := range problems {
		problems[i] = schema.Problem{Pointer: fmt.Sprintf("/items/%06d", i), Message: "expected integer, got string"}
	}
	runCodeMeta, _ := json.Marshal(map[string]any{"status": "error", "duration_ms": 1.5, "logs": []map[string]string{{"level": "log", "text": "before"}}})
	hugeMeta, _ := json.Marshal(map[string]any{"duration_ms": 1.5, "logs": []map[string]string{{"level": "log", "text": hugeText}}})
	return newRegistry(t,
		quiver.Func("huge_error", "fails at length", func(context.Context, none) (string, error) { return "", errors.New(hugeText) }),
		quiver.Func("huge_text", "talks at length", func(context.Context, none) (string, error) { return hugeText, nil }),
		result("huge_stack", &quiver.Result{Status: quiver.StatusError, Error: "boom", Stack: hugeText}),
		result("huge_error_and_stack", &quiver.Result{Status: quiver.StatusError, Error: hugeText[:3_000_000], Stack: strings.Repeat("s", 3_000_000)}),
		result("run_code_like", &quiver.Result{Status: quiver.StatusError, Code: quiver.CodeToolError,
			Error: "the code ended with status error: Error: " + hugeText, Meta: runCodeMeta}),
		result("huge_meta", &quiver.Result{Status: quiver.StatusSuccess, Text: "ran", Meta: hugeMeta}),
		quiver.Func("many_parts", "returns 10,000 content items", func(context.Context, none) ([]quiver.Content, error) { return items, nil }),
		quiver.Func("huge_value", "returns a large JSON document", func(context.Context, none) (json.RawMessage, error) {
			return json.RawMessage(`{"rows":"` + hugeText + `"}`), nil
		}),
		quiver.Func("huge_typed_value", "returns a large typed value", func(context.Context, none) ([]string, error) {
			return []string{hugeText}, nil
		}),
		result("big_attachments", &quiver.Result{Status: quiver.StatusSuccess, Text: "three plots", Attachments: []quiver.Attachment{
			{Name: "small.png", MimeType: "image/png", Data: png(1000)},
			{Name: "big-1.png", MimeType: "image/png", Data: png(2 << 20)},
			{Name: "big-2.png", MimeType: "image/png", Data: png(2 << 20)},
		}}),
		result("big_image", &quiver.Result{Status: quiver.StatusSuccess, Content: []quiver.Content{
			quiver.TextContent("the picture:"), {Type: quiver.ContentImage, Data: png(3 << 20), MimeType: "image/png"}}}),
		result("many_problems", &quiver.Result{Status: quiver.StatusError, Code: quiver.CodeInvalidArguments, Error: "invalid items", Problems: problems}),
		result("small", &quiver.Result{Status: quiver.StatusSuccess, Text: "fine", Value: json.RawMessage(`{"ok":true}`), Meta: json.RawMessage(`{"duration_ms":2}`),
			Attachments: []quiver.Attachment{{Name: "small.png", MimeType: "image/png", Data: png(100)}}}),
	)
}

type limitCase struct {
	tool   string
	status quiver.Status
	code   quiver.Code
	// cut names the parts that end with a truncation marker, with their size before the cut.
	cut map[string]int
	// note is in the text the model reads (the stored message's content).
	note []string
	// value: the result keeps a structured value; meta: its metadata; attachments: how many
	// it keeps.
	value, meta bool
	attachments int
}

var limitCases = []limitCase{
	{tool: "huge_error", status: quiver.StatusError, code: quiver.CodeToolError, cut: map[string]int{"error": huge}},
	{tool: "huge_text", status: quiver.StatusSuccess, cut: map[string]int{"text": huge}},
	{tool: "huge_stack", status: quiver.StatusError, code: quiver.CodeToolError, cut: map[string]int{"stack": huge}},
	// Two large parts share the limit.
	{tool: "huge_error_and_stack", status: quiver.StatusError, code: quiver.CodeToolError, cut: map[string]int{"error": 3_000_000, "stack": 3_000_000}},
	// A huge error, as run_code returns a huge throw: the error is cut, the small metadata kept.
	{tool: "run_code_like", status: quiver.StatusError, code: quiver.CodeToolError,
		cut: map[string]int{"error": len("the code ended with status error: Error: ") + huge}, meta: true},
	// Metadata cannot be cut as JSON: over its share it goes, and the text stays.
	{tool: "huge_meta", status: quiver.StatusSuccess,
		note: []string{"the metadata (5,000,0", "bytes) was left out"}},
	{tool: "many_parts", status: quiver.StatusSuccess, cut: map[string]int{"content": 1000},
		note: []string{"of 10,000 content items (", "bytes) were left out"}},
	{tool: "huge_value", status: quiver.StatusSuccess, cut: map[string]int{"text": huge + 11},
		note: []string{"beginning of a structured value of 5,000,011 bytes, as text: it is not valid JSON"}},
	{tool: "huge_typed_value", status: quiver.StatusError, code: quiver.CodeResultTooLarge,
		cut:  map[string]int{"error": len("the result of huge_typed_value is 5,000,004 bytes, over the result limit of 1 MiB, and its structured value (5,000,004 bytes) cannot be cut; its beginning, as text (not valid JSON):\n") + huge + 4},
		note: []string{"cannot be cut"}},
	{tool: "big_attachments", status: quiver.StatusSuccess, attachments: 1,
		note: []string{`2 of 3 attachments were left out: "big-1.png" (2,796,204 bytes), "big-2.png" (2,796,204 bytes)`}},
	{tool: "big_image", status: quiver.StatusSuccess, note: []string{"1 of 2 content items (", "bytes) were left out"}},
	{tool: "many_problems", status: quiver.StatusError, code: quiver.CodeInvalidArguments, cut: map[string]int{"problem": 28},
		note: []string{"of 200,000 problems were left out"}},
	{tool: "small", status: quiver.StatusSuccess, value: true, attachments: 1, meta: true},
}

// TestResultLimit reproduces issue 11: results of every shape, megabytes each, through a
// Dispatcher recording into a thread (the agent loop's recorder) and into a platform.Recorder
// (MCP's), on SQLite and PostgreSQL. What the caller gets and what is stored stay within the
// limit (plus markers and notes), every marker says how much it cut, and the stored message
// holds the model's text once.
func TestResultLimit(t *testing.T) {
	reg := limitTools(t)
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		for _, recorder := range []string{"thread", "server"} {
			for _, tc := range limitCases {
				t.Run(recorder+"/"+tc.tool, func(t *testing.T) {
					r, msg := dispatchRecorded(t, st, reg, recorder, tc.tool, 0)
					checkLimited(t, tc, r, msg)
				})
			}
		}
	})
}

// TestResultLimitIsTheOperators: MaxResultBytes sets the limit, and the marker says which.
func TestResultLimitIsTheOperators(t *testing.T) {
	reg := limitTools(t)
	for _, tc := range []struct {
		limit int
		says  string
	}{{64 << 10, "the result limit is 64 KiB"}, {3 << 20, "the result limit is 3 MiB"}, {100_000, "the result limit is 100,000 bytes"}} {
		d := &quiver.Dispatcher{Registry: reg, MaxResultBytes: tc.limit}
		r := dispatch(t, d, "huge_text", `{}`)
		if n := strings.Index(r.Text, "…[truncated: "); n != tc.limit || !strings.Contains(r.Text, tc.says) {
			t.Errorf("limit %d: kept %d bytes, marker %q", tc.limit, n, r.Text[max(n, 0):])
		}
	}
}

// TestResultLimitKeepsMaskingWhole: the limit applies to the masked result, so a secret the
// cut would have split is already masked, and what remains holds no part of it.
func TestResultLimitKeepsMaskingWhole(t *testing.T) {
	const secret = "s3cr3t-VALUE-0123456789"
	tool := quiver.Func("leaky", "repeats its secret", func(ctx context.Context, _ struct{}) (string, error) {
		v, _ := quiver.Var(ctx, "TOKEN")
		return strings.Repeat("x", 1000-5) + strings.Repeat(v, 200), nil
	}, quiver.WithVariables(quiver.Variable{Name: "TOKEN", Type: quiver.VarSecret}))
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool), MaxResultBytes: 1000,
		Resolver: quiver.Layered{Instance: quiver.Vars{"TOKEN": secret}}}
	r := dispatch(t, d, "leaky", `{}`)
	kept, _, _ := strings.Cut(r.Text, "…[truncated")
	if len(kept) != 1000 || !strings.HasPrefix(kept, strings.Repeat("x", 1000-5)) || strings.Contains(r.Text, secret[:3]) {
		t.Fatalf("kept %d bytes ending %q", len(kept), kept[max(len(kept)-20, 0):])
	}
}

// TestResultLimitBoundsDatabaseGrowth: three 5 MB errors recorded the way `quiver serve`
// records them grow the SQLite file by about the limit each (issue 11: 50 MB each).
func TestResultLimitBoundsDatabaseGrowth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	th, err := thread.Create(context.Background(), st, thread.Options{WorkspaceID: limitWS})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	before := dbSize(t, path)
	st, err = sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: limitTools(t), Recorder: &platform.Recorder{Store: st}}
	ctx := quiver.WithScope(context.Background(), quiver.Scope{WorkspaceID: limitWS, ThreadID: th.ID()})
	const calls = 3
	for i := range calls {
		if _, err := d.Dispatch(ctx, quiver.Call{ID: fmt.Sprint("c", i), Name: "huge_error"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	growth := dbSize(t, path) - before
	t.Logf("the database grew by %d bytes per call", growth/calls)
	if growth > calls*(resultMB+64<<10) {
		t.Fatalf("%d calls grew the database by %d bytes, over %d per call", calls, growth, resultMB+64<<10)
	}
}

func dbSize(t *testing.T, path string) int {
	n := 0
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if fi, err := os.Stat(path + suffix); err == nil {
			n += int(fi.Size())
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	return n
}

// dispatchRecorded calls tool in a new thread of st, recorded by recorder ("thread" or
// "server"), and returns the caller's result and the stored tool message.
func dispatchRecorded(t *testing.T, st thread.Store, reg *quiver.Registry, recorder, tool string, limit int) (*quiver.Result, *store.Message) {
	t.Helper()
	ctx := context.Background()
	th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: limitWS})
	if err != nil {
		t.Fatal(err)
	}
	call := quiver.Call{ID: "call_1", Name: tool}
	d := &quiver.Dispatcher{Registry: reg, MaxResultBytes: limit}
	if recorder == "thread" {
		if _, err := th.AppendAssistant(ctx, "", []quiver.Call{call}); err != nil {
			t.Fatal(err)
		}
		d.Recorder = th
	} else {
		d.Recorder = &platform.Recorder{Store: st}
		ctx = quiver.WithScope(ctx, quiver.Scope{WorkspaceID: limitWS, ThreadID: th.ID()})
	}
	r, err := d.Dispatch(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := th.History(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[1].Role != store.RoleTool || hist[1].ToolCallID != call.ID {
		t.Fatalf("history %+v", hist)
	}
	return r, hist[1]
}

var markerRE = regexp.MustCompile(`…\[truncated: ([0-9,]+) of ([0-9,]+) bytes cut; the result limit is 1 MiB\]`)

func checkLimited(t *testing.T, tc limitCase, r *quiver.Result, msg *store.Message) {
	t.Helper()
	if r.Status != tc.status || r.Code != tc.code {
		t.Errorf("status %s %s, want %s %s", r.Status, r.Code, tc.status, tc.code)
	}
	if got := resultBytes(r); got > resultMB+slack {
		t.Errorf("the caller got %d bytes, over the limit of %d", got, resultMB)
	}
	if (len(r.Value) > 0) != tc.value {
		t.Errorf("value kept: %v, want %v", len(r.Value) > 0, tc.value)
	}
	if (len(r.Meta) > 0) != tc.meta {
		t.Errorf("metadata kept: %v, want %v", len(r.Meta) > 0, tc.meta)
	}
	if len(r.Attachments) != tc.attachments {
		t.Errorf("%d attachments kept, want %d", len(r.Attachments), tc.attachments)
	}
	// Every marker says exactly what it cut, and only the parts expected are cut.
	cut := map[string]int{}
	for part, s := range textParts(r) {
		loc := markerRE.FindStringSubmatchIndex(s)
		if loc == nil {
			continue
		}
		removed, total := number(t, s[loc[2]:loc[3]]), number(t, s[loc[4]:loc[5]])
		if total-removed != loc[0] {
			t.Errorf("%s: the marker says %d of %d bytes cut, but %d were kept", part, removed, total, loc[0])
		}
		cut[part] = total
	}
	if !reflect.DeepEqual(cut, tc.cut) && !(len(cut) == 0 && len(tc.cut) == 0) {
		t.Errorf("parts cut (with their size before): %v, want %v", cut, tc.cut)
	}
	for _, n := range tc.note {
		if !strings.Contains(msg.Content, n) {
			t.Errorf("the model's text %q does not say %q", abbreviate(msg.Content), n)
		}
	}

	// Stored once, and as the caller got it.
	if msg.Content != r.ModelText() {
		t.Errorf("stored content %q, want the model text %q", abbreviate(msg.Content), abbreviate(r.ModelText()))
	}
	encoded, err := store.EncodeResult(msg.Content, msg.Result)
	if err != nil {
		t.Fatal(err)
	}
	if stored := len(msg.Content) + len(encoded); stored > resultMB+slack {
		t.Errorf("stored %d bytes (content %d, result %d), over the limit of %d", stored, len(msg.Content), len(encoded), resultMB)
	}
	if n := len(msg.Content); n > 1000 {
		sample, _ := json.Marshal(msg.Content[n/2 : n/2+500])
		if strings.Contains(string(encoded), strings.Trim(string(sample), `"`)) {
			t.Errorf("the model's text is stored twice: in the content (%d bytes) and in the result (%d bytes)", n, len(encoded))
		}
	}
	back, err := thread.Result(msg.Result)
	if err != nil {
		t.Fatal(err)
	}
	if !sameResult(t, back, r) {
		t.Errorf("stored result differs from the caller's")
	}
}

// textParts names the text of a result that a cut may end: error, text, stack, the text
// content items and the problem messages.
func textParts(r *quiver.Result) map[string]string {
	parts := map[string]string{"error": r.Error, "text": r.Text, "stack": r.Stack}
	for _, c := range r.Content {
		if strings.Contains(c.Text, "…[truncated") {
			parts["content"] = c.Text
		}
	}
	for _, p := range r.Problems {
		if strings.Contains(p.Message, "…[truncated") {
			parts["problem"] = p.Message
		}
	}
	return parts
}

// resultBytes counts the bytes of every part of r.
func resultBytes(r *quiver.Result) int {
	n := len(r.Text) + len(r.Value) + len(r.Error) + len(r.Stack) + len(r.Code) + len(r.Meta)
	for _, p := range r.Problems {
		n += len(p.Pointer) + len(p.Message)
	}
	for _, c := range r.Content {
		n += len(c.Text) + len(c.Data) + len(c.URI) + len(c.MimeType)
	}
	for _, a := range r.Attachments {
		n += len(a.Data) + len(a.Name) + len(a.Path) + len(a.ID) + len(a.MimeType) + len(a.Description)
	}
	return n
}

func sameResult(t *testing.T, a, b *quiver.Result) bool {
	t.Helper()
	x, y := *a, *b
	if len(x.Value) > 0 || len(y.Value) > 0 {
		if len(x.Value) == 0 || len(y.Value) == 0 || !jsonEqual(t, x.Value, y.Value) {
			return false
		}
	}
	if len(x.Meta) > 0 || len(y.Meta) > 0 {
		if len(x.Meta) == 0 || len(y.Meta) == 0 || !jsonEqual(t, x.Meta, y.Meta) {
			return false
		}
	}
	x.Value, y.Value, x.Meta, y.Meta = nil, nil, nil, nil
	return reflect.DeepEqual(x, y)
}

func number(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func abbreviate(s string) string {
	if len(s) <= 300 {
		return s
	}
	return s[:150] + " ... " + s[len(s)-150:]
}
