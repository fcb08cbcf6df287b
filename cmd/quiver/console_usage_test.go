package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/quiverhq/quiver/server/console"
)

// The console's usage page (issue 50) in Chromium, against quiver serve after a real workload:
// calls of two tools by two keys (one tool's calls fail, one is refused by a limit), an agent
// run that calls a tool, and runs of an agent whose model (a fake OpenAI API) counts tokens,
// priced by the limits document's price table. The page draws its charts with the vendored
// uPlot (canvases of non-zero size with bars on them, legends naming the models and agents)
// and ranks tools and callers, at a desktop's width and at a phone's 390 pixels, where nothing
// is wider than the window. QUIVER_SCREENSHOTS=1 saves both to docs/console/.

// fakeTokensProvider is an OpenAI API whose every answer is "Done." and counts 1,200 input
// and 300 output tokens.
func fakeTokensProvider(t *testing.T) string {
	t.Helper()
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, chunk := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Done."},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1200,"completion_tokens":300,"total_tokens":1500}}`,
		} {
			io.WriteString(w, "data: "+chunk+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(provider.Close)
	return provider.URL
}

// usageWorkload starts quiver serve and makes the calls and runs the page then shows.
func usageWorkload(t *testing.T) (site *consoleSite, member string) {
	t.Helper()
	chromiumPath(t)
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("OPENAI_BASE_URL", fakeTokensProvider(t))
	agents, script := scriptedAgentsDir(t)
	writeTestFiles(t, map[string]string{
		script("clerk"):                      "turns:\n  - calls: [{name: lookup_order, args: {id: 7}}]\n  - text: Order 7 is on its way.\n",
		filepath.Join(agents, "clerk.yaml"):  "name: clerk\ndescription: Looks orders up.\nmodel: scripted:" + script("clerk") + "\ntools: [lookup_order]\n",
		filepath.Join(agents, "writer.yaml"): "name: writer\ndescription: Writes.\nmodel: openai:gpt-test\n",
	})
	base, admin := serveAgentsAPI(t, []string{"--db", filepath.Join(t.TempDir(), "q.db")}, agents)
	site = &consoleSite{origin: strings.TrimSuffix(base, "/v1"), api: base, admin: admin}
	createJSTool(t, base, admin, "lookup_order", `export default ({ id }) => "order " + id + " shipped"`,
		`{"type":"object","description":"Looks an order up.","properties":{"id":{"type":"integer"}}}`, false)
	createJSTool(t, base, admin, "flaky_refund", `export default () => { throw new Error("the payment provider is down") }`,
		`{"type":"object","description":"Refunds, or fails.","properties":{}}`, false)
	if status, _, out := apiDo(t, "PUT", base+"/limits", admin, `{"document":{"limits":[{"name":"refund-rate","tools":["flaky_refund"],"calls":{"per_minute":3}}],`+
		`"prices":[{"model":"openai:gpt-*","input_per_million":2.5,"output_per_million":10}]},"after":0}`); status != 200 {
		t.Fatalf("the limits and prices: %d %v", status, out)
	}
	keys := map[string]string{}
	for _, role := range []string{"member", "viewer"} {
		status, _, out := apiDo(t, "POST", base+"/keys", admin, `{"role":"`+role+`","name":"a `+role+`"}`)
		keys[role], _ = out["secret"].(string)
		if status != 201 || keys[role] == "" {
			t.Fatalf("a %s's key: %d %v", role, status, out)
		}
	}
	site.viewer = keys["viewer"]
	call := func(key, tool string, times int) {
		for range times {
			if status, _, out := apiDo(t, "POST", base+"/tools/"+tool+"/call", key, `{"args":{"id":7}}`); status >= 500 {
				t.Fatalf("calling %s: %d %v", tool, status, out)
			}
		}
	}
	call(admin, "lookup_order", 5)
	call(keys["member"], "lookup_order", 3)
	call(keys["member"], "flaky_refund", 4) // 3 fail, the fourth is over the limit
	clerk := newAPIThread(t, base, admin, "clerk")
	startAPIRun(t, base, admin, clerk, "clerk", "Where is order 7?")
	if got := lastAnswer(t, base, admin, clerk); got != "Order 7 is on its way." {
		t.Fatalf("clerk answered %q", got)
	}
	for i := range 2 {
		writer := newAPIThread(t, base, admin, "writer")
		startAPIRun(t, base, admin, writer, "writer", "Write something, "+string(rune('a'+i))+".")
		if got := lastAnswer(t, base, admin, writer); got != "Done." {
			t.Fatalf("writer answered %q", got)
		}
	}
	// The node answers with what it metered so far: wait until the API has the workload.
	waitUntil(t, "the workload's usage", 20*time.Second, func() (bool, string) {
		status, _, out := apiDo(t, "GET", base+"/usage?bucket=all", admin, "")
		totals, _ := out["totals"].(map[string]any)
		return status == 200 && totals["calls"] == float64(13) && totals["requests"] == float64(4) && totals["output_tokens"] == float64(600), asJSON(out)
	})
	return site, keys["member"]
}

// Conditions on the page's charts, as JavaScript.
const (
	// chartsDrawn: the three charts' canvases, each of non-zero size with some pixels painted.
	chartsDrawn = `(() => {
		const cs = ["usage-calls-chart", "usage-tokens-chart", "usage-cost-chart"].map((t) => document.querySelector('[data-test="' + t + '"] canvas'));
		return cs.every((c) => c && c.width > 0 && c.height > 0 && c.getBoundingClientRect().width > 0 && (() => {
			const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
			let painted = 0;
			for (let i = 3; i < d.length; i += 4) if (d[i] > 0) painted++;
			return painted > 200;
		})());
	})()`
	// fitsWidth: no chart and nothing on the page wider than the window.
	fitsWidth = `[...document.querySelectorAll("#main canvas")].every((c) => c.getBoundingClientRect().right <= window.innerWidth + 1) && ` +
		`document.documentElement.scrollWidth <= window.innerWidth + 1`
)

func TestConsoleUsage(t *testing.T) {
	timed(t)
	site, member := usageWorkload(t)
	tab := newBrowser(t)
	tab.do("a desktop's screen", chromedp.EmulateViewport(1280, 800))
	tab.signIn(site, site.admin)
	tab.click("Usage in the navigation", `[...document.querySelectorAll("#nav a")].find((a) => a.textContent.trim() === "Usage" && !a.hidden)`)
	tab.waitFor("the charts drawn", chartsDrawn, 0)
	tab.waitFor("the totals", testEls("total-calls")+`[0].textContent.includes("13") && `+testEls("total-refusals")+`[0].textContent.includes("1") && `+
		testEls("total-tokens")+`[0].textContent.includes("2.4k / 600")`, 0)
	// The legends name what the charts draw: the calls, the model, the agent.
	for test, words := range map[string][]string{
		"usage-calls-chart":  {"calls", "errors", "refusals"},
		"usage-tokens-chart": {"openai:gpt-test"},
		"usage-cost-chart":   {"writer"},
	} {
		for _, w := range words {
			tab.waitFor(test+"'s legend names "+w, `document.querySelector('[data-test="`+test+`"] .u-legend').textContent.includes(`+js(w)+`)`, 0)
		}
	}
	// The rankings: lookup_order's 8 calls (and the clerk's run's), flaky_refund's errors and
	// refusal; the member's key among the callers; the writer's cost.
	rows := func(test string) string { return testEls(test+"-row") + `.map((r) => r.textContent)` }
	tab.waitFor("the top tools", rows("usage-tools")+`[0].includes("lookup_order") && `+rows("usage-tools")+`[0].includes("9") && `+
		rows("usage-tools")+`.some((r) => r.includes("flaky_refund") && r.includes("3 errors") && r.includes("1 refusals"))`, 0)
	tab.waitFor("the top callers, by their keys' names", rows("usage-callers")+`.some((r) => r.includes("a member") && r.includes("7 calls") && r.includes("1 refusals"))`, 0)
	tab.waitFor("the cost by agent", rows("usage-agents")+`.some((r) => r.includes("writer") && r.includes("0.012"))`, 0)
	tab.waitFor("the models", rows("usage-models")+`.some((r) => r.includes("openai:gpt-test") && r.includes("2.4k"))`, 0)
	if status, _, out := apiDo(t, "GET", site.api+"/limits/status", site.admin, ""); status != 200 {
		t.Fatalf("GET /v1/limits/status: %d %v", status, out)
	}
	tab.waitFor("the limits' closeness", testEls("usage-limit")+`.some((l) => l.textContent.includes("refund-rate") && /\d+ of \d+ calls a (second|minute|hour|day)/.test(l.textContent))`, 0)
	if !tab.bool(fitsWidth) {
		t.Errorf("the usage page is wider than a desktop's window")
	}
	// uPlot, served by Quiver, runs under the console's policy, unchanged: nothing it does is
	// blocked (it styles through the DOM, never with inline style or script).
	if v := tab.string(`window.__csp.join("\n")`); v != "" {
		t.Errorf("the usage page broke the Content-Security-Policy:\n%s", v)
	}
	if n := tab.string(`performance.getEntriesByType("resource").filter((e) => !e.name.startsWith(location.origin)).map((e) => e.name).join(" ")`); n != "" {
		t.Errorf("the usage page loaded from another origin: %s", n)
	}
	shot(t, tab, "usage", true)

	// A phone: the charts shrink to the window, and nothing is wider than it.
	tab.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	tab.waitFor("the charts at a phone's width", fitsWidth+` && `+chartsDrawn+` && document.querySelector('[data-test="usage-calls-chart"] canvas').getBoundingClientRect().width > 300`, 0)
	tab.do("the calls chart in view", chromedp.Evaluate[chromedp.Void](testEls("usage-calls")+`[0].scrollIntoView()`))
	shot(t, tab, "usage-phone", false)

	// Another period asks again and draws again.
	tab.do("a desktop's screen", chromedp.EmulateViewport(1280, 800))
	tab.click("Last hour", `document.querySelector('[data-period="1h"]')`)
	tab.waitFor("the last hour's charts", `document.querySelector('[data-period="1h"]').getAttribute("aria-pressed") === "true" && `+chartsDrawn+` && `+
		testEls("total-calls")+`[0].textContent.includes("13")`, 0)

	for role, key := range map[string]string{"member": member, "viewer": site.viewer} {
		other := tab.newTab()
		other.signIn(site, key)
		if other.bool(`[...document.querySelectorAll("#nav a")].some((a) => a.textContent.trim() === "Usage" && !a.hidden)`) {
			t.Errorf("a %s is offered Usage in the navigation", role)
		}
		other.route("#/usage")
		other.waitFor(role+": told only an admin reads it", testEls("not-admin")+`.length === 1 && !document.querySelector("#main canvas")`, 0)
	}
}

// shot saves what the tab shows (the whole page, or the window) as docs/console/NAME.png, with
// QUIVER_SCREENSHOTS=1.
func shot(t *testing.T, tab *browserTab, name string, whole bool) {
	t.Helper()
	if os.Getenv("QUIVER_SCREENSHOTS") != "1" {
		return
	}
	tab.do("leaving the fields", chromedp.Evaluate[chromedp.Void](`document.activeElement?.blur()`))
	time.Sleep(300 * time.Millisecond) // fonts and layout settle
	var png []byte
	var err error
	if whole {
		png, err = chromedp.Run(tab.ctx, chromedp.FullScreenshot(100))
	} else {
		png, err = chromedp.Run(tab.ctx, chromedp.CaptureScreenshot())
	}
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "console", name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The usage page's shaping of the API's rows (usage-data.js), run in Chromium as the page runs
// it: buckets zero-filled across the period, the smaller groups folded into "others", stacked
// bars summed from the last series, rankings summed across rows with the busiest row's
// percentiles, and callers named.
func TestConsoleUsageShaping(t *testing.T) {
	chromiumPath(t)
	srv := httptest.NewServer(console.Handler())
	t.Cleanup(srv.Close)
	tab := newBrowser(t)
	tab.do("opening the console", chromedp.Navigate(srv.URL+"/"))
	cases := []struct{ name, expr, want string }{
		{"hour buckets from a time within the first", `m.starts("2026-11-29T10:30:00Z", "2026-11-29T13:00:00Z", 3600).map((s) => new Date(s * 1000).toISOString())`,
			`["2026-11-29T10:00:00.000Z","2026-11-29T11:00:00.000Z","2026-11-29T12:00:00.000Z"]`},
		{"rows summed into their buckets, zero elsewhere", `(() => { const xs = m.starts("2026-11-29T10:00:00Z", "2026-11-29T10:04:00Z", 60);
			return m.overTime([{start: "2026-11-29T10:01:00Z", calls: 2}, {start: "2026-11-29T10:01:00Z", calls: 3}, {start: "2026-11-29T10:03:00Z", calls: 1},
				{start: "2026-11-29T11:00:00Z", calls: 9}], xs, 60, (r) => r.calls); })()`, `[0,5,0,1]`},
		{"the largest groups first, the rest as others, none without any", `(() => { const xs = [0, 60];
			const rows = ["a", "b", "c", "d", ""].map((model, i) => ({start: "1970-01-01T00:01:00Z", model, input_tokens: (i + 1) * 10}));
			rows.push({start: "1970-01-01T00:00:00Z", model: "z", input_tokens: 0});
			return m.seriesBy(rows, "model", (r) => r.input_tokens, xs, 60, {max: 3, label: "none"}).map((s) => [s.name, s.total, s.values]); })()`,
			`[["none",50,[0,50]],["d",40,[0,40]],["others",60,[0,60]]]`},
		{"stacked bars: each the sum of it and those after it", `m.stacked([{values: [1, 2]}, {values: [3, 0]}, {values: [5, 1]}])`, `[[9,3],[8,1],[5,1]]`},
		{"rankings summed, the busiest row's percentiles", `m.ranked([{tool: "t", calls: 2, errors: 1, p50_ms: 5, p95_ms: 9}, {tool: "t", calls: 7, p50_ms: 3, p95_ms: 4},
			{tool: "u", calls: 8}, {tool: "v", calls: 0}], (r) => r.tool).map((g) => [g.name, g.calls, g.errors, g.p50_ms, g.p95_ms])`,
			`[["t",9,1,3,4],["u",8,0,0,0]]`},
		{"callers by their names", `[m.callerName({key: "key_1", user: "usr_1"}, new Map([["key_1", "ci"], ["usr_1", "Ann"]])), m.callerName({user: "usr_2"}), m.callerName({})]`,
			`["ci (Ann)","usr_2","(no key or user: the operator)"]`},
		{"limits, the closest to its bound first", `m.closeness([{name: "a", used: 1, max: 10}, {name: "b", used: 9, max: 10}, {name: "c", used: 0, max: 0}]).map((l) => l.name)`,
			`["b","a","c"]`},
		{"numbers as people read them", `[m.fmt.compact(1234), m.fmt.compact(2500000), m.fmt.cost(0.012), m.fmt.cost(0.0004), m.fmt.cost(12.5), m.fmt.ms(1500), m.fmt.ms(42.4)]`,
			`["1.2k","2.5M","0.012","0.00040","12.50","1.5 s","42 ms"]`},
	}
	for _, c := range cases {
		got := evalIn[string](tab, `import("/console/usage-data.js").then((m) => JSON.stringify(`+c.expr+`))`)
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
