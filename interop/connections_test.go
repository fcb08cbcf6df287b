package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/client/rp"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Users' connections (docs/guides/connections.md) against real components: zitadel/oidc's
// example OpenID provider (its login form, its in-memory users id1 and id2), a resource server
// that accepts only the provider's access tokens, the quiver binary, Chromium driving the
// console's Connections page and mcp-go calling the tool that acts as the caller.

const (
	connProvider     = "zitadel"
	connClientID     = "quiver-connections"
	connClientSecret = "s3cret-of-quiver-at-zitadel"
	connSecretVar    = "ZITADEL_CLIENT_SECRET"
	// connLifetime is how long the provider's access tokens live. Quiver refreshes a token
	// within a minute of its expiry, so the first token must outlive that minute by the time
	// it takes to go from the provider's redirect to the first call.
	connLifetime = 75 * time.Second
)

// connIdP is zitadel's example provider issuing JWT access tokens (provider's) that live
// connLifetime (the example's live five minutes), and counting what Quiver asks of it.
type connIdP struct {
	*provider
	mu            sync.Mutex
	refreshes     map[string]int    // refresh grants, by subject
	refreshTokens map[string]string // the last refresh token issued, by subject
	revocations   map[string]int    // tokens revoked, by subject
}

func (p *connIdP) shorten(exp time.Time) time.Time {
	if limit := time.Now().Add(connLifetime); exp.After(limit) {
		return limit
	}
	return exp
}

func (p *connIdP) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	id, exp, err := p.provider.CreateAccessToken(ctx, req)
	return id, p.shorten(exp), err
}

func (p *connIdP) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	id, refresh, exp, err := p.provider.CreateAccessAndRefreshTokens(ctx, req, current)
	if err != nil {
		return "", "", time.Time{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if current != "" {
		p.refreshes[req.GetSubject()]++
	}
	p.refreshTokens[req.GetSubject()] = refresh
	return id, refresh, p.shorten(exp), nil
}

func (p *connIdP) RevokeToken(ctx context.Context, token, userID, clientID string) *oidc.Error {
	p.mu.Lock()
	p.revocations[userID]++
	p.mu.Unlock()
	return p.provider.RevokeToken(ctx, token, userID, clientID)
}

// counts returns a subject's refresh grants and revocations so far.
func (p *connIdP) counts(subject string) (refreshes, revocations int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refreshes[subject], p.revocations[subject]
}

func (p *connIdP) lastRefreshToken(subject string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refreshTokens[subject]
}

// startConnIdP serves the provider on loopback, its issuer http://localhost:PORT/, with one
// confidential client (a secret, client_secret_basic, refresh tokens granted for
// offline_access) that may redirect to redirectURI alone.
func startConnIdP(t *testing.T, redirectURI string) (*connIdP, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := fmt.Sprintf("http://localhost:%d/", ln.Addr().(*net.TCPAddr).Port)
	prev := slog.Default() // the example logs every request through the default logger
	slog.SetDefault(slog.New(slog.DiscardHandler))
	t.Cleanup(func() { slog.SetDefault(prev) })
	p := &connIdP{provider: &provider{groups: map[string][]string{}}, refreshes: map[string]int{}, refreshTokens: map[string]string{},
		revocations: map[string]int{}}
	p.Storage = storage.NewStorageWithClients(storage.NewUserStore(issuer),
		map[string]*storage.Client{connClientID: storage.WebClient(connClientID, connClientSecret, redirectURI)})
	srv := &http.Server{Handler: exampleop.SetupServer(issuer, p, nil, false), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p, issuer
}

// connDiscovery is the provider's metadata, as its discovery document says.
type connDiscovery struct {
	Authorization string `json:"authorization_endpoint"`
	Token         string `json:"token_endpoint"`
	Revocation    string `json:"revocation_endpoint"`
	Userinfo      string `json:"userinfo_endpoint"`
	JWKS          string `json:"jwks_uri"`
}

func discoverConnIdP(t *testing.T, issuer string) connDiscovery {
	t.Helper()
	var d connDiscovery
	if status := getJSON(t, issuer+".well-known/openid-configuration", "", &d); status != 200 || d.Token == "" || d.JWKS == "" ||
		d.Revocation == "" || d.Userinfo == "" {
		t.Fatalf("the provider's discovery document: %d %+v", status, d)
	}
	return d
}

// whoServer is the resource server: GET /whoami answers the subject and id of the bearer
// token, a JWT it verifies against the provider's keys (issuer, signature, expiry); any other
// token gets 401.
type whoServer struct {
	URL string
	mu  sync.Mutex
	// last is the last token accepted, by subject.
	last map[string]whoToken
}

type whoToken struct{ raw, id string }

const whoDocument = `{"openapi":"3.0.3","info":{"title":"Who","version":"1"},
 "components":{"securitySchemes":{"oauth":{"type":"oauth2","flows":{"authorizationCode":{"authorizationUrl":"%s",
   "tokenUrl":"%s","scopes":{"openid":"Who you are."}}}}}},
 "security":[{"oauth":["openid"]}],
 "paths":{"/whoami":{"get":{"operationId":"whoami","summary":"Who the bearer token is.","responses":{"200":{"description":"ok",
   "content":{"application/json":{"schema":{"type":"object","properties":{"subject":{"type":"string"},"token_id":{"type":"string"}}}}}}}}}}}`

func startWhoServer(t *testing.T, issuer, jwks string) *whoServer {
	t.Helper()
	verifier := op.NewAccessTokenVerifier(issuer, rp.NewRemoteKeySet(http.DefaultClient, jwks))
	w := &whoServer{last: map[string]whoToken{}}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/whoami" {
			http.NotFound(rw, r)
			return
		}
		raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		claims, err := op.VerifyAccessToken[*oidc.AccessTokenClaims](r.Context(), raw, verifier)
		if !ok || err != nil {
			rw.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(rw, "not a token of the provider's", http.StatusUnauthorized)
			return
		}
		w.mu.Lock()
		w.last[claims.Subject] = whoToken{raw: raw, id: claims.JWTID}
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]string{"subject": claims.Subject, "token_id": claims.JWTID})
	}))
	t.Cleanup(srv.Close)
	w.URL = srv.URL
	return w
}

