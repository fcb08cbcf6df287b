package server_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/server/apidocs"
	"github.com/quiverhq/quiver/server/console"
)

// The API reference is served at /v1/docs without a key, under the console's
// Content-Security-Policy, and everything it loads comes from the server itself: the page's
// script and style (served with the same policy and the types a browser runs them as) and the
// OpenAPI document, which its script fetches from the same origin.
func TestAPIReferenceIsServedFromTheServerAlone(t *testing.T) {
	w := newTenantWorld(t) // a server that asks for keys: the reference needs none
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(w.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	for _, directive := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'"} {
		if !strings.Contains(console.Policy, directive) {
			t.Fatalf("the console's policy lacks %q: %s", directive, console.Policy)
		}
	}

	resp, page := get(apidocs.Path)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s: %d %s", apidocs.Path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if got := resp.Header.Get("Content-Security-Policy"); got != console.Policy {
		t.Errorf("GET %s: Content-Security-Policy %q, want the console's %q", apidocs.Path, got, console.Policy)
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "<style") || regexp.MustCompile(`\s(on[a-z]+|style)=`).MatchString(page) {
		t.Errorf("the page holds inline script or style, which the policy refuses:\n%s", page)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 3 {
		t.Fatalf("the page names %d files, want its script, its style and the document", len(refs))
	}
	wantTypes := map[string]string{".js": "text/javascript", ".css": "text/css"}
	for _, m := range refs {
		ref := m[1]
		if !strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, "//") {
			if ref != "#" {
				t.Errorf("the page refers to %q, not a path of this server", ref)
			}
			continue
		}
		resp, body := get(ref)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s (named by the page): %d", ref, resp.StatusCode)
			continue
		}
		for ext, ct := range wantTypes {
			if strings.HasSuffix(ref, ext) && !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) {
				t.Errorf("GET %s: Content-Type %q, want %s", ref, resp.Header.Get("Content-Type"), ct)
			}
		}
		if strings.HasPrefix(ref, apidocs.Path+"/") {
			if resp.Header.Get("Content-Security-Policy") != console.Policy {
				t.Errorf("GET %s: no console policy", ref)
			}
			// What the script and style load comes from here too: no other origin's URL.
			if u := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`).FindString(body); u != "" {
				t.Errorf("%s names another origin: %q", ref, u)
			}
			if strings.HasSuffix(ref, ".js") && !strings.Contains(body, `fetch("/v1/openapi.json"`) {
				t.Errorf("%s does not read the server's own document", ref)
			}
		}
	}
	if resp, _ := get(apidocs.Path + "/nothing.js"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET %s/nothing.js: %d, want 404", apidocs.Path, resp.StatusCode)
	}
}
