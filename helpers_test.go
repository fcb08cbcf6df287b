package quiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// newRegistry returns a fresh registry holding tools; it fails the test on a registration error.
func newRegistry(t testing.TB, tools ...*quiver.Tool) *quiver.Registry {
	t.Helper()
	r := &quiver.Registry{}
	if err := r.Register(tools...); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return r
}

// dispatch runs one call and fails the test if the runtime (not the call) fails.
func dispatch(t testing.TB, d *quiver.Dispatcher, name, args string) *quiver.Result {
	t.Helper()
	return dispatchCall(t, context.Background(), d, quiver.Call{Name: name, Args: json.RawMessage(args)})
}

func dispatchCall(t testing.TB, ctx context.Context, d *quiver.Dispatcher, c quiver.Call) *quiver.Result {
	t.Helper()
	r, err := d.Dispatch(ctx, c)
	if err != nil {
		t.Fatalf("Dispatch(%s): runtime error: %v", c.Name, err)
	}
	if r == nil {
		t.Fatalf("Dispatch(%s): nil result", c.Name)
	}
	return r
}

// wantSuccess fails the test unless r is a success.
func wantSuccess(t testing.TB, r *quiver.Result) {
	t.Helper()
	if r.IsError() || r.Status != quiver.StatusSuccess {
		t.Fatalf("want success, got %s %s: %s", r.Status, r.Code, r.Error)
	}
}

// wantError fails the test unless r is an error result with code and an error text containing
// every one of contains.
func wantError(t testing.TB, r *quiver.Result, code quiver.Code, contains ...string) {
	t.Helper()
	if !r.IsError() {
		t.Fatalf("want error %s, got success: text=%q value=%s", code, r.Text, r.Value)
	}
	if r.Code != code {
		t.Fatalf("want code %s, got %s: %s", code, r.Code, r.Error)
	}
	if r.Error == "" {
		t.Fatalf("error result with code %s has an empty error text", code)
	}
	for _, s := range contains {
		if !strings.Contains(r.Error, s) {
			t.Errorf("error %q does not contain %q", r.Error, s)
		}
	}
}

// jsonEqual reports whether a and b encode the same JSON value.
func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("not JSON: %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// toMap decodes JSON into a generic map.
func toMap(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %s: %v", b, err)
	}
	return m
}

// memRecorder is an in-memory Recorder (storage comes later); err, when set, makes recording
// fail.
type memRecorder struct {
	mu      sync.Mutex
	err     error
	records []record
}

type record struct {
	Name   string
	Args   string
	Result quiver.Result
}

func (m *memRecorder) RecordResult(_ context.Context, c *quiver.Call, r *quiver.Result) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	m.records = append(m.records, record{Name: c.Name, Args: string(c.Args), Result: *r})
	return nil
}

func (m *memRecorder) all() []record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]record(nil), m.records...)
}

// rawTool returns a tool whose code is fn, with the given input schema (JSON, "" for none).
func rawTool(t testing.TB, name, inputSchema string, fn quiver.ToolFunc, opts ...func(*quiver.Spec)) *quiver.Tool {
	t.Helper()
	spec := quiver.Spec{Name: name, Description: "Test tool " + name + "."}
	if inputSchema != "" {
		spec.InputSchema = mustSchema(t, inputSchema)
	}
	for _, o := range opts {
		o(&spec)
	}
	tool, err := quiver.NewTool(spec, fn)
	if err != nil {
		t.Fatalf("NewTool(%s): %v", name, err)
	}
	return tool
}

// returning is a ToolFunc that returns v and err.
func returning(v any, err error) quiver.ToolFunc {
	return func(context.Context, json.RawMessage) (any, error) { return v, err }
}

// mustSchema parses a JSON Schema document.
func mustSchema(t testing.TB, doc string) *schema.Schema {
	t.Helper()
	var s schema.Schema
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatalf("schema %s: %v", doc, err)
	}
	return &s
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
