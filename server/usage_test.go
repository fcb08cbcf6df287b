package server_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
)

// usageTally is what the records say of a (user, tool): calls, errors, refusals.
type usageTally struct{ calls, errors, refusals int64 }

// recordedUsage sums the tool messages of every thread of the workspace by the thread's user
// and the tool: the records a usage answer must agree with.
func recordedUsage(t *testing.T, st store.Backend, ws string) map[string]usageTally {
	t.Helper()
	ctx := context.Background()
	out := map[string]usageTally{}
	var cursor string
	for {
		threads, next, err := st.Threads(ctx, ws, store.ThreadFilter{Limit: store.MaxThreadPage, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, th := range threads {
			msgs, err := st.Messages(ctx, ws, th.ID, store.Page{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				if m.Role != store.RoleTool {
					continue
				}
				k := th.UserID + "/" + m.ToolName
				tally := out[k]
				tally.calls++
				switch m.Result.Code {
				case "":
				case "rate_limited", "not_entitled":
					tally.refusals++
				default:
					tally.errors++
				}
				out[k] = tally
			}
		}
		if next == "" {
			return out
		}
		cursor = next
	}
}

// TestUsageMatchesTheRecords: a workload of calls at two doors, some refused by a limit and
// some of a tool the caller may not call, is metered as the thread records say, at
// GET /v1/usage in JSON and CSV; only an admin reads it, and bad queries are 400s naming the
// parameter.
func TestUsageMatchesTheRecords(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		w := newEntitleWorld(t, st.(store.Backend))
		doc := `{"rules": [{"who": {"role": "member"}, "tools": ["billing_*"], "access": "deny"}]}`
		if status, body := w.send(t, "PUT", "/v1/entitlements", "admin", map[string]any{"document": json.RawMessage(doc), "after": 0}); status != 200 {
			t.Fatalf("entitlements: %d %s", status, body)
		}
		if status, body := w.send(t, "PUT", "/v1/limits", "admin", map[string]any{"document": json.RawMessage(limitsDocument), "after": 0}); status != 200 {
			t.Fatalf("limits: %d %s", status, body)
		}
		call := func(who, tool string) int {
			status, _ := w.send(t, "POST", "/v1/tools/"+tool+"/call", who, map[string]any{"args": map[string]any{"text": "x"}})
			return status
		}
		for range 5 { // 3 pass, 2 are over the member's 3 a minute
			call("member", "echo")
		}
		call("member", "billing_charge") // not entitled: refused before the limit counts it
		call("admin", "support_lookup")
		cs := w.mcpSession(t, "admin", "/mcp")
		for range 2 {
			if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "support_lookup", Arguments: map[string]any{"text": "y"}}); err != nil {
				t.Fatal(err)
			}
		}

		status, body := w.send(t, "GET", "/v1/usage?bucket=all&group_by=user,tool", "admin", nil)
		var got server.UsageBody
		if status != 200 || json.Unmarshal(body, &got) != nil {
			t.Fatalf("usage: %d %s", status, body)
		}
		metered := map[string]usageTally{}
		for _, r := range got.Rows {
			metered[r.User+"/"+r.Tool] = usageTally{r.Calls, r.Errors, r.Refusals}
		}
		want := recordedUsage(t, st.(store.Backend), w.ws)
		if !maps.Equal(metered, want) {
			t.Errorf("usage\n%v\nthe records\n%v", metered, want)
		}
		if got.Totals.Calls != 9 || got.Totals.Refusals != 3 || got.Totals.P50MS <= 0 {
			t.Errorf("totals %+v, want 9 calls of which 3 refused", got.Totals)
		}

		status, body = w.send(t, "GET", "/v1/usage?bucket=all&group_by=tool&format=csv", "admin", nil)
		lines, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
		if status != 200 || err != nil || len(lines) != 4 || !slices.Equal(lines[0][:3], []string{"start", "tool", "calls"}) {
			t.Fatalf("csv: %d %v %q", status, err, body)
		}

		// Names no tool has count under one tool, whoever invents them.
		for _, name := range []string{"made_up_1", "MADE_UP_2", "made-up-3"} {
			call("admin", name)
		}
		status, body = w.send(t, "GET", "/v1/usage?bucket=all&group_by=tool", "admin", nil)
		got = server.UsageBody{}
		if status != 200 || json.Unmarshal(body, &got) != nil {
			t.Fatalf("usage: %d %s", status, body)
		}
		unknown := false
		for _, r := range got.Rows {
			unknown = unknown || r.Tool == "(unknown)"
			if strings.Contains(strings.ToLower(r.Tool), "made") {
				t.Errorf("a made-up name has a row of its own: %+v", r)
			}
			// Where entitlements restrict, a name no tool has is answered not_entitled, as a
			// hidden tool is: a refusal.
			if r.Tool == "(unknown)" && (r.Calls != 3 || r.Refusals != 3) {
				t.Errorf("(unknown): %+v, want the 3 calls of made-up names, refused", r)
			}
		}
		if !unknown {
			t.Errorf("no (unknown) row among %+v", got.Rows)
		}

		for _, who := range []string{"member", "viewer"} {
			if status, body := w.send(t, "GET", "/v1/usage", who, nil); status != 403 {
				t.Errorf("usage as %s: %d %s", who, status, body)
			}
		}
		for q, where := range map[string]string{
			"group_by=cost": "query.group_by",
			"bucket=week":   "query.bucket",
			"from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z":               "query.from",
			"bucket=minute&from=2020-01-01T00:00:00Z&to=2020-01-01T01:00:00Z": "query.from",
		} {
			status, body := w.send(t, "GET", "/v1/usage?"+q, "admin", nil)
			var p server.ProblemDetails
			if status != 400 && status != 422 || json.Unmarshal(body, &p) != nil || len(p.Errors) == 0 || p.Errors[0].Location != where {
				t.Errorf("%s: %d %s, want a 400 naming %s", q, status, body, where)
			}
		}
	})
}
