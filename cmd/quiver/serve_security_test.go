package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// initialize posts an initialize request to endpoint with the given Host (none: the
// endpoint's) and returns the status and body.
func initialize(t testing.TB, endpoint, host string) (int, string) {
	t.Helper()
	return initializeWithKey(t, endpoint, host, "")
}

// initializeWithKey is initialize with an API key.
func initializeWithKey(t testing.TB, endpoint, host, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The session limits are the operator's to set: a flood of initialize requests from one
// client gets 429, from all of them 503, and places come back as sessions expire.
func TestServeSessionLimits(t *testing.T) {
	tests := []struct {
		name  string
		flags []string
		// want is the status of each initialize in turn; 0 retries until one is let in (the
		// sessions expired), which takes a place again.
		want []int
		says string
	}{
		{"--max-sessions", []string{"--max-sessions", "2", "--max-sessions-per-client", "0"}, []int{200, 200, 503, 503},
			"the server has 2 open, its limit"},
		{"--max-sessions-per-client", []string{"--max-sessions", "0", "--max-sessions-per-client", "1"}, []int{200, 429},
			"127.0.0.1 has 1 open, the limit per client"},
		{"--session-idle-timeout", []string{"--max-sessions", "1", "--session-idle-timeout", "500ms"}, []int{200, 503, 0, 503},
			"a session closes after 500ms without a request"},
		{"defaults", nil, []int{200, 200, 200, 200, 200}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			endpoint, _, _ := startServe(t, tt.flags...)
			for i, want := range tt.want {
				if want == 0 {
					deadline := time.Now().Add(10 * time.Second)
					for {
						status, _ := initialize(t, endpoint, "")
						if status == 200 {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("step %d: the sessions did not expire", i+1)
						}
						time.Sleep(100 * time.Millisecond)
					}
					continue
				}
				status, body := initialize(t, endpoint, "")
				if status != want {
					t.Fatalf("step %d: status %d, want %d: %s", i+1, status, want, body)
				}
				if status != 200 && (!strings.Contains(body, fmt.Sprintf(`"code":%d`, -32030)) || !strings.Contains(body, tt.says)) {
					t.Errorf("step %d: refusal %s does not say %q", i+1, body, tt.says)
				}
			}
		})
	}
}

func TestServeSessionFlagErrors(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--max-sessions", "-1"}, "--max-sessions must not be negative"},
		{[]string{"--max-sessions-per-client", "-5"}, "--max-sessions-per-client must not be negative"},
		{[]string{"--max-sessions-per-workspace", "-1"}, "--max-sessions-per-workspace must not be negative"},
		{[]string{"--session-idle-timeout", "-1s"}, "--session-idle-timeout must not be negative"},
		{[]string{"--session-idle-timeout", "soon"}, "invalid value"},
		{[]string{"--max-result-bytes", "-1"}, "--max-result-bytes must not be negative"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := runCLI(t, "", append([]string{"serve", "--addr", "127.0.0.1:0"}, tt.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tt.want)
			}
		})
	}
}

// quiver serve listens where other hosts can reach it only with API keys (--insecure-local is
// refused there), and checks the Host of MCP requests against local names and the public URL's
// host whatever the address.
func TestServeExposure(t *testing.T) {
	tests := []struct {
		name  string
		flags []string
		// hosts maps a Host header to the status an initialize with it gets.
		hosts map[string]int
	}{
		{"loopback", nil, map[string]int{"": 200, "localhost": 200, "evil.example": 403, "quiver.example.com": 403}},
		{"all interfaces", []string{"--addr", "0.0.0.0:0"}, map[string]int{"": 200, "evil.example:7411": 403}},
		{"public URL", []string{"--public-url", "https://quiver.example.com"},
			map[string]int{"": 200, "quiver.example.com": 200, "quiver.example.com:443": 200, "evil.example": 403, "quiver.example.com.evil.example": 403}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(publicURLEnv, "")
			endpoint, _, stderr := startServeWith(t, tt.flags...)
			key := firstKeyRE.FindString(stderr.String())
			if key == "" {
				t.Fatalf("no API key printed:\n%s", stderr.String())
			}
			// The server prints where it listens; reach it on loopback whatever the address.
			port := endpoint[strings.LastIndex(endpoint, ":")+1 : strings.LastIndex(endpoint, "/mcp")]
			endpoint = "http://127.0.0.1:" + port + "/mcp"
			for host, want := range tt.hosts {
				if status, body := initializeWithKey(t, endpoint, host, key); status != want {
					t.Errorf("Host %q: status %d, want %d: %s", host, status, want, body)
				}
			}
		})
	}
	code, _, stderr := runCLI(t, "", "serve", "--addr", "0.0.0.0:0", "--insecure-local")
	if code != exitUsage || !strings.Contains(stderr, "only on a loopback address") {
		t.Errorf("--insecure-local on all interfaces: exit %d\n%s", code, stderr)
	}
}