func (w *whoServer) lastToken(subject string) whoToken {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[subject]
}

// status is the resource server's answer to a token presented directly.
func (w *whoServer) status(t *testing.T, token string) int {
	t.Helper()
	return getJSON(t, w.URL+"/whoami", token, nil)
}

// connAPI sends a /v1 request with the key and decodes a JSON answer.
func connAPI(t *testing.T, method, url, key string, body any) (int, map[string]any) {
	t.Helper()
	var in io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		in = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, url, in)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// connectionOf is the key's person's one connection, as GET /v1/connections lists it; nil
// when they have none.
func connectionOf(t *testing.T, base, key string) map[string]any {
	t.Helper()
	status, out := connAPI(t, "GET", base+"/v1/connections", key, nil)
	list, ok := out["connections"].([]any)
	if status != 200 || !ok || len(list) > 1 {
		t.Fatalf("GET /v1/connections: %d %v", status, out)
	}
	if len(list) == 0 {
		return nil
	}
	c, _ := list[0].(map[string]any)
	return c
}

// connPerson is a member of the workspace: their user id and a key of theirs.
type connPerson struct{ name, userID, key string }

func addConnPerson(t *testing.T, base, admin, name string) connPerson {
	t.Helper()
	status, m := connAPI(t, "POST", base+"/v1/members", admin, map[string]any{"email": name + "@example.com", "name": name, "role": "member"})
	if status != 201 {
		t.Fatalf("adding %s: %d %v", name, status, m)
	}
	id, _ := m["user_id"].(string)
	status, k := connAPI(t, "POST", base+"/v1/keys", admin, map[string]any{"user_id": id, "role": "member", "name": name})
	secret, _ := k["secret"].(string)
	if status != 201 || secret == "" {
		t.Fatalf("a key for %s: %d %v", name, status, k)
	}
	return connPerson{name: name, userID: id, key: secret}
}

// whoCall is what the tool answered one call: the subject the resource server saw, or the
// code and link of an error result.
type whoCall struct {
	subject, tokenID string
	isError          bool
	code, authURL    string
	text             string
}

