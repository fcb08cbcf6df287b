package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The console's limits page (issue 50) in Chromium: an admin reads the workspace's limits as a
// table and edits them a card per limit, saved with the version read; the API's refusal is
// shown on the card of the limit it names, beside the field; another admin's change made
// meanwhile is refused and the page offers the limits in force; limits that the configuration
// file sets are refused with the configuration's message; a member and a viewer are told that
// only an admin reads them, and offered nothing.

// startLimitsConsole starts quiver serve with config (a configuration file's text, or none)
// and returns the site, with member and viewer keys.
func startLimitsConsole(t *testing.T, config string) (site *consoleSite, member string) {
	t.Helper()
	chromiumPath(t)
	args := []string{"--db", filepath.Join(t.TempDir(), "q.db")}
	if config != "" {
		cfg := filepath.Join(t.TempDir(), "quiver.yaml")
		writeTestFiles(t, map[string]string{cfg: config})
		args = append(args, "--config", cfg)
	}
	endpoint, _, stderr := startServeWith(t, args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("quiver serve's log:\n%s", stderr.String())
		}
	})
	base := strings.TrimSuffix(endpoint, "/mcp")
	site = &consoleSite{origin: base, api: base + "/v1", admin: firstKeyRE.FindString(stderr.String())}
	return site, site.addRoleKeys(t)
}

func TestConsoleLimits(t *testing.T) {
	timed(t)
	site, member := startLimitsConsole(t, "")
	tab := newBrowser(t)
	tab.signIn(site, site.admin)
	tab.click("Limits in the navigation", `[...document.querySelectorAll("#nav a")].find((a) => a.textContent.trim() === "Limits" && !a.hidden)`)
	tab.waitFor("no limits yet", testEls("limits-version")+`[0]?.textContent.includes("None set yet") && `+testEls("limits-empty")+`.length === 1`, 0)

	// A limit with a bound the API refuses: shown on its card, its field marked; nothing saved.
	tab.click("Add a limit", testEls("limit-add")+`[0]`)
	card := testEls("limit-card") + `[0]`
	tab.fill("the limit's name", card+`.querySelector('[name="name"]')`, "each-key")
	tab.click("per key", card+`.querySelector('[name="per.key"]')`)
	tab.fill("calls per minute", card+`.querySelector('[name="calls.per_minute"]')`, "-5")
	tab.click("Save", testEls("limits-save")+`[0]`)
	tab.waitFor("the refusal on the limit's card", testEls("limit-error")+`[0]?.textContent.includes("body.document.limits[0].calls.per_minute") && `+
		card+`.querySelector('[name="calls.per_minute"]').getAttribute("aria-invalid") === "true"`, 0)
	if _, _, out := apiDo(t, "GET", site.api+"/limits", site.admin, ""); out["version"] != float64(0) {
		t.Fatalf("a refused limit was stored: %v", out)
	}

	// Put right and saved: the API has it, the table shows it.
	tab.fill("calls per minute", card+`.querySelector('[name="calls.per_minute"]')`, "100")
	tab.fill("calls per day", card+`.querySelector('[name="calls.per_day"]')`, "10000")
	tab.fill("who", card+`.querySelector('[name="who"]')`, "role:member")
	tab.click("Save", testEls("limits-save")+`[0]`)
	tab.waitFor("saved", testEls("limits-saved")+`[0]?.offsetParent !== null && `+testEls("limits-saved")+`[0].textContent.includes("version 1")`, 0)
	_, _, out := apiDo(t, "GET", site.api+"/limits", site.admin, "")
	if got := asJSON(out["document"]); out["version"] != float64(1) ||
		got != `{"limits":[{"calls":{"per_day":10000,"per_minute":100},"name":"each-key","per":["key"],"who":{"role":"member"}}]}` {
		t.Fatalf("GET /v1/limits after saving: version %v, document %s", out["version"], got)
	}
	tab.waitFor("the table in force", testEls("limit")+`.length === 1 && `+testEls("limit")+`[0].textContent.includes("each-key") && `+
		testEls("limit")+`[0].textContent.includes("role:member") && `+testEls("limit-per_minute")+`[0].textContent.includes("100") && `+
		testEls("limit-per_day")+`[0].textContent.includes("10,000")`, 0)

	// Another admin changes them meanwhile: saving from version 1 is refused, said clearly, and
	// the page loads the limits in force.
	if status, _, out := apiDo(t, "PUT", site.api+"/limits", site.admin,
		`{"document":{"limits":[{"name":"deploys","tools":["deploy_*"],"source":"stored","concurrent":2}]},"after":1}`); status != 200 {
		t.Fatalf("another admin's change: %d %v", status, out)
	}
	tab.click("Save", testEls("limits-save")+`[0]`)
	tab.waitFor("the conflict", testEls("limits-conflict")+`[0]?.textContent.includes("Another admin changed the limits")`, 0)
	tab.click("load the limits in force", testEls("limits-reload")+`[0]`)
	tab.waitFor("the limits in force", card+`.querySelector('[name="name"]').value === "deploys" && `+
		card+`.querySelector('[name="concurrent"]').value === "2" && `+testEls("limits-version")+`[0].textContent.includes("Version 2") && `+
		testEls("limit-concurrent")+`[0].textContent.includes("2")`, 0)

	// What the card does not edit (the limit's source) is saved as it was read.
	tab.fill("at once", card+`.querySelector('[name="concurrent"]')`, "3")
	tab.click("Save", testEls("limits-save")+`[0]`)
	tab.waitFor("saved", testEls("limits-saved")+`[0]?.offsetParent !== null && `+testEls("limits-saved")+`[0].textContent.includes("version 3")`, 0)
	if _, _, out := apiDo(t, "GET", site.api+"/limits", site.admin, ""); asJSON(out["document"]) !=
		`{"limits":[{"concurrent":3,"name":"deploys","source":"stored","tools":["deploy_*"]}]}` {
		t.Fatalf("GET /v1/limits after saving the reloaded limits: %v", out)
	}

	for role, key := range map[string]string{"member": member, "viewer": site.viewer} {
		other := tab.newTab()
		other.signIn(site, key)
		if other.bool(`[...document.querySelectorAll("#nav a")].some((a) => a.textContent.trim() === "Limits" && !a.hidden)`) {
			t.Errorf("a %s is offered Limits in the navigation", role)
		}
		other.route("#/limits")
		other.waitFor(role+": told only an admin reads them", testEls("not-admin")+`.length === 1`, 0)
		if n := other.string(`document.querySelectorAll('#main input, #main select, #main textarea, #main button, #main table').length`); n != "0" {
			t.Errorf("a %s is offered %s fields, buttons or tables on the limits page", role, n)
		}
	}
}

