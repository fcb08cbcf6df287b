package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// readmeClient is what an MCP client configured as the README says sends: the URL it
// connects to and the headers it adds, once its placeholders are the key.
type readmeClient struct {
	name    string
	url     string
	headers map[string]string
}

// TestREADMEMCPClientConfigs reads each MCP client's configuration in the docs (docPages: the
// README and docs/guides/clients.md) (Claude Code's
// command, Cursor's, VS Code's and Claude Desktop's JSON files), works out the URL and headers
// the client sends as that client does (its own variables, and for Claude Desktop mcp-remote's
// --header and ${VAR} from env), and connects to a quiver serve that asks for keys with them:
// each lists the tools, where the same URL without the header is refused.
func TestREADMEMCPClientConfigs(t *testing.T) {
	readme := docPages(t)
	endpoint, _, stderr := startServeWith(t)
	key := firstKeyRE.FindString(stderr.String())
	if key == "" {
		t.Fatalf("no key:\n%s", stderr.String())
	}
	clients := readmeClients(t, readme, key)
	for _, want := range []string{"Claude Code", "Cursor", "VS Code", "Claude Desktop"} {
		found := false
		for _, c := range clients {
			found = found || c.name == want
		}
		if !found {
			t.Errorf("the README has no configuration for %s", want)
		}
	}
	served, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			u, err := url.Parse(c.url)
			if err != nil {
				t.Fatal(err)
			}
			if u.Scheme+"://"+u.Host != "http://127.0.0.1:7411" || u.Path != "/mcp" {
				t.Fatalf("the README's URL %s is not quiver serve's default MCP endpoint", c.url)
			}
			u.Host = served.Host // the test's server listens on a port of its own
			if _, err := connectWithHeaders(u.String(), nil); err == nil {
				t.Fatal("a client without the header was let in: the test proves nothing")
			}
			cs, err := connectWithHeaders(u.String(), c.headers)
			if err != nil {
				t.Fatalf("with the headers %v: %v", redactKey(c.headers, key), err)
			}
			defer cs.Close()
			if _, err := cs.ListTools(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func redactKey(h map[string]string, key string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = strings.ReplaceAll(v, key, "qvk_(the key)")
	}
	return out
}

// readmeClients finds the README's client configurations, with the key where each expects
// the user's.
func readmeClients(t *testing.T, readme, key string) []readmeClient {
	t.Helper()
	var out []readmeClient
	for _, block := range shellBlocks(readme) {
		if !strings.HasPrefix(block, "claude mcp add") || strings.Contains(block, "/mcp/") {
			// A toolset's address (docs/guides/entitlements.md) needs a workspace that defines
			// it: readmeExamples says what checks that one.
			continue
		}
		// claude mcp add --transport http NAME URL --header "H: V", the key in QUIVER_KEY.
		m := regexp.MustCompile(`^claude mcp add --transport http (\S+) (\S+) --header "([^"]*)"$`).FindStringSubmatch(block)
		if m == nil || m[1] != "quiver" {
			t.Fatalf("the Claude Code command is not claude mcp add --transport http quiver URL --header \"...\": %s", block)
		}
		name, value, _ := strings.Cut(os.Expand(m[3], func(v string) string { return map[string]string{"QUIVER_KEY": key}[v] }), ": ")
		out = append(out, readmeClient{"Claude Code", m[2], map[string]string{name: value}})
	}
	for _, block := range jsonBlocks(readme) {
		var cfg struct {
			MCPServers map[string]struct {
				URL     string            `json:"url"`
				Headers map[string]string `json:"headers"`
				Command string            `json:"command"`
				Args    []string          `json:"args"`
				Env     map[string]string `json:"env"`
			} `json:"mcpServers"`
			Servers map[string]struct {
				Type    string            `json:"type"`
				URL     string            `json:"url"`
				Headers map[string]string `json:"headers"`
			} `json:"servers"`
			Inputs []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Password bool   `json:"password"`
			} `json:"inputs"`
		}
		if err := json.Unmarshal([]byte(block), &cfg); err != nil {
			continue // TestREADMEJSONBlocks says which block does not parse
		}
		if s, ok := cfg.MCPServers["quiver"]; ok && s.URL != "" {
			// Cursor: ${env:NAME} is the environment's.
			h := map[string]string{}
			for k, v := range s.Headers {
				h[k] = strings.ReplaceAll(v, "${env:QUIVER_KEY}", key)
			}
			out = append(out, readmeClient{"Cursor", s.URL, h})
		}
		if s, ok := cfg.MCPServers["quiver"]; ok && s.Command != "" {
			out = append(out, mcpRemoteClient(t, s.Command, s.Args, s.Env, key))
		}
		if s, ok := cfg.Servers["quiver"]; ok {
			// VS Code: ${input:ID} is what the user typed when asked for the input ID.
			if s.Type != "http" {
				t.Errorf("VS Code's server has type %q, want http", s.Type)
			}
			h := map[string]string{}
			for k, v := range s.Headers {
				for _, in := range cfg.Inputs {
					if in.Type == "promptString" && in.Password {
						v = strings.ReplaceAll(v, "${input:"+in.ID+"}", key)
					}
				}
				h[k] = v
			}
			out = append(out, readmeClient{"VS Code", s.URL, h})
		}
	}
	return out
}

