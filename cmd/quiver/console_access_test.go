package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The console's access page (issue 49) in Chromium: the toolsets and the rules an admin set, an admin's edit of the document (refused naming the field, saved with
// warnings, refused when another admin changed it meanwhile), explain, and a member's view:
// the toolsets and a question about themselves, no editor.

// consoleAccessDocument is the document the page starts from, set through the API as an admin sets
// one where the configuration has no entitlements block (with one, the block is the document,
// and the API refuses changes).
const consoleAccessDocument = `{"after": 0, "document": {
  "toolsets": [{"name": "support", "description": "What support works with", "include": [{"tools": ["lookup_order", "refund_payment"]}]}],
  "rules": [{"who": {"role": "viewer"}, "tools": ["lookup_order"], "access": "allow", "description": "Viewers look orders up"}]}}`

// startAccessConsole starts quiver serve with the stored tools lookup_order and
// refund_payment, consoleAccessDocument, and a member's key.
func startAccessConsole(t *testing.T) (site *consoleSite, member string) {
	t.Helper()
	chromiumPath(t)
	endpoint, _, stderr := startServeWith(t, "--db", filepath.Join(t.TempDir(), "q.db"))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("quiver serve's log:\n%s", stderr.String())
		}
	})
	base := strings.TrimSuffix(endpoint, "/mcp")
	site = &consoleSite{origin: base, api: base + "/v1", admin: firstKeyRE.FindString(stderr.String())}
	for _, name := range []string{"lookup_order", "refund_payment"} {
		createJSTool(t, site.api, site.admin, name, `export default () => "done"`, `{"type":"object","description":"Does it.","properties":{}}`, false)
	}
	if status, _, out := apiDo(t, "PUT", site.api+"/entitlements", site.admin, consoleAccessDocument); status != 200 {
		t.Fatalf("the first document: %d %v", status, out)
	}
	status, _, out := apiDo(t, "POST", site.api+"/keys", site.admin, `{"role":"member","name":"a member"}`)
	member, _ = out["secret"].(string)
	if status != 201 || member == "" {
		t.Fatalf("a member's key: %d %v", status, out)
	}
	return site, member
}

// accessDecision fills the explain form and waits for its answer: allowed or not.
func accessDecision(tab *browserTab, subject, tool, want string) {
	tab.t.Helper()
	if subject != "-" {
		tab.fill("the subject", testEls("explain-subject")+`[0]`, subject)
	}
	tab.fill("the tool", testEls("explain-tool")+`[0]`, tool)
	tab.click("Explain", testEls("explain-ask")+`[0]`)
	tab.waitFor(subject+" may call "+tool+": "+want, testEls("explain-allowed")+`[0]?.textContent === `+js(want)+` && `+
		testEls("explain-decision")+`[0].textContent.includes(`+js(tool)+`)`, 0)
}

