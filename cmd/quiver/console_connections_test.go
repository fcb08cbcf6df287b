package main

import (
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/quiverhq/quiver/internal/oauthtest"
)

// The console's connections page (issue 51) in Chromium, against quiver serve and the test
// OAuth server on loopback: a person follows a tool's link (#/connections?connect=acme&scopes=
// read) and sees acme's card marked, nothing connected until they click Connect; the click
// sends the window through the provider's page and back to the page, which says so and lists
// the connection with the scope asked; the API agrees; Disconnect, after a second click,
// revokes it at the provider. The page requests nothing from another origin but the
// provider's page, and breaks no Content-Security-Policy. An admin edits the providers
// document (a refusal names its field); a viewer is offered no button. QUIVER_SCREENSHOTS=1
// saves docs/console/connections.png and connections-phone.png.

// startConnectionsConsole starts quiver serve with its public URL its own address (the
// callback providers send people back to is on it) and the auth server's host allowed although
// it is on loopback, and declares acme and globex at the auth server. It returns the site (with
// a viewer's key), the auth server and a member's key. extra are more of quiver serve's
// arguments; hosts it allows first (--openapi-internal-hosts) join the auth server's.
func startConnectionsConsole(t *testing.T, extra ...string) (site *consoleSite, as *oauthtest.AuthServer, member string) {
	t.Helper()
	chromiumPath(t)
	as = oauthtest.NewAuthServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	asURL, _ := url.Parse(as.URL)
	internal := asURL.Host
	if len(extra) >= 2 && extra[0] == "--openapi-internal-hosts" {
		internal, extra = internal+","+extra[1], extra[2:]
	}
	endpoint, _, stderr := startServeWith(t, append([]string{"--db", filepath.Join(t.TempDir(), "q.db"), "--addr", addr, "--public-url", "http://" + addr,
		"--openapi-internal-hosts", internal}, extra...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("quiver serve's log:\n%s", stderr.String())
		}
	})
	base := strings.TrimSuffix(endpoint, "/mcp")
	if base != "http://"+addr {
		t.Fatalf("quiver serve listens at %s, not %s", base, addr)
	}
	site = &consoleSite{origin: base, api: base + "/v1", admin: firstKeyRE.FindString(stderr.String())}
	member = site.addRoleKeys(t)
	client := as.Register(base + "/connections/callback")
	doc := map[string]any{"providers": []map[string]any{
		{"name": "acme", "description": "Acme's orders and invoices.", "authorization_url": as.URL + "/authorize", "token_url": as.URL + "/token",
			"revocation_url": as.URL + "/revoke", "client_id": client, "scopes": []string{"read", "write"}},
		{"name": "globex", "description": "Globex's calendar.", "authorization_url": as.URL + "/authorize", "token_url": as.URL + "/token",
			"client_id": client, "scopes": []string{"calendar.read"}},
	}}
	if status, _, out := apiDo(t, "PUT", site.api+"/connection-providers", site.admin, asJSON(map[string]any{"document": doc, "after": 0})); status != 200 {
		t.Fatalf("declaring the providers: %d %v", status, out)
	}
	return site, as, member
}

// connectionsOf is the key's connections, as GET /v1/connections lists them.
func connectionsOf(t *testing.T, site *consoleSite, key string) []any {
	t.Helper()
	status, _, out := apiDo(t, "GET", site.api+"/connections", key, "")
	list, ok := out["connections"].([]any)
	if status != 200 || !ok {
		t.Fatalf("GET /v1/connections: %d %v", status, out)
	}
	return list
}

