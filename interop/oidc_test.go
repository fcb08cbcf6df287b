package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// provider is zitadel/oidc's OpenID provider (its example server: in-memory users and
// clients, a login form) issuing JWT access tokens that carry each user's groups.
type provider struct {
	*storage.Storage
	mu     sync.Mutex
	groups map[string][]string // by user id
}

// jwtClient is a registered client whose access tokens are JWTs (the example's are opaque).
type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

func (p *provider) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := p.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

func (p *provider) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := p.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if claims == nil {
		claims = map[string]any{}
	}
	p.mu.Lock()
	claims["groups"] = p.groups[userID]
	p.mu.Unlock()
	return claims, err
}

func (p *provider) setGroups(user string, groups ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.groups[user] = groups
}

const (
	oidcClient   = "quiver-mcp"
	oidcUser     = "id1" // the example's user, test-user@localhost
	oidcPassword = "verysecure"
)

// startProvider serves the provider on loopback, its issuer http://localhost:PORT/, with public
// clients (PKCE): each client id with the one URI it may redirect to.
func startProvider(t *testing.T, clients map[string]string) (*provider, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := fmt.Sprintf("http://localhost:%d/", ln.Addr().(*net.TCPAddr).Port)
	// The example server logs every request through the default logger: not in the test's output.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	t.Cleanup(func() { slog.SetDefault(prev) })
	p := &provider{groups: map[string][]string{}}
	registered := map[string]*storage.Client{}
	for id, redirect := range clients {
		registered[id] = storage.NativeClient(id, redirect)
	}
	p.Storage = storage.NewStorageWithClients(storage.NewUserStore(issuer), registered)
	srv := &http.Server{Handler: exampleop.SetupServer(issuer, p, nil, false), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p, issuer
}

// signIn is the person in the browser: it opens authURL, fills in the provider's login form
// and returns the code the provider sends to redirectURI.
func signIn(t *testing.T, authURL, redirectURI string) (code, state string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), redirectURI) {
			return http.ErrUseLastResponse // the client's callback: not followed, read
		}
		return nil
	}}
	resp, err := hc.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Request.URL.Query().Get("authRequestID")
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("the authorization URL led to %d %s, not the login form", resp.StatusCode, resp.Request.URL)
	}
	login := *resp.Request.URL
	login.RawQuery = ""
	resp, err = hc.PostForm(login.String(), url.Values{"id": {id}, "username": {"test-user@localhost"}, "password": {oidcPassword}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || back.Query().Get("code") == "" {
		t.Fatalf("after the login form: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return back.Query().Get("code"), back.Query().Get("state")
}

// quiverServe starts quiver serve with args and the data directory dataDir, and returns its
// base URL once it serves and, with firstStart, the admin key the first start shows after it.
func quiverServe(t *testing.T, dataDir string, firstStart bool, args ...string) (base, key string, stop func()) {
	t.Helper()
	cmd := exec.Command(quiverBinary(t), append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dataDir, "QUIVER_ADDR=", "QUIVER_CONFIG=", "QUIVER_PUBLIC_URL=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	urlRE, keyRE := regexp.MustCompile(`serving MCP at (http://\S+)/mcp`), regexp.MustCompile(`qvk_[A-Za-z0-9_-]{43}`)
	found := make(chan struct{})
	var log strings.Builder
	go func() {
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			log.WriteString(lines.Text() + "\n")
			if k := keyRE.FindString(lines.Text()); k != "" {
				key = k
			}
			if m := urlRE.FindStringSubmatch(lines.Text()); m != nil {
				base = m[1]
			}
			if base != "" && (key != "" || !firstStart) {
				close(found)
				break
			}
		}
		for lines.Scan() {
		}
	}()
	select {
	case <-found:
	case <-time.After(2 * time.Minute):
		stop()
		t.Fatalf("quiver serve did not say where it serves:\n%s", log.String())
	}
	return base, key, stop
}

// getJSON GETs url with the bearer and decodes the answer into v, returning the status.
func getJSON(t *testing.T, url, bearer string, v any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil && resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestOIDCEndToEnd: quiver serve accepts the access tokens of a real OpenID provider. An MCP
// client (mcp-go) that knows nothing but the server's URL and its client id goes through the
// MCP authorization flow: the 401, the protected resource metadata, the provider's metadata,
// the authorization code with PKCE and a person signing in, the token; then it lists and calls
// tools. The API takes the same token. A provider that stops putting the person in the group
// gets tokens the server refuses, and so does a server whose rules no longer map the group.
func TestOIDCEndToEnd(t *testing.T) {
	redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", freePort(t))
	idp, issuer := startProvider(t, map[string]string{oidcClient: redirect})
	idp.setGroups(oidcUser, "eng")

	dataDir := t.TempDir()
	base, key, stop := quiverServe(t, dataDir, true, "--addr", "127.0.0.1:0")
	var session struct {
		WorkspaceID string `json:"workspace_id"`
		UserID      string `json:"user_id"`
		Role        string `json:"role"`
	}
	if status := getJSON(t, base+"/v1/session", key, &session); status != 200 || session.WorkspaceID == "" {
		t.Fatalf("the first start's key: %d %+v", status, session)
	}
	ws := session.WorkspaceID
	stop()

	rules := filepath.Join(t.TempDir(), "rules.yaml")
	writeRules := func(group string) {
		body := fmt.Sprintf("rules:\n  - {claim: groups, value: %s, workspace: %s, role: member}\n", group, ws)
		if err := os.WriteFile(rules, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeRules("eng")
	port := freePort(t)
	public := fmt.Sprintf("http://127.0.0.1:%d", port)
	oidcFlags := []string{"--addr", fmt.Sprintf("127.0.0.1:%d", port), "--public-url", public,
		"--oidc-issuer", issuer, "--oidc-audience", oidcClient, "--oidc-rules", rules}
	base, _, stop = quiverServe(t, dataDir, false, oidcFlags...)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	token := mcpSignIn(ctx, t, base+"/mcp", redirect)

	// The API takes the same token, in the workspace the rule grants, as the person it names.
	if status := getJSON(t, base+"/v1/session", token, &session); status != 200 || session.WorkspaceID != ws || session.Role != "member" ||
		!strings.HasPrefix(session.UserID, "usr_") {
		t.Fatalf("the API with the token: %d %+v", status, session)
	}

	// What the client did is recorded as the person the token named: the MCP session's thread
	// is theirs.
	var threads struct {
		Threads []struct {
			UserID string   `json:"user_id"`
			Tags   []string `json:"tags"`
		} `json:"threads"`
	}
	if status := getJSON(t, base+"/v1/threads?tag=mcp", token, &threads); status != 200 || len(threads.Threads) != 1 ||
		threads.Threads[0].UserID != session.UserID {
		t.Fatalf("the MCP session's thread: %d %+v, want one of user %s", status, threads, session.UserID)
	}

	// The provider no longer puts the person in the group: a new sign-in gets a token the
	// server refuses.
	idp.setGroups(oidcUser)
	refused, err := tryMCPSignIn(ctx, t, base+"/mcp", redirect)
	if err == nil || refused == "" {
		t.Fatalf("a token without the group: %v, want a token the server refuses", err)
	}
	if status := getJSON(t, base+"/v1/session", refused, nil); status != 403 {
		t.Fatalf("a token without the group on the API: %d, want 403", status)
	}
	idp.setGroups(oidcUser, "eng")

	// The operator maps another group: the token issued before is refused once the server
	// runs with the new rules.
	stop()
	writeRules("eng-leads")
	base, _, stop = quiverServe(t, dataDir, false, oidcFlags...)
	if status := getJSON(t, base+"/v1/session", token, nil); status != 403 {
		t.Fatalf("a token replayed after its group's rule was removed: %d, want 403", status)
	}
	stop()
}

// mcpSignIn connects an mcp-go client with OAuth to endpoint, takes it through the sign-in, and
// checks it lists and calls tools; it returns the access token.
func mcpSignIn(ctx context.Context, t *testing.T, endpoint, redirect string) string {
	t.Helper()
	token, err := tryMCPSignIn(ctx, t, endpoint, redirect)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func tryMCPSignIn(ctx context.Context, t *testing.T, endpoint, redirect string) (string, error) {
	t.Helper()
	tokens := client.NewMemoryTokenStore()
	c, err := client.NewOAuthStreamableHttpClient(endpoint, client.OAuthConfig{ClientID: oidcClient, RedirectURI: redirect,
		Scopes: []string{"openid", "profile"}, TokenStore: tokens, PKCEEnabled: true, TokenEndpointAuthMethod: "none"})
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return "", err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "interop-oidc", Version: "1"}
	_, err = c.Initialize(ctx, init)
	if !client.IsOAuthAuthorizationRequiredError(err) {
		return "", fmt.Errorf("initialize without a token: %v, want the OAuth flow asked for", err)
	}
	h := client.GetOAuthHandler(err)
	verifier, err := client.GenerateCodeVerifier()
	if err != nil {
		return "", err
	}
	state, err := client.GenerateState()
	if err != nil {
		return "", err
	}
	authURL, err := h.GetAuthorizationURL(ctx, state, client.GenerateCodeChallenge(verifier))
	if err != nil {
		return "", fmt.Errorf("the authorization URL, from the server's metadata: %w", err)
	}
	code, gotState := signIn(t, authURL, redirect)
	if err := h.ProcessAuthorizationResponse(ctx, code, gotState, verifier); err != nil {
		return "", fmt.Errorf("exchanging the code: %w", err)
	}
	tok, err := tokens.GetToken(ctx)
	if err != nil {
		return "", err
	}
	if _, err := c.Initialize(ctx, init); err != nil {
		return tok.AccessToken, fmt.Errorf("initialize with the token: %w", err)
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return "", fmt.Errorf("tools/list: %w", err)
	}
	if !hasTool(tools.Tools, "get_current_time") {
		return "", fmt.Errorf("tools/list has no get_current_time: %d tools", len(tools.Tools))
	}
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "get_current_time", map[string]any{"timezone": "UTC"}
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		return "", fmt.Errorf("tools/call get_current_time: %v %+v", err, res)
	}
	return tok.AccessToken, nil
}

func hasTool(tools []mcp.Tool, name string) bool {
	for _, tl := range tools {
		if tl.Name == name {
			return true
		}
	}
	return false
}
