package main

import "testing"

// A tool whose name holds spaces, "?", "%", "/" and "#" (seed 003 §8.3 accepts it) is linked
// from the tools page, its page loads it, and its try-it calls it: every link and API path
// escapes the name.
func TestConsoleToolWithHostileName(t *testing.T) {
	timed(t)
	site := startConsoleSite(t)
	const name = "look up: weather? 100% a/b #x"
	createJSTool(t, site.api, site.admin, name, `export default () => "sunny in Oslo"`,
		`{"type":"object","description":"Looks up the weather.","properties":{}}`, false)
	tab := newBrowser(t)
	tab.signIn(site, site.admin)
	tab.route("#/tools")
	tab.click("the tool's link", `[...document.querySelectorAll('#main [data-test="served-tool"]')].find((tr) => tr.dataset.tool === `+js(name)+`)?.querySelector("a")`)
	tab.waitFor("the tool's page", `document.querySelector('[data-test="tool-title"]')?.textContent === `+js(name)+` && `+hasText("Looks up the weather."), 0)
	tab.click("the tool's try-it button", testEls("tool-try")+`[0]`)
	tab.waitFor("the try-it result", `document.querySelector('[data-test="try-result"]')?.textContent.includes("sunny in Oslo")`, 0)
}

// A tool's MCP hints are shown beside its other flags, in the list and on its page; a hint it
// does not declare is not shown.
func TestConsoleShowsToolHints(t *testing.T) {
	timed(t)
	site := startConsoleSite(t)
	createJSTool(t, site.api, site.admin, "read_weather", `export default () => "sunny"`,
		`{"type":"object","description":"Reads the weather.","properties":{},"annotations":{"readOnlyHint":true,"openWorldHint":true}}`, false)
	tab := newBrowser(t)
	tab.signIn(site, site.admin)
	tab.route("#/tools")
	row := `[...document.querySelectorAll('#main [data-test="served-tool"]')].find((tr) => tr.dataset.tool === "read_weather")`
	hints := func(scope string) string {
		return `[...(` + scope + `)?.querySelectorAll('[data-test="flag-hint"]') ?? []].map((e) => e.textContent).join(",")`
	}
	tab.waitFor("the row's hints", hints(row)+` === "read-only,open world"`, 0)
	tab.route("#/tools/read_weather")
	tab.waitFor("the page's hints", hints(`document.querySelector('[data-test="tool-flags"]')`)+` === "read-only,open world"`, 0)
}
