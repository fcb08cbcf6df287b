package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The console (issue 15) in a real browser: quiver serve on 127.0.0.1 with scripted models and
// an agents directory, and Debian's Chromium, headless, driven over the DevTools protocol by
// chromedp (pure Go: the tests stay in go test, no Node at test time). Each test starts its own
// server and browser (a fresh profile), signs in by typing a key into the sign-in form, and
// waits for what the pages show by their data-test attributes and their text, each wait bounded.
//
// Chromium is found at $QUIVER_TEST_CHROMIUM or as chromium on the PATH; without it the tests
// skip, except under CI=true, where they fail (.ci/run installs it).

// chromiumEnv names the Chromium the console tests drive, when it is not chromium on the PATH.
const chromiumEnv = "QUIVER_TEST_CHROMIUM"

// Each browser test gets this long in all, and each wait for the page this long.
const (
	consoleTestLimit = 2 * time.Minute
	consoleWait      = 20 * time.Second
)

// chromiumPath returns the Chromium to drive, or skips the test (fails it under CI=true).
func chromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(chromiumEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", chromiumEnv, p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const howTo = "no Chromium for the console's browser tests: install Debian's chromium (apt-get install chromium; .ci/run does) or set " + chromiumEnv + " to a Chromium or Chrome binary"
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but " + howTo)
	}
	t.Skip(howTo)
	return ""
}

// consoleSite is a quiver serve for the console tests: its origin, its /v1 base, an admin key
// and a viewer key of its workspace.
type consoleSite struct {
	origin, api   string
	admin, viewer string
}

// The values the XSS test plants: a tool's result and a model's text that would run script if
// a page put them in as HTML.
const (
	xssResult = `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`
	xssText   = `The tool said: <img src=x onerror="window.__pwned=3"> and <b>nothing more</b>.`
)

// startConsoleSite starts quiver serve (SQLite; the console is a client of /v1, whose backends
// other tests cover) with two scripted agents and their tools:
//   - reporter calls shout, whose result is xssResult, then answers xssText;
//   - payer calls charge {amount: 5, note: order 7}, which waits for a person's confirmation,
//     then answers "Charged.";
//   - debate is two-sided: its writer says "Go: fast.", its critic "APPROVED".
func startConsoleSite(t testing.TB) *consoleSite {
	t.Helper()
	chromiumPath(t) // skip (or fail) before starting anything
	agents, script := scriptedAgentsDir(t)
	writeTestFiles(t, map[string]string{
		// The shout's output is kept in the thread's state too, which the thread page shows.
		script("reporter"): "turns:\n  - calls: [{name: shout, args: {_outputPath: /shouted}}]\n  - text: " + jsonString(xssText) + "\n",
		script("payer"):    "turns:\n  - calls: [{name: charge, args: {amount: 5, note: order 7}}]\n  - text: Charged.\n",
		filepath.Join(agents, "reporter.yaml"): "name: reporter\ndescription: Reports what a tool shouts.\nmodel: scripted:" + script("reporter") +
			"\ntools: [shout]\nmeta_fields: [_outputPath]\n",
		filepath.Join(agents, "payer.yaml"): "name: payer\ndescription: Pays what it is asked to.\nmodel: scripted:" + script("payer") +
			"\ntools: [charge]\n",
		// debate is two-sided: the writer (side_a) and the critic (side_b) take turns.
		script("writer"):                     "turns:\n  - text: \"Go: fast.\"\n",
		script("critic"):                     "turns:\n  - text: APPROVED\n",
		filepath.Join(agents, "debate.yaml"): "name: debate\ntype: dual_ai\nside_a: writer\nside_b: critic\nconversation: {until: APPROVED}\n",
		filepath.Join(agents, "writer.yaml"): "kind: prompt\nname: writer\nmodel: scripted:" + script("writer") + "\n",
		filepath.Join(agents, "critic.yaml"): "kind: prompt\nname: critic\nmodel: scripted:" + script("critic") + "\n",
	})
	base, admin := serveAgentsAPI(t, []string{"--db", filepath.Join(t.TempDir(), "q.db")}, agents)
	if admin == "" {
		t.Fatal("quiver serve printed no admin key")
	}
	createJSTool(t, base, admin, "shout", "export default () => "+jsonString(xssResult),
		`{"type":"object","description":"Shouts something a page must show as text.","properties":{}}`, false)
	createJSTool(t, base, admin, "charge", `export default ({ amount, note }) => "charged " + amount + (note ? " for " + note : "")`,
		`{"type":"object","description":"Charges an amount.","properties":{"amount":{"type":"integer","minimum":1,"description":"In euros."},"note":{"type":"string","description":"What it is for."}},"required":["amount"]}`, true)
	status, _, out := apiDo(t, "POST", base+"/keys", admin, `{"role":"viewer","name":"console viewer"}`)
	viewer, _ := out["secret"].(string)
	if status != 201 || viewer == "" {
		t.Fatalf("POST /v1/keys for a viewer: %d %v", status, out)
	}
	return &consoleSite{origin: strings.TrimSuffix(base, "/v1"), api: base, admin: admin, viewer: viewer}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// namedThread creates a thread of agent named name over the API.
func (s *consoleSite) namedThread(t *testing.T, agent, name string) string {
	t.Helper()
	status, _, th := apiDo(t, "POST", s.api+"/threads", s.admin, asJSON(map[string]any{"agent": agent, "tags": []string{"name:" + name}}))
	id, _ := th["id"].(string)
	if status != 201 || id == "" {
		t.Fatalf("creating thread %q: %d %v", name, status, th)
	}
	return id
}

// runToEnd starts a run over the API and waits until the thread's messages hold text.
func (s *consoleSite) runToEnd(t *testing.T, threadID, agent, message, text string) {
	t.Helper()
	startAPIRun(t, s.api, s.admin, threadID, agent, message)
	s.waitMessages(t, threadID, text)
}

// waitMessages waits until a thread's messages hold text.
func (s *consoleSite) waitMessages(t *testing.T, threadID, text string) {
	t.Helper()
	waitUntil(t, "the thread's messages to hold "+text, consoleWait, func() (bool, string) {
		_, raw := threadMessages(t, s.api, s.admin, threadID)
		return strings.Contains(raw, text), raw
	})
}

// pausedCall waits until a thread's run is paused on a call and returns the call's id.
func (s *consoleSite) pausedCall(t *testing.T, threadID string) string {
	t.Helper()
	var callID string
	waitUntil(t, "thread "+threadID+" to pause for a confirmation", consoleWait, func() (bool, string) {
		_, _, th := apiDo(t, "GET", s.api+"/threads/"+threadID, s.admin, "")
		var state struct {
			Status  string
			Pending *struct{ Call struct{ ID string } }
		}
		b, _ := json.Marshal(th["state"])
		if json.Unmarshal(b, &state) == nil && state.Status == "paused" && state.Pending != nil && th["status"] == "waiting" {
			callID = state.Pending.Call.ID
			return true, ""
		}
		return false, asJSON(th)
	})
	return callID
}

// browserTab is a tab of a headless Chromium: its chromedp context, and what the page wrote
// to its console (exceptions included), shown when the test fails.
type browserTab struct {
	t        testing.TB
	ctx      context.Context
	console  *syncBuffer
	requests *requestLog
}

// requestLog holds every request a tab sent: its URL (with the fragment) and its headers.
type requestLog struct {
	mu   sync.Mutex
	reqs []*network.Request
}

func (l *requestLog) add(r *network.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, r)
}

