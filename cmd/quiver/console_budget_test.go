package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Budgets in the console (issue 50), in Chromium against quiver serve: an admin gives a limit
// model tokens and a cost on the limits page; the API's refusals are marked on the input they
// name (a bound out of range, counting per tool) or said on the limit's card (a tool selector
// with tokens); saved, the table shows the budget. A run of the agent it bounds pauses before
// its third model request (budget_exhausted): the threads list says the thread waits for its
// budget, and the thread page says which limit and when the run goes on, with no link to the
// approvals; once an admin raises the limit, the run goes on and the page says so as it
// happens. QUIVER_SCREENSHOTS=1 saves docs/console/limits-budget.png and thread-budget.png.

// startBudgetConsole starts quiver serve with the scripted agent spender, whose every model
// request uses 6 input tokens: it reads the clock twice, then answers "Done.".
func startBudgetConsole(t *testing.T) *consoleSite {
	t.Helper()
	chromiumPath(t)
	agents, script := scriptedAgentsDir(t)
	writeTestFiles(t, map[string]string{
		script("spender"): "turns:\n" +
			"  - {calls: [{name: get_current_time, args: {}}], usage: {input_tokens: 6}}\n" +
			"  - {calls: [{name: get_current_time, args: {}}], usage: {input_tokens: 6}}\n" +
			"  - {text: Done., usage: {input_tokens: 6}}\n",
		filepath.Join(agents, "spender.yaml"): "name: spender\ndescription: Reads the clock, then answers.\nmodel: scripted:" + script("spender") +
			"\ntools: [get_current_time]\n",
	})
	base, admin := serveAgentsAPI(t, []string{"--db", filepath.Join(t.TempDir(), "q.db")}, agents)
	if admin == "" {
		t.Fatal("quiver serve printed no admin key")
	}
	return &consoleSite{origin: strings.TrimSuffix(base, "/v1"), api: base, admin: admin}
}

