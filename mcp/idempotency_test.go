package mcp_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// A call of an imported tool carries the call's idempotency key to the remote server in the
// request's _meta: the call's id and the attempt's number (io.quiver/call_id and
// io.quiver/attempt), the attempt a run executing the call again names; a call without an id
// sends neither.
func TestImportedCallsCarryTheirIdempotencyKey(t *testing.T) {
	var mu sync.Mutex
	var metas []map[string]any
	raw := sdk.NewServer(&sdk.Implementation{Name: "ledger", Version: "1"}, nil)
	raw.AddTool(&sdk.Tool{Name: "append", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		mu.Lock()
		metas = append(metas, req.Params.Meta)
		mu.Unlock()
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "appended"}}}, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return raw }, nil))
	t.Cleanup(ts.Close) // after the importer's cleanup: its event stream must end first
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	importInto(t, reg, []qmcp.Remote{{Name: "ledger", URL: ts.URL}}, fastRetry)
	d := &quiver.Dispatcher{Registry: reg}

	cases := []struct {
		name        string
		ctx         context.Context
		call        quiver.Call
		id, attempt any // nil: the key is absent
	}{
		{"a first attempt", context.Background(), quiver.Call{ID: "call_1", Name: "ledger.append"}, "call_1", float64(1)},
		{"a run's third attempt at the call",
			quiver.WithExecution(context.Background(), quiver.Execution{StepCount: 2, CallID: "call_2", Attempt: 3}),
			quiver.Call{ID: "call_2", Name: "ledger.append"}, "call_2", float64(3)},
		{"a call without an id", context.Background(), quiver.Call{Name: "ledger.append"}, nil, nil},
	}
	for _, c := range cases {
		mu.Lock()
		metas = nil
		mu.Unlock()
		r, err := d.Dispatch(c.ctx, c.call)
		if err != nil || r.Text != "appended" {
			t.Fatalf("%s: %v %+v", c.name, err, r)
		}
		mu.Lock()
		got := metas
		mu.Unlock()
		if len(got) != 1 {
			t.Fatalf("%s: the remote got %d requests", c.name, len(got))
		}
		if id, attempt := got[0][qmcp.CallIDMetaKey], got[0][qmcp.AttemptMetaKey]; id != c.id || attempt != c.attempt {
			t.Errorf("%s: the remote got _meta %v; want %s=%v and %s=%v", c.name, got[0],
				qmcp.CallIDMetaKey, c.id, qmcp.AttemptMetaKey, c.attempt)
		}
		if _, ok := got[0]["progressToken"]; !ok {
			t.Errorf("%s: the key replaced the progress token: _meta %v", c.name, got[0])
		}
	}
	if qmcp.CallIDMetaKey != "io.quiver/call_id" || qmcp.AttemptMetaKey != "io.quiver/attempt" {
		t.Errorf("the _meta keys changed: %s, %s (remote tools depend on them)", qmcp.CallIDMetaKey, qmcp.AttemptMetaKey)
	}
}

// A call at the MCP door is a first attempt of a call whose id is the one its result is
// recorded with: the key a tool deduplicates on is the one the thread shows.
func TestMCPCallsAreFirstAttemptsWithTheirRecordedID(t *testing.T) {
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	reg.Register(quiver.Func("key", "Says its idempotency key.", func(ctx context.Context, _ struct{}) (string, error) {
		e, ok := quiver.ExecutionFrom(ctx)
		return fmt.Sprintf("%v %s %d", ok, e.CallID, e.Attempt), nil
	}))
	rec := &memRecorder{}
	srv := qmcp.NewServer(&quiver.Dispatcher{Registry: reg, Recorder: rec}, nil)
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	defer func() { cancel(); <-done }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "key"})
	if err != nil {
		t.Fatal(err)
	}
	r := rec.waitFor(t, "key")
	if want := fmt.Sprintf("true %s 1", r.Call.ID); r.Call.ID == "" || texts(res) != want {
		t.Errorf("the tool saw %q, want %q (the recorded call's id, attempt 1)", texts(res), want)
	}
}