// mcpRemoteClient is Claude Desktop's server command: npx running mcp-remote URL with --header
// "Name:value" arguments, whose ${VAR} mcp-remote takes from its environment (the config's env),
// and the key pasted in place of qvk_YOUR_KEY.
func mcpRemoteClient(t *testing.T, command string, args []string, env map[string]string, key string) readmeClient {
	t.Helper()
	if command != "npx" || len(args) < 3 || args[0] != "-y" || args[1] != "mcp-remote" {
		t.Fatalf("Claude Desktop's command is not npx -y mcp-remote URL: %s %v", command, args)
	}
	c := readmeClient{name: "Claude Desktop", url: args[2], headers: map[string]string{}}
	header := regexp.MustCompile(`^([A-Za-z0-9_-]+):\s*(.*)$`) // mcp-remote's reading of --header
	for i := 3; i < len(args); i++ {
		if args[i] != "--header" || i+1 == len(args) {
			t.Fatalf("an argument mcp-remote is not given here: %q", args[i])
		}
		i++
		m := header.FindStringSubmatch(args[i])
		if m == nil {
			t.Fatalf("mcp-remote ignores the header %q", args[i])
		}
		if strings.Contains(args[i], " ") {
			t.Errorf("the header argument %q has a space, which some clients split arguments at", args[i])
		}
		value := regexp.MustCompile(`\$\{([^}]+)\}`).ReplaceAllStringFunc(m[2], func(v string) string {
			return env[v[2:len(v)-1]]
		})
		c.headers[m[1]] = strings.ReplaceAll(value, "qvk_YOUR_KEY", key)
	}
	return c
}

// jsonBlocks returns the text of every ```json block in md.
func jsonBlocks(md string) []string {
	var blocks []string
	for _, part := range strings.Split(md, "```json\n")[1:] {
		blocks = append(blocks, part[:strings.Index(part, "```")])
	}
	return blocks
}

// connectWithHeaders opens an MCP session that sends headers on every request.
func connectWithHeaders(endpoint string, headers map[string]string) (*sdk.ClientSession, error) {
	hc := &http.Client{Transport: withHeaders{headers, http.DefaultTransport}}
	return sdk.NewClient(&sdk.Implementation{Name: "readme", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}, nil)
}

type withHeaders struct {
	headers map[string]string
	next    http.RoundTripper
}

func (w withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range w.headers {
		r.Header.Set(k, v)
	}
	return w.next.RoundTrip(r)
}

// TestTestsSkipSayingHowToRunThem: without PostgreSQL, Chromium and the npm packages (and
// outside CI), the tests that need them skip, each naming the variable that runs it, as the
// README promises a contributor running go test ./... for the first time. It runs this test
// binary again on those tests, with what they need taken away.
func TestTestsSkipSayingHowToRunThem(t *testing.T) {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "QUIVER_TEST_") || k == "CI" || k == "PATH" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PATH="+t.TempDir()) // no chromium to find
	cmd := exec.Command(os.Args[0], "-test.run", "^(TestFleetChaos|TestConsoleSignIn|TestInspectorCLI)$", "-test.v", "-test.count=1")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for test, variable := range map[string]string{"TestFleetChaos": "QUIVER_TEST_POSTGRES", "TestConsoleSignIn": "QUIVER_TEST_CHROMIUM",
		"TestInspectorCLI": "QUIVER_TEST_NPM"} {
		m := regexp.MustCompile(`(?s)=== RUN   ` + test + `\n(.*?)--- SKIP: ` + test + ` `).FindStringSubmatch(string(out))
		if m == nil || !strings.Contains(m[1], variable) {
			t.Errorf("%s does not skip naming %s:\n%s", test, variable, out)
		}
	}
}
