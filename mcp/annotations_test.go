package mcp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// listOver serves reg's tools over MCP (streamable HTTP, in process) and returns what a real
// go-sdk client's tools/list gets, by name, with the raw wire form of each tool's annotations.
func listOver(t *testing.T, reg *quiver.Registry) (map[string]*sdk.Tool, map[string]string) {
	t.Helper()
	srv := qmcp.NewServer(&quiver.Dispatcher{Registry: reg}, &qmcp.ServerOptions{Name: "annotations"})
	ts := httptest.NewServer(srv.HTTPHandler(nil))
	t.Cleanup(func() { srv.Close(); ts.Close() })
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1.0"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName, wire := map[string]*sdk.Tool{}, map[string]string{}
	for _, tl := range res.Tools {
		byName[tl.Name] = tl
		if tl.Annotations != nil {
			b, _ := json.Marshal(tl.Annotations)
			wire[tl.Name] = string(b)
		}
	}
	return byName, wire
}

func TestAnnotationsReachMCPClients(t *testing.T) {
	noop := func(context.Context, struct{}) (string, error) { return "ok", nil }
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	if err := reg.Register(
		quiver.Func("search", "Searches the web.", noop, quiver.WithAnnotations(quiver.Annotations{
			Title: "Web search", ReadOnlyHint: quiver.Hint(true), OpenWorldHint: quiver.Hint(true)})),
		quiver.Func("upsert", "Writes a record.", noop, quiver.WithAnnotations(quiver.Annotations{
			DestructiveHint: quiver.Hint(false), IdempotentHint: quiver.Hint(true), OpenWorldHint: quiver.Hint(false)})),
		quiver.Func("plain", "Says nothing of itself.", noop),
		// Confirmation and nothing declared: served destructive, as before.
		quiver.Func("wipe", "Wipes; needs confirmation.", noop, quiver.WithConfirmation()),
		// Confirmation for another reason: the tool's declaration wins.
		quiver.Func("spend", "Spends money; needs confirmation.", noop, quiver.WithConfirmation(),
			quiver.WithAnnotations(quiver.Annotations{DestructiveHint: quiver.Hint(false)})),
		// A read-only tool that needs confirmation is not called destructive.
		quiver.Func("peek", "Reads private data; needs confirmation.", noop, quiver.WithConfirmation(),
			quiver.WithAnnotations(quiver.Annotations{ReadOnlyHint: quiver.Hint(true)})),
	); err != nil {
		t.Fatal(err)
	}
	byName, wire := listOver(t, reg)
	want := map[string]string{
		"search": `{"idempotentHint":false,"openWorldHint":true,"readOnlyHint":true,"title":"Web search"}`,
		"upsert": `{"destructiveHint":false,"idempotentHint":true,"openWorldHint":false,"readOnlyHint":false}`,
		"wipe":   `{"destructiveHint":true,"idempotentHint":false,"readOnlyHint":false}`,
		"spend":  `{"destructiveHint":false,"idempotentHint":false,"readOnlyHint":false}`,
		"peek":   `{"idempotentHint":false,"readOnlyHint":true}`,
	}
	for name, w := range want {
		if byName[name] == nil {
			t.Fatalf("%s is not listed", name)
		}
		if got := canonical(t, wire[name]); got != canonical(t, w) {
			t.Errorf("%s's annotations = %s, want %s", name, got, w)
		}
	}
	if a := byName["plain"].Annotations; a != nil {
		t.Errorf("a tool that declares nothing is served annotations %+v", a)
	}
}

// canonical re-encodes a JSON object with sorted keys.
func canonical(t *testing.T, s string) string {
	t.Helper()
	if s == "" {
		return ""
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// A remote server that is not Quiver (the go-sdk's own) declares annotations: the imported
// tools keep them, and Quiver serves them on to its own MCP clients.
func TestImportKeepsRemoteAnnotations(t *testing.T) {
	remote := sdk.NewServer(&sdk.Implementation{Name: "plain-sdk", Version: "1.0"}, nil)
	type none struct{}
	handler := func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil, nil
	}
	f := false
	sdk.AddTool(remote, &sdk.Tool{Name: "lookup", Description: "Looks something up.",
		Annotations: &sdk.ToolAnnotations{Title: "Lookup", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &f}}, handler)
	sdk.AddTool(remote, &sdk.Tool{Name: "drop", Description: "Drops a table.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: quiver.Hint(true)}}, handler)
	sdk.AddTool(remote, &sdk.Tool{Name: "titled", Title: "Titled tool", Description: "Has a title, no annotations."}, handler)
	sdk.AddTool(remote, &sdk.Tool{Name: "bare", Description: "Declares nothing."}, handler)
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return remote }, nil))
	t.Cleanup(ts.Close)

	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	importInto(t, reg, []qmcp.Remote{{Name: "ext", URL: ts.URL}}, fastRetry)
	spec := func(name string) quiver.Annotations {
		t.Helper()
		tl, ok := reg.Lookup(name)
		if !ok {
			t.Fatalf("%s was not imported; tools: %v", name, names(reg))
		}
		return tl.Spec().Annotations
	}
	enc := func(a quiver.Annotations) string { b, _ := json.Marshal(a); return string(b) }
	for name, want := range map[string]string{
		"ext.lookup": `{"title":"Lookup","readOnlyHint":true,"idempotentHint":true,"openWorldHint":false}`,
		"ext.drop":   `{"destructiveHint":true}`,
		"ext.titled": `{"title":"Titled tool"}`,
		"ext.bare":   `{}`,
	} {
		if got := enc(spec(name)); got != want {
			t.Errorf("%s's imported annotations = %s, want %s", name, got, want)
		}
	}

	// Served on by Quiver to a go-sdk client.
	byName, wire := listOver(t, reg)
	if got, want := canonical(t, wire["ext.lookup"]), canonical(t, `{"title":"Lookup","readOnlyHint":true,"idempotentHint":true,"openWorldHint":false}`); got != want {
		t.Errorf("ext.lookup served with %s, want %s", got, want)
	}
	if a := byName["ext.drop"].Annotations; a == nil || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("ext.drop served with %+v, want destructiveHint true", a)
	}
	if a := byName["ext.bare"].Annotations; a != nil {
		t.Errorf("ext.bare served with %+v, want none", a)
	}
}
