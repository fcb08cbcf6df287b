package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// A run that cannot start shows on the thread page as it happens, and on a page opened later:
// the thread's status failed, the reason (bad_definition: the agent's prompt names a tool the
// server does not have) and the server's words for it, naming the tool. Before, the page
// showed the thread idle with no step and said nothing.
func TestConsoleShowsAFailedRun(t *testing.T) {
	timed(t)
	chromiumPath(t)
	agents, script := scriptedAgentsDir(t)
	writeTestFiles(t, map[string]string{
		script("lister"):                     "turns:\n  - text: Listed.\n",
		filepath.Join(agents, "lister.yaml"): "name: lister\nmodel: scripted:" + script("lister") + "\ntools: [vanished_tool]\n",
	})
	db := filepath.Join(t.TempDir(), "q.db")
	base, admin := serveAgentsAPI(t, []string{"--db", db}, agents)
	site := &consoleSite{origin: strings.TrimSuffix(base, "/v1"), api: base, admin: admin}
	threadID := site.namedThread(t, "lister", "Broken lister")

	failed := func(tab *browserTab) {
		t.Helper()
		tab.waitFor("the failure's reason", testEls("run-failure-reason")+`.some((e) => e.textContent === "bad_definition")`, 0)
		tab.waitFor("the failure's words, naming the tool", testEls("run-failure")+`.some((e) => e.textContent.includes("vanished_tool"))`, 0)
		tab.waitFor("the thread's status", testEls("status")+`.some((e) => e.textContent === "failed")`, 0)
		tab.waitFor("the outcome shown as an error", testEls("run-outcome")+`.some((e) => !e.hidden && e.classList.contains("error"))`, 0)
	}
	live := newBrowser(t)
	live.signIn(site, admin)
	live.route("#/threads/" + threadID)
	form := testEls("run-form") + `[0]`
	live.waitFor("the run form", form, 0)
	live.do("typing the message", chromedp.SendKeys(chromedp.JSPath(form+`.querySelector('[name="message"]')`), "List them."))
	live.click("Run", testEls("run-submit")+`[0]`)
	failed(live)

	later := live.newTab()
	later.signIn(site, admin)
	later.route("#/threads/" + threadID)
	failed(later)

	// The thread list says so too, and its failed filter keeps the thread.
	later.route("#/threads?status=failed")
	later.waitFor("the list's row, failed", testEls("thread-row")+`.some((r) => r.dataset.id === "`+threadID+
		`" && r.querySelector('[data-test="status"]').textContent === "failed")`, 0)

	// The CLI's list, the same platform's.
	code, out, errOut := runCLI(t, "", "threads", "list", "--status", "failed", "--json", "--db", db)
	var list struct {
		Threads []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Run    struct {
				Reason string `json:"reason"`
			} `json:"run"`
		} `json:"threads"`
	}
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list.Threads) != 1 || list.Threads[0].ID != threadID ||
		list.Threads[0].Status != "failed" || list.Threads[0].Run.Reason != "bad_definition" {
		t.Errorf("quiver threads list --status failed: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "", "threads", "list", "--status", "broken", "--db", db); code != exitUsage || !strings.Contains(errOut, "--status must be") {
		t.Errorf("an unknown status: %d %s", code, errOut)
	}
}
