package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The trace of a run on the console's thread page (issue 50), in Chromium: a run of model
// requests, a tool call that succeeds and one that fails, a sub-agent and an approved call is
// drawn as a timeline, a row per span with its kind, name, duration, tokens and error, the
// sub-agent linking to its own thread; on a phone-sized window the timeline fits. With
// QUIVER_SCREENSHOTS=1 it saves docs/console/trace.png and trace-phone.png.

// startTraceConsole starts quiver serve with a scripted agent whose run asks for lookup and
// explode (which fails), then for the scout sub-agent, then for charge (which requires
// confirmation), then answers; and returns the site and a thread of it that ran to its end.
func startTraceConsole(t *testing.T) (site *consoleSite, threadID string) {
	t.Helper()
	chromiumPath(t)
	agents, script := scriptedAgentsDir(t)
	writeTestFiles(t, map[string]string{
		script("tracer"): "turns:\n" +
			"  - calls: [{name: lookup, args: {word: sprat}}, {name: explode, args: {}}]\n" +
			"  - calls: [{name: scout, args: {message: Look around.}}]\n" +
			"  - calls: [{name: charge, args: {amount: 5}}]\n" +
			"  - text: All done.\n",
		script("scout"): "turns:\n  - text: Nothing here.\n",
		filepath.Join(agents, "tracer.yaml"): "name: tracer\ndescription: Runs a bit of everything.\nmodel: scripted:" + script("tracer") +
			"\ntools: [lookup, explode, scout, charge]\n",
		filepath.Join(agents, "scout.yaml"): "name: scout\ntype: dual_ai\ndescription: Looks around.\nmodel: scripted:" + script("scout") + "\nexpose_as_tool: true\n",
	})
	base, admin := serveAgentsAPI(t, []string{"--db", filepath.Join(t.TempDir(), "q.db")}, agents)
	if admin == "" {
		t.Fatal("quiver serve printed no admin key")
	}
	createJSTool(t, base, admin, "lookup", `export default ({ word }) => word + ": a small fish"`,
		`{"type":"object","description":"Looks a word up.","properties":{"word":{"type":"string"}}}`, false)
	createJSTool(t, base, admin, "explode", `export default () => { throw new Error("the fuse was wet") }`,
		`{"type":"object","description":"Always fails.","properties":{}}`, false)
	createJSTool(t, base, admin, "charge", `export default ({ amount }) => "charged " + amount`,
		`{"type":"object","description":"Charges an amount.","properties":{"amount":{"type":"integer"}},"required":["amount"]}`, true)
	site = &consoleSite{origin: strings.TrimSuffix(base, "/v1"), api: base, admin: admin}
	threadID = site.namedThread(t, "tracer", "A traced run")
	startAPIRun(t, site.api, site.admin, threadID, "tracer", "Do a bit of everything.")
	callID := site.pausedCall(t, threadID)
	if status, _, out := apiDo(t, "POST", site.api+"/threads/"+threadID+"/decisions", site.admin,
		`{"call_id":"`+callID+`","action":"approve"}`); status != 202 {
		t.Fatalf("approving: %d %v", status, out)
	}
	site.waitMessages(t, threadID, "All done.")
	return site, threadID
}

func TestConsoleTrace(t *testing.T) {
	timed(t)
	site, threadID := startTraceConsole(t)
	tab := newBrowser(t)
	tab.do("a desktop's screen", chromedp.EmulateViewport(1280, 900))
	tab.signIn(site, site.admin)
	tab.route("#/threads/" + threadID)
	tab.waitFor("the thread's run", hasText("All done."), 0)
	tab.click("the Trace tab", testEls("view-trace")+`[0]`)

	span := func(kind, name string) string {
		return testEls("span") + `.find((s) => s.dataset.kind === ` + js(kind) + ` && s.dataset.name.startsWith(` + js(name) + `))`
	}
	tab.waitFor("the timeline", testEls("span")+`.filter((s) => s.dataset.kind === "model").length === 4`, 0)
	if !tab.bool(testEls("conversation-view") + `[0].hidden && !` + testEls("trace") + `[0].hidden`) {
		t.Error("the Trace tab left the conversation shown, or the trace hidden")
	}
	for _, c := range []struct{ what, cond string }{
		{"a model request with its model, duration and tokens", span("model", "scripted:") + `.dataset.status === "ok" && ` +
			span("model", "scripted:") + `.querySelector('[data-test="span-facts"]').textContent.match(/\d+ (ms|s)/) !== null`},
		{"lookup, ok", span("tool", "lookup") + `.dataset.status === "ok"`},
		{"explode, an error with its code and words", span("tool", "explode") + `.dataset.status === "error" && ` +
			span("tool", "explode") + `.querySelector('[data-test="span-error"]').textContent.includes("the fuse was wet")`},
		{"charge's approval, under its call", span("approval", "charge") + `.dataset.status === "ok" && ` +
			span("approval", "charge") + `.classList.contains("nested") && ` + span("approval", "charge") + `.textContent.includes("approve")`},
		{"the sub-agent, under its call, linking to its thread", span("subagent", "scout") + `.classList.contains("nested") && ` +
			span("subagent", "scout") + `.querySelector('[data-test="span-child"]').getAttribute("href").startsWith("#/threads/thr_")`},
		{"a bar per span, placed on the axis", testEls("span") + `.every((s) => { const b = s.querySelector(".span-bar"); ` +
			`return b.style.left.endsWith("%") && b.style.width.endsWith("%") && b.getBoundingClientRect().width > 0; })`},
		{"the summary", testEls("trace-summary") + `[0].textContent.includes("4 model requests") && ` +
			testEls("trace-summary") + `[0].textContent.includes("1 error")`},
	} {
		tab.waitFor(c.what, c.cond, 5*time.Second)
	}
	shot(t, tab, "trace", true)

	tab.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	tab.waitFor("the timeline fits the window", `document.documentElement.scrollWidth <= window.innerWidth && `+
		testEls("span")+`.every((s) => s.getBoundingClientRect().right <= window.innerWidth)`, 0)
	shot(t, tab, "trace-phone", false)

	tab.click("the sub-agent's thread", span("subagent", "scout")+`.querySelector('[data-test="span-child"]')`)
	tab.waitFor("the child's page", `document.querySelector('[data-test="thread-page"]')?.dataset.id !== `+js(threadID)+` && `+
		hasText("Nothing here."), 0)
}
