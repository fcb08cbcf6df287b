package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader on different goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var servingRE = regexp.MustCompile(`serving MCP at (http://[^ ]+/mcp)`)

// firstKeyRE finds the API key quiver serve prints on its first start.
var firstKeyRE = regexp.MustCompile(`qvk_[A-Za-z0-9_-]{43}`)

// startServe runs "quiver serve" in-process on a random 127.0.0.1 port with a fresh data
// directory, and returns the MCP endpoint and a function that stops it and returns its exit
// code.
func startServe(t testing.TB, extra ...string) (string, func() int, *syncBuffer) {
	t.Helper()
	return startServeWith(t, append([]string{"--insecure-local"}, extra...)...)
}

// startServeWith is startServe without --insecure-local: the server asks for API keys.
func startServeWith(t testing.TB, extra ...string) (string, func() int, *syncBuffer) {
	t.Helper()
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv(configEnv, "")
	t.Setenv(addrEnv, "")
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	args := append([]string{"serve", "--addr", "127.0.0.1:0"}, extra...)
	go func() { done <- run(ctx, args, strings.NewReader(""), io.Discard, stderr) }()
	deadline := time.After(30 * time.Second)
	for {
		if m := servingRE.FindStringSubmatch(stderr.String()); m != nil {
			stopped := false
			code := 0
			stop := func() int {
				if !stopped {
					stopped = true
					cancel()
					code = <-done
				}
				return code
			}
			t.Cleanup(func() { stop() })
			return m[1], stop, stderr
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("serve exited with %d before serving:\n%s", code, stderr.String())
		case <-deadline:
			cancel()
			t.Fatalf("serve did not start:\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestServe(t *testing.T) {
	endpoint, stop, stderr := startServe(t)
	ctx := context.Background()
	cs := connectServe(t, endpoint)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range tools.Tools {
		found = found || tl.Name == "get_current_time"
	}
	if !found {
		t.Errorf("the built-in get_current_time is not served: %v", tools.Tools)
	}
	cases := []struct {
		args    map[string]any
		isError bool
		want    string
	}{
		{map[string]any{"timezone": "Europe/Paris"}, false, `"timezone":"Europe/Paris"`},
		{map[string]any{"timezone": 5}, true, "/timezone"},
	}
	for _, c := range cases {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "get_current_time", Arguments: c.args})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Content[0].(*sdk.TextContent).Text
		if res.IsError != c.isError || !strings.Contains(text, c.want) {
			t.Errorf("call %v: isError %v %q, want %v containing %q", c.args, res.IsError, text, c.isError, c.want)
		}
	}
	resp, err := http.Get(strings.TrimSuffix(endpoint, "/mcp") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Status string }
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if h.Status != "ok" {
		t.Errorf("healthz status %q", h.Status)
	}
	if code := stop(); code != exitOK {
		t.Errorf("serve exited with %d after a shutdown request, want 0:\n%s", code, stderr.String())
	}
	// The calls were recorded in the default database of the data directory, through the
	// journal beside it, which a clean shutdown leaves empty.
	dbPath := filepath.Join(os.Getenv("XDG_DATA_HOME"), "quiver", defaultDBName)
	if n := recordedResults(t, dbPath); n != len(cases) {
		t.Errorf("%d results recorded in %s, want %d", n, dbPath, len(cases))
	}
	if files, err := filepath.Glob(filepath.Join(dbPath+".journal", "*")); err != nil || len(files) != 0 {
		t.Errorf("the journal holds %v after a clean shutdown (%v)", files, err)
	}
	if fi, err := os.Stat(dbPath + ".journal"); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("journal directory: %v, %v", fi, err)
	}
}