// quiver serve --max-result-bytes caps what every tool returns over MCP, errors included.
func TestServeCapsResults(t *testing.T) {
	endpoint, _, _ := startServe(t, "--max-result-bytes", "4096")
	cs := connectServe(t, endpoint)
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "run_code",
		Arguments: map[string]any{"code": `export default () => { throw new Error("x".repeat(200000)) }`}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*sdk.TextContent).Text
	if !res.IsError || len(text) > 4096+200 || !strings.Contains(text, "the result limit is 4 KiB") {
		t.Fatalf("a 200 kB error came back as %d bytes (error %v): %.300s", len(text), res.IsError, text)
	}
}

// A keyless local server answers only to its own names and origins, on every door: a web page
// that rebinds its name to 127.0.0.1 sent Host: evil.example.com:PORT and ran run_code, planted
// a function and read the threads through /v1 (only /mcp checked Host). /healthz answers any
// name, for load balancers' probes; --allowed-hosts and --allowed-origins add the names a
// reverse proxy uses.
func TestServeRefusesForeignHostsOnEveryDoor(t *testing.T) {
	endpoint, _, stderr := startServe(t, "--metrics-addr", "127.0.0.1:0", "--allowed-hosts", "quiver.internal", "--allowed-origins", "https://console.example.com")
	base := strings.TrimSuffix(endpoint, "/mcp")
	var metrics string
	for deadline := time.Now().Add(10 * time.Second); metrics == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`metrics at (http://\S+/metrics)`).FindStringSubmatch(stderr.String()); m != nil {
			metrics = m[1]
		}
	}
	if metrics == "" {
		t.Fatalf("no metrics address in:\n%s", stderr.String())
	}
	port := base[strings.LastIndex(base, ":")+1:]
	send := func(method, url, host, origin, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	runCode := `{"args":{"code":"export default () => 1"}}`
	function := `{"name":"planted","code":"export default () => 1"}`
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	doors := []struct{ name, method, url, body string }{
		{"run_code over the API", "POST", base + "/v1/tools/run_code/call", runCode},
		{"a function planted", "POST", base + "/v1/functions", function},
		{"the threads", "GET", base + "/v1/threads", ""},
		{"the OpenAPI document", "GET", base + "/v1/openapi.json", ""},
		{"the console", "GET", base + "/", ""},
		{"the console's assets", "GET", base + "/console/", ""},
		{"MCP", "POST", endpoint, initBody},
		{"the metrics", "GET", metrics, ""},
	}
	for _, d := range doors {
		if got := send(d.method, d.url, "evil.example.com:"+port, "", d.body); got != http.StatusForbidden {
			t.Errorf("%s, Host evil.example.com: %d, want 403", d.name, got)
		}
		if got := send(d.method, d.url, "127.0.0.1:"+port, "http://evil.example.com:"+port, d.body); got != http.StatusForbidden {
			t.Errorf("%s, Origin evil.example.com: %d, want 403", d.name, got)
		}
	}
	// Nothing the refused requests asked for happened.
	resp, err := http.Get(base + "/v1/functions")
	if err != nil {
		t.Fatal(err)
	}
	listed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(listed), "planted") {
		t.Errorf("GET /v1/functions after the refusals: %d %s, want 200 without planted", resp.StatusCode, listed)
	}
	for _, d := range doors {
		if got := send(d.method, d.url, "quiver.internal:"+port, "https://console.example.com", d.body); got == http.StatusForbidden {
			t.Errorf("%s, an allowed host and origin: 403", d.name)
		}
		if got := send(d.method, d.url, "localhost:"+port, "http://localhost:"+port, d.body); got == http.StatusForbidden {
			t.Errorf("%s, localhost: 403", d.name)
		}
	}
	if got := send("GET", base+"/healthz", "lb-probe.example.com", "", ""); got != http.StatusOK {
		t.Errorf("/healthz by another name: %d, want 200", got)
	}
}

func TestServeAllowedHostsFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--allowed-hosts", "https://quiver.example.com"},
		{"--allowed-hosts", "quiver.example.com:443"},
		{"--allowed-origins", "console.example.com"},
		{"--allowed-origins", "https://console.example.com/path"},
	} {
		code, _, stderr := runCLI(t, "", append([]string{"serve", "--addr", "127.0.0.1:0", "--insecure-local"}, args...)...)
		if code != exitUsage || !strings.Contains(stderr, args[0]) {
			t.Errorf("serve %v: exit %d, want %d naming %s:\n%s", args, code, exitUsage, args[0], stderr)
		}
	}
}
