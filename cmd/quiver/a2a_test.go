package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type greeter struct{}

func (greeter) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return q.Write(ctx, a2asdk.NewMessage(a2asdk.MessageRoleAgent, a2asdk.TextPart{Text: "Greetings from the other platform."}))
}

func (greeter) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error { return nil }

// TestA2AAgentsFromTheConfiguration: an agent of the configuration's a2a block is a tool of
// quiver call (recorded, with a key from the environment) and of quiver serve over MCP; one
// that requires confirmation waits for it.
func TestA2AAgentsFromTheConfiguration(t *testing.T) {
	mux := http.NewServeMux()
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Key") != "agent-key-0123456789" {
			http.Error(w, "a key, please", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	defer agent.Close()
	card := &a2asdk.AgentCard{Name: "Greeter", Description: "Greets.", URL: agent.URL + "/invoke", Version: "1",
		PreferredTransport: a2asdk.TransportProtocolJSONRPC, DefaultInputModes: []string{"text"}, DefaultOutputModes: []string{"text"}}
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(greeter{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))

	t.Setenv("GREETER_KEY", "agent-key-0123456789")
	cfg := filepath.Join(t.TempDir(), "quiver.yaml")
	doc := "a2a:\n  agents:\n    - {name: greeter, url: '" + agent.URL + "', headers: {X-Key: '${GREETER_KEY}'}}\n" +
		"    - {name: careful_greeter, url: '" + agent.URL + "', headers: {X-Key: '${GREETER_KEY}'}, requires_confirmation: true}\n"
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv(configEnv, cfg)
	code, out, errOut := runOwn(t, "", "call", "greeter", "--args", `{"message":"hello"}`)
	if code != exitOK || !strings.Contains(out, "Greetings from the other platform.") || strings.Contains(out+errOut, "agent-key-0123456789") {
		t.Fatalf("call: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runOwn(t, "", "threads", "list")
	if code != exitOK || !strings.Contains(out, "cli") {
		t.Errorf("the call is not recorded: exit %d\n%s", code, out)
	}
	code, out, _ = runOwn(t, "", "call", "careful_greeter", "--args", `{"message":"hello"}`)
	if code != exitError || !strings.Contains(out, `"code": "confirmation_required"`) {
		t.Errorf("a confirmed agent called without confirmation: exit %d\n%s", code, out)
	}

	endpoint, _, _ := startServe(t, "--config", cfg)
	cs := connectServe(t, endpoint)
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "greeter", Arguments: map[string]any{"message": "hi"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "Greetings from the other platform.") {
		t.Fatalf("over MCP: %+v %v", res, err)
	}
}