// TestServeWithoutJournal: --journal=false stores each record before answering, and makes no
// journal directory.
func TestServeWithoutJournal(t *testing.T) {
	endpoint, stop, stderr := startServe(t, "--journal=false")
	ctx := context.Background()
	cs := connectServe(t, endpoint)
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "get_current_time", Arguments: map[string]any{"timezone": "UTC"}}); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(os.Getenv("XDG_DATA_HOME"), "quiver", defaultDBName)
	// Stored before the answer: visible while the server still runs.
	if n := recordedResults(t, dbPath); n != 1 {
		t.Errorf("%d results recorded while serving, want 1", n)
	}
	if code := stop(); code != exitOK {
		t.Fatalf("serve exited with %d:\n%s", code, stderr.String())
	}
	if _, err := os.Stat(dbPath + ".journal"); !os.IsNotExist(err) {
		t.Errorf("a journal directory exists with --journal=false: %v", err)
	}
}

// connectServe connects an MCP client to a server started by startServe; it is closed when the
// test ends.
func connectServe(t testing.TB, endpoint string) *sdk.ClientSession {
	t.Helper()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// recordedResults counts the tool results recorded in the SQLite database at path.
func recordedResults(t testing.TB, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM messages WHERE role = 'tool'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestServeConformanceFixtures(t *testing.T) {
	endpoint, _, _ := startServe(t, "--conformance")
	ctx := context.Background()
	cs := connectServe(t, endpoint)
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "test_simple_text"})
	if err != nil || res.IsError {
		t.Fatalf("test_simple_text: %v %v", err, res)
	}
	pr, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "test_prompt_with_arguments", Arguments: map[string]string{"arg1": "a", "arg2": "b"}})
	if err != nil || len(pr.Messages) != 1 {
		t.Fatalf("prompt: %v %v", err, pr)
	}
	rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "test://template/42/data"})
	if err != nil || !strings.Contains(rr.Contents[0].Text, `"42"`) {
		t.Fatalf("template resource: %v %v", err, rr)
	}
}

func TestServeUsageErrors(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("mcp:\n  servers:\n    - {name: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad address", []string{"serve", "--addr", "nowhere"}, exitUsage, "must be HOST:PORT"},
		{"stray argument", []string{"serve", "extra"}, exitUsage, "takes no arguments"},
		{"negative cap", []string{"serve", "--max-request-bytes", "-1"}, exitUsage, "must not be negative"},
		{"bad configuration", []string{"serve", "--addr", "127.0.0.1:0", "--config", bad}, exitError, "needs a command"},
		{"missing configuration", []string{"serve", "--config", filepath.Join(t.TempDir(), "none.yaml")}, exitError, "opening the configuration"},
		{"unknown mcp subcommand", []string{"mcp", "http"}, exitUsage, "unknown mcp subcommand"},
		{"conformance client without scenario", []string{"mcp", "conformance-client", "http://127.0.0.1:1/mcp"}, exitUsage, "MCP_CONFORMANCE_SCENARIO"},
	}
	t.Setenv("MCP_CONFORMANCE_SCENARIO", "")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, "", c.args...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, c.code, c.want)
			}
		})
	}
}

func TestMCPStdio(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv(configEnv, "")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"mcp", "stdio"}, inR, outW, io.Discard)
		outW.Close()
	}()
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).
		Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "get_current_time", Arguments: map[string]any{"timezone": "UTC"}})
	if err != nil || res.IsError {
		t.Fatalf("call over stdio: %v %v", err, res)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(res.Content[0].(*sdk.TextContent).Text), &v); err != nil || v["timezone"] != "UTC" {
		t.Errorf("result %v %v", v, err)
	}
	cs.Close() // closes stdin: the command ends
	if code := <-done; code != exitOK {
		t.Errorf("mcp stdio exited with %d", code)
	}
}