// callWho calls the tool as the key's person, over MCP (mcp-go, streamable HTTP).
func callWho(t *testing.T, endpoint, key string) whoCall {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.NewStreamableHttpClient(endpoint, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "interop-connections", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	name := ""
	for _, tl := range tools.Tools {
		if strings.HasPrefix(tl.Name, "who") && strings.HasSuffix(tl.Name, "whoami") {
			name = tl.Name
		}
	}
	if name == "" {
		t.Fatalf("tools/list has no tool of the who source: %d tools", len(tools.Tools))
	}
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, map[string]any{}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	var out whoCall
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			out.text += tc.Text
		}
	}
	out.isError = res.IsError
	if res.Meta != nil {
		out.code, _ = res.Meta.AdditionalFields["io.quiver/code"].(string)
		out.authURL, _ = res.Meta.AdditionalFields["authorization_url"].(string)
	}
	if !res.IsError {
		var body struct {
			Subject string `json:"subject"`
			TokenID string `json:"token_id"`
		}
		if err := json.Unmarshal([]byte(out.text), &body); err != nil {
			t.Fatalf("the tool's answer is not the resource server's JSON: %q", out.text)
		}
		out.subject, out.tokenID = body.Subject, body.TokenID
	}
	return out
}

// connBrowser is a Chromium tab on the console.
type connBrowser struct {
	t   *testing.T
	ctx context.Context
}

func (b *connBrowser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText : "")`))
		b.t.Fatalf("%s: %v\n%s", what, err, page)
	}
}

// waitFor waits until the JavaScript condition holds, for 30 seconds at most.
func (b *connBrowser) waitFor(what, cond string) {
	b.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`!!(`+cond+`)`))
		if err == nil && v {
			return
		}
		if time.Now().After(deadline) {
			page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText : "")`))
			b.t.Fatalf("waiting for %s: %v\n%s", what, err, page)
		}
	}
}

// connect signs into the console with the person's key, opens link (the Connections page
// with the provider asked for), clicks Connect, signs in at the provider's login form as
// username and waits to be back on the page, connected.
func (b *connBrowser) connect(base string, p connPerson, link, username string) {
	b.t.Helper()
	b.do(p.name+" opens the console", chromedp.Navigate(base+"/"), chromedp.WaitVisible("form.signin input#key"))
	b.do(p.name+" signs in with their key", chromedp.SendKeys("form.signin input#key", p.key),
		chromedp.Click(`form.signin button[type="submit"]`))
	b.waitFor(p.name+" signed in", `!document.getElementById("nav").hidden && !document.querySelector("form.signin")`)
	b.do(p.name+" follows "+link, chromedp.Navigate(link))
	card := `section[data-provider="` + connProvider + `"]`
	b.waitFor("the provider's card, asked for", `document.querySelector('`+card+`.asked [data-test="connect"]')`)
	b.do(p.name+" clicks Connect and signs in at the provider", chromedp.Click(card+` [data-test="connect"]`),
		chromedp.WaitVisible("#username"),
		chromedp.SendKeys("#username", username),
		chromedp.SendKeys("#password", oidcPassword),
		chromedp.Submit("#password"))
	b.waitFor(p.name+" back on the Connections page, connected",
		`document.querySelector('[data-test="connected-note"]')?.textContent.includes("Connected to `+connProvider+`") && `+
			`document.querySelector('`+card+` [data-test="connection-status"]')?.textContent === "connected" && location.origin === `+
			`"`+base+`"`)
}

