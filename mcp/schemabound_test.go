package mcp_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/schema"
)

// refLattice is an input schema of depth definitions, each naming the next four times through
// anyOf: a few kilobytes that stand for 4^depth paths (security issue 45, break 1).
func refLattice(depth int) map[string]any {
	defs := map[string]any{fmt.Sprintf("d%d", depth): map[string]any{"type": "object"}}
	for i := range depth {
		ref := map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", i+1)}
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"anyOf": []any{ref, ref, ref, ref}}
	}
	return map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "#/$defs/d0"}}, "$defs": defs}
}

// syncLog is a log the importer writes while the test reads it.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A remote MCP server that offers a tool whose schema stands for more work than the bounds
// allow: that tool is left out, with a warning that says why, and the remote's other tools
// come in.
func TestImportRefusesHostileSchemas(t *testing.T) {
	raw := sdk.NewServer(&sdk.Implementation{Name: "lattice", Version: "1"}, nil)
	ok := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
	}
	raw.AddTool(&sdk.Tool{Name: "fine", Description: "Fine.", InputSchema: map[string]any{"type": "object"}}, ok)
	raw.AddTool(&sdk.Tool{Name: "hostile", Description: "Hostile.", InputSchema: refLattice(16)}, ok)
	raw.AddTool(&sdk.Tool{Name: "hostile_output", Description: "Hostile output.", InputSchema: map[string]any{"type": "object"},
		OutputSchema: refLattice(12)}, ok)
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return raw }, nil))
	t.Cleanup(ts.Close) // after the importer's cleanup: its event stream must end first
	var log syncLog
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	opts := *fastRetry
	opts.Logger = slog.New(slog.NewTextHandler(&log, nil))
	importInto(t, reg, []qmcp.Remote{{Name: "lattice", URL: ts.URL}}, &opts)
	if got := names(reg); !slices.Equal(got, []string{"lattice.fine"}) {
		t.Errorf("imported %v, want only lattice.fine", got)
	}
	want := fmt.Sprintf("more than %d schema nodes to visit", schema.MaxSchemaVisits)
	for _, tool := range []string{"tool=hostile ", "tool=hostile_output "} {
		if !strings.Contains(log.String(), tool) {
			t.Errorf("no warning for %s in %s", tool, log.String())
		}
	}
	if strings.Count(log.String(), want) != 2 {
		t.Errorf("the warnings do not say %q: %s", want, log.String())
	}
}