func (l *requestLog) all() []*network.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*network.Request(nil), l.reqs...)
}

// watchScript runs in every document before the console's scripts: it records the
// Content-Security-Policy violations the page reports (a blocked inline script or handler).
const watchScript = `window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI + " " + (e.sample || "")));`

// newBrowser starts a headless Chromium with a fresh profile (chromedp makes and removes it)
// and the flags this machine's closed network needs, and returns its first tab. The whole
// browser lives at most consoleTestLimit. It fails the test at the end if a page threw.
func newBrowser(t testing.TB) *browserTab {
	t.Helper()
	path := chromiumPath(t)
	limited, cancelLimit := context.WithTimeout(context.Background(), consoleTestLimit)
	output := &syncBuffer{}
	alloc, cancelAlloc := chromedp.NewExecAllocator(limited,
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.WindowSize(1280, 800),
		chromedp.CombinedOutput(output),
	)
	quiet := func(string, ...any) {}
	ctx, cancelCtx := chromedp.NewContext(alloc, chromedp.WithLogf(quiet), chromedp.WithErrorf(quiet))
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		cancelLimit()
		if t.Failed() {
			if out := chromiumOutput(output.String()); out != "" {
				t.Logf("Chromium's output:\n%s", out)
			}
		}
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium (%s): %v\n%s", path, err, output.String())
	}
	return watchTab(t, ctx)
}

// chromiumOutput is what Chromium wrote, without its complaints that this machine has no D-Bus.
func chromiumOutput(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) != "" && !strings.Contains(line, "dbus") && !strings.Contains(line, "unexpected operator") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// newTab opens another tab in the same browser (its own session storage: it signs in again).
func (b *browserTab) newTab() *browserTab {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		b.t.Fatalf("opening a tab: %v", err)
	}
	return watchTab(b.t, ctx)
}

