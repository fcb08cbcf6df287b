package server_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
)

// limitsDocument gives each key 3 calls a minute, and refunds 1 a day for the workspace.
const limitsDocument = `{"limits": [
  {"name": "each-key", "per": ["key"], "calls": {"per_minute": 3}},
  {"name": "refunds", "tools": ["support_refund"], "calls": {"per_day": 1}}
]}`

// TestLimitsAtTheDoors: GET and PUT /v1/limits are an admin's and refuse a document that does
// not check naming its part; a key over its limit is answered without running, with 429 and
// Retry-After over /v1 and an error result carrying the code over MCP, whichever door it
// used before; a limit raised takes effect at the next call; another key keeps its own count;
// a daily quota says quota_exhausted.
func TestLimitsAtTheDoors(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		w := newEntitleWorld(t, st.(store.Backend))
		status, body := w.send(t, "GET", "/v1/limits", "admin", nil)
		if status != 200 || !strings.Contains(string(body), `"version":0`) {
			t.Fatalf("limits never set: %d %s", status, body)
		}
		for _, who := range []string{"member", "viewer"} {
			if status, body := w.send(t, "PUT", "/v1/limits", who, map[string]any{"document": json.RawMessage(limitsDocument), "after": 0}); status != 403 {
				t.Errorf("PUT as %s: %d %s", who, status, body)
			}
		}
		for _, c := range []struct{ doc, location string }{
			{`{"limits": [{"name": "a", "calls": {"per_minute": -1}}]}`, "body.document.limits[0].calls.per_minute"},
			{`{"limits": [{"name": "a", "per": ["team"], "concurrent": 1}]}`, "body.document.limits[0].per[0]"},
			{`{"limits": [{"name": "a"}]}`, "body.document.limits[0]"},
		} {
			status, body := w.send(t, "PUT", "/v1/limits", "admin", map[string]any{"document": json.RawMessage(c.doc), "after": 0})
			var p server.ProblemDetails
			if status != 400 || json.Unmarshal(body, &p) != nil || len(p.Errors) != 1 || p.Errors[0].Location != c.location {
				t.Errorf("%s: %d %s, want 400 naming %s", c.doc, status, body, c.location)
			}
		}
		status, body = w.send(t, "PUT", "/v1/limits", "admin", map[string]any{"document": json.RawMessage(limitsDocument), "after": 0})
		if status != 200 || !strings.Contains(string(body), `"version":1`) || !strings.Contains(string(body), `"per_minute":3`) {
			t.Fatalf("setting the limits: %d %s", status, body)
		}

		call := func(who, tool string) (int, []byte, string) {
			res, data := sendAPI(t, w.client, "POST", w.url+"/v1/tools/"+tool+"/call", w.key[who], map[string]any{"args": map[string]any{"text": "x"}})
			return res.StatusCode, data, res.Header.Get("Retry-After")
		}
		for i := range 2 {
			if status, body, _ := call("member", "echo"); status != 200 || !strings.Contains(string(body), "echo: x") {
				t.Fatalf("the member's call %d: %d %s", i, status, body)
			}
		}
		// The third over MCP, with the same key: the doors count together.
		cs := w.mcpSession(t, "member", "/mcp")
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
		if err != nil || res.IsError {
			t.Fatalf("the member's third call, over MCP: %v %+v", err, res)
		}
		res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
		if err != nil || !res.IsError || res.Meta[mcp.CodeMetaKey] != "rate_limited" ||
			!strings.Contains(mcpText(res), `the limit "each-key" allows 3 calls per minute and is reached: try again in`) {
			t.Fatalf("the member's fourth call, over MCP: %v %+v %q", err, res, mcpText(res))
		}
		if secs, _ := res.Meta["retry_after_seconds"].(float64); secs < 1 || secs > 61 {
			t.Errorf("retry_after_seconds over MCP: %v", res.Meta["retry_after_seconds"])
		}
		status, body, retry := call("member", "echo")
		var p server.ProblemDetails
		if status != 429 || json.Unmarshal(body, &p) != nil || p.Code != server.CodeRateLimited || !strings.Contains(p.Detail, `"each-key"`) {
			t.Fatalf("the member's fifth call, over /v1: %d %s", status, body)
		}
		if n, err := strconv.Atoi(retry); err != nil || n < 1 || n > 61 {
			t.Errorf("Retry-After: %q", retry)
		}
		// The limit raised while the member's key is over it: the next call passes, without a
		// restart, as every door follows a change of the document.
		raised := strings.Replace(limitsDocument, `"per_minute": 3`, `"per_minute": 6`, 1)
		if status, body := w.send(t, "PUT", "/v1/limits", "admin", map[string]any{"document": json.RawMessage(raised), "after": 1}); status != 200 {
			t.Fatalf("raising the limit: %d %s", status, body)
		}
		if status, body, _ := call("member", "echo"); status != 200 {
			t.Fatalf("the member's call after the limit was raised: %d %s", status, body)
		}
		// The admin's key has its own count; the workspace's refunds their one a day.
		if status, body, _ := call("admin", "support_refund"); status != 200 {
			t.Fatalf("the admin's refund: %d %s", status, body)
		}
		status, body, retry = call("admin", "support_refund")
		if status != 429 || json.Unmarshal(body, &p) != nil || p.Code != server.CodeQuotaExhausted || retry == "" {
			t.Fatalf("a second refund in the day: %d %s (Retry-After %q)", status, body, retry)
		}
	})
}

