package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The console's governance page (issue 46) in Chromium: the operator's rules of the
// configuration, read-only; the workspace's, which an admin edits a row per rule and saves
// with the version read, the API's refusal shown beside the rule it names; read-only for a
// member and a viewer.

// startGovernanceConsole starts quiver serve with a configuration of two operator's rules,
// a stored tool charge (no confirmation of its own) and member and viewer keys.
func startGovernanceConsole(t *testing.T) (site *consoleSite, member string) {
	t.Helper()
	chromiumPath(t)
	cfg := filepath.Join(t.TempDir(), "quiver.yaml")
	writeTestFiles(t, map[string]string{cfg: "governance:\n" +
		"  - source: 'mcp:*'\n    when: {destructiveHint: true}\n    requires_confirmation: true\n" +
		"  - tools: [charge]\n    timeout: 2m\n"})
	endpoint, _, stderr := startServeWith(t, "--db", filepath.Join(t.TempDir(), "q.db"), "--config", cfg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("quiver serve's log:\n%s", stderr.String())
		}
	})
	base := strings.TrimSuffix(endpoint, "/mcp")
	site = &consoleSite{origin: base, api: base + "/v1", admin: firstKeyRE.FindString(stderr.String())}
	createJSTool(t, site.api, site.admin, "charge", `export default ({ amount }) => "charged " + amount`,
		`{"type":"object","description":"Charges an amount.","properties":{"amount":{"type":"integer"}},"required":["amount"]}`, false)
	return site, site.addRoleKeys(t)
}

// An admin sees the operator's rules, read-only, adds a rule requiring confirmation of charge
// (first with a timeout the API refuses, shown beside the rule, nothing saved), and the API
// and the tool then say so; saving from a version another admin has changed since is refused,
// and the page loads the rules in force. A member and a viewer see both lists and can change
// nothing.
func TestConsoleGovernance(t *testing.T) {
	timed(t)
	site, member := startGovernanceConsole(t)
	tab := newBrowser(t)
	tab.signIn(site, site.admin)
	tab.click("Governance in the navigation", `[...document.querySelectorAll("#nav a")].find((a) => a.textContent.trim() === "Governance")`)
	operator := testEls("operator-rule")
	tab.waitFor("the operator's rules", operator+`.length === 2 && `+operator+`[0].textContent.includes("mcp:*") && `+
		operator+`[0].textContent.includes("requires confirmation") && `+operator+`[1].textContent.includes("timeout 2m")`, 0)
	if n := tab.string(`document.querySelectorAll('[data-test="operator-rules"] input, [data-test="operator-rules"] select, [data-test="operator-rules"] button').length`); n != "0" {
		t.Errorf("the operator's rules offer %s fields or buttons", n)
	}
	tab.waitFor("no workspace rules yet", testEls("governance-version")+`[0].textContent.includes("None set yet")`, 0)

	tab.click("Add a rule", testEls("rule-add")+`[0]`)
	rule := testEls("workspace-rule") + `[0]`
	tab.fill("the rule's tools", rule+`.querySelector('[name="tools"]')`, "charge")
	tab.fill("the rule's timeout", rule+`.querySelector('[name="timeout"]')`, "soon")
	tab.click("requires confirmation", rule+`.querySelector('[name="requires_confirmation"]')`)
	tab.click("Save", testEls("governance-save")+`[0]`)
	tab.waitFor("the refusal beside the rule", testEls("rule-error")+`[0]?.textContent.includes("body.rules[0].timeout")`, 0)
	tab.waitFor("the refusal, with its field, above", testEls("error")+`.some((e) => e.textContent.includes("body.rules[0].timeout: ") && e.textContent.includes("not a duration"))`, 0)
	if _, _, out := apiDo(t, "GET", site.api+"/governance", site.admin, ""); out["version"] != float64(0) {
		t.Fatalf("a refused rule was stored: %v", out)
	}

	tab.fill("the rule's timeout", rule+`.querySelector('[name="timeout"]')`, "30s")
	tab.click("Save", testEls("governance-save")+`[0]`)
	tab.waitFor("saved", testEls("saved")+`[0]?.offsetParent !== null && `+testEls("saved")+`[0].textContent.includes("version 1")`, 0)
	_, _, out := apiDo(t, "GET", site.api+"/governance", site.admin, "")
	if got := asJSON(out["workspace"]); out["version"] != float64(1) || got != `[{"requires_confirmation":true,"timeout":"30s","tools":["charge"]}]` {
		t.Fatalf("GET /v1/governance after saving: version %v, workspace %s", out["version"], got)
	}
	if _, _, tool := apiDo(t, "GET", site.api+"/tools/served/charge", site.admin, ""); tool["requires_confirmation"] != true {
		t.Errorf("charge after the workspace's rule: %v, want it to require confirmation", tool)
	}

	// Another admin changes the rules meanwhile: saving from version 1 is refused, and the
	// page offers the rules now in force.
	if status, _, out := apiDo(t, "PUT", site.api+"/governance", site.admin,
		`{"rules":[{"tools":["charge","refund"],"requires_confirmation":true}],"version":1}`); status != 200 {
		t.Fatalf("another admin's change: %d %v", status, out)
	}
	tab.click("Save", testEls("governance-save")+`[0]`)
	tab.click("load the rules in force", testEls("governance-reload")+`[0]`)
	tab.waitFor("the rules in force", rule+`.querySelector('[name="tools"]').value === "charge, refund" && `+
		testEls("governance-version")+`[0].textContent.includes("Version 2")`, 0)

	for role, key := range map[string]string{"member": member, "viewer": site.viewer} {
		other := tab.newTab()
		other.signIn(site, key)
		other.route("#/governance")
		other.waitFor(role+": both lists", testEls("operator-rule")+`.length === 2 && `+testEls("workspace-rule")+
			`.some((e) => e.textContent.includes("charge, refund") && e.textContent.includes("requires confirmation"))`, 0)
		if n := other.string(`document.querySelectorAll('#main input, #main select, #main textarea, #main button').length`); n != "0" {
			t.Errorf("a %s is offered %s fields or buttons on the governance page", role, n)
		}
		if !other.bool(testEls("not-admin") + `.length === 1`) {
			t.Errorf("a %s is not told that only an admin changes the rules", role)
		}
	}
}

// addRoleKeys gives the site a viewer's key (site.viewer) and returns a member's.
func (site *consoleSite) addRoleKeys(t *testing.T) (member string) {
	t.Helper()
	keys := map[string]string{}
	for _, role := range []string{"member", "viewer"} {
		status, _, out := apiDo(t, "POST", site.api+"/keys", site.admin, `{"role":"`+role+`","name":"a `+role+`"}`)
		keys[role], _ = out["secret"].(string)
		if status != 201 || keys[role] == "" {
			t.Fatalf("a %s's key: %d %v", role, status, out)
		}
	}
	site.viewer = keys["viewer"]
	return keys["member"]
}