// watchTab records a tab's console and requests, and installs watchScript.
func watchTab(t testing.TB, ctx context.Context) *browserTab {
	t.Helper()
	tab := &browserTab{t: t, ctx: ctx, console: &syncBuffer{}, requests: &requestLog{}}
	messages := chromedp.Console(ctx)
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	var thrown []string
	var mu sync.Mutex
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			fmt.Fprintf(tab.console, "%s %s:%d %s\n", m.Type, m.URL, m.Line+1, m.Text)
			if m.IsException() {
				mu.Lock()
				thrown = append(thrown, m.Text)
				mu.Unlock()
			}
		}
	}()
	go func() {
		for ev, err := range requests {
			if err != nil {
				return
			}
			if ev.Request != nil {
				tab.requests.add(ev.Request)
			}
		}
	}()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watchScript}); err != nil {
		t.Fatalf("installing the page watch: %v", err)
	}
	t.Cleanup(func() {
		// The iterators end with the tab's context, cancelled by the cleanups registered
		// before this one (run after it): read what was thrown so far.
		mu.Lock()
		defer mu.Unlock()
		if len(thrown) > 0 {
			t.Errorf("the console threw in the browser:\n%s", strings.Join(thrown, "\n"))
		}
		if t.Failed() {
			t.Logf("the browser's console:\n%s", tab.console.String())
		}
	})
	return tab
}

// do runs actions, failing the test with what the page shows when one fails.
func (b *browserTab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v\n%s", what, err, b.snapshot())
	}
}

// evalIn evaluates a JavaScript expression in a tab (awaiting a promise) and decodes its JSON
// value into T.
func evalIn[T any](b *browserTab, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v\n%s", expr, err, b.snapshot())
	}
	return v
}

// bool is a JavaScript expression's value, a boolean.
func (b *browserTab) bool(expr string) bool {
	b.t.Helper()
	return evalIn[bool](b, expr)
}

// string is a JavaScript expression's value as text (String(value)).
func (b *browserTab) string(expr string) string {
	b.t.Helper()
	return evalIn[string](b, "String("+expr+")")
}

// snapshot is what the tab shows, for a failure: its location and the text of the page.
func (b *browserTab) snapshot() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n--- the page says:\n" + (document.body ? document.body.innerText : "(no body)")`))
	if err != nil {
		return "(the page could not be read: " + err.Error() + ")"
	}
	if len(s) > 4000 {
		s = s[:4000] + "…"
	}
	return s
}

// waitFor polls a JavaScript condition every 50 ms until it holds, failing after limit (or
// consoleWait when 0) with what the page shows; or at once (after a second) when the page is
// still a placeholder that says "Not written yet.", a page of the console not written yet.
func (b *browserTab) waitFor(what, cond string, limit time.Duration) {
	b.t.Helper()
	if limit == 0 {
		limit = consoleWait
	}
	deadline := time.Now().Add(limit)
	expr := `(() => {
		try { if (` + cond + `) return "ok"; } catch (e) { /* not yet */ }
		const m = document.getElementById("main");
		return m && !m.querySelector(".loading") && m.textContent.includes("Not written yet.") ? "placeholder" : "";
	})()`
	var placeholder time.Time
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		cancel()
		if err == nil && got == "ok" {
			return
		}
		if b.ctx.Err() != nil {
			b.t.Fatalf("waiting for %s: the test's time is up (%v)", what, b.ctx.Err())
		}
		switch {
		case got != "placeholder":
			placeholder = time.Time{}
		case placeholder.IsZero():
			placeholder = time.Now()
		case time.Since(placeholder) > time.Second:
			b.t.Fatalf("waiting for %s: the page is a placeholder, not written yet:\n%s", what, b.snapshot())
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waiting for %s: not within %s (%s)\n%s", what, limit, cond, b.snapshot())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// js quotes s as a JavaScript string literal.
func js(s string) string { return jsonString(s) }

// Conditions and element finders the tests share, as JavaScript.
const (
	// signInShown: the sign-in form, and no navigation.
	signInShown = `document.querySelector("form.signin input#key") && document.getElementById("nav").hidden`
	// signedIn: the navigation, and no sign-in form.
	signedIn = `!document.getElementById("nav").hidden && !document.querySelector("form.signin")`
)

// testEls is a JavaScript array of the elements whose data-test attribute is name.
func testEls(name string) string {
	return `[...document.querySelectorAll('[data-test="` + name + `"]')]`
}

// hasText is a JavaScript condition: the main element's text contains s.
func hasText(s string) string {
	return `document.getElementById("main").textContent.includes(` + js(s) + `)`
}

// open navigates the tab to the console at hash (a full page load).
func (b *browserTab) open(site *consoleSite, hash string) {
	b.t.Helper()
	b.do("opening the console at "+hash, chromedp.Navigate(site.origin+"/"+hash))
}

// route changes the console's route the way a link does (no page load).
func (b *browserTab) route(hash string) {
	b.t.Helper()
	b.do("going to "+hash, chromedp.Evaluate[chromedp.Void](`location.hash = `+js(hash)))
}

// signIn opens the console and signs in by typing key into the sign-in form.
func (b *browserTab) signIn(site *consoleSite, key string) {
	b.t.Helper()
	b.open(site, "")
	b.waitFor("the sign-in form", signInShown, 0)
	b.do("typing the key and signing in",
		chromedp.SendKeys(chromedp.CSS("form.signin input#key"), key),
		chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)))
	b.waitFor("the signed-in navigation", signedIn, 0)
}