// TestLimitStatus: GET /v1/limits/status says, for each bound of each limit, the fullest
// counter's count now and how many counters have counts; an admin's only.
func TestLimitStatus(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		w := newEntitleWorld(t, st.(store.Backend))
		if status, body := w.send(t, "PUT", "/v1/limits", "admin", map[string]any{"document": json.RawMessage(limitsDocument), "after": 0}); status != 200 {
			t.Fatalf("limits: %d %s", status, body)
		}
		for _, who := range []string{"member", "member", "admin"} {
			if status, body := w.send(t, "POST", "/v1/tools/echo/call", who, map[string]any{"args": map[string]any{"text": "x"}}); status != 200 {
				t.Fatalf("call: %d %s", status, body)
			}
		}
		status, body := w.send(t, "GET", "/v1/limits/status", "admin", nil)
		var got struct{ Limits []server.LimitStatus }
		if status != 200 || json.Unmarshal(body, &got) != nil {
			t.Fatalf("status: %d %s", status, body)
		}
		want := []server.LimitStatus{{Name: "each-key", Measure: "calls", Period: "minute", Max: 3, Used: 2, Counters: 2}, {Name: "refunds", Measure: "calls", Period: "day", Max: 1}}
		if !reflect.DeepEqual(got.Limits, want) {
			t.Errorf("status %+v, want %+v", got.Limits, want)
		}
		for _, who := range []string{"member", "viewer"} {
			if status, body := w.send(t, "GET", "/v1/limits/status", who, nil); status != 403 {
				t.Errorf("status as %s: %d %s", who, status, body)
			}
		}
	})
}

// TestClientsWaitOutTheLimit: a client that does what a refusal says gets through. An MCP
// client (an agent's loop) over a limit of 2 calls a second reads rate_limited and
// retry_after_seconds from the result's _meta, waits that long and calls again, and an HTTP
// client waits Retry-After; each is let through on its next try, and no call is lost or runs
// twice.
func TestClientsWaitOutTheLimit(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		w := newEntitleWorld(t, st.(store.Backend))
		doc := `{"limits": [{"name": "two-a-second", "per": ["key"], "calls": {"per_second": 2}}]}`
		if status, body := w.send(t, "PUT", "/v1/limits", "admin", map[string]any{"document": json.RawMessage(doc), "after": 0}); status != 200 {
			t.Fatalf("limits: %d %s", status, body)
		}
		cs := w.mcpSession(t, "member", "/mcp")
		answered, waited := 0, 0
		for i := range 6 {
			for try := 0; ; try++ {
				res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": strconv.Itoa(i)}})
				if err != nil {
					t.Fatal(err)
				}
				if !res.IsError {
					if got := mcpText(res); got != "echo: "+strconv.Itoa(i) {
						t.Fatalf("call %d answered %q", i, got)
					}
					answered++
					break
				}
				secs, _ := res.Meta["retry_after_seconds"].(float64)
				if res.Meta[mcp.CodeMetaKey] != "rate_limited" || secs < 1 || try > 0 {
					t.Fatalf("call %d, try %d: %+v %q", i, try, res.Meta, mcpText(res))
				}
				waited++
				time.Sleep(time.Duration(secs) * time.Second)
			}
		}
		if answered != 6 || waited == 0 {
			t.Fatalf("answered %d, waited %d times", answered, waited)
		}
		for i := range 4 {
			for try := 0; ; try++ {
				res, body := sendAPI(t, w.client, "POST", w.url+"/v1/tools/echo/call", w.key["admin"], map[string]any{"args": map[string]any{"text": "x"}})
				if res.StatusCode == 200 {
					break
				}
				secs, err := strconv.Atoi(res.Header.Get("Retry-After"))
				if res.StatusCode != 429 || err != nil || try > 0 {
					t.Fatalf("the admin's call %d, try %d: %d %s (Retry-After %q)", i, try, res.StatusCode, body, res.Header.Get("Retry-After"))
				}
				time.Sleep(time.Duration(secs) * time.Second)
			}
		}
	})
}
