package interop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the Chromium to drive (QUIVER_TEST_CHROMIUM, else chromium on the PATH), or
// skips the test: failed under CI=true, where .ci/run installs it.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("QUIVER_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const why = "no Chromium for the console's sign-in with a provider: install chromium or set QUIVER_TEST_CHROMIUM"
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but " + why)
	}
	t.Skip(why)
	return ""
}

// TestConsoleSignsInWithTheProvider: in Chromium, the console offers the provider beside the
// API key form; the person signs in on the provider's own page and comes back to the console
// signed in, with the role the rules grant, the token in the tab's session storage and neither
// code nor token in the address or a cookie; signing out forgets the token.
func TestConsoleSignsInWithTheProvider(t *testing.T) {
	browser := chromium(t)
	port := freePort(t)
	consoleURL := fmt.Sprintf("http://127.0.0.1:%d/", port)
	idp, issuer := startProvider(t, map[string]string{"quiver-console": consoleURL})
	idp.setGroups(oidcUser, "eng")

	dataDir := t.TempDir()
	base, key, stop := quiverServe(t, dataDir, true, "--addr", "127.0.0.1:0")
	var session struct {
		WorkspaceID string `json:"workspace_id"`
	}
	if status := getJSON(t, base+"/v1/session", key, &session); status != 200 {
		t.Fatalf("the first start's key: %d", status)
	}
	stop()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	body := fmt.Sprintf("rules:\n  - {claim: groups, value: eng, workspace: %s, role: member}\n", session.WorkspaceID)
	if err := os.WriteFile(rules, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	quiverServe(t, dataDir, false, "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--public-url", strings.TrimSuffix(consoleURL, "/"),
		"--oidc-issuer", issuer, "--oidc-audience", "quiver-console", "--oidc-rules", rules, "--oidc-console-client-id", "quiver-console",
		"--oidc-console-param", "prompt=login")

	limited, cancelLimit := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelLimit()
	alloc, cancelAlloc := chromedp.NewExecAllocator(limited, chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("password-store", "basic"))
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithLogf(func(string, ...any) {}), chromedp.WithErrorf(func(string, ...any) {}))
	defer cancel()

	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText : "")`))
			t.Fatalf("%s: %v\n%s", what, err, page)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("evaluating %s: %v", expr, err)
		}
		return v
	}
	do("opening the console", chromedp.Navigate(consoleURL), chromedp.WaitVisible("#signin-provider"), chromedp.WaitVisible("#key"))
	button := eval(`document.getElementById("signin-provider").textContent`)
	do("signing in on the provider's page", chromedp.Click("#signin-provider"),
		chromedp.WaitVisible("#username"),
		chromedp.SendKeys("#username", "test-user@localhost"),
		chromedp.SendKeys("#password", oidcPassword),
		chromedp.Submit("#password"))
	// Back in the console: signed in, or an error saying why not.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		state := eval(`(() => { const out = document.getElementById("signout");
			if (out && !out.hidden) return "signed in";
			const e = document.querySelector("#main .error"); return e ? "error: " + e.textContent : ""; })()`)
		if state == "signed in" {
			break
		}
		if strings.HasPrefix(state, "error: ") || time.Now().After(deadline) {
			t.Fatalf("coming back from the provider: %q", state)
		}
	}
	who := eval(`document.getElementById("who").textContent`)
	search := eval(`location.search`)
	stored := eval(`sessionStorage.getItem("quiver.key") || ""`)
	cookies := eval(`document.cookie`)
	if !strings.Contains(button, strings.TrimPrefix(strings.TrimSuffix(issuer, "/"), "http://")) {
		t.Errorf("the provider's button says %q", button)
	}
	if !strings.HasSuffix(who, "· member") {
		t.Errorf("signed in as %q, want the member role the rule grants", who)
	}
	if search != "" || strings.Count(stored, ".") != 2 || cookies != "" {
		t.Errorf("after the sign-in: address query %q, stored %d bytes (a JWT: %v), cookies %q", search, len(stored), strings.Count(stored, ".") == 2, cookies)
	}
	if status := getJSON(t, consoleURL+"v1/session", stored, nil); status != 200 {
		t.Errorf("the console's token on the API: %d", status)
	}
	// A link that carries a provider's answer this tab never asked for neither signs the person
	// out nor puts its words on the page.
	do("opening a forged callback", chromedp.Navigate(consoleURL+"?error=access_denied&error_description=Your+account+is+locked"),
		chromedp.WaitVisible("#signout"))
	if text := eval(`document.body.innerText + location.search`); strings.Contains(text, "locked") {
		t.Fatalf("a forged callback's words reached the page: %q", text)
	}
	do("signing out", chromedp.Click("#signout"), chromedp.WaitVisible("#signin-provider"))
	if forgotten := eval(`String(sessionStorage.getItem("quiver.key") === null)`); forgotten != "true" {
		t.Fatal("signing out left the token in the tab's session storage")
	}
}