// click clicks (with the mouse) the element a JavaScript expression returns.
func (b *browserTab) click(what, element string) {
	b.t.Helper()
	b.waitFor(what+" to be there", element, 0)
	b.do("clicking "+what, chromedp.Click(chromedp.JSPath(element), chromedp.NodeVisible))
}

// fill empties the field a JavaScript expression returns (as selecting its text and deleting
// it would) and types value into it.
func (b *browserTab) fill(what, field, value string) {
	b.t.Helper()
	b.waitFor(what+" to be there", field, 0)
	b.do("emptying "+what, chromedp.Evaluate[chromedp.Void](`(() => {
		const f = `+field+`;
		f.focus();
		f.value = "";
		f.dispatchEvent(new Event("input", {bubbles: true}));
	})()`))
	if value != "" {
		b.do("typing into "+what, chromedp.SendKeys(chromedp.JSPath(field), value))
	}
	if got := b.string(field + ".value"); got != value {
		b.t.Fatalf("%s holds %q after typing %q", what, got, value)
	}
}

// timed logs how long a test took.
func timed(t testing.TB) {
	start := time.Now()
	t.Cleanup(func() { t.Logf("%s took %s", t.Name(), time.Since(start).Round(time.Millisecond)) })
}

// Sign-in: a wrong key is refused and not kept; the admin key is typed in, kept in the tab's
// session storage only, sent in the Authorization header and never in a URL or a cookie; the
// navigation offers Keys to an admin; a reload keeps the tab signed in; signing out forgets it.
func TestConsoleSignIn(t *testing.T) {
	timed(t)
	site := startConsoleSite(t)
	tab := newBrowser(t)

	tab.open(site, "")
	tab.waitFor("the sign-in form", signInShown, 0)
	tab.do("signing in with a wrong key",
		chromedp.SendKeys(chromedp.CSS("input#key"), "qvk_"+strings.Repeat("x", 43)),
		chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)))
	tab.waitFor("the refusal", `document.querySelector("form.signin [role=alert]")?.textContent.includes("refused")`, 0)
	if n := tab.string(`sessionStorage.length`); n != "0" {
		t.Errorf("a refused key is kept: sessionStorage has %s items", n)
	}

	tab.do("typing the admin key",
		chromedp.SendKeys(chromedp.CSS("input#key"), site.admin),
		chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)))
	tab.waitFor("the signed-in navigation", signedIn, 0)
	tab.waitFor("the role shown", `document.getElementById("who").textContent.includes("admin")`, 0)
	tab.waitFor("Keys in the navigation",
		`[...document.querySelectorAll("#nav a")].some((a) => a.textContent.trim() === "Keys" && a.offsetParent !== null)`, 0)
	if got := tab.string(`sessionStorage.getItem("quiver.key")`); got != site.admin {
		t.Errorf("sessionStorage holds %q, want the key typed", got)
	}
	if n := tab.string(`localStorage.length`); n != "0" {
		t.Errorf("localStorage has %s items: the key must live in the tab's session only", n)
	}

	// Every page, reached as a person does: the key in no URL, no cookie set.
	for _, hash := range []string{"#/threads", "#/approvals", "#/tools", "#/variables", "#/keys"} {
		tab.route(hash)
		tab.waitFor(hash+" loaded", `location.hash === `+js(hash)+` && document.querySelector("#main > :not(p.loading)")`, 0)
		if href := tab.string(`location.href`); strings.Contains(href, site.admin) {
			t.Errorf("the key is in the URL: %s", href)
		}
		// A value put in as a string where an element was meant shows as "[object ...]".
		tab.waitFor(hash+" to settle", `![...document.querySelectorAll("#main .loading")].some((e) => e.offsetParent !== null)`, 5*time.Second)
		if text := tab.string(`document.getElementById("main").innerText`); strings.Contains(text, "[object ") {
			i := strings.Index(text, "[object ")
			t.Errorf("%s shows an object's string instead of its content: …%s…", hash, text[max(0, i-80):min(len(text), i+80)])
		}
	}
	tab.do("reloading", chromedp.Evaluate[chromedp.Void](`window.__before = true`), chromedp.Reload())
	tab.waitFor("still signed in after a reload", `!window.__before && `+signedIn+` && document.querySelector("#main > :not(p.loading)")`, 0)

	if c := tab.string(`document.cookie`); c != "" {
		t.Errorf("document.cookie = %q, want none", c)
	}
	cookies, err := chromedp.Call(tab.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{site.origin + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cookies.Cookies) > 0 {
		t.Errorf("the site set cookies: %v", asJSON(cookies.Cookies))
	}
	apiCalls := 0
	for _, r := range tab.requests.all() {
		if strings.Contains(r.URL+r.URLFragment, site.admin) {
			t.Errorf("a request has the key in its URL: %s%s", r.URL, r.URLFragment)
		}
		if _, ok := r.Headers["Cookie"]; ok {
			t.Errorf("a request sent a cookie: %s", r.URL)
		}
		if strings.HasPrefix(r.URL, site.api+"/") {
			apiCalls++
			if auth, _ := r.Headers["Authorization"].(string); !strings.HasPrefix(auth, "Bearer qvk_") {
				t.Errorf("%s %s went without the key in its Authorization header", r.Method, r.URL)
			}
		}
	}
	if apiCalls == 0 {
		t.Error("the browser made no /v1 request")
	}
	if v := tab.string(`performance.getEntriesByType("resource").map((e) => e.name).join(" ")`); strings.Contains(v, site.admin) {
		t.Error("a resource URL holds the key")
	}

	tab.click("the sign-out button", `document.getElementById("signout")`)
	tab.waitFor("the sign-in form after signing out", signInShown, 0)
	if n := tab.string(`sessionStorage.length`); n != "0" {
		t.Errorf("after signing out sessionStorage has %s items, want none", n)
	}
	if tab.bool(`document.getElementById("main").textContent.includes("Threads")`) {
		t.Error("a page's content is still shown after signing out")
	}
	tab.route("#/threads")
	tab.waitFor("the sign-in form on a route after signing out", signInShown, 0)
}

