package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/internal/oauthtest"
	"github.com/quiverhq/quiver/store"
)

// listingToken is what Quiver's own session with Acme's MCP server lists its tools with: the
// server lists to it, and runs no call of it.
const listingToken = "acme-listing-token"

// acmeRemotes are Acme's MCP server and A2A agent, behind the tokens acme issues: each says
// whose token called, by its hash.
type acmeRemotes struct {
	mcpURL, agentURL string
	mu               sync.Mutex
	agentSaw         []string // the hashes of the tokens the agent was called with
}

func tokenHash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:6])
}

func serveAcmeRemotes(t *testing.T, as *oauthtest.AuthServer) *acmeRemotes {
	t.Helper()
	ar := &acmeRemotes{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "acme", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "whoami", Description: "Says whose token called.", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			who := req.Extra.TokenInfo.UserID
			if who == "listing" {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "a call needs a person's token"}}}, nil
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "token " + who}}}, nil
		})
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		if tok == listingToken {
			return &auth.TokenInfo{UserID: "listing", Expiration: time.Now().Add(time.Hour)}, nil
		}
		exp, ok := as.Valid(tok)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: tokenHash(tok), Expiration: exp}, nil
	}
	mcpSrv := httptest.NewServer(auth.RequireBearerToken(verify, nil)(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)))
	t.Cleanup(mcpSrv.Close)
	ar.mcpURL = mcpSrv.URL

	mux := http.NewServeMux()
	agentSrv := httptest.NewServer(mux)
	t.Cleanup(agentSrv.Close)
	card := &a2asdk.AgentCard{Name: "Acme", Description: "Acme's agent.", URL: agentSrv.URL + "/invoke", Version: "1",
		PreferredTransport: a2asdk.TransportProtocolJSONRPC, DefaultInputModes: []string{"text"}, DefaultOutputModes: []string{"text"},
		Skills: []a2asdk.AgentSkill{{ID: "hello", Name: "Hello", Description: "Says hello."}}}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	invoke := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(helloAgent{}))
	mux.HandleFunc("/invoke", func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, ok := as.Valid(tok); !ok {
			http.Error(w, "a token of acme, please", http.StatusUnauthorized)
			return
		}
		ar.mu.Lock()
		ar.agentSaw = append(ar.agentSaw, tokenHash(tok))
		ar.mu.Unlock()
		invoke.ServeHTTP(w, r)
	})
	ar.agentURL = agentSrv.URL
	return ar
}

// saw returns the hashes of the tokens the agent was called with.
func (ar *acmeRemotes) saw() []string {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	return slices.Clone(ar.agentSaw)
}

// acmeRemotesConfiguration imports Acme's MCP server and agent, each call carrying its
// person's token.
func (ar *acmeRemotes) configuration() string {
	return "mcp:\n  servers:\n    - name: acmemcp\n      url: " + ar.mcpURL + "\n      headers: {Authorization: 'Bearer " + listingToken + "'}\n" +
		"      connection: {provider: acme, scopes: [read]}\n" +
		"a2a:\n  agents:\n    - name: acmeagent\n      url: " + ar.agentURL + "\n      connection: {provider: acme, scopes: [read]}\n"
}

// helloAgent answers every message with a greeting.
type helloAgent struct{}

func (helloAgent) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return q.Write(ctx, a2asdk.NewMessage(a2asdk.MessageRoleAgent, a2asdk.TextPart{Text: "Hello from Acme."}))
}

func (helloAgent) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error { return nil }

// TestConnectionsOfRemoteServersAndAgents: a remote MCP server and an A2A agent imported with
// a connection are called with the calling person's token: the MCP server in a session of
// that person's own (it binds a session to the user of its first request), the agent with
// the token as bearer. A person not connected is asked to; two people's calls carry their own
// tokens, never the listing token Quiver lists the tools with.
func TestConnectionsOfRemoteServersAndAgents(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, bs backendtest.Store) {
		spans := recordSpans(t)
		w := newConnectServer(t, bs.(store.Backend))
		ctx := context.Background()
		bob := w.mcpSession(t, "bob", "/mcp")
		for _, name := range []string{"acmemcp.whoami", "acmeagent"} {
			res, err := bob.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: map[string]any{"message": "hi"}})
			if err != nil || !res.IsError || res.Meta["io.quiver/code"] != "authorization_required" || res.Meta["provider"] != "acme" {
				t.Fatalf("bob's call of %s, not connected: %v %+v %q", name, err, res, mcpText(res))
			}
		}
		// The imported tools declare the need, so that a run pauses before calling them.
		for _, name := range []string{"acmemcp.whoami", "acmeagent"} {
			tool, ok := w.p.Workspace(ctx, w.ws).Registry().Lookup(name)
			if !ok || len(tool.Spec().Connections) != 1 || tool.Spec().Connections[0].Provider != "acme" {
				t.Fatalf("%s declares no connection to acme: %v", name, ok)
			}
		}
		tokens := map[string]string{}
		for _, who := range []string{"ada", "bob"} {
			b := browser(t)
			_, out := w.startConnection(t, b, who, map[string]any{"bind_browser": true})
			res, err := b.Get(out["authorization_url"].(string))
			must(t, err)
			res.Body.Close()
			cs := w.mcpSession(t, who, "/mcp")
			own, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
			if err != nil || own.IsError {
				t.Fatalf("%s's whoami: %v %q", who, err, mcpText(own))
			}
			tokens[who] = mcpText(own)
			// Twice: the second call goes through the session the first opened.
			for range 2 {
				remote, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "acmemcp.whoami", Arguments: map[string]any{}})
				if err != nil || remote.IsError || mcpText(remote) != tokens[who] {
					t.Fatalf("%s's call of the remote MCP server: %v %q (their token: %q)", who, err, mcpText(remote), tokens[who])
				}
			}
			agent, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "acmeagent", Arguments: map[string]any{"message": "hi"}})
			if err != nil || agent.IsError || !strings.Contains(mcpText(agent), "Hello from Acme") {
				t.Fatalf("%s's call of the agent: %v %q", who, err, mcpText(agent))
			}
			if saw := w.remotes.saw(); len(saw) == 0 || "token "+saw[len(saw)-1] != tokens[who] {
				t.Fatalf("the agent saw %v, %s's token is %s", saw, who, tokens[who])
			}
		}
		if tokens["ada"] == tokens["bob"] {
			t.Fatalf("ada and bob called with one token: %v", tokens)
		}
		// No person's token is in the log or a span.
		for _, tok := range w.as.Issued() {
			if strings.Contains(w.log.String(), tok) {
				t.Fatal("a person's token is in the log")
			}
		}
		spansHoldNone(t, spans, w.as.Issued())
	})
}
