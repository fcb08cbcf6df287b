package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver/config"
)

func TestParse(t *testing.T) {
	t.Setenv("QUIVER_TEST_TOKEN", "tok-9")
	cases := []struct {
		name    string
		doc     string
		wantErr string
		check   func(t *testing.T, f *config.File)
	}{
		{"empty file", "", "", func(t *testing.T, f *config.File) {
			if rs, _ := f.Remotes(); len(rs) != 0 {
				t.Errorf("remotes = %v", rs)
			}
		}},
		{"stdio and http servers", `
mcp:
  servers:
    - name: everything
      command: npx
      args: ["-y", "@modelcontextprotocol/server-everything"]
      env: {MODE: "${QUIVER_TEST_TOKEN}"}
      timeout: 5s
    - name: search
      url: http://127.0.0.1:9/mcp
      headers: {Authorization: "Bearer ${QUIVER_TEST_TOKEN}"}
`, "", func(t *testing.T, f *config.File) {
			rs, err := f.Remotes()
			if err != nil || len(rs) != 2 {
				t.Fatalf("remotes = %v, %v", rs, err)
			}
			if rs[0].Command != "npx" || len(rs[0].Args) != 2 || rs[0].Env["MODE"] != "tok-9" || rs[0].Timeout != 5*time.Second {
				t.Errorf("stdio server = %+v", rs[0])
			}
			if rs[1].URL != "http://127.0.0.1:9/mcp" || rs[1].Headers["Authorization"] != "Bearer tok-9" {
				t.Errorf("http server = %+v", rs[1])
			}
		}},
		{"JSON works too", `{"mcp":{"servers":[{"name":"x","url":"https://example.com/mcp"}]}}`, "", nil},
		{"misspelt key", "mcp:\n  server: []\n", "field server not found", nil},
		{"no command or url", "mcp:\n  servers:\n    - name: x\n", "needs a command", nil},
		{"both command and url", "mcp:\n  servers:\n    - {name: x, command: a, url: http://b}\n", "give one", nil},
		{"bad name", "mcp:\n  servers:\n    - {name: 'a.b', command: a}\n", "must be 1 to 32 characters", nil},
		{"duplicate names", "mcp:\n  servers:\n    - {name: a, command: a}\n    - {name: a, command: b}\n", "used twice", nil},
		{"bad timeout", "mcp:\n  servers:\n    - {name: a, command: a, timeout: soon}\n", "not a positive duration", nil},
		{"bad url scheme", "mcp:\n  servers:\n    - {name: a, url: 'ftp://x'}\n", "http://", nil},
		{"not YAML", "mcp: [", "quiver.yaml", nil},
		{"oauth block", `
mcp:
  servers:
    - name: tracker
      url: https://tracker.example.com/mcp
      oauth:
        client_id: quiver
        client_secret: "${QUIVER_TEST_TOKEN}"
        client_metadata_url: https://quiver.example.com/client.json
        redirect_url: https://quiver.example.com/oauth/callback
        scopes: [read, write]
`, "", func(t *testing.T, f *config.File) {
			rs, err := f.Remotes()
			if err != nil || len(rs) != 1 || rs[0].OAuth == nil {
				t.Fatalf("remotes = %+v, %v", rs, err)
			}
			o := rs[0].OAuth
			if o.ClientID != "quiver" || o.ClientSecret != "tok-9" || o.ClientMetadataURL != "https://quiver.example.com/client.json" ||
				o.RedirectURL != "https://quiver.example.com/oauth/callback" || strings.Join(o.Scopes, " ") != "read write" {
				t.Errorf("oauth = %+v", o)
			}
		}},
		{"oauth without redirect (the server's own)", "mcp:\n  servers:\n    - {name: a, url: 'http://x/mcp', oauth: {}}\n", "", nil},
		{"oauth on a command", "mcp:\n  servers:\n    - {name: a, command: a, oauth: {}}\n", "not to a command", nil},
		{"oauth and an Authorization header", "mcp:\n  servers:\n    - {name: a, url: 'http://x', headers: {authorization: b}, oauth: {}}\n", "give one", nil},
		{"oauth redirect not http", "mcp:\n  servers:\n    - {name: a, url: 'http://x', oauth: {redirect_url: 'x:y'}}\n", "not an http or https URL", nil},
		{"oauth secret without id", "mcp:\n  servers:\n    - {name: a, url: 'http://x', oauth: {client_secret: s}}\n", "no client_id", nil},
		{"oauth metadata URL not https", "mcp:\n  servers:\n    - {name: a, url: 'http://x', oauth: {client_metadata_url: 'http://q/c.json'}}\n", "must be an https URL", nil},
		{"oauth misspelt key", "mcp:\n  servers:\n    - {name: a, url: 'http://x', oauth: {clientid: q}}\n", "field clientid not found", nil},
		{"openapi documents", "openapi:\n  - {name: pets, document: pets.yaml, servers: ['http://127.0.0.1:1/api'], operations: [findPets], credentials: {api_key: K}, timeout: 5s, max_response_bytes: 100}\n",
			"", func(t *testing.T, f *config.File) {
				if len(f.OpenAPI) != 1 || f.OpenAPI[0].Credentials["api_key"] != "K" || f.OpenAPI[0].MaxResponseBytes != 100 {
					t.Errorf("openapi = %+v", f.OpenAPI)
				}
			}},
		{"openapi name twice", "openapi:\n  - {name: a, document: x.yaml}\n  - {name: a, document: y.yaml}\n", `the name "a" is already another OpenAPI document's`, nil},
		{"openapi name of a remote", "mcp:\n  servers:\n    - {name: a, url: 'http://x'}\nopenapi:\n  - {name: a, document: x.yaml}\n", `already a remote MCP server's`, nil},
		{"openapi name with a dot", "openapi:\n  - {name: a.b, document: x.yaml}\n", "use 1 to 32 letters", nil},
		{"openapi without a document", "openapi:\n  - {name: a}\n", "document is missing", nil},
		{"openapi bad timeout", "openapi:\n  - {name: a, document: x.yaml, timeout: soon}\n", `timeout "soon"`, nil},
		{"a2a agents", "a2a:\n  agents:\n    - {name: weather, url: 'http://127.0.0.1:1', headers: {X-Key: '${QUIVER_TEST_TOKEN}'}, timeout: 2m, requires_confirmation: true}\n",
			"", func(t *testing.T, f *config.File) {
				rs, err := f.A2ARemotes()
				if err != nil || len(rs) != 1 || rs[0].Headers["X-Key"] != "tok-9" || rs[0].Timeout != 2*time.Minute || !rs[0].RequiresConfirmation {
					t.Errorf("a2a = %+v, %v", rs, err)
				}
			}},
		{"a2a name twice", "a2a:\n  agents:\n    - {name: w, url: 'http://x'}\n    - {name: w, url: 'http://y'}\n", `the name "w" is used twice`, nil},
		{"a2a without a url", "a2a:\n  agents:\n    - {name: w}\n", "url is missing", nil},
		{"a2a bad timeout", "a2a:\n  agents:\n    - {name: w, url: 'http://x', timeout: never}\n", `timeout "never"`, nil},
		{"openapi misspelt key", "openapi:\n  - {name: a, document: x.yaml, server: [x]}\n", "field server not found", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := config.Parse(strings.NewReader(c.doc), "quiver.yaml")
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.check != nil {
				c.check(t, f)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "quiver.yaml")
	if err := os.WriteFile(good, []byte("mcp:\n  servers:\n    - {name: a, command: a}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "none.yaml")
	cases := []struct {
		name     string
		path     string
		optional bool
		remotes  int
		wantErr  bool
	}{
		{"existing file", good, false, 1, false},
		{"missing optional file is empty", missing, true, 0, false},
		{"missing required file is an error", missing, false, 0, true},
	}
	for _, c := range cases {
		f, err := config.Load(c.path, c.optional)
		if (err != nil) != c.wantErr {
			t.Errorf("%s: err = %v", c.name, err)
			continue
		}
		if err == nil {
			if rs, _ := f.Remotes(); len(rs) != c.remotes {
				t.Errorf("%s: %d remotes, want %d", c.name, len(rs), c.remotes)
			}
		}
	}
}

func TestGovernanceRules(t *testing.T) {
	cases := []struct {
		name    string
		doc     string
		want    []string // each rule, as source|tools|confirm|timeout|access
		wantErr string
	}{
		{"none", "", nil, ""},
		{"the block and each source's, in order", `
governance:
  - tools: ["*"]
    timeout: 2m
openapi:
  - name: payments
    document: payments.yaml
    requires_confirmation: true
    governance:
      - when: {readOnlyHint: false}
        access: deny
mcp:
  servers:
    - name: github
      url: http://127.0.0.1:9/mcp
      governance:
        - {tools: [github.delete_repository], requires_confirmation: true}
a2a:
  agents:
    - name: weather
      url: http://127.0.0.1:9/
      governance:
        - {source: "a2a:weather", timeout: 10s}
`, []string{"|*||2m0s|", "openapi:payments||true|0s|", "openapi:payments|||0s|deny", "mcp:github|github.delete_repository|true|0s|", "a2a:weather|||10s|"}, ""},
		{"a source's rule naming another source", `
openapi:
  - name: payments
    document: payments.yaml
    governance: [{source: "mcp:*", access: deny}]
`, nil, `openapi[0] (payments): governance rule 1: source "mcp:*" is another source's`},
		{"a rule that sets nothing", "governance: [{tools: [x]}]", nil, "governance rule 1: it sets nothing"},
		{"a bad timeout", "governance: [{timeout: soon}]", nil, `"soon" is not a duration like 30s or 2m`},
		{"a misspelt key", "governance: [{tool: [x], access: deny}]", nil, "field tool not found"},
		{"an unknown hint", "governance: [{when: {readonly: true}, access: deny}]", nil, "field readonly not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := config.Parse(strings.NewReader(c.doc), "quiver.yaml")
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v; want it to say %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rules, err := f.Rules()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rules {
				confirm := ""
				if r.RequiresConfirmation != nil {
					confirm = fmt.Sprint(*r.RequiresConfirmation)
				}
				got = append(got, fmt.Sprintf("%s|%s|%s|%s|%s", r.Source, strings.Join(r.Tools, ","), confirm, time.Duration(r.Timeout), r.Access))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("rules = %q\nwant    %q", got, c.want)
			}
		})
	}
}