// TestConnectionsWithZitadel: two people of a workspace connect their own accounts at a real
// OpenID provider (zitadel/oidc's example, a confidential client with refresh tokens), each in
// Chromium from the console's Connections page, and an OpenAPI tool acting as the caller
// reaches a resource server with each one's own token: the resource server, which verifies the
// provider's signature, sees each person's subject. A person not connected is told where to
// connect, and the link leads there. An access token that expires is refreshed before the
// next call; disconnecting revokes the tokens at the provider and the call asks again; a
// member removed from the workspace loses their connection, revoked at the provider too.
func TestConnectionsWithZitadel(t *testing.T) {
	browser := chromium(t)
	port := freePort(t)
	public := fmt.Sprintf("http://127.0.0.1:%d", port)
	idp, issuer := startConnIdP(t, public+"/connections/callback")
	disc := discoverConnIdP(t, issuer)
	who := startWhoServer(t, issuer, disc.JWKS)

	// The operator's configuration: the resource server's API, its oauth scheme the caller's
	// connection to zitadel.
	dir := t.TempDir()
	docPath := filepath.Join(dir, "who.json")
	if err := os.WriteFile(docPath, fmt.Appendf(nil, whoDocument, disc.Authorization, disc.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "quiver.yaml")
	body := fmt.Sprintf("openapi:\n  - name: who\n    document: %s\n    servers: ['%s']\n    connections: {oauth: {provider: %s, scopes: [openid]}}\n",
		docPath, who.URL, connProvider)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	idpURL, _ := url.Parse(issuer)
	whoURL, _ := url.Parse(who.URL)
	dataDir := t.TempDir()
	base, admin, _ := quiverServe(t, dataDir, true, "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--public-url", public,
		"--openapi-internal-hosts", idpURL.Host+","+whoURL.Host, "--config", config)
	endpoint := base + "/mcp"

	// The admin keeps the client secret in a workspace secret variable (quiver vars set
	// --secret reads it from standard input) and declares the provider.
	set := exec.Command(quiverBinary(t), "vars", "set", connSecretVar, "--secret")
	set.Env = append(os.Environ(), "XDG_DATA_HOME="+dataDir, "QUIVER_CONFIG=", "QUIVER_POSTGRES=")
	set.Stdin = strings.NewReader(connClientSecret)
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("quiver vars set %s --secret: %v\n%s", connSecretVar, err, out)
	}
	doc := map[string]any{"providers": []map[string]any{{"name": connProvider, "description": "zitadel/oidc's example provider",
		"authorization_url": disc.Authorization, "token_url": disc.Token, "revocation_url": disc.Revocation,
		"client_id": connClientID, "client_secret_variable": connSecretVar, "scopes": []string{"openid", "offline_access"}}}}
	if status, out := connAPI(t, "PUT", base+"/v1/connection-providers", admin, map[string]any{"document": doc, "after": 0}); status != 200 {
		t.Fatalf("declaring the provider: %d %v", status, out)
	}
	ada, bob := addConnPerson(t, base, admin, "ada"), addConnPerson(t, base, admin, "bob")
	const adaSubject, bobSubject = "id1", "id2" // the example's users test-user@localhost and test-user2

	limited, cancelLimit := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancelLimit()
	alloc, cancelAlloc := chromedp.NewExecAllocator(limited, chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("password-store", "basic"))
	defer cancelAlloc()
	browserCtx, cancelBrowser := chromedp.NewContext(alloc, chromedp.WithLogf(func(string, ...any) {}), chromedp.WithErrorf(func(string, ...any) {}))
	defer cancelBrowser()
	tab := func() *connBrowser {
		ctx, cancel := chromedp.NewContext(browserCtx) // a tab of its own: its own sessionStorage, so its own key
		t.Cleanup(cancel)
		return &connBrowser{t: t, ctx: ctx}
	}

	// Ada connects from the Connections page, asked for the provider (every scope it offers,
	// offline_access among them), signing in on the provider's own page.
	tab().connect(base, ada, public+"/console/#/connections?connect="+connProvider, "test-user@localhost")
	conn := connectionOf(t, base, ada.key)
	expires, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(conn["expires_at"]))
	if conn["provider"] != connProvider || !strings.Contains(fmt.Sprint(conn["scopes"]), "offline_access") || expires.IsZero() {
		t.Fatalf("Ada's connection: %v, want one to %s with offline_access, saying when its token expires", conn, connProvider)
	}

	// Her call reaches the resource server with her own token, the one the code was exchanged
	// for: no refresh yet.
	first := callWho(t, endpoint, ada.key)
	if first.isError || first.subject != adaSubject {
		t.Fatalf("Ada's call: %+v, want the resource server to see %s", first, adaSubject)
	}
	if refreshes, _ := idp.counts(adaSubject); refreshes != 0 {
		t.Fatalf("Ada's first call came %d refreshes after she connected (the token lives %s)", refreshes, connLifetime)
	}

	// Bob has not connected: the call says so, with where to connect; nothing reached the
	// resource server as him.
	asked := callWho(t, endpoint, bob.key)
	wantLink := public + "/console/#/connections?connect=" + connProvider + "&scopes=openid"
	if !asked.isError || asked.code != "authorization_required" || asked.authURL != wantLink || !strings.Contains(asked.text, wantLink) {
		t.Fatalf("Bob's call before connecting: %+v, want authorization_required with %s", asked, wantLink)
	}
	if who.lastToken(bobSubject).raw != "" {
		t.Fatal("the resource server saw a token of Bob's before he connected")
	}
	// He follows the link: the page asks for openid, he connects as the provider's other user.
	tab().connect(base, bob, asked.authURL, "test-user2")
	if got := callWho(t, endpoint, bob.key); got.isError || got.subject != bobSubject {
		t.Fatalf("Bob's call after connecting: %+v, want the resource server to see %s", got, bobSubject)
	}
	if got := callWho(t, endpoint, ada.key); got.isError || got.subject != adaSubject || got.tokenID != first.tokenID {
		t.Fatalf("Ada's call after Bob connected: %+v, want %s with her same token", got, adaSubject)
	}

	// Ada's access token expires: the resource server refuses it, and her next call goes
	// through a refresh at the provider, with a new token.
	wait := time.Until(expires) + time.Second
	t.Logf("waiting %s for Ada's access token to expire", wait.Round(time.Second))
	time.Sleep(wait)
	if status := who.status(t, who.lastToken(adaSubject).raw); status != http.StatusUnauthorized {
		t.Fatalf("Ada's first token, expired, at the resource server: %d, want 401", status)
	}
	refreshed := callWho(t, endpoint, ada.key)
	if refreshed.isError || refreshed.subject != adaSubject || refreshed.tokenID == first.tokenID {
		t.Fatalf("Ada's call after her token expired: %+v, want %s with a new token", refreshed, adaSubject)
	}
	if refreshes, _ := idp.counts(adaSubject); refreshes != 1 {
		t.Fatalf("the provider saw %d refresh grants for Ada, want 1", refreshes)
	}
	after := connectionOf(t, base, ada.key)
	if later, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(after["expires_at"])); !later.After(expires) {
		t.Errorf("Ada's connection after the refresh: %v, want it to expire after %s", after, expires)
	}

	// Ada disconnects: her tokens are revoked at the provider (her last refresh token no longer
	// refreshes there) and her call asks her to connect again.
	_, revokedBefore := idp.counts(adaSubject)
	if status, out := connAPI(t, "DELETE", base+"/v1/connections/"+connProvider, ada.key, nil); status != 204 {
		t.Fatalf("Ada disconnecting: %d %v", status, out)
	}
	if _, revoked := idp.counts(adaSubject); revoked <= revokedBefore {
		t.Errorf("disconnecting revoked nothing at the provider")
	}
	if status := refreshAt(t, disc.Token, idp.lastRefreshToken(adaSubject)); status == 200 {
		t.Errorf("Ada's last refresh token still refreshes at the provider after she disconnected")
	}
	if got := callWho(t, endpoint, ada.key); !got.isError || got.code != "authorization_required" || got.authURL != wantLink {
		t.Errorf("Ada's call after disconnecting: %+v, want authorization_required", got)
	}

	// The admin removes Bob: his connection is deleted and revoked at the provider (his access
	// token, which the provider's userinfo took, no longer works there). Added back, he has no
	// connection and is asked to connect.
	bobToken := who.lastToken(bobSubject).raw
	if status := getJSON(t, disc.Userinfo, bobToken, nil); status != 200 {
		t.Fatalf("Bob's access token at the provider's userinfo before he is removed: %d", status)
	}
	_, revokedBefore = idp.counts(bobSubject)
	if status, out := connAPI(t, "DELETE", base+"/v1/members/"+bob.userID, admin, nil); status != 204 {
		t.Fatalf("removing Bob: %d %v", status, out)
	}
	if _, revoked := idp.counts(bobSubject); revoked <= revokedBefore {
		t.Errorf("removing Bob revoked nothing at the provider")
	}
	if status := getJSON(t, disc.Userinfo, bobToken, nil); status == 200 {
		t.Errorf("Bob's access token still works at the provider's userinfo after he was removed")
	}
	again := addConnPerson(t, base, admin, "bob")
	if again.userID != bob.userID {
		t.Fatalf("Bob added back is %s, was %s", again.userID, bob.userID)
	}
	if c := connectionOf(t, base, again.key); c != nil {
		t.Errorf("Bob's connection once added back: %v, want none", c)
	}
	if got := callWho(t, endpoint, again.key); !got.isError || got.code != "authorization_required" {
		t.Errorf("Bob's call once added back: %+v, want authorization_required", got)
	}
}

// refreshAt asks the provider's token endpoint for a refresh with refreshToken, as Quiver's
// client, and returns the status.
func refreshAt(t *testing.T, tokenURL, refreshToken string) int {
	t.Helper()
	if refreshToken == "" {
		t.Fatal("the provider issued no refresh token")
	}
	req, _ := http.NewRequest("POST", tokenURL, strings.NewReader(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(connClientID, connClientSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
