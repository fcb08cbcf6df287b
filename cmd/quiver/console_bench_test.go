package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

// The console's pages on big data, in Chromium: a thread of 1,000 messages (its page shows the
// newest 100, the rest a click away) and a list of 1,000 threads (50 a page). Each op is a
// full page load (navigation, the modules, the API calls, the rendering), timed in the page
// from the navigation's start until the page shows its data. The baseline beside it is the
// API call the page's data comes from, timed in the same page: what no page can be faster
// than.
//
//	go test ./cmd/quiver -run '^$' -bench Console -benchtime 30x
func BenchmarkConsolePages(b *testing.B) {
	chromiumPath(b)
	agents, script := scriptedAgentsDir(b)
	writeTestFiles(b, map[string]string{
		script("payer"):                     "turns:\n  - text: Done.\n",
		filepath.Join(agents, "payer.yaml"): "name: payer\nmodel: scripted:" + script("payer") + "\n",
	})
	db := filepath.Join(b.TempDir(), "q.db")
	base, admin := serveAgentsAPI(b, []string{"--db", db}, agents)
	site := &consoleSite{origin: base[:len(base)-len("/v1")], api: base, admin: admin}

	// 1,000 threads, the last of which holds 1,000 messages, written straight to the store
	// the server serves (SQLite takes a second writer).
	st, err := sqlite.Open(db)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	_, _, th := apiDo(b, "POST", base+"/threads", admin, `{"agent":"payer","tags":["name:big thread"]}`)
	threadID, _ := th["id"].(string)
	ws, _ := th["workspace_id"].(string)
	for i := 0; i < 999; i++ {
		if err := st.CreateThread(ctx, &store.Thread{WorkspaceID: ws, AgentID: "payer", Tags: []string{fmt.Sprintf("name:thread %d", i)}}); err != nil {
			b.Fatal(err)
		}
	}
	for turn := 0; turn < 250; turn++ {
		call := fmt.Sprintf("call_%d", turn)
		args, _ := json.Marshal(map[string]any{"query": fmt.Sprintf("question %d", turn), "limit": turn})
		msgs := []*store.Message{
			{Role: store.RoleUser, Content: fmt.Sprintf("Question %d: what is in the report?", turn)},
			{Role: store.RoleAssistant, Content: "Let me look.", ToolCalls: []store.ToolCall{{ID: call, Name: "search", Args: args}}},
			{Role: store.RoleTool, ToolCallID: call, ToolName: "search", Content: fmt.Sprintf("result %d: %s", turn, longText),
				Result: &store.ToolResult{Status: "success", Text: fmt.Sprintf("result %d: %s", turn, longText)}},
			{Role: store.RoleAssistant, Content: fmt.Sprintf("Answer %d: the report says so.", turn)},
		}
		if err := st.Append(ctx, ws, threadID, msgs...); err != nil {
			b.Fatal(err)
		}
	}

	tab := newBrowser(b)
	tab.signIn(site, admin)
	pages := []struct {
		name, hash, ready, api string
	}{
		{"thread-1000-messages", "#/threads/" + threadID, `document.querySelectorAll('[data-test="message"], [data-test="tool-result"]').length >= 100`,
			"/v1/threads/" + threadID + "/messages?limit=100"},
		{"threads-1000", "#/threads", `document.querySelectorAll('[data-test="thread-row"]').length >= 50`, "/v1/threads?limit=50"},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			var page, call []float64
			for i := 0; i < b.N; i++ {
				// A query of its own makes each op a full page load (a URL that differs only
				// in its hash would be the same document).
				tab.do("opening "+p.hash, chromedp.Navigate(fmt.Sprintf("%s/?load=%d%s", site.origin, i, p.hash)))
				ms := evalIn[float64](tab, `new Promise((resolve) => {
					const ready = () => { try { return `+p.ready+`; } catch { return false; } };
					if (ready()) return resolve(performance.now());
					const o = new MutationObserver(() => { if (ready()) { o.disconnect(); resolve(performance.now()); } });
					o.observe(document.body, { childList: true, subtree: true });
					setTimeout(() => resolve(-1), 10000);
				})`)
				if ms < 0 {
					b.Fatalf("%s did not show its data within 10 s:\n%s", p.name, tab.snapshot())
				}
				page = append(page, ms)
				call = append(call, evalIn[float64](tab, `(async () => {
					const t0 = performance.now();
					const r = await fetch(`+js(p.api)+`, { headers: { Authorization: "Bearer " + sessionStorage.getItem("quiver.key") } });
					await r.json();
					return performance.now() - t0;
				})()`))
			}
			b.ReportMetric(quantile(page, 0.5), "p50-ms/page")
			b.ReportMetric(quantile(page, 0.99), "p99-ms/page")
			b.ReportMetric(quantile(call, 0.5), "p50-ms/api-call")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// longText makes each result a paragraph, as a search tool's would be.
const longText = "The report covers the third quarter: revenue grew, costs fell, and the outlook is steady. " +
	"It lists the regions one by one, with the figures of each and a note on what changed since the last report."

func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