func TestConsoleConnections(t *testing.T) {
	timed(t)
	site, as, member := startConnectionsConsole(t)
	tab := newBrowser(t)
	tab.do("a desktop's screen", chromedp.EmulateViewport(1280, 900))
	tab.signIn(site, member)

	// A tool's link, as the API gives it, opened in the signed-in tab: acme's card is marked
	// and asks for read; nothing is connected until the person clicks.
	tab.do("following a tool's link", chromedp.Navigate(site.origin+"/console/#/connections?connect=acme&scopes=read"))
	acme := testEls("provider") + `.find((c) => c.dataset.provider === "acme")`
	globex := testEls("provider") + `.find((c) => c.dataset.provider === "globex")`
	tab.waitFor("acme's card marked, asking for read", acme+`?.classList.contains("asked") && `+acme+`.querySelector('[data-test="asked"]') && `+
		acme+`.querySelector('[data-test="asked-note"]').textContent.includes("with read") && `+
		acme+`.querySelector('[data-test="asks-for"]').textContent === "Connect asks for read." && `+
		acme+`.querySelector('[data-test="connect"]').textContent === "Connect" && `+
		acme+`.querySelector('[data-test="connection-status"]').textContent === "not connected" && `+
		acme+`.textContent.includes("Acme's orders and invoices.")`, 0)
	tab.waitFor("globex's card, not marked", globex+` && !`+globex+`.classList.contains("asked") && `+
		globex+`.querySelector('[data-test="asks-for"]').textContent === "Connect asks for every scope it offers."`, 0)
	if n := len(connectionsOf(t, site, member)); n != 0 || as.Authorizes.Load() != 0 {
		t.Fatalf("following the link connected something: %d connections, %d authorizations", n, as.Authorizes.Load())
	}
	noCSP := func(where string) {
		t.Helper()
		if v := tab.string(`window.__csp.join("\n")`); v != "" {
			t.Errorf("%s: the page broke the Content-Security-Policy:\n%s", where, v)
		}
	}
	noCSP("before connecting")
	shot(t, tab, "connections", true)

	// Connect: through the provider's page and back, to the page saying so, the connection
	// listed with the scope asked.
	tab.click("Connect", acme+`.querySelector('[data-test="connect"]')`)
	tab.waitFor("back, connected", testEls("connected-note")+`[0]?.textContent.includes("Connected to acme, with read") && `+
		acme+`?.querySelector('[data-test="connection-status"]').textContent === "connected" && `+
		acme+`.querySelector('[data-test="granted"]').textContent === "read" && `+
		acme+`.querySelector('[data-test="expiry"]').textContent.includes("expires") && `+
		acme+`.querySelector('[data-test="connect"]').textContent === "Reconnect" && `+
		`!`+acme+`.classList.contains("asked") && location.hash === "#/connections"`, 0)
	if got := as.Authorizes.Load(); got != 1 || as.CodeGrants.Load() != 1 {
		t.Errorf("the provider saw %d authorizations and %d code grants, want 1 and 1", got, as.CodeGrants.Load())
	}
	list := connectionsOf(t, site, member)
	if c, _ := list[0].(map[string]any); len(list) != 1 || c["provider"] != "acme" || asJSON(c["scopes"]) != `["read"]` || c["expires_at"] == nil {
		t.Fatalf("GET /v1/connections after connecting: %s", asJSON(list))
	}
	noCSP("back from the provider")
	// The page asked its own origin for everything; the window went to the provider's page
	// alone, once.
	away := 0
	for _, r := range tab.requests.all() {
		switch {
		case strings.HasPrefix(r.URL, site.origin+"/"):
		case strings.HasPrefix(r.URL, as.URL+"/authorize?") && r.Method == "GET":
			away++
		default:
			t.Errorf("the page sent a request to another origin: %s %s", r.Method, r.URL)
		}
	}
	if away != 1 {
		t.Errorf("the window went to the provider's page %d times, want once", away)
	}
	// The flow's cookie went with the callback, and is gone.
	cookies, err := chromedp.Call(tab.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{site.origin + "/connections/callback"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cookies.Cookies) > 0 {
		t.Errorf("the flow's cookie stayed: %v", asJSON(cookies.Cookies))
	}
	tab.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	tab.waitFor("the page at a phone's width", fitsWidth+` && `+acme+`.getBoundingClientRect().right <= window.innerWidth && `+
		acme+`.querySelector('[data-test="disconnect"]').getBoundingClientRect().right <= window.innerWidth`, 0)
	shot(t, tab, "connections-phone", false)
	tab.do("a desktop's screen", chromedp.EmulateViewport(1280, 900))

	// Disconnect asks first; Cancel keeps it; the second click revokes it at the provider.
	tab.click("Disconnect", acme+`.querySelector('[data-test="disconnect"]')`)
	tab.click("Cancel", acme+`.querySelector('[data-test="disconnect-cancel"]')`)
	tab.waitFor("still connected", acme+`.querySelector('[data-test="disconnect"]') && `+acme+`.querySelector('[data-test="connect"]')`, 0)
	if n := len(connectionsOf(t, site, member)); n != 1 {
		t.Fatalf("Cancel disconnected: %d connections", n)
	}
	revoked := as.Revocations.Load()
	tab.click("Disconnect", acme+`.querySelector('[data-test="disconnect"]')`)
	tab.click("Disconnect, again", acme+`.querySelector('[data-test="disconnect-confirm"]')`)
	tab.waitFor("disconnected", testEls("disconnected-note")+`[0]?.textContent.includes("Disconnected from acme") && `+
		acme+`?.querySelector('[data-test="connection-status"]').textContent === "not connected" && !`+acme+`.querySelector('[data-test="disconnect"]')`, 0)
	if n := len(connectionsOf(t, site, member)); n != 0 || as.Revocations.Load() == revoked {
		t.Errorf("after disconnecting: %d connections, %d revocations (%d before)", n, as.Revocations.Load(), revoked)
	}
	noCSP("after disconnecting")

	// A link that names a scope the provider does not offer: the refusal is shown on the card,
	// and the window stays.
	tab.route("#/connections?connect=acme&scopes=admin")
	tab.waitFor("acme asking for admin", acme+`?.querySelector('[data-test="asks-for"]')?.textContent === "Connect asks for admin."`, 0)
	tab.click("Connect", acme+`.querySelector('[data-test="connect"]')`)
	tab.waitFor("the refusal", acme+`.querySelector('[data-test="error"]')?.textContent.includes("body.scopes[0]") && `+
		`location.origin === `+js(site.origin)+` && !`+acme+`.querySelector('[data-test="connect"]').disabled`, 0)
	// A link to a provider the workspace does not declare says so.
	tab.route("#/connections?connect=initech")
	tab.waitFor("an undeclared provider", testEls("asked-unknown")+`[0]?.textContent.includes("initech")`, 0)
	if tab.bool(`!!document.querySelector("#main textarea")`) {
		t.Error("a member is offered the providers document")
	}

	// A viewer reads the providers, and is offered no button.
	viewer := tab.newTab()
	viewer.signIn(site, site.viewer)
	viewer.route("#/connections?connect=acme&scopes=read")
	viewer.waitFor("the viewer's page", testEls("viewer")+`.length === 1 && `+testEls("provider")+`.length === 2`, 0)
	if n := viewer.string(`document.querySelectorAll('#main button, #main textarea').length`); n != "0" {
		t.Errorf("a viewer is offered %s buttons or fields on the connections page", n)
	}
}

// An admin edits the providers document: a refusal names its field and marks the document;
// saved, the page shows the providers declared; another admin's change made meanwhile is
// refused, and the page offers the document in force.
func TestConsoleConnectionsProviders(t *testing.T) {
	timed(t)
	site, as, _ := startConnectionsConsole(t)
	tab := newBrowser(t)
	tab.signIn(site, site.admin)
	tab.route("#/connections")
	doc := testEls("providers-document") + `[0]`
	tab.waitFor("the document in force", doc+`?.value.includes('"acme"') && `+testEls("providers-version")+`[0].textContent.includes("Version 1") && `+
		testEls("redirect-uri")+`[0].textContent === `+js(site.origin+"/connections/callback"), 0)

	bad := `{"providers": [{"name": "initech", "authorization_url": "` + as.URL + `/authorize", "token_url": "ftp://initech.example/token", "client_id": "c"}]}`
	tab.fill("the document", doc, bad)
	tab.click("Save", testEls("providers-save")+`[0]`)
	tab.waitFor("the refusal naming the field", testEls("error")+`.some((e) => e.textContent.includes("body.document.providers[0].token_url")) && `+
		doc+`.getAttribute("aria-invalid") === "true"`, 0)
	if _, _, out := apiDo(t, "GET", site.api+"/connection-providers", site.admin, ""); out["version"] != float64(1) {
		t.Fatalf("a refused document was stored: %v", out)
	}
	tab.fill("the document", doc, "{not json")
	tab.click("Save", testEls("providers-save")+`[0]`)
	tab.waitFor("not JSON", testEls("error")+`.some((e) => e.textContent.includes("not JSON"))`, 0)

	good := `{"providers": [{"name": "initech", "description": "Initech's TPS reports.", "authorization_url": "` + as.URL + `/authorize", ` +
		`"token_url": "` + as.URL + `/token", "client_id": "c", "scopes": ["tps"]}]}`
	tab.fill("the document", doc, good)
	tab.click("Save", testEls("providers-save")+`[0]`)
	tab.waitFor("saved", testEls("providers-saved")+`[0]?.offsetParent !== null && `+testEls("providers-saved")+`[0].textContent.includes("version 2") && `+
		testEls("provider")+`.map((c) => c.dataset.provider).join() === "initech" && `+doc+`.getAttribute("aria-invalid") === null`, 0)
	if _, _, out := apiDo(t, "GET", site.api+"/connection-providers", site.admin, ""); !strings.Contains(asJSON(out["document"]), `"initech"`) {
		t.Fatalf("GET /v1/connection-providers after saving: %v", out)
	}

	// Another admin's change meanwhile: refused, and the document in force offered.
	if status, _, out := apiDo(t, "PUT", site.api+"/connection-providers", site.admin, `{"document": {}, "after": 2}`); status != 200 {
		t.Fatalf("another admin's change: %d %v", status, out)
	}
	tab.click("Save", testEls("providers-save")+`[0]`)
	tab.click("load the document in force", testEls("providers-reload")+`[0]`)
	tab.waitFor("the document in force", testEls("providers-version")+`[0].textContent.includes("Version 3") && `+testEls("providers-empty")+`.length === 1`, 0)
	if v := tab.string(`window.__csp.join("\n")`); v != "" {
		t.Errorf("the page broke the Content-Security-Policy:\n%s", v)
	}
}
