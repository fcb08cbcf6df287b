package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/quiverhq/quiver/internal/oauthtest"
)

// A run that needs its person's connection, in the console and against quiver serve: an
// agent's call of an OpenAPI tool whose scheme is the person's connection to acme pauses the
// run, waiting_for_authorization; the approvals page lists the call as waiting for the
// connection, with a link to connect it; following the link and connecting (through the test
// OAuth server on loopback) has the run go on by itself and run the call with the person's
// token, which Acme's API knows.
func TestConsoleRunWaitsForConnection(t *testing.T) {
	timed(t)
	var as *oauthtest.AuthServer // the test OAuth server startConnectionsConsole starts
	acme := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, ok := as.Valid(tok); !ok {
			http.Error(w, "unknown token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"orders":3}`))
	}))
	t.Cleanup(acme.Close)
	agents, script := scriptedAgentsDir(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "quiver.yaml")
	document := filepath.Join(dir, "acme.json")
	writeTestFiles(t, map[string]string{
		document: `{"openapi":"3.0.3","info":{"title":"Acme","version":"1"},
 "components":{"securitySchemes":{"oauth":{"type":"oauth2","flows":{"authorizationCode":{"authorizationUrl":"https://acme.example/a",
   "tokenUrl":"https://acme.example/t","scopes":{"read":"Read."}}}}}},
 "security":[{"oauth":["read"]}],
 "paths":{"/orders":{"get":{"operationId":"orders","summary":"The caller's open orders.","responses":{"200":{"description":"ok"}}}}}}`,
		config: "openapi:\n  - name: acme\n    document: " + document + "\n    servers: ['" + acme.URL + "']\n" +
			"    connections: {oauth: {provider: acme}}\n",
		script("clerk"): `turns:
  - calls: [{name: acme.orders, args: {}}]
  - expect: {result_is_error: false, result_contains: "orders"}
    text: You have 3 open orders.
`,
		filepath.Join(agents, "clerk.yaml"): "name: clerk\ndescription: Counts your orders.\nmodel: scripted:" + script("clerk") + "\ntools: [acme.orders]\n",
	})
	acmeURL, _ := url.Parse(acme.URL)
	site, as, member := startConnectionsConsole(t, "--openapi-internal-hosts", acmeURL.Host, "--agents", agents, "--config", config)

	th := newAPIThread(t, site.api, member, "clerk")
	startAPIRun(t, site.api, member, th, "clerk", "How many open orders do I have?")
	waitUntil(t, "the run to wait for the connection", 30*time.Second, func() (bool, string) {
		_, _, out := apiDo(t, "GET", site.api+"/threads/"+th, member, "")
		run, _ := out["run"].(map[string]any)
		return out["status"] == "waiting" && run["reason"] == "waiting_for_authorization", asJSON(out)
	})

	tab := newBrowser(t)
	tab.do("a desktop's screen", chromedp.EmulateViewport(1280, 900))
	tab.signIn(site, member)
	tab.route("#/approvals")
	item := testEls("pending-item") + `.find((e) => e.dataset.reason === "waiting_for_authorization")`
	tab.waitFor("the call waiting for the connection", item+`?.textContent.includes("waits for a connection to acme") && `+
		item+`.querySelector('[data-test="pending-authorization"] a')?.getAttribute("href") === "#/connections?connect=acme&scopes=read"`, 0)
	tab.click("Connect it", item+`.querySelector('[data-test="pending-authorization"] a')`)
	card := testEls("provider") + `.find((c) => c.dataset.provider === "acme")`
	tab.waitFor("acme's card, asked", card+`?.classList.contains("asked")`, 0)
	tab.click("Connect", card+`.querySelector('[data-test="connect"]')`)
	tab.waitFor("back, connected", card+`?.querySelector('[data-test="connection-status"]')?.textContent === "connected"`, 0)

	if got := lastAnswer(t, site.api, member, th); got != "You have 3 open orders." {
		_, raw := threadMessages(t, site.api, member, th)
		t.Fatalf("the run answered %q; its thread: %s", got, raw)
	}
}
