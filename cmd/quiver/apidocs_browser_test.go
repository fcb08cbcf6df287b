package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The API reference in a real browser, under the console's Content-Security-Policy, from
// quiver serve with keys required (the reference needs none): it renders every operation of
// the served OpenAPI document, grouped by resource, with parameters, bodies and answers; its
// filter narrows the list; the policy blocks nothing, and every request the page sends goes to
// the server itself.
func TestAPIReferenceInABrowser(t *testing.T) {
	chromiumPath(t) // skip (or fail) before starting anything
	endpoint, _, _ := startServeWith(t, "--db", filepath.Join(t.TempDir(), "q.db"))
	origin := strings.TrimSuffix(endpoint, "/mcp")

	resp, err := http.Get(origin + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	operations := 0
	for _, item := range doc.Paths {
		for method := range item {
			if strings.Contains("get post put patch delete", method) {
				operations++
			}
		}
	}
	if operations < 20 {
		t.Fatalf("the document has %d operations", operations)
	}

	tab := newBrowser(t)
	tab.do("opening the reference", chromedp.Navigate(origin+"/v1/docs"))
	tab.waitFor("the reference to render", `document.body.dataset.rendered === "true"`, 0)
	if got := evalIn[int](tab, testEls("operation")+`.length`); got != operations {
		t.Errorf("the page shows %d operations, the document has %d", got, operations)
	}
	for what, cond := range map[string]string{
		"groups by resource":           `["threads", "tools", "keys"].every((g) => document.getElementById("group-" + g))`,
		"call-tool's path parameter":   `[...document.querySelectorAll('#op-call-tool [data-test=parameter] code')].some((e) => e.textContent === "name")`,
		"call-tool's body field args":  `[...document.querySelectorAll("#op-call-tool .body .prop-name")].some((e) => e.textContent === "args")`,
		"call-tool's 200 answer":       `[...document.querySelectorAll("#op-call-tool [data-test=response] summary")].some((e) => e.textContent.startsWith("200"))`,
		"the decision body's fields":   `["call_id", "action", "args", "message", "agent"].every((f) => [...document.querySelectorAll("#op-decide .body .prop-name")].some((e) => e.textContent === f))`,
		"a thread's waiting status":    `document.getElementById("op-get-thread").textContent.includes('"waiting"')`,
		"the schemas, linked to":       `document.getElementById("schema-ThreadView") && document.querySelector('a[href="#schema-ThreadView"]')`,
		"the document's text, as text": `!document.querySelector("#main script, #main iframe, #main img")`,
	} {
		if !tab.bool(`!!(` + cond + `)`) {
			t.Errorf("the reference lacks %s (%s)", what, cond)
		}
	}

	// The filter narrows the operations to those that match, and the table of contents too.
	tab.do("filtering", chromedp.SendKeys("#filter", "threads/{id}/decisions"))
	tab.waitFor("the filter to apply", testEls("operation")+`.filter((e) => !e.hidden).length === 1`, 0)
	if !tab.bool(`!document.getElementById("op-decide").hidden && document.querySelectorAll("#toc li:not([hidden])").length === 1`) {
		t.Errorf("filtering by threads/{id}/decisions shows %s", tab.string(testEls("operation")+`.filter((e) => !e.hidden).map((e) => e.id).join(", ")`))
	}

	// A link to an operation opens the page there, once it has rendered.
	linked := tab.newTab()
	linked.do("opening the reference at an operation", chromedp.Navigate(origin+"/v1/docs#op-start-run"))
	linked.waitFor("the operation linked to, in view", `document.body.dataset.rendered === "true" && (() => {
		const r = document.getElementById("op-start-run").getBoundingClientRect();
		return r.top >= 0 && r.top < innerHeight; })()`, 0)

	if v := tab.string(`window.__csp.join("\n")`); v != "" {
		t.Errorf("the Content-Security-Policy blocked:\n%s", v)
	}
	for _, r := range tab.requests.all() {
		if !strings.HasPrefix(r.URL, origin+"/") {
			t.Errorf("the page sent a request to another origin: %s", r.URL)
		}
	}
}