// Limits the configuration file sets are shown, and a change is refused with the
// configuration's message, the editor then closed.
func TestConsoleLimitsFromTheConfiguration(t *testing.T) {
	timed(t)
	site, _ := startLimitsConsole(t, "limits:\n  limits:\n    - {name: viewers, who: {role: viewer}, calls: {per_second: 5}}\n")
	tab := newBrowser(t)
	tab.signIn(site, site.admin)
	tab.route("#/limits")
	tab.waitFor("the configuration's limit", testEls("limit")+`.length === 1 && `+testEls("limit")+`[0].textContent.includes("role:viewer") && `+
		testEls("limit-per_second")+`[0].textContent.includes("5")`, 0)
	tab.fill("calls per second", testEls("limit-card")+`[0].querySelector('[name="calls.per_second"]')`, "10")
	tab.click("Save", testEls("limits-save")+`[0]`)
	tab.waitFor("the configuration's refusal", testEls("limits-configured")+`[0]?.textContent.includes("fleet's configuration file") && `+
		testEls("limits-configured")+`[0].textContent.includes("quiver apply") && `+testEls("limits-save")+`[0].disabled`, 0)
	if _, _, out := apiDo(t, "GET", site.api+"/limits", site.admin, ""); !strings.Contains(asJSON(out["document"]), `"per_second":5`) {
		t.Fatalf("the configuration's limits changed: %v", out)
	}
}