func TestConsoleAccess(t *testing.T) {
	timed(t)
	site, member := startAccessConsole(t)
	tab := newBrowser(t)
	tab.signIn(site, site.admin)
	tab.click("Access in the navigation", `[...document.querySelectorAll("#nav a")].find((a) => a.textContent.trim() === "Access")`)

	// The document: its toolset, at its own MCP address, and its rule.
	tab.waitFor("the support toolset", testEls("toolset")+`.length === 1 && `+testEls("toolset")+`[0].textContent.includes("What support works with") && `+
		testEls("toolset-tools")+`[0].textContent === "lookup_order, refund_payment" && `+
		testEls("toolset-address")+`[0].textContent === `+js(site.origin+"/mcp/support"), 0)
	tab.waitFor("the document's rule", testEls("access-rule")+`.length === 1 && `+testEls("access-rule")+`[0].textContent.includes("role:viewer") && `+
		testEls("access-rule")+`[0].textContent.includes("Viewers look orders up") && `+testEls("access-version")+`[0].textContent.includes("Version 1")`, 0)
	accessDecision(tab, "role:viewer", "refund_payment", "not allowed")
	accessDecision(tab, "role:member", "refund_payment", "allowed")

	// A document the API refuses: the field named, nothing stored.
	doc := testEls("access-document") + `[0]`
	tab.fill("the document", doc, `{"rules": [{"tools": ["refund_payment"], "access": "maybe"}]}`)
	tab.click("Save", testEls("access-save")+`[0]`)
	tab.waitFor("the refusal naming the field", testEls("error")+`.some((e) => e.textContent.includes("body.document.rules[0].access"))`, 0)
	if _, _, out := apiDo(t, "GET", site.api+"/entitlements", site.admin, ""); out["version"] != float64(1) {
		t.Fatalf("a refused document was stored: %v", out)
	}

	// A document that denies members refund_payment and names a tool not there: saved, warned.
	tab.fill("the document", doc, `{"rules": [{"who": {"role": "member"}, "tools": ["refund_payment", "no_such_tool"], "access": "deny", `+
		`"description": "Members never refund"}], "toolsets": [{"name": "support", "include": [{"tools": ["lookup_order", "refund_payment"]}]}]}`)
	tab.click("Save", testEls("access-save")+`[0]`)
	tab.waitFor("saved, with a warning", testEls("access-saved")+`[0]?.offsetParent !== null && `+testEls("access-saved")+`[0].textContent.includes("version 2") && `+
		testEls("access-warning")+`.some((w) => w.textContent.includes("no_such_tool"))`, 0)
	tab.waitFor("the rules shown", testEls("access-rule")+`.length === 1 && `+testEls("access-rule")+`[0].textContent.includes("Members never refund")`, 0)
	if _, _, out := apiDo(t, "GET", site.api+"/entitlements", site.admin, ""); out["version"] != float64(2) ||
		!strings.Contains(asJSON(out["document"]), `"Members never refund"`) {
		t.Fatalf("GET /v1/entitlements after saving: %v", out)
	}
	accessDecision(tab, "role:member", "refund_payment", "not allowed")
	tab.waitFor("the deciding rule", testEls("explain-rule")+`[0]?.textContent.includes("rules[0]")`, 0)

	// Another admin changes the document meanwhile: saving from version 2 is refused, and the
	// page loads the document in force.
	if status, _, out := apiDo(t, "PUT", site.api+"/entitlements", site.admin,
		`{"document": {"default": "allow", "rules": [{"tools": ["refund_payment"], "access": "deny", "description": "Nobody refunds"}]}, "after": 2}`); status != 200 {
		t.Fatalf("another admin's change: %d %v", status, out)
	}
	tab.click("Save", testEls("access-save")+`[0]`)
	tab.click("load the document in force", testEls("access-reload")+`[0]`)
	tab.waitFor("the document in force", doc+`.value.includes("Nobody refunds") && `+testEls("access-version")+`[0].textContent.includes("Version 3")`, 0)

	// A member: the toolsets, with what they may call, and a question about themselves.
	if status, _, out := apiDo(t, "PUT", site.api+"/entitlements", site.admin,
		`{"document": {"rules": [{"who": {"role": "member"}, "tools": ["refund_payment"], "access": "deny"}], `+
			`"toolsets": [{"name": "support", "include": [{"tools": ["lookup_order", "refund_payment"]}]}]}, "after": 3}`); status != 200 {
		t.Fatalf("the member's rules: %d %v", status, out)
	}
	other := tab.newTab()
	other.signIn(site, member)
	other.route("#/access")
	other.waitFor("the member's toolsets", testEls("toolset-tools")+`[0]?.textContent === "lookup_order"`, 0)
	if n := other.string(`document.querySelectorAll('#main textarea, [data-test="access-rules"], [data-test="access-save"], [data-test="explain-subject"]').length`); n != "0" {
		t.Errorf("a member is offered %s parts of the editor", n)
	}
	if !other.bool(testEls("not-admin") + `.length === 1`) {
		t.Error("a member is not told that only an admin reads and changes the rules")
	}
	accessDecision(other, "-", "refund_payment", "not allowed")
	accessDecision(other, "-", "lookup_order", "allowed")
}
