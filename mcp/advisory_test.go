package mcp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/schema"
)

// TestAdvisoryOutputSchemaOverMCP: a tool whose output schema is advisory (an OpenAPI
// document's, quiver.Spec.OutputAdvisory) is listed over MCP without it, and its answer that
// does not match the schema comes as a success with structuredContent and the warning in
// _meta; a tool whose schema is a contract is listed with it, and the same answer is an error.
// MCP says a declared outputSchema binds what the server returns, so declaring an advisory
// one would make its clients (the TypeScript SDK) refuse the answer.
func TestAdvisoryOutputSchemaOverMCP(t *testing.T) {
	out := &schema.Schema{Type: "object", Required: []string{"id"}, Properties: map[string]*schema.Schema{"id": {Type: "integer"}}}
	answer := func(context.Context, json.RawMessage) (any, error) { return map[string]any{"id": "seven"}, nil }
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	for _, spec := range []quiver.Spec{
		{Name: "advisory", Description: "A service's answer, described by its document.", OutputSchema: out, OutputAdvisory: true},
		{Name: "contract", Description: "An answer bound by its schema.", OutputSchema: out},
	} {
		tl, err := quiver.NewTool(spec, answer)
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	srv := qmcp.NewServer(&quiver.Dispatcher{Registry: reg}, &qmcp.ServerOptions{Name: "advisory"})
	ts := httptest.NewServer(srv.HTTPHandler(nil))
	t.Cleanup(func() { srv.Close(); ts.Close() })
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1.0"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool     string
		declared bool
		isError  bool
		says     string
	}{
		{"advisory", false, false, "does not match the output schema"},
		{"contract", true, true, "id"},
	} {
		var listed *sdk.Tool
		for _, tl := range list.Tools {
			if tl.Name == tc.tool {
				listed = tl
			}
		}
		if listed == nil || (listed.OutputSchema != nil) != tc.declared {
			t.Errorf("%s listed as %+v, want outputSchema declared %v", tc.tool, listed, tc.declared)
		}
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tc.tool, Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		said, _ := res.Meta[quiver.OutputWarningMeta].(string)
		if res.IsError {
			said = res.Content[0].(*sdk.TextContent).Text
		}
		if res.IsError != tc.isError || !strings.Contains(said, tc.says) {
			t.Errorf("%s: isError %v, said %q", tc.tool, res.IsError, said)
		}
		if !tc.isError && res.StructuredContent == nil {
			t.Errorf("%s: no structuredContent", tc.tool)
		}
	}
}