// TestCallSeesImportedTools: quiver call reaches tools of a remote MCP server named in the
// configuration file (here a Quiver server started by the test).
func TestCallSeesImportedTools(t *testing.T) {
	endpoint, _, _ := startServe(t)
	cfg := filepath.Join(t.TempDir(), "quiver.yaml")
	if err := os.WriteFile(cfg, []byte("mcp:\n  servers:\n    - {name: upstream, url: \""+endpoint+"\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(configEnv, cfg)
	reg := &quiver.Registry{}
	var stdout, stderr bytes.Buffer
	a := &app{registry: reg, stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	code := a.run(context.Background(), []string{"call", "upstream.get_current_time", "--args", `{"timezone":"Asia/Tokyo"}`})
	if code != exitOK || !strings.Contains(stdout.String(), "Asia/Tokyo") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
	}
}

// The configuration file's remote servers reach every command that lists or calls tools, named
// by --config or QUIVER_CONFIG alike, and their names (the remote's, which no one here can
// change) are not warned about on every command.
func TestConfigReachesEveryToolCommand(t *testing.T) {
	endpoint, _, _ := startServe(t)
	cfg := filepath.Join(t.TempDir(), "quiver.yaml")
	if err := os.WriteFile(cfg, []byte("mcp:\n  servers:\n    - {name: upstream, url: \""+endpoint+"\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  bool // QUIVER_CONFIG instead of --config
		args []string
		want string
	}{
		{"tools list --config", false, []string{"tools", "list", "--config", cfg}, "upstream.get_current_time"},
		{"tools list with QUIVER_CONFIG", true, []string{"tools", "list"}, "upstream.get_current_time"},
		{"tools schema --config", false, []string{"tools", "schema", "upstream.get_current_time", "--config", cfg, "--dialect", "mcp"}, `"name": "upstream.get_current_time"`},
		{"call --config", false, []string{"call", "upstream.get_current_time", "--config", cfg, "--args", `{"timezone":"Asia/Tokyo"}`}, `"value": {`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env {
				t.Setenv(configEnv, cfg)
			} else {
				t.Setenv(configEnv, "")
			}
			var stdout, stderr bytes.Buffer
			reg := &quiver.Registry{Logger: slog.New(slog.NewTextHandler(&stderr, nil))}
			a := &app{registry: reg, stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
			code := a.run(context.Background(), tt.args)
			if code != exitOK || !strings.Contains(stdout.String(), tt.want) {
				t.Fatalf("exit %d, want %q\nstdout %s\nstderr %s", code, tt.want, stdout.String(), stderr.String())
			}
			if strings.Contains(stderr.String(), "WARN") {
				t.Errorf("warnings for the remote's tool names:\n%s", stderr.String())
			}
		})
	}
}

// TestServeOffersStoredJavaScriptTools: a tool added with quiver tools add is served over MCP
// and runs in the sandbox.
func TestServeOffersStoredJavaScriptTools(t *testing.T) {
	dir := writeFiles(t, map[string]string{"weather.js": weatherJS, "weather.json": weatherSchema})
	db := filepath.Join(dir, "quiver.db")
	if code, _, stderr := runCLI(t, "", "tools", "add", "--js", filepath.Join(dir, "weather.js"), "--schema", filepath.Join(dir, "weather.json"), "--db", db); code != exitOK {
		t.Fatalf("tools add: %s", stderr)
	}
	endpoint, _, _ := startServe(t, "--db", db)
	ctx := context.Background()
	cs := connectServe(t, endpoint)
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "weather", Arguments: map[string]any{"city": "Oslo"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if res.IsError || string(b) != `{"city":"Oslo","temp":21,"unit":"C"}` {
		t.Fatalf("weather over MCP: error %v, %s", res.IsError, b)
	}
}

// quiver mcp stdio answers every request it read before its input ended, as a pipe gives them:
// `echo '{...initialize...}' | quiver mcp stdio` printed nothing and exited 0.
func TestMCPStdioAnswersBeforeItsInputEnds(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"echo","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"export default () => 6 * 7"}}}` + "\n"
	code, stdout, stderr := runCLI(t, in, "mcp", "stdio", "--db", filepath.Join(t.TempDir(), "q.db"))
	// run_code's answer is the value, its duration in _meta (issue 35: not a report holding both).
	if code != exitOK || !strings.Contains(stdout, `"id":1,"result":{"capabilities"`) || !strings.Contains(stdout, `"id":2,"result":{"_meta":{"duration_ms":`) ||
		!strings.Contains(stdout, `"content":[{"type":"text","text":"42"}]`) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}
