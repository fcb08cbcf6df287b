package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// hostileTools are tools whose names MCP rejects (seed 003 §8.3 accepts them with a warning),
// several of which sanitize alike; each answers with its own name.
func hostileTools(t *testing.T) (*quiver.Registry, []string) {
	t.Helper()
	long := strings.Repeat("n", 128)
	names := []string{"look up: weather?", "look up; weather!", "look_up__weather_", "名前", "名後",
		long + strings.Repeat("a", 172), long + strings.Repeat("b", 172), "a b", "a.b", "a/b", "get_weather"}
	reg := &quiver.Registry{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, n := range names {
		tool, err := quiver.NewTool(quiver.Spec{Name: n, Description: "Answers with its name."},
			func(context.Context, json.RawMessage) (any, error) { return "I am " + n, nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(tool); err != nil {
			t.Fatalf("%q refused: %v", n, err)
		}
	}
	return reg, names
}

var mcpToolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// Tools whose names MCP rejects are served under MCP-valid, distinct names, and a tools/call
// with the served name reaches that tool, with the official SDK's client in process; a second
// server of the same tools (another process, say) that has not listed them yet maps the same
// served names to the same tools.
func TestServeToolsWithHostileNames(t *testing.T) {
	reg, names := hostileTools(t)
	connect := func(t *testing.T) *sdk.ClientSession {
		srv := qmcp.NewServer(&quiver.Dispatcher{Registry: reg}, nil)
		st, ct := sdk.NewInMemoryTransports()
		if _, err := srv.Connect(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).Connect(context.Background(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close(); srv.Close() })
		return cs
	}
	cs := connect(t)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != len(names) {
		t.Fatalf("%d tools listed, want %d", len(res.Tools), len(names))
	}
	served := map[string]bool{}
	var order []string
	for _, tl := range res.Tools {
		if !mcpToolName.MatchString(tl.Name) || served[tl.Name] {
			t.Errorf("served as %q: not a valid MCP tool name, or given twice", tl.Name)
		}
		served[tl.Name] = true
		order = append(order, tl.Name)
	}
	if !served["get_weather"] || served["look up: weather?"] {
		t.Errorf("served names %v", order)
	}
	// Each served name reaches a tool of its own (each answers with its registered name).
	call := func(cs *sdk.ClientSession, name string) string {
		t.Helper()
		r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err != nil || r.IsError {
			t.Fatalf("call %q: %v %s", name, err, texts(r))
		}
		return strings.TrimPrefix(texts(r), "I am ")
	}
	reached := map[string]string{} // served name -> registered name
	answered := map[string]bool{}
	for _, name := range order {
		got := call(cs, name)
		if answered[got] {
			t.Errorf("%q reached %q, which another served name reaches too", name, got)
		}
		answered[got], reached[name] = true, got
		if mcpToolName.MatchString(got) && got != name {
			t.Errorf("%q, a valid MCP name, was served as %q", got, name)
		}
	}
	for _, n := range names {
		if !answered[n] {
			t.Errorf("no served name reaches %q", n)
		}
	}
	// Another server, never asked for its list: the same served names reach the same tools.
	other := connect(t)
	for i := len(order) - 1; i >= 0; i-- {
		if got := call(other, order[i]); got != reached[order[i]] {
			t.Errorf("on a server that never listed, %q reached %q, want %q", order[i], got, reached[order[i]])
		}
	}
	// The registered name works too, as for every other door.
	if got := call(other, "look up: weather?"); got != "look up: weather?" {
		t.Errorf("called by its registered name: %q", got)
	}
}