func TestConsoleBudget(t *testing.T) {
	timed(t)
	site := startBudgetConsole(t)
	tab := newBrowser(t)
	tab.do("a desktop's screen", chromedp.EmulateViewport(1280, 900))
	tab.signIn(site, site.admin)
	tab.route("#/limits")
	tab.waitFor("no limits yet", testEls("limits-empty")+`.length === 1`, 0)

	card := testEls("limit-card") + `[0]`
	input := func(name string) string { return card + `.querySelector('[name="` + name + `"]')` }
	marked := func(name string) string { return `(` + input(name) + `.getAttribute("aria-invalid") === "true")` }
	refused := func(what, at, cond string) {
		t.Helper()
		tab.click("Save", testEls("limits-save")+`[0]`)
		tab.waitFor(what, testEls("limit-error")+`[0]?.textContent.includes(`+js("body.document.limits[0]"+at)+`) && `+cond, 0)
		if _, _, out := apiDo(t, "GET", site.api+"/limits", site.admin, ""); out["version"] != float64(0) {
			t.Fatalf("%s: a refused limit was stored: %v", what, out)
		}
	}
	tab.click("Add a limit", testEls("limit-add")+`[0]`)
	tab.fill("the limit's name", input("name"), "day-tokens")
	tab.fill("who", input("who"), "agent:spender")

	// Bounds out of range: each refused at its field, and that input marked.
	tab.fill("input tokens per day", input("tokens.input_per_day"), "-5")
	refused("negative tokens marked", ".tokens.input_per_day: ", marked("tokens.input_per_day"))
	tab.fill("input tokens per day", input("tokens.input_per_day"), "10")
	tab.fill("cost per month", input("cost.per_month"), "2000000000")
	refused("a cost over the maximum marked", ".cost.per_month: ", marked("cost.per_month")+` && !`+marked("tokens.input_per_day"))
	tab.fill("cost per month", input("cost.per_month"), "2.5")

	// A budget selects by who alone: a tool selector is refused at tools, that input marked;
	// counting per tool is refused at that one of per, the tool's box marked.
	tab.fill("tools", input("tools"), "get_current_time")
	refused("tools with tokens refused", ".tools: ", marked("tools")+` && `+testEls("limit-error")+`[0].textContent.includes("selects by who alone")`)
	tab.fill("tools", input("tools"), "")
	tab.click("per key", input("per.key"))
	tab.click("per tool", input("per.tool"))
	refused("counting per tool refused", ".per[1]: ", marked("per.tool")+` && !`+marked("per.key"))
	tab.click("per key", input("per.key"))
	tab.click("per tool", input("per.tool"))

	// Saved: the API has numbers, no empty tokens or cost fields; the table shows the budget,
	// the card edits it (nothing "kept as it is").
	tab.click("Save", testEls("limits-save")+`[0]`)
	tab.waitFor("saved", testEls("limits-saved")+`[0]?.offsetParent !== null && `+testEls("limits-saved")+`[0].textContent.includes("version 1")`, 0)
	if _, _, out := apiDo(t, "GET", site.api+"/limits", site.admin, ""); asJSON(out["document"]) !=
		`{"limits":[{"cost":{"per_month":2.5},"name":"day-tokens","tokens":{"input_per_day":10},"who":{"agent":"spender"}}]}` {
		t.Fatalf("GET /v1/limits after saving: %v", out)
	}
	tab.waitFor("the budget in the table, a bound a line", testEls("limit-budget-bound")+`.map((b) => b.textContent).join("; ") === "10 input tokens / day; 2.5 cost / month"`, 0)
	tab.waitFor("the budget on the card", input("tokens.input_per_day")+`.value === "10" && `+input("cost.per_month")+`.value === "2.5" && `+
		`!`+card+`.textContent.includes("Kept as it is")`, 0)
	shot(t, tab, "limits-budget", true)
	tab.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	tab.waitFor("the limits at a phone's width", fitsWidth+` && `+testEls("limit-budget")+`[0].getBoundingClientRect().right <= window.innerWidth`, 0)
	tab.do("a desktop's screen", chromedp.EmulateViewport(1280, 900))

	// A run of spender: two requests use 12 input tokens, and the third waits for the budget.
	th := site.namedThread(t, "spender", "Over its budget")
	startAPIRun(t, site.api, site.admin, th, "spender", "Read the clock twice, then answer.")
	var budget map[string]any
	waitUntil(t, "the run to pause for its budget", consoleWait, func() (bool, string) {
		_, _, out := apiDo(t, "GET", site.api+"/threads/"+th, site.admin, "")
		run, _ := out["run"].(map[string]any)
		budget, _ = run["budget"].(map[string]any)
		return out["status"] == "waiting" && run["reason"] == "budget_exhausted" && budget != nil, asJSON(out)
	})
	if budget["limit"] != "day-tokens" || !strings.Contains(fmt.Sprint(budget["message"]), `the limit "day-tokens" allows 10 input tokens per day and is reached`) {
		t.Fatalf("the run's budget: %v", budget)
	}

	tab.route("#/threads")
	status := testEls("thread-row") + `.find((r) => r.dataset.id === ` + js(th) + `)?.querySelector('[data-test="status"]')`
	tab.waitFor("the list: waits for its budget", status+`?.textContent === "waiting" && `+status+`.title.includes("waits for its budget") && `+
		status+`.title.includes("day-tokens")`, 0)

	tab.route("#/threads/" + th)
	box := testEls("budget") + `[0]`
	tab.waitFor("the thread page: the budget, not the approvals", box+`?.offsetParent !== null && `+box+`.textContent.includes("day-tokens") && `+
		testEls("budget-limit")+`[0].textContent === "day-tokens" && `+testEls("budget-retry")+`[0].textContent.length > 0 && `+
		testEls("budget-retry")+`[0].getAttribute("datetime") === `+js(fmt.Sprint(budget["retry_at"]))+` && `+
		testEls("waiting")+`[0].hidden && `+testEls("status")+`[0].textContent === "waiting" && `+
		testEls("tool-call")+`.length === 2`, 0)
	shot(t, tab, "thread-budget", true)

	// An admin raises the limit: the run goes on, and the page follows.
	if status, _, out := apiDo(t, "PUT", site.api+"/limits", site.admin,
		`{"document":{"limits":[{"name":"day-tokens","who":{"agent":"spender"},"tokens":{"input_per_day":1000}}]},"after":1}`); status != 200 {
		t.Fatalf("raising the limit: %d %v", status, out)
	}
	tab.waitFor("the run gone on", hasText("Done.")+` && `+box+`.hidden && `+testEls("status")+`[0].textContent === "idle"`, 0)
}