// XSS: a tool result with an <img onerror> and a <script>, and a model's text with another,
// are shown literally on the thread page and run nothing; a thread name with markup in the
// thread list, and the same result from the tool page's "try it", too; the console's responses
// carry a strict Content-Security-Policy.
func TestConsoleShowsValuesAsText(t *testing.T) {
	timed(t)
	site := startConsoleSite(t)
	for _, path := range []string{"/", "/console/app.js"} {
		resp, err := http.Get(site.origin + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		scripts := ""
		for _, d := range strings.Split(csp, ";") {
			if d = strings.TrimSpace(d); strings.HasPrefix(d, "script-src ") {
				scripts = d
			}
		}
		if resp.StatusCode != 200 || scripts != "script-src 'self'" || !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe-") {
			t.Errorf("GET %s: %d, Content-Security-Policy %q: want default-src 'none' and script-src 'self' only", path, resp.StatusCode, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", path)
		}
	}

	name := `<img src=x onerror="window.__pwned=4">Shouting`
	threadID := site.namedThread(t, "reporter", name)
	site.runToEnd(t, threadID, "reporter", "What does the tool say?", "nothing more")

	tab := newBrowser(t)
	tab.signIn(site, site.admin)
	// ranNothing checks that what a page shows made no element and ran no script.
	ranNothing := func(where string) {
		t.Helper()
		time.Sleep(300 * time.Millisecond) // an injected handler's time to fire, had one been made
		if got := tab.string(`typeof window.__pwned`); got != "undefined" {
			t.Errorf("%s: window.__pwned is %s: a value ran as script", where, tab.string(`window.__pwned`))
		}
		if n := tab.string(`document.querySelectorAll('#main img[src="x"], #main script, #main [onerror]').length`); n != "0" {
			t.Errorf("%s: %s elements were made from a value's markup", where, n)
		}
		if v := tab.string(`window.__csp.join("\n")`); v != "" {
			t.Errorf("%s: the page tried what its Content-Security-Policy blocks:\n%s", where, v)
		}
	}
	tab.route("#/threads")
	tab.waitFor("the thread's name, as text, in the list", hasText(name), 0)
	ranNothing("the thread list")
	tab.route("#/threads/" + threadID)
	tab.waitFor("the tool result, as text", testEls("tool-result")+`.some((e) => e.textContent.includes(`+js(xssResult)+`))`, 0)
	tab.waitFor("the model's text, as text", testEls("message")+`.some((e) => e.textContent.includes(`+js(xssText)+`))`, 0)
	tab.click("the thread's state", testEls("thread-state")+`[0].querySelector("summary")`)
	tab.waitFor("the state, as text", testEls("thread-state")+`[0].textContent.includes('"shouted": ' + JSON.stringify(`+js(xssResult)+`))`, 0)
	ranNothing("the thread page")
	// The same result from the tool's "try it", called through the API from its page.
	tab.route("#/tools/shout")
	tab.click("the tool's try-it button", testEls("tool-try")+`[0]`)
	tab.waitFor("the try-it result, as text", `document.querySelector('[data-test="try-result"]')?.textContent.includes(`+js(xssResult)+`)`, 0)
	ranNothing("the tool's try-it")
}

// A two-sided agent's thread shows which side said what.
func TestConsoleShowsEachSide(t *testing.T) {
	timed(t)
	site := startConsoleSite(t)
	threadID := site.namedThread(t, "debate", "slogan")
	site.runToEnd(t, threadID, "debate", "A slogan for Go.", "APPROVED")
	tab := newBrowser(t)
	tab.signIn(site, site.admin)
	tab.route("#/threads/" + threadID)
	for side, text := range map[string]string{"side_a": "Go: fast.", "side_b": "APPROVED"} {
		label := strings.Replace(side, "side_", "side ", 1)
		label = label[:len(label)-1] + strings.ToUpper(label[len(label)-1:])
		tab.waitFor(side+"'s turn, marked", testEls("message")+`.some((e) => e.dataset.side === `+js(side)+
			` && e.textContent.includes(`+js(text)+`) && e.querySelector(".role").textContent.includes(`+js(label)+`))`, 0)
	}
	if n := tab.string(testEls("message") + `.filter((e) => e.dataset.role === "user" && e.dataset.side).length`); n != "0" {
		t.Errorf("%s user messages are marked with a side", n)
	}
}

// The flow of the issue: make a thread in the list, start a run on it from its page; the run
// pauses for charge's confirmation; in the Approvals inbox (another tab) edit its arguments in
// the form made from charge's schema (a required field left empty, or below its minimum, is
// refused next to the field, nothing decided), approve, and the thread page, open all along,
// shows the result as it comes; a second call is denied with a message.
func TestConsoleApproveEditedCallLive(t *testing.T) {
	timed(t)
	site := startConsoleSite(t)
	thread := newBrowser(t)
	thread.signIn(site, site.admin)
	thread.route("#/threads")
	newThread := testEls("new-thread-form") + `[0]`
	thread.waitFor("the new-thread form", newThread, 0)
	thread.do("filling in the new thread",
		chromedp.SendKeys(chromedp.JSPath(newThread+`.querySelector('[name="agent"]')`), "payer"),
		chromedp.SendKeys(chromedp.JSPath(newThread+`.querySelector('[name="name"]')`), "Refund for order 7"))
	thread.click("Create", newThread+`.querySelector('button[type="submit"]')`)
	thread.waitFor("the new thread's page", `/^#\/threads\/thr_/.test(location.hash)`, 0)
	first := strings.TrimPrefix(thread.string(`decodeURIComponent(location.hash)`), "#/threads/")
	if th := listThreads(t, site.api, site.admin, "&name=Refund"); len(th) != 1 || th[0].ID != first || th[0].AgentID != "payer" {
		t.Fatalf("the thread made in the console: %v, want %s of payer", asJSON(th), first)
	}
	form := testEls("run-form") + `[0]`
	thread.waitFor("the run form", form, 0)
	// The agent: the thread's by default; chosen when the form asks.
	thread.do("choosing the agent", chromedp.Evaluate[chromedp.Void](`(() => {
		const f = `+form+`.querySelector('[name="agent"]');
		if (f && !f.value) { f.value = "payer"; f.dispatchEvent(new Event("input", {bubbles: true})); f.dispatchEvent(new Event("change", {bubbles: true})); }
	})()`))
	thread.do("typing the message",
		chromedp.SendKeys(chromedp.JSPath(form+`.querySelector('[name="message"]')`), "Please pay for order 7."))
	thread.click("the run form's submit button", form+`.querySelector('button[type="submit"], button:not([type])')`)
	callID := site.pausedCall(t, first)
	thread.waitFor("the waiting call on the thread page", hasText("charge"), 0)
	thread.do("marking the page", chromedp.Evaluate[chromedp.Void](`window.__samePage = "yes"`))

	inbox := thread.newTab()
	inbox.signIn(site, site.admin)
	inbox.route("#/approvals")
	item := testEls("pending-item") + `.find((e) => e.textContent.includes("Refund for order 7") || e.textContent.includes(` + js(callID) + `))`
	inbox.waitFor("the call in the inbox", item, 0)
	inbox.click("Edit", item+`.querySelector('[data-test="edit"]')`)
	schemaForm := item + `.querySelector('[data-test="schema-form"]')`
	amount := schemaForm + `.querySelector('[name="amount"]')`
	inbox.waitFor("the form from charge's schema, holding the call's amount", amount+`.value === "5"`, 0)
	approve := `(` + schemaForm + `.querySelector('[data-test="approve"]') || ` + item + `.querySelector('[data-test="approve"]'))`

	// A required field left empty: told next to it, nothing sent.
	inbox.fill("the amount", amount, "")
	inbox.click("Approve with no amount", approve)
	inbox.waitFor("the field's error", item+`.querySelector('[data-test="field-error"]')?.textContent.trim()`, 0)
	if site.pausedCall(t, first) != callID {
		t.Fatal("the call was decided with its required amount empty")
	}

	// Below the schema's minimum: told next to the field (by the page or by the server's
	// validation), nothing decided.
	fieldError := schemaForm + `.querySelector('[data-test="field-error"]')?.textContent.trim() || ""`
	before := inbox.string(fieldError)
	inbox.fill("the amount", amount, "0")
	inbox.click("Approve with amount 0", approve)
	inbox.waitFor("the minimum's error", `(`+fieldError+`) !== "" && (`+fieldError+`) !== `+js(before), 0)
	if site.pausedCall(t, first) != callID {
		t.Fatal("the call was decided with an amount below its minimum")
	}

	inbox.fill("the amount", amount, "7")
	inbox.click("Approve", approve)
	inbox.waitFor("the call gone from the inbox", `!(`+item+`)`, 0)

	// The thread page, open all along, shows the edited call's result and the answer.
	thread.waitFor("the edited call's result, live", testEls("tool-result")+`.some((e) => e.textContent.includes("charged 7 for order 7"))`, 0)
	thread.waitFor("the answer after it, live", hasText("Charged."), 0)
	if thread.string(`window.__samePage`) != "yes" {
		t.Error("the thread page was reloaded to show the result, not updated live")
	}
	site.waitMessages(t, first, "charged 7 for order 7")

	// Another call, denied with a message.
	second := site.namedThread(t, "payer", "Second charge")
	startAPIRun(t, site.api, site.admin, second, "payer", "Pay again.")
	site.pausedCall(t, second)
	item = testEls("pending-item") + `.find((e) => e.textContent.includes("Second charge"))`
	// The inbox shows a call that came after it loaded on Refresh (or on coming back to it).
	if inbox.bool(`!!document.querySelector('[data-test="refresh"]')`) {
		inbox.click("Refresh", `document.querySelector('[data-test="refresh"]')`)
	} else {
		inbox.route("#/threads")
		inbox.waitFor("the thread list", hasText("Second charge"), 0)
		inbox.route("#/approvals")
	}
	inbox.waitFor("the second call in the inbox", item, 0)
	inbox.click("Deny", item+`.querySelector('[data-test="deny"]')`)
	// Deny asks what to tell the model, then the same button (or the form's) sends it.
	message := item + `?.querySelector('textarea, input[name="message"]')`
	inbox.waitFor("the denial's message field", message, 0)
	inbox.do("typing the denial's message", chromedp.SendKeys(chromedp.JSPath(message), "Not today."))
	inbox.click("sending the denial", `(`+item+`.querySelector('form [data-test="deny"], form button[type="submit"]') || `+item+`.querySelector('[data-test="deny"]'))`)
	inbox.waitFor("the second call gone from the inbox", `!(`+item+`)`, 0)
	site.waitMessages(t, second, "Not today.")
	thread.route("#/threads/" + second)
	thread.waitFor("the denial on the thread page", hasText("Not today."), 0)
}

// A viewer key reads but is offered nothing that changes anything: no Keys, no new thread, no
// run form, no approve, edit or deny in the inbox, no "try it" on a tool, no variable set or
// removed, no key made or revoked (not even at #/keys typed in).
func TestConsoleViewerSeesNoActions(t *testing.T) {
	timed(t)
	site := startConsoleSite(t)
	threadID := site.namedThread(t, "payer", "Waiting charge")
	startAPIRun(t, site.api, site.admin, threadID, "payer", "Pay.")
	site.pausedCall(t, threadID)

	tab := newBrowser(t)
	tab.signIn(site, site.viewer)
	tab.waitFor("the role shown", `document.getElementById("who").textContent.includes("viewer")`, 0)
	if tab.bool(`[...document.querySelectorAll("#nav a")].some((a) => a.textContent.trim() === "Keys" && a.offsetParent !== null)`) {
		t.Error("a viewer's navigation offers Keys")
	}
	actions := `document.querySelectorAll('` + strings.Join([]string{
		`[data-test="new-thread-form"]`, `[data-test="run-form"]`, `[data-test="approve"]`, `[data-test="deny"]`, `[data-test="edit"]`,
		`[data-test="answer"]`, `[data-test="tool-try"]`, `[data-test="var-set"]`, `[data-test="remove"]`, `[data-test="key-form"]`,
		`[data-test="revoke"]`}, ", ") + `').length`
	settled := `document.querySelector("#main > :not(p.loading)") && ![...document.querySelectorAll("#main .loading")].some((e) => e.offsetParent !== null)`

	tab.route("#/threads")
	tab.waitFor("the thread list", hasText("Waiting charge"), 0)
	if n := tab.string(actions); n != "0" {
		t.Errorf("the thread list offers a viewer %s actions", n)
	}

	tab.route("#/threads/" + threadID)
	tab.waitFor("the thread's messages", testEls("message")+`.length > 0`, 0)
	tab.waitFor("the waiting call on the thread page", hasText("charge"), 0)
	if n := tab.string(actions); n != "0" {
		t.Errorf("the thread page offers a viewer %s actions", n)
	}

	tab.route("#/approvals")
	tab.waitFor("the waiting call in the inbox", testEls("pending-item")+`.some((e) => e.textContent.includes("Waiting charge"))`, 0)
	if n := tab.string(actions); n != "0" {
		t.Errorf("the approvals page offers a viewer %s actions", n)
	}

	tab.route("#/tools")
	tab.waitFor("the tools", hasText("charge")+` && `+hasText("shout"), 0)
	tab.click("the charge tool", `[...document.querySelectorAll("#main a")].find((a) => a.getAttribute("href") === "#/tools/charge" || a.textContent.trim() === "charge")`)
	tab.waitFor("charge's page", hasText("Charges an amount."), 0)
	if n := tab.string(actions); n != "0" {
		t.Errorf("a tool's page offers a viewer %s actions", n)
	}

	for _, hash := range []string{"#/variables", "#/keys"} {
		tab.route(hash)
		tab.waitFor(hash+" loaded", `location.hash === `+js(hash)+` && `+settled, 0)
		if n := tab.string(actions); n != "0" {
			t.Errorf("%s offers a viewer %s actions", hash, n)
		}
	}
}

// TestConsoleScreenshots writes the README's pictures of the console to docs/console/ (with
// QUIVER_SCREENSHOTS=1): sign-in, threads, a thread with a run, approvals (a call's arguments
// being edited), tools, and a thread at phone width.
func TestConsoleScreenshots(t *testing.T) {
	if os.Getenv("QUIVER_SCREENSHOTS") != "1" {
		t.Skip("QUIVER_SCREENSHOTS=1 writes the console's screenshots to docs/console/")
	}
	timed(t)
	dir := filepath.Join("..", "..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	site := startConsoleSite(t)
	done := site.namedThread(t, "payer", "Refund for order 7")
	startAPIRun(t, site.api, site.admin, done, "payer", "Please refund order 7.")
	callID := site.pausedCall(t, done)
	if status, _, out := apiDo(t, "POST", site.api+"/threads/"+done+"/decisions", site.admin,
		`{"call_id":"`+callID+`","action":"edit","args":{"amount":7,"note":"order 7"}}`); status != 202 {
		t.Fatalf("approving: %d %v", status, out)
	}
	site.waitMessages(t, done, "Charged.")
	shout := site.namedThread(t, "reporter", "What the tool shouts")
	site.runToEnd(t, shout, "reporter", "What does the tool say?", "nothing more")
	waiting := site.namedThread(t, "payer", "Another charge")
	startAPIRun(t, site.api, site.admin, waiting, "payer", "Charge order 7 again.")
	site.pausedCall(t, waiting)

	tab := newBrowser(t)
	shot := func(name string) {
		t.Helper()
		tab.do("leaving the fields", chromedp.Evaluate[chromedp.Void](`document.activeElement?.blur()`))
		time.Sleep(300 * time.Millisecond) // fonts and layout settle
		png, err := chromedp.Run(tab.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tab.do("a desktop's screen", chromedp.EmulateViewport(1280, 800))
	tab.open(site, "")
	tab.waitFor("the sign-in form", signInShown, 0)
	shot("signin")
	tab.signIn(site, site.admin)
	tab.route("#/threads")
	tab.waitFor("the threads", hasText("Refund for order 7"), 0)
	shot("threads")
	tab.route("#/threads/" + done)
	tab.waitFor("the thread's run", hasText("Charged."), 0)
	shot("thread")
	tab.route("#/approvals")
	tab.waitFor("the inbox", testEls("pending-item")+`.length > 0`, 0)
	tab.click("Edit", testEls("pending-item")+`[0].querySelector('[data-test="edit"]')`)
	tab.waitFor("the form from charge's schema", `document.querySelector('[data-test="schema-form"] [name="amount"]')`, 0)
	shot("approvals")
	tab.route("#/tools")
	tab.waitFor("the tools", hasText("charge"), 0)
	shot("tools")
	tab.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	tab.route("#/threads/" + done)
	tab.waitFor("the thread's run", hasText("Charged."), 0)
	shot("thread-phone")
}
