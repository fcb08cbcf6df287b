package mcp_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/schema"
)

// TestPromptsOption: ServerOptions.Prompts are listed in the schema's property order (no
// arguments for an empty schema), a prompt whose argument schema does not compile is left out
// and logged, and arguments of types other than string are read as JSON.
func TestPromptsOption(t *testing.T) {
	var logs bytes.Buffer
	srv := qmcp.NewServer(&quiver.Dispatcher{Registry: &quiver.Registry{}}, &qmcp.ServerOptions{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Prompts: []qmcp.Prompt{
			{Name: "ordered", System: "S", Args: &schema.Schema{Type: "object", PropertyOrder: []string{"b", "a"},
				Properties: map[string]*schema.Schema{"a": {Type: "boolean"}, "b": {Type: "array", Items: &schema.Schema{Type: "integer"}}}}},
			{Name: "none", Args: &schema.Schema{Type: "object"}},
			{Name: "broken", Args: &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"x": {Pattern: "("}}}},
		},
	})
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Run(ctx, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Prompts {
		names = append(names, p.Name)
		if p.Name == "ordered" && (len(p.Arguments) != 2 || p.Arguments[0].Name != "b" || p.Arguments[1].Name != "a") {
			t.Errorf("ordered's arguments are not in property order: %+v", p.Arguments)
		}
		if p.Name == "none" && len(p.Arguments) != 0 {
			t.Errorf("none's arguments: %+v", p.Arguments)
		}
	}
	if strings.Join(names, ",") != "none,ordered" || !strings.Contains(logs.String(), "broken") {
		t.Errorf("prompts %v, logs %s: want none and ordered, broken left out and logged", names, logs.String())
	}
	res, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "ordered", Arguments: map[string]string{"a": "true", "b": "[1,2]"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 2 || res.Messages[1].Content.(*sdk.TextContent).Text != `{"a":true,"b":[1,2]}` {
		t.Errorf("ordered: %+v", res.Messages)
	}
	res, err = cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "none"})
	if err != nil || len(res.Messages) != 1 || res.Messages[0].Content.(*sdk.TextContent).Text != `{}` {
		t.Errorf("none: %+v %v, want only the arguments message (no system text)", res, err)
	}
	_, err = cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "ordered", Arguments: map[string]string{"b": "[1,\"x\"]"}})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams || !strings.Contains(we.Message, "/b/1") {
		t.Errorf("ordered with a bad item: %v", err)
	}
}
