package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// quiver run reads the configuration as quiver serve does (--config, else $QUIVER_CONFIG): an
// agent given a tool of a remote MCP server the configuration names calls it, where before the
// run was refused as naming an unknown tool.
func TestRunReadsTheConfiguration(t *testing.T) {
	var calls atomic.Int32
	srv := sdk.NewServer(&sdk.Implementation{Name: "inventory", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "count", Description: "Counts the items."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		calls.Add(1)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "42 items"}}}, nil, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	defer ts.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "quiver.yaml")
	writeTestFiles(t, map[string]string{
		cfg:                              "mcp:\n  servers:\n    - {name: inventory, url: '" + ts.URL + "'}\n",
		filepath.Join(dir, "turns.yaml"): "turns:\n  - calls: [{name: inventory.count}]\n  - text: There are 42 items.\n",
		filepath.Join(dir, "agents", "clerk.yaml"): "name: clerk\nmodel: scripted:" + filepath.Join(dir, "turns.yaml") + "\ntools: [inventory.count]\n",
	})
	for _, tt := range []struct {
		name string
		args []string
		env  string
	}{
		{"--config", []string{"--config", cfg}, ""},
		{"QUIVER_CONFIG", nil, cfg},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XDG_DATA_HOME", t.TempDir())
			t.Setenv(configEnv, tt.env)
			before := calls.Load()
			args := append([]string{"run", "--agents", filepath.Join(dir, "agents"), "--agent", "clerk"}, tt.args...)
			code, stdout, stderr := runCLI(t, "", append(args, "How many items?")...)
			if code != exitOK || !strings.Contains(stdout, "There are 42 items.") || calls.Load() != before+1 {
				t.Fatalf("exit %d, %d calls of the remote tool\nstdout: %s\nstderr: %s", code, calls.Load()-before, stdout, stderr)
			}
		})
	}
}
