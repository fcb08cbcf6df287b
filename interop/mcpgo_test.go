package interop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// quiverBinary builds the quiver command of this repository once per test binary.
func quiverBinary(t *testing.T) string {
	t.Helper()
	builtOnce.Do(func() {
		dir, err := os.MkdirTemp("", "quiver-interop")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "quiver")
		cmd := exec.Command("go", "build", "-o", built, "./cmd/quiver")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err, string(out)}
		}
	})
	if buildErr != nil {
		t.Fatalf("building quiver: %v", buildErr)
	}
	return built
}

// serve starts quiver serve on a free 127.0.0.1 port with a fresh data directory, API keys
// on, and extra flags, and returns its MCP endpoint and the admin key its first start printed.
func serve(t *testing.T, extra ...string) (endpoint, key string) {
	t.Helper()
	return serveEnv(t, nil, true, extra...)
}

// exercise initializes c at the client's default protocol version, then lists and calls
// tools with valid, invalid and unknown arguments; it returns the protocol version negotiated.
func exercise(t *testing.T, c *client.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "interop", Version: "1"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatalf("initialize at mcp-go's default version: %v", err)
	}
	t.Logf("negotiated protocol %s", res.ProtocolVersion)
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	found := false
	for _, tl := range tools.Tools {
		found = found || tl.Name == "get_current_time"
	}
	if !found {
		t.Fatalf("tools/list has no get_current_time: %d tools", len(tools.Tools))
	}
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		r, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("tools/call %s: %v", name, err)
		}
		return r
	}
	text := func(r *mcp.CallToolResult) string {
		var b strings.Builder
		for _, c := range r.Content {
			if tc, ok := c.(mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	if r := call("get_current_time", map[string]any{"timezone": "UTC"}); r.IsError || !strings.Contains(text(r), "UTC") {
		t.Errorf("a valid call: error %v, %q", r.IsError, text(r))
	}
	if r := call("get_current_time", map[string]any{"timezone": 5}); !r.IsError || !strings.Contains(text(r), "timezone") {
		t.Errorf("invalid arguments: error %v, %q; want an error result naming the field", r.IsError, text(r))
	}
	if r := call("no_such_tool", map[string]any{}); !r.IsError || !strings.Contains(text(r), "get_current_time") {
		t.Errorf("an unknown tool: error %v, %q; want an error result listing the tools", r.IsError, text(r))
	}
	return res.ProtocolVersion
}

// mcp-go's client at its default version (2026-07-28) over HTTP: it probes with
// server/discover and speaks that version, without a session. (Before Quiver served it over
// HTTP, the discover was answered "method not found" and the client fell back to initialize.)
func TestMCPGoOverHTTP(t *testing.T) {
	endpoint, key := serve(t)
	c, err := client.NewStreamableHttpClient(endpoint, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		t.Fatal(err)
	}
	if got := exercise(t, c); got != "2026-07-28" {
		t.Errorf("negotiated %s over HTTP, want 2026-07-28", got)
	}
}

// mcp-go's client at its default version over stdio, where Quiver serves 2026-07-28.
func TestMCPGoOverStdio(t *testing.T) {
	c, err := client.NewStdioMCPClient(quiverBinary(t), []string{"XDG_DATA_HOME=" + t.TempDir(), "QUIVER_CONFIG="}, "mcp", "stdio")
	if err != nil {
		t.Fatal(err)
	}
	if got := exercise(t, c); got != "2026-07-28" {
		t.Errorf("negotiated %s over stdio, want 2026-07-28", got)
	}
}
