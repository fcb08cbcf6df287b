package main

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// breaksOnlyAtSeparators is a JavaScript function of an element: it returns "" when the text in
// it wraps (if at all) only after a separator of a tool's name (_ . - / :), else the text up
// to the first line break that is not, with the break marked "|".
const breaksOnlyAtSeparators = `(el) => {
	const chars = [];
	const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
	for (let n = walk.nextNode(); n; n = walk.nextNode()) {
		for (let i = 0; i < n.data.length; i++) {
			const r = document.createRange();
			r.setStart(n, i);
			r.setEnd(n, i + 1);
			const rect = r.getBoundingClientRect();
			chars.push({ c: n.data[i], top: rect.top, h: rect.height });
		}
	}
	for (let i = 1; i < chars.length; i++) {
		if (chars[i].top > chars[i - 1].top + chars[i - 1].h / 2 && !/[_.\-\/:]/.test(chars[i - 1].c)) {
			return chars.slice(0, i).map((x) => x.c).join("") + "|" + chars.slice(i).map((x) => x.c).join("");
		}
	}
	return "";
}`

// The console names threads and counts what happened on them as people read them (issue 35):
// a thread without a name is titled by what was first asked of it, shortened, else by its
// agent, and an MCP session's thread as one; counts are "1 step", "2 steps", and an MCP
// session's thread counts its calls, not the model steps it never has. Tool names wrap only
// after their separators, at a desktop's width and a narrow one.
func TestConsoleTitlesCountsAndToolNames(t *testing.T) {
	timed(t)
	site := startConsoleSite(t)
	const asked = "Please tell me, in as much detail as you can manage, what the shouting tool says when it is called with nothing at all."
	const askedTitle = "Please tell me, in as much detail as you can manage, what the shouting tool…"
	unnamed := newAPIThread(t, site.api, site.admin, "reporter")
	site.runToEnd(t, unnamed, "reporter", asked, "nothing more")
	empty := newAPIThread(t, site.api, site.admin, "payer")
	oneStep := site.namedThread(t, "payer", "One step so far")
	startAPIRun(t, site.api, site.admin, oneStep, "payer", "Charge order 7.")
	site.pausedCall(t, oneStep)

	cs, err := connectWithKey(t, site.origin+"/mcp", site.admin)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "get_current_time", Arguments: map[string]any{"timezone": "UTC"}}); err != nil || res.IsError {
		t.Fatalf("the MCP call: %v %+v", err, res)
	}
	var session string
	waitUntil(t, "the MCP session's thread", consoleWait, func() (bool, string) {
		_, raw, out := apiDo(t, "GET", site.api+"/threads?tag=mcp", site.admin, "")
		if list, _ := out["threads"].([]any); len(list) == 1 {
			session, _ = list[0].(map[string]any)["id"].(string)
		}
		return session != "", raw
	})

	tab := newBrowser(t)
	tab.signIn(site, site.admin)
	tab.route("#/threads")
	title := func(id string) string {
		return `document.querySelector('[data-test="thread-row"][data-id=` + js(id) + `] [data-test="thread-title"]')?.textContent`
	}
	for _, tt := range []struct{ id, want string }{
		{unnamed, askedTitle},
		{empty, "payer thread"},
		{oneStep, "One step so far"},
		{session, "MCP session of t"},
	} {
		tab.waitFor("the list's title of "+tt.id+", "+tt.want, title(tt.id)+` === `+js(tt.want), 0)
	}

	for _, tt := range []struct{ id, title, count string }{
		{unnamed, askedTitle, "2 steps"},
		{empty, "payer thread", "0 steps"},
		{oneStep, "One step so far", "1 step"},
		{session, "MCP session of t", "1 call"},
	} {
		tab.route("#/threads/" + tt.id)
		tab.waitFor("the page of "+tt.id, `document.querySelector('[data-test="thread-page"]')?.dataset.id === `+js(tt.id), 0)
		tab.waitFor("its title, "+tt.title, testEls("thread-title")+`[0]?.textContent === `+js(tt.title), 0)
		tab.waitFor("its count, "+tt.count, testEls("thread-count")+`[0]?.textContent === `+js(tt.count), 0)
	}
	// The session's call is there, under its tool's name.
	tab.waitFor("the call of get_current_time", testEls("tool-call")+`.some((e) => e.dataset.name === "get_current_time")`, 0)

	for _, width := range []int64{1280, 700} {
		tab.do("a window this wide", chromedp.EmulateViewport(width, 800))
		tab.route("#/tools")
		tab.waitFor("the served tools", testEls("served-tool")+`.length >= 4`, 0)
		names := testEls("served-tool") + `.map((tr) => tr.querySelector("td a"))`
		if bad := tab.string(`(() => { const f = ` + breaksOnlyAtSeparators + `; return ` + names + `.map(f).filter(Boolean).join("\n"); })()`); bad != "" {
			t.Errorf("at %d px, tool names wrap mid-word:\n%s", width, bad)
		}
		if got := tab.string(names + `.map((a) => a.querySelector(".tool-name")?.title).join(",")`); got != "charge,get_current_time,run_code,shout" {
			t.Errorf("at %d px, the names' titles are %q", width, got)
		}
	}
}
