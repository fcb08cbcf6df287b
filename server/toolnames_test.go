package server_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
)

// Seed 003 §8.3 (SPEC T6) over the API: a stored tool may be named anything but hostile input,
// and its name, URL-escaped by the client (spaces, "/", "%", "?", other scripts, path-like
// names, 300 characters), reaches that tool on GET /v1/tools/served/{name}, its validate and
// POST /v1/tools/{name}/call; each provider is shown a valid name for it. Hostile names are
// refused with a problem that says why.
func TestAPIToolsWithHostileNames(t *testing.T) {
	names := []string{"look up: weather?", "a/b", "a b", "100% sure?", "名前 (ja)", "../../evil", "q?x=1&y=2#frag",
		strings.Repeat("long name ", 30)}
	dialectName := map[string]*regexp.Regexp{
		"openai": regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`), "openai-strict": regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`),
		"anthropic": regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`), "gemini": regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`),
		"mcp": regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`),
	}
	if quiver.MaxNameBytes != store.MaxToolNameLen {
		t.Fatalf("quiver.MaxNameBytes %d, store.MaxToolNameLen %d: the registry and the store bound names alike", quiver.MaxNameBytes, store.MaxToolNameLen)
	}
	conEach(t, func(t *testing.T, w *conWorld) {
		in := json.RawMessage(`{"type":"object","description":"Says which tool it is.","properties":{"city":{"type":"string"}}}`)
		for i, n := range names {
			var fn, v struct {
				ID string `json:"id"`
			}
			// A function's name is a tool's name: free text too.
			w.ok(t, "admin", "POST", "/v1/functions", map[string]any{"name": fmt.Sprintf("fn %d: %s", i, n)}, 201, &fn)
			w.ok(t, "admin", "POST", "/v1/functions/"+fn.ID+"/versions",
				map[string]any{"code": fmt.Sprintf(`export default ({ city }) => "tool %d in " + city`, i)}, 201, &v)
			var tool struct {
				Name string `json:"name"`
			}
			w.ok(t, "admin", "POST", "/v1/tools", map[string]any{"name": n, "target": "server", "function_id": fn.ID, "input_schema": in}, 201, &tool)
			if tool.Name != n {
				t.Fatalf("stored as %q, want %q", tool.Name, n)
			}
		}
		for i, n := range names {
			p := url.PathEscape(n)
			var tl servedTool
			w.ok(t, "viewer", "GET", "/v1/tools/served/"+p, nil, 200, &tl)
			if tl.Name != n {
				t.Errorf("GET /v1/tools/served/%s answered the tool %q, want %q", p, tl.Name, n)
			}
			for _, d := range tl.Dialects {
				if re := dialectName[d.Dialect]; d.Error != "" || re == nil || !re.MatchString(d.Name) {
					t.Errorf("%q in %s is offered as %q (%s)", n, d.Dialect, d.Name, d.Error)
				}
			}
			w.ok(t, "member", "POST", "/v1/tools/served/"+p+"/validate", map[string]any{"args": map[string]any{"city": "Oslo"}}, 200, nil)
			var out struct {
				Result struct {
					Status string `json:"status"`
					Text   string `json:"result"`
					Error  string `json:"error"`
				} `json:"result"`
			}
			w.ok(t, "member", "POST", "/v1/tools/"+p+"/call", map[string]any{"args": map[string]any{"city": "Oslo"}}, 200, &out)
			if want := fmt.Sprintf("tool %d in Oslo", i); out.Result.Status != "success" || out.Result.Text != want {
				t.Errorf("POST /v1/tools/%s/call: %+v, want %q", p, out.Result, want)
			}
		}
		// The served list names each as it is stored.
		var list struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		w.ok(t, "viewer", "GET", "/v1/tools/served", nil, 200, &list)
		listed := map[string]bool{}
		for _, tl := range list.Tools {
			listed[tl.Name] = true
		}
		for _, n := range names {
			if !listed[n] {
				t.Errorf("%q is not in GET /v1/tools/served", n)
			}
		}

		// Hostile input is refused, saying why; nothing is stored.
		for _, c := range []struct{ name, why string }{
			{"bad\nname", "control character"},
			{"esc\x1b[2J", "control character"},
			{"   ", "only whitespace"},
			{strings.Repeat("x", quiver.MaxNameBytes+1), "512"},
			{strings.Repeat("é", quiver.MaxNameBytes/2+1), "over the bound of 512 bytes"}, // 256 characters, 514 bytes
		} {
			r := w.do(t, "admin", "POST", "/v1/tools", map[string]any{"name": c.name, "target": "client", "input_schema": in})
			if r.status != 400 && r.status != 422 || !strings.Contains(string(r.body), c.why) {
				t.Errorf("a tool named %q: %d %s, want a refusal that says %q", c.name, r.status, r.body, c.why)
			}
		}
	})
}
