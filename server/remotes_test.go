package server_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/internal/apicontract"
	"github.com/quiverhq/quiver/server"
)

// closedURL is the URL of a port nothing listens on: a remote MCP server that is down.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/mcp"
}

// A remote MCP server that is down is named, with why, at every door of the server: a call to
// one of its tools over MCP and over the API answers that it is not connected (not "unknown
// tool"), and the served tools' listing reports it.
func TestDownRemoteIsReportedAtEveryDoor(t *testing.T) {
	r := startConfigured(t, server.Config{}, "mcp:\n  servers:\n    - {name: down, url: '"+closedURL(t)+"'}\n")
	wants := []string{`"down.echo"`, `MCP server "down", which is not connected`, "connection refused", "(last tried "}
	check := func(door, code, text string) {
		t.Helper()
		for _, want := range wants {
			if code != "tool_error" || !strings.Contains(text, want) {
				t.Errorf("%s: %s %q, want a tool_error saying %q", door, code, text, want)
			}
		}
	}

	cs := connect(t, r.url, "down-remote")
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "down.echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || len(res.Content) == 0 {
		t.Fatalf("tools/call: %+v, want an error result", res)
	}
	check("MCP tools/call", "tool_error", res.Content[0].(*sdk.TextContent).Text)

	resp, body := sendAPI(t, http.DefaultClient, "POST", r.url+"/v1/tools/down.echo/call", "", map[string]any{"args": map[string]any{"text": "hi"}})
	var call struct {
		Result struct{ Code, Error string }
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &call) != nil {
		t.Fatalf("POST /v1/tools/down.echo/call: %d %s", resp.StatusCode, body)
	}
	check("POST /v1/tools/{name}/call", call.Result.Code, call.Result.Error)
	mustDo(t, apicontract.Check(resp.Request, resp.StatusCode, resp.Header, body))

	resp, body = sendAPI(t, http.DefaultClient, "GET", r.url+"/v1/tools/served", "", nil)
	var served struct {
		Remotes []struct {
			Name        string
			Connected   bool
			LastError   string `json:"last_error"`
			LastAttempt string `json:"last_attempt"`
		}
	}
	mustDo(t, json.Unmarshal(body, &served))
	mustDo(t, apicontract.Check(resp.Request, resp.StatusCode, resp.Header, body))
	if resp.StatusCode != http.StatusOK || len(served.Remotes) != 1 {
		t.Fatalf("GET /v1/tools/served: %d %s", resp.StatusCode, body)
	}
	if rm := served.Remotes[0]; rm.Name != "down" || rm.Connected || !strings.Contains(rm.LastError, "connection refused") || rm.LastAttempt == "" {
		t.Errorf("GET /v1/tools/served reports the remote as %+v", rm)
	}
}
