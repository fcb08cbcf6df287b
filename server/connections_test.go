package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/internal/oauthtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
)

// connectServer is a server at a known public URL whose workspace declares a provider served
// by an OAuth server on loopback, with a tool that acts as its caller there.
type connectServer struct {
	*entitleWorld
	as    *oauthtest.AuthServer
	store store.Backend
	p     *platform.Platform
	// log is what the platform and the server logged, at debug level.
	log *lockedLog
	// remotes are Acme's MCP server and agent, imported with the connection.
	remotes *acmeRemotes
}

// lockedLog is a log many goroutines write.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newConnectServer(t *testing.T, st store.Backend) *connectServer {
	t.Helper()
	ctx := context.Background()
	w := &connectServer{entitleWorld: &entitleWorld{key: map[string]string{}, rec: map[string]*store.APIKey{}}, as: oauthtest.NewAuthServer(t), store: st,
		log: &lockedLog{}}
	logger := slog.New(slog.NewTextHandler(w.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ws := &store.Workspace{Name: "acme"}
	must(t, st.CreateWorkspace(ctx, ws))
	w.ws = ws.ID
	for _, u := range []struct{ who, role string }{{"admin", "admin"}, {"ada", "member"}, {"bob", "member"}} {
		user := &store.User{Email: u.who + "@acme.test", Name: u.who}
		must(t, st.CreateUser(ctx, user))
		must(t, st.AddMember(ctx, &store.Membership{WorkspaceID: ws.ID, UserID: user.ID, Role: store.MemberRole(u.role)}))
		rec := &store.APIKey{WorkspaceID: ws.ID, UserID: user.ID, Name: u.who, Role: store.KeyRole(u.role)}
		key, err := platform.IssueAPIKey(ctx, st, rec)
		must(t, err)
		w.key[u.who], w.rec[u.who] = key, rec
	}
	// whoami acts as its caller at acme: it answers which token it was given, by its hash
	// (the token itself would be masked), once the provider confirms the token is its own.
	reg := &quiver.Registry{}
	must(t, reg.Register(quiver.Func("whoami", "Who the caller is at acme.", func(ctx context.Context, _ struct{}) (string, error) {
		tok, err := quiver.UserToken(ctx, "acme", "read")
		if err != nil {
			return "", err
		}
		if _, ok := w.as.Valid(tok); !ok {
			return "", quiver.Fail(quiver.CodeToolError, "acme does not know the token")
		}
		h := sha256.Sum256([]byte(tok))
		return "token " + hex.EncodeToString(h[:6]), nil
	})))
	key, _, err := secret.GenerateKey()
	must(t, err)
	asURL, _ := url.Parse(w.as.URL)
	api := w.resourceServer(t)
	apiURL, _ := url.Parse(api)
	p, err := platform.New(platform.Config{Store: st, Registry: reg, Resolver: vars.New(st, secret.NewKeyring(key)),
		Logger: logger, OpenAPIInternal: []string{asURL.Host, apiURL.Host}, ServerWorkspace: ws.ID})
	must(t, err)
	// An OpenAPI source whose oauth scheme is the person's connection to acme.
	docPath := filepath.Join(t.TempDir(), "acmeapi.json")
	must(t, os.WriteFile(docPath, []byte(acmeAPIDocument), 0o600))
	w.remotes = serveAcmeRemotes(t, w.as)
	serveConfiguration(t, p, "openapi:\n  - name: acmeapi\n    document: "+docPath+"\n    servers: ['"+api+"']\n"+
		"    connections: {oauth: {provider: acme}}\n"+w.remotes.configuration())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	public := "http://" + ln.Addr().String()
	srv, err := server.New(ctx, server.Config{Platform: p, Auth: &server.Authenticator{Keys: st}, WorkspaceID: ws.ID, PublicURL: public,
		Logger: logger})
	must(t, err)
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(func() { ts.Close(); srv.Close(); p.Close() })
	w.url, w.client, w.p = public, ts.Client(), p
	client := w.as.Register(public + server.ConnectionsCallbackPath)
	doc := map[string]any{"providers": []map[string]any{{"name": "acme", "authorization_url": w.as.URL + "/authorize", "token_url": w.as.URL + "/token",
		"revocation_url": w.as.URL + "/revoke", "client_id": client, "scopes": []string{"read", "write"}}}}
	if status, body := w.send(t, "PUT", "/v1/connection-providers", "admin", map[string]any{"document": doc, "after": 0}); status != 200 {
		t.Fatalf("declaring acme: %d %s", status, body)
	}
	return w
}

// acmeAPIDocument is Acme's API: one operation behind its OAuth scheme.
const acmeAPIDocument = `{"openapi":"3.0.3","info":{"title":"Acme","version":"1"},
 "components":{"securitySchemes":{"oauth":{"type":"oauth2","flows":{"authorizationCode":{"authorizationUrl":"https://acme.example/a",
   "tokenUrl":"https://acme.example/t","scopes":{"read":"Read."}}}}}},
 "security":[{"oauth":["read"]}],
 "paths":{"/me":{"get":{"operationId":"me","summary":"Who the token is.","responses":{"200":{"description":"ok",
   "content":{"application/json":{"schema":{"type":"object","properties":{"token":{"type":"string"}}}}}}}}}}}`

// resourceServer is Acme's API: it answers /me with the hash of a bearer token acme issued,
// and 401 to any other.
func (w *connectServer) resourceServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, valid := w.as.Valid(tok); !ok || !valid {
			http.Error(rw, "unknown token", http.StatusUnauthorized)
			return
		}
		h := sha256.Sum256([]byte(tok))
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(`{"token":"` + hex.EncodeToString(h[:6]) + `"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// addMember adds a member with a key of their own, named who.
func (w *connectServer) addMember(t *testing.T, who string) {
	t.Helper()
	ctx := context.Background()
	st := w.store
	user := &store.User{Email: who + "@acme.test", Name: who}
	must(t, st.CreateUser(ctx, user))
	must(t, st.AddMember(ctx, &store.Membership{WorkspaceID: w.ws, UserID: user.ID, Role: store.MemberRoleMember}))
	rec := &store.APIKey{WorkspaceID: w.ws, UserID: user.ID, Name: who, Role: store.KeyRoleMember}
	key, err := platform.IssueAPIKey(ctx, st, rec)
	must(t, err)
	w.key[who], w.rec[who] = key, rec
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// browser is a person's browser: its own cookies, following redirects.
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	must(t, err)
	return &http.Client{Jar: jar}
}

// startConnection starts who's connection to acme from their browser (as the console does)
// and returns the provider's page.
func (w *connectServer) startConnection(t *testing.T, b *http.Client, who string, in map[string]any) (int, map[string]any) {
	t.Helper()
	res, body := sendAPI(t, b, "POST", w.url+"/v1/connections/acme", w.key[who], in)
	var out map[string]any
	_ = json.Unmarshal(body, &out)
	return res.StatusCode, out
}

// TestConnectionsAtTheDoors: a person connects their account from their browser (the start
// over /v1, the provider's page, the callback, back to the console), and the tool that acts as
// them gets their token over MCP; another person's call gets their own token, or, not connected,
// an error result over MCP and a 403 over /v1 that say where to connect. A flow started in one
// browser cannot be finished in another; a return path off the server is refused; the
// connections list holds no token; disconnecting revokes.
func TestConnectionsAtTheDoors(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, bs backendtest.Store) {
		spans := recordSpans(t)
		w := newConnectServer(t, bs.(store.Backend))
		ctx := context.Background()

		// Bob is not connected: MCP says so in a result a model reads, /v1 in a 403 problem.
		bob := w.mcpSession(t, "bob", "/mcp")
		res, err := bob.CallTool(ctx, &sdk.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
		if err != nil || !res.IsError || res.Meta["io.quiver/code"] != "authorization_required" ||
			res.Meta["authorization_url"] != w.url+"/console/#/connections?connect=acme&scopes=read" || !strings.Contains(mcpText(res), "connect it at") {
			t.Fatalf("bob's call over MCP: %v %+v %q", err, res, mcpText(res))
		}
		res, err = bob.CallTool(ctx, &sdk.CallToolParams{Name: "acmeapi.me", Arguments: map[string]any{}})
		if err != nil || !res.IsError || res.Meta["io.quiver/code"] != "authorization_required" || res.Meta["provider"] != "acme" {
			t.Fatalf("bob's call of Acme's API: %v %+v %q", err, res, mcpText(res))
		}
		r, body := sendAPI(t, w.client, "POST", w.url+"/v1/tools/whoami/call", w.key["bob"], map[string]any{"args": map[string]any{}})
		var p server.AuthorizationProblem
		if r.StatusCode != 403 || json.Unmarshal(body, &p) != nil || p.Code != "authorization_required" || p.Provider != "acme" ||
			!strings.HasPrefix(p.AuthorizationURL, w.url+"/console/") {
			t.Fatalf("bob's call over /v1: %d %s", r.StatusCode, body)
		}

		// Ada connects from her browser, and lands back on the console.
		adaBrowser := browser(t)
		if status, out := w.startConnection(t, adaBrowser, "ada", map[string]any{"bind_browser": true, "return_to": "/console/#/connections"}); status != 200 {
			t.Fatalf("ada's start: %d %v", status, out)
		} else {
			landed, err := adaBrowser.Get(out["authorization_url"].(string))
			must(t, err)
			landed.Body.Close()
			if landed.StatusCode != 200 || landed.Request.URL.Path != "/console/" || !strings.Contains(landed.Request.URL.RawQuery, "connected=acme") &&
				!strings.Contains(landed.Request.URL.Fragment, "connected=acme") {
				t.Fatalf("ada's browser landed on %s (%d)", landed.Request.URL, landed.StatusCode)
			}
		}
		ada := w.mcpSession(t, "ada", "/mcp")
		res, err = ada.CallTool(ctx, &sdk.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
		if err != nil || res.IsError || !strings.HasPrefix(mcpText(res), "token ") {
			t.Fatalf("ada's call: %v %+v %q", err, res, mcpText(res))
		}
		adaToken := mcpText(res)
		// The OpenAPI source's tool sends her token to Acme's API, which knows it.
		res, err = ada.CallTool(ctx, &sdk.CallToolParams{Name: "acmeapi.me", Arguments: map[string]any{}})
		if err != nil || res.IsError || !strings.Contains(mcpText(res), strings.TrimPrefix(adaToken, "token ")) {
			t.Fatalf("ada's call of Acme's API: %v %+v %q (her token %s)", err, res, mcpText(res), adaToken)
		}

		// Bob's flow, started in his browser, is refused in another's: the state alone is not
		// enough. He then connects in his own, and his token is his.
		bobBrowser := browser(t)
		_, out := w.startConnection(t, bobBrowser, "bob", map[string]any{"bind_browser": true})
		stolen, err := browser(t).Get(out["authorization_url"].(string))
		must(t, err)
		stolen.Body.Close()
		if stolen.StatusCode != 403 {
			t.Fatalf("bob's flow in another browser: %d", stolen.StatusCode)
		}
		_, out = w.startConnection(t, bobBrowser, "bob", map[string]any{"bind_browser": true})
		done, err := bobBrowser.Get(out["authorization_url"].(string))
		must(t, err)
		done.Body.Close()
		if done.StatusCode != 200 {
			t.Fatalf("bob's connection in his browser: %d", done.StatusCode)
		}
		res, err = bob.CallTool(ctx, &sdk.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
		if err != nil || res.IsError || mcpText(res) == adaToken {
			t.Fatalf("bob's call once connected: %v %+v %q (ada's: %q)", err, res, mcpText(res), adaToken)
		}

		// A client whose user can be sent to a URL (MCP's URL-mode elicitation): Carol is
		// asked to connect in the middle of her call, connects in her browser, and the call
		// goes on with her token, in the same tools/call.
		w.addMember(t, "carol")
		var asked atomic.Int64
		carolBrowser := browser(t)
		carol, err := sdk.NewClient(&sdk.Implementation{Name: "carol's agent", Version: "1"}, &sdk.ClientOptions{
			Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
			ElicitationHandler: func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				asked.Add(1)
				if req.Params.Mode != "url" || !strings.HasPrefix(req.Params.URL, w.url+"/console/#/connections?connect=acme") {
					return &sdk.ElicitResult{Action: "decline"}, nil
				}
				// Carol follows the link: the console starts the flow in her browser.
				_, out := w.startConnection(t, carolBrowser, "carol", map[string]any{"bind_browser": true, "scopes": []string{"read"}})
				go func() {
					if res, err := carolBrowser.Get(out["authorization_url"].(string)); err == nil {
						res.Body.Close()
					}
				}()
				return &sdk.ElicitResult{Action: "accept"}, nil
			}}).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: w.url + "/mcp", MaxRetries: -1,
			HTTPClient: &http.Client{Transport: isoBearer{w.key["carol"]}}}, nil)
		must(t, err)
		t.Cleanup(func() { _ = carol.Close() })
		res, err = carol.CallTool(ctx, &sdk.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
		if err != nil || res.IsError || !strings.HasPrefix(mcpText(res), "token ") || asked.Load() != 1 {
			t.Fatalf("carol's call, asked %d times: %v %+v %q", asked.Load(), err, res, mcpText(res))
		}

		// Refusals at the start: a way back off the server, a scope not offered, a viewer.
		if status, _ := w.startConnection(t, browser(t), "ada", map[string]any{"return_to": "https://evil.example/"}); status != 400 {
			t.Errorf("a return off the server: %d", status)
		}
		if status, _ := w.startConnection(t, browser(t), "ada", map[string]any{"scopes": []string{"admin"}}); status != 400 {
			t.Errorf("a scope not offered: %d", status)
		}
		if status, body := w.send(t, "PUT", "/v1/connection-providers", "ada", map[string]any{"document": map[string]any{}, "after": 1}); status != 403 {
			t.Errorf("a member declaring providers: %d %s", status, body)
		}

		// Ada's list names acme and holds no token; she disconnects and her tokens are revoked.
		status, body := w.send(t, "GET", "/v1/connections", "ada", nil)
		if status != 200 || !strings.Contains(string(body), `"provider":"acme"`) || strings.Contains(string(body), "at-") || strings.Contains(string(body), "rt-") {
			t.Fatalf("ada's connections: %d %s", status, body)
		}
		before := w.as.Revocations.Load()
		if status, body := w.send(t, "DELETE", "/v1/connections/acme", "ada", nil); status != 204 {
			t.Fatalf("disconnecting: %d %s", status, body)
		}
		if w.as.Revocations.Load() != before+2 {
			t.Errorf("disconnecting revoked %d tokens", w.as.Revocations.Load()-before)
		}
		if status, _ := w.send(t, "DELETE", "/v1/connections/acme", "ada", nil); status != 404 {
			t.Errorf("disconnecting twice: %d", status)
		}
		// No token the provider issued is in anything the platform and the server logged.
		log := w.log.String()
		for _, tok := range w.as.Issued() {
			if strings.Contains(log, tok) {
				t.Fatalf("a token is in the log:\n%s", log)
			}
		}
		if !strings.Contains(log, "connection could not be finished") {
			t.Errorf("the log says nothing of the refused flows; is it the server's?\n%s", log)
		}
		// Nor in any span of the calls, the flows and the requests.
		spansHoldNone(t, spans, w.as.Issued())
	})
}

// TestConnectionProvidersFromTheConfiguration: the configuration's connections block is the
// server's own workspace's providers, applied to the database as the next version; while it is
// there, the API refuses a change, naming the configuration.
func TestConnectionProvidersFromTheConfiguration(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, bs backendtest.Store) {
		w := newConnectServer(t, bs.(store.Backend))
		serveConfiguration(t, w.p, "connections:\n  providers:\n    - name: globex\n      authorization_url: https://auth.globex.example/a\n"+
			"      token_url: https://auth.globex.example/t\n      client_id: quiver\n      scopes: [calendar.read]\n")
		status, body := w.send(t, "GET", "/v1/connection-providers", "ada", nil)
		if status != 200 || !strings.Contains(string(body), `"name":"globex"`) || strings.Contains(string(body), `"name":"acme"`) ||
			!strings.Contains(string(body), `"version":2`) {
			t.Fatalf("the providers after the configuration: %d %s", status, body)
		}
		status, body = w.send(t, "PUT", "/v1/connection-providers", "admin", map[string]any{"document": map[string]any{}, "after": 2})
		if status != 409 || !strings.Contains(string(body), "connections block") {
			t.Fatalf("a change while the configuration has the block: %d %s", status, body)
		}
	})
}

// recordSpans sends the spans of everything the test does to a recorder, and back to the
// provider before it at the end.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	before := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(before)
		_ = tp.Shutdown(context.Background())
	})
	return rec
}

// spansHoldNone fails the test when a span (its name, attributes, events or status) holds
// one of the secrets, or when there are no spans to look at.
func spansHoldNone(t *testing.T, rec *tracetest.SpanRecorder, secrets []string) {
	t.Helper()
	spans := rec.Ended()
	if !slices.ContainsFunc(spans, func(s sdktrace.ReadOnlySpan) bool { return strings.Contains(s.Name(), "whoami") }) {
		t.Fatalf("no span of a call was recorded (%d spans): the scan would find nothing", len(spans))
	}
	for _, s := range spans {
		texts := []string{s.Name(), s.Status().Description}
		for _, kv := range s.Attributes() {
			texts = append(texts, kv.Value.Emit())
		}
		for _, e := range s.Events() {
			texts = append(texts, e.Name)
			for _, kv := range e.Attributes {
				texts = append(texts, kv.Value.Emit())
			}
		}
		for _, text := range texts {
			for _, secret := range secrets {
				if strings.Contains(text, secret) {
					t.Fatalf("the span %q holds a token: %q", s.Name(), text)
				}
			}
		}
	}
}
