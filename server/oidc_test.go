package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiverhq/quiver/config"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
)

// tokenIssuer serves a discovery document and a key set on loopback, and signs tokens with
// its current key: what the hostile tokens below are made against (a real provider signs only
// good ones; TestOIDCEndToEnd uses one).
type tokenIssuer struct {
	url       string
	mu        sync.Mutex
	key       *rsa.PrivateKey
	kid       string
	keyFetchs atomic.Int32
	// failKeys makes the key set answer 500; oddKey adds a key this server cannot use;
	// tokenEndpoint, when set, is the discovery document's token_endpoint.
	failKeys      atomic.Bool
	oddKey        atomic.Bool
	tokenEndpoint atomic.Pointer[string]
	// holdKeys, when set, makes the key set answer only once the channel is closed.
	holdKeys atomic.Pointer[chan struct{}]
}

func newTokenIssuer(t testing.TB) *tokenIssuer {
	t.Helper()
	is := &tokenIssuer{}
	is.rotate(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(is.handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	is.url = srv.URL
	return is
}

// handler serves the discovery document and the key set.
func (is *tokenIssuer) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			tokenEndpoint := is.url + "/token"
			if p := is.tokenEndpoint.Load(); p != nil {
				tokenEndpoint = *p
			}
			json.NewEncoder(w).Encode(map[string]any{"issuer": is.url, "jwks_uri": is.url + "/keys",
				"authorization_endpoint": is.url + "/authorize", "token_endpoint": tokenEndpoint})
		case "/keys":
			is.keyFetchs.Add(1)
			if hold := is.holdKeys.Load(); hold != nil {
				select {
				case <-*hold:
				case <-r.Context().Done():
					return
				}
			}
			if is.failKeys.Load() {
				http.Error(w, "down", http.StatusInternalServerError)
				return
			}
			is.mu.Lock()
			good, _ := json.Marshal(jose.JSONWebKey{Key: &is.key.PublicKey, KeyID: is.kid, Algorithm: "RS256", Use: "sig"})
			is.mu.Unlock()
			keys := []json.RawMessage{good}
			if is.oddKey.Load() { // an encryption key on a curve go-jose does not read
				keys = append([]json.RawMessage{json.RawMessage(`{"kty":"EC","crv":"secp256k1","use":"enc","kid":"odd",` +
					`"x":"0zsmtDu5FiHC2gAG6XE_XmoI4ZpM33SjJ9zVmnZb_7Q","y":"mwz-Rkx0H4wMWPxZ8zsfOv0Hd0ZmLk9fP-XBQfJ8URs"}`)}, keys...)
			}
			json.NewEncoder(w).Encode(map[string]any{"keys": keys})
		default:
			http.NotFound(w, r)
		}
	})
}

// inProcessClient is an HTTP client that reaches the issuer without a network: for tests in a
// synctest bubble, where a goroutine waiting on a socket is not durably blocked.
func (is *tokenIssuer) inProcessClient() *http.Client {
	return &http.Client{Transport: handlerTransport{is.handler()}}
}

// handlerTransport answers every request with its handler, in the calling goroutine.
type handlerTransport struct{ h http.Handler }

func (tr handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	tr.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// rotate replaces the issuer's key by a new one with a new key id.
func (is *tokenIssuer) rotate(t testing.TB) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.key, is.kid = k, "k"+time.Now().Format("150405.000000000")
}

// sign returns claims signed with key under kid, typed JWT.
func sign(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	return signTyped(t, alg, key, kid, "JWT", claims)
}

// signTyped is sign with the header's type (typ) typ, none when nil.
func signTyped(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, typ any, claims map[string]any) string {
	t.Helper()
	opts := &jose.SignerOptions{}
	if typ != nil {
		opts = opts.WithHeader(jose.HeaderType, typ)
	}
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (is *tokenIssuer) token(t testing.TB, claims map[string]any) string {
	return is.typedToken(t, "JWT", claims)
}

// typedToken is a token of the issuer's whose header's type (typ) is typ, none when nil.
func (is *tokenIssuer) typedToken(t testing.TB, typ any, claims map[string]any) string {
	is.mu.Lock()
	key, kid := is.key, is.kid
	is.mu.Unlock()
	return signTyped(t, jose.RS256, key, kid, typ, claims)
}

const tokenAudience = "https://quiver.test/mcp"

// claims are a good token's: change them to make a bad one.
func (is *tokenIssuer) claims(now time.Time, groups ...any) map[string]any {
	return map[string]any{"iss": is.url, "sub": "ada", "aud": []string{tokenAudience, "other"}, "exp": now.Add(5 * time.Minute).Unix(),
		"iat": now.Unix(), "nbf": now.Add(-time.Second).Unix(), "groups": groups, "name": "Ada"}
}

func newTokenAuth(is *tokenIssuer, users server.TokenUsers, now func() time.Time) *server.TokenAuth {
	return &server.TokenAuth{Issuer: is.url, Audiences: []string{tokenAudience}, Users: users, Now: now, Rules: []config.ClaimRule{
		{Claim: "groups", Value: "eng", Workspace: "wsp_a", Role: store.KeyRoleMember},
		{Claim: "groups", Value: "eng-leads", Workspace: "wsp_a", Role: store.KeyRoleAdmin},
		{Claim: "groups", Value: "auditors", Workspace: "wsp_b", Role: store.KeyRoleViewer},
		{Claim: "org.team", Value: "platform", Workspace: "wsp_c", Role: store.KeyRoleMember},
		{Claim: "https://acme.test/teams", Value: "platform", Workspace: "wsp_c", Role: store.KeyRoleMember},
		{Claim: "scope", Value: "quiver.admin", Workspace: "wsp_d", Role: store.KeyRoleAdmin},
	}}
}

// TestAccessTokens: a token from the issuer acts as the workspace and role its claims' rule
// grants, and every hostile token is refused with 401 saying why, without the token.
func TestAccessTokens(t *testing.T) {
	is := newTokenIssuer(t)
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	ta := newTokenAuth(is, st, func() time.Time { return now })
	if err := ta.Check(); err != nil {
		t.Fatal(err)
	}
	auth := &server.Authenticator{Keys: st, Tokens: ta}
	with := func(change func(c map[string]any)) map[string]any {
		c := is.claims(now, "eng")
		change(c)
		return c
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pub, _ := x509.MarshalPKIXPublicKey(&is.key.PublicKey)
	none := func(c map[string]any) string {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT","kid":"` + is.kid + `"}`))
		p, _ := json.Marshal(c)
		return h + "." + base64.RawURLEncoding.EncodeToString(p) + "."
	}
	hs256 := func(c map[string]any) string { // the issuer's public key used as an HMAC secret
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT","kid":"` + is.kid + `"}`))
		p, _ := json.Marshal(c)
		in := h + "." + base64.RawURLEncoding.EncodeToString(p)
		m := hmac.New(sha256.New, pub)
		m.Write([]byte(in))
		return in + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	tests := []struct {
		name, token, workspace string
		status                 int
		says                   string
	}{
		{"a member of eng", is.token(t, is.claims(now, "eng")), "", 200, "wsp_a member"},
		{"a lead: the higher of two rules", is.token(t, is.claims(now, "eng", "eng-leads")), "", 200, "wsp_a admin"},
		{"a nested claim", is.token(t, with(func(c map[string]any) { c["groups"] = nil; c["org"] = map[string]any{"team": "platform"} })), "", 200, "wsp_c member"},
		{"a claim that is a string", is.token(t, with(func(c map[string]any) { c["groups"] = "auditors" })), "", 200, "wsp_b viewer"},
		{"within the clock skew after exp", is.token(t, with(func(c map[string]any) { c["exp"] = now.Add(-10 * time.Second).Unix() })), "", 200, "wsp_a member"},
		{"two workspaces, one named", is.token(t, is.claims(now, "eng", "auditors")), "wsp_b", 200, "wsp_b viewer"},
		{"two workspaces, none named", is.token(t, is.claims(now, "eng", "auditors")), "", 403, "name one with the Quiver-Workspace header"},
		{"a workspace the token does not grant", is.token(t, is.claims(now, "eng")), "wsp_b", 403, `no access to workspace "wsp_b"`},
		{"no rule matches", is.token(t, is.claims(now, "sales")), "", 403, "match no rule"},
		{"an ID token (nonce)", is.token(t, with(func(c map[string]any) { c["nonce"] = "n" })), "", 401, "ID token"},
		{"an ID token (at_hash)", is.token(t, with(func(c map[string]any) { c["at_hash"] = "h" })), "", 401, "ID token"},
		{"a claim named with dots", is.token(t, with(func(c map[string]any) { c["groups"] = nil; c["https://acme.test/teams"] = []any{"platform"} })), "", 200, "wsp_c member"},
		{"roles as an object's keys", is.token(t, with(func(c map[string]any) { c["groups"] = map[string]any{"auditors": map[string]any{"id": 1}} })), "", 200, "wsp_b viewer"},
		{"a scope among several", is.token(t, with(func(c map[string]any) { c["groups"] = nil; c["scope"] = "openid quiver.admin profile" })), "", 200, "wsp_d admin"},
		{"a scope that only starts like one", is.token(t, with(func(c map[string]any) { c["groups"] = nil; c["scope"] = "openid quiver.admins" })), "", 403, "match no rule"},
		{"a token over 16 KB", is.token(t, with(func(c map[string]any) { c["pad"] = strings.Repeat("x", 17<<10) })), "", 401, "over the 16384"},
		{"wrong signature", sign(t, jose.RS256, other, is.kid, is.claims(now, "eng")), "", 401, "does not match the issuer's key"},
		{"alg none", none(is.claims(now, "eng")), "", 401, `unexpected signature algorithm "none"`},
		{"algorithm switch to HS256 with the public key", hs256(is.claims(now, "eng")), "", 401, `unexpected signature algorithm "HS256"`},
		{"an ES256 key the issuer does not have", sign(t, jose.ES256, ec, is.kid, is.claims(now, "eng")), "", 401, "does not match"},
		{"another issuer", is.token(t, with(func(c map[string]any) { c["iss"] = "https://evil.test" })), "", 401, "different provider"},
		{"another audience", is.token(t, with(func(c map[string]any) { c["aud"] = "https://other.test/mcp" })), "", 401, "for another audience"},
		{"an audience that is a string", is.token(t, with(func(c map[string]any) { c["aud"] = tokenAudience })), "", 200, "wsp_a member"},
		{"expired", is.token(t, with(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })), "", 401, "expired"},
		{"no expiry", is.token(t, with(func(c map[string]any) { delete(c, "exp") })), "", 401, "no expiry"},
		{"not yet valid", is.token(t, with(func(c map[string]any) { c["nbf"] = now.Add(time.Minute).Unix() })), "", 401, "not valid before"},
		{"issued in the future", is.token(t, with(func(c map[string]any) { c["iat"] = now.Add(time.Hour).Unix() })), "", 401, "in the future"},
		{"no subject", is.token(t, with(func(c map[string]any) { delete(c, "sub") })), "", 401, "no subject"},
		{"a key id the issuer lacks", sign(t, jose.RS256, other, "nope", is.claims(now, "eng")), "", 401, `no key "nope"`},
		{"not a token", "eyJhbGciOi.garbage.x", "", 401, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, says, header := tokenRequest(t, auth, tt.token, tt.workspace)
			if status != tt.status || !strings.Contains(says, tt.says) {
				t.Fatalf("%d %q, want %d saying %q", status, says, tt.status, tt.says)
			}
			wantError := map[int]string{401: `error="invalid_token"`, 403: `error="insufficient_scope"`}[status]
			if status != 200 && (!strings.Contains(header, `resource_metadata="https://quiver.test/.well-known/oauth-protected-resource/mcp"`) ||
				!strings.Contains(header, wantError)) {
				t.Fatalf("WWW-Authenticate: %q", header)
			}
		})
	}
	// The user a token names is stored, under an id derived from issuer and subject: the same
	// for every token of that person.
	var users []string
	for range 2 {
		status, says, _ := tokenRequest(t, auth, is.token(t, is.claims(now, "eng")), "")
		if status != 200 {
			t.Fatal(says)
		}
		users = append(users, says[strings.LastIndex(says, " ")+1:])
	}
	u, err := st.User(context.Background(), users[0])
	if err != nil || u.Name != "Ada" || users[1] != users[0] {
		t.Fatalf("the token's user %v (%v), ids %v", u, err, users)
	}
}

// tokenRequest sends token through Require(viewer) and returns the status, what the handler
// or the problem said, and the WWW-Authenticate header.
func tokenRequest(t *testing.T, auth *server.Authenticator, token, workspace string) (int, string, string) {
	t.Helper()
	h := auth.Require(store.KeyRoleViewer, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		p, _ := server.PrincipalFrom(r.Context())
		rw.Write([]byte(p.WorkspaceID + " " + string(p.Role) + " " + p.UserID))
	}))
	req := httptest.NewRequest("GET", "/v1/anything", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if workspace != "" {
		req.Header.Set(server.WorkspaceHeader, workspace)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code == 200 {
		return rec.Code, rec.Body.String(), ""
	}
	var p struct{ Detail string }
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("a %d answer that is not a problem: %q", rec.Code, rec.Body.String())
	}
	if strings.Contains(rec.Body.String(), token) {
		t.Fatalf("the answer repeats the token: %s", rec.Body.String())
	}
	return rec.Code, p.Detail, rec.Header().Get("WWW-Authenticate")
}

// clockedTokenAuth is an Authenticator taking tokens of is (newTokenAuth's rules) on a store
// of its own, with a clock the test moves by calling the returned function.
func clockedTokenAuth(t *testing.T, is *tokenIssuer) (auth *server.Authenticator, st *memstore.Store, clock func() time.Time, advance func(time.Duration)) {
	t.Helper()
	st = memstore.New()
	t.Cleanup(func() { st.Close() })
	var mu sync.Mutex
	now := time.Now()
	clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance = func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	return &server.Authenticator{Keys: st, Tokens: newTokenAuth(is, st, clock)}, st, clock, advance
}

// TestIssuerKeysRotate: a token signed with a key the issuer rotated to is accepted without a
// restart, and tokens naming made-up key ids make the server fetch the key set at most once
// per interval.
func TestIssuerKeysRotate(t *testing.T) {
	is := newTokenIssuer(t)
	auth, _, clock, advance := clockedTokenAuth(t, is)
	if status, says, _ := tokenRequest(t, auth, is.token(t, is.claims(clock(), "eng")), ""); status != 200 {
		t.Fatal(says)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	before := is.keyFetchs.Load()
	for i := range 50 {
		tok := sign(t, jose.RS256, other, "made-up-"+string(rune('a'+i%26)), is.claims(clock(), "eng"))
		if status, _, _ := tokenRequest(t, auth, tok, ""); status != 401 {
			t.Fatalf("a made-up key id: %d", status)
		}
	}
	if n := is.keyFetchs.Load() - before; n > 1 {
		t.Fatalf("50 tokens with made-up key ids fetched the keys %d times, want at most 1", n)
	}
	is.rotate(t)
	advance(time.Minute) // past the interval between fetches
	if status, says, _ := tokenRequest(t, auth, is.token(t, is.claims(clock(), "eng")), ""); status != 200 {
		t.Fatalf("a token signed with the rotated key: %d %s", status, says)
	}
}

// TestTokensOnTheDoors: a server that accepts tokens publishes its protected resource metadata,
// answers 401 on /mcp and /v1 pointing to it, and a token acts in its workspace only: another
// workspace's thread is 404 to it, as to that workspace's keys.
func TestTokensOnTheDoors(t *testing.T) {
	is := newTokenIssuer(t)
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	a, b := &store.Workspace{Name: "a"}, &store.Workspace{Name: "b"}
	for _, ws := range []*store.Workspace{a, b} {
		if err := st.CreateWorkspace(ctx, ws); err != nil {
			t.Fatal(err)
		}
	}
	theirs := &store.Thread{WorkspaceID: b.ID}
	if err := st.CreateThread(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	ta := &server.TokenAuth{Issuer: is.url, Audiences: []string{tokenAudience}, Users: st, ConsoleClientID: "quiver-console",
		Rules: []config.ClaimRule{{Claim: "groups", Value: "eng", Workspace: a.ID, Role: store.KeyRoleMember}}}
	srv, err := server.New(ctx, server.Config{Platform: newPlatform(t, st, nil), Auth: &server.Authenticator{Keys: st, Tokens: ta}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })

	resp, body := sendAPI(t, ts.Client(), "GET", ts.URL+"/.well-known/oauth-protected-resource/mcp", "", nil)
	var meta struct {
		Resource string   `json:"resource"`
		Servers  []string `json:"authorization_servers"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &meta) != nil || meta.Resource != tokenAudience || len(meta.Servers) != 1 || meta.Servers[0] != is.url {
		t.Fatalf("protected resource metadata: %d %s", resp.StatusCode, body)
	}
	// The console learns how to sign in with the provider, and its page may fetch from the
	// provider's token endpoint, and from nowhere else.
	resp, body = sendAPI(t, ts.Client(), "GET", ts.URL+"/console/signin.json", "", nil)
	var signin struct {
		APIKey   bool `json:"api_key"`
		Provider struct {
			ClientID, Resource   string
			Authorization, Token string
			Scopes               []string
		} `json:"provider"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &signin) != nil || !signin.APIKey || !strings.Contains(string(body), `"client_id":"quiver-console"`) ||
		!strings.Contains(string(body), `"token_endpoint":"`+is.url+`/token"`) || !strings.Contains(string(body), `"resource":"`+tokenAudience+`"`) {
		t.Fatalf("the console's sign-in: %d %s", resp.StatusCode, body)
	}
	resp, _ = sendAPI(t, ts.Client(), "GET", ts.URL+"/", "", nil)
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' "+is.url+";") {
		t.Fatalf("the console page's policy: %q", csp)
	}
	for _, door := range []string{"/mcp", "/v1/threads"} {
		resp, _ := sendAPI(t, ts.Client(), "GET", ts.URL+door, "", nil)
		if h := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 || !strings.Contains(h, `resource_metadata="https://quiver.test/.well-known/oauth-protected-resource/mcp"`) {
			t.Fatalf("%s without a token: %d, WWW-Authenticate %q", door, resp.StatusCode, h)
		}
	}
	token := is.token(t, is.claims(time.Now(), "eng"))
	resp, body = sendAPI(t, ts.Client(), "GET", ts.URL+"/v1/session", token, nil)
	var session struct {
		WorkspaceID string `json:"workspace_id"`
		UserID      string `json:"user_id"`
		Role        string `json:"role"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &session) != nil || session.WorkspaceID != a.ID || session.Role != "member" || !strings.HasPrefix(session.UserID, "usr_") {
		t.Fatalf("session with a token: %d %s", resp.StatusCode, body)
	}
	// A member by token creates what a member's key may, recorded as the token's user.
	resp, body = sendAPI(t, ts.Client(), "POST", ts.URL+"/v1/tools", token, map[string]any{"name": "ask_client", "target": "client", "description": "Asks the client.",
		"input_schema": map[string]any{"type": "object"}})
	if resp.StatusCode != 201 || !strings.Contains(string(body), `"created_by":"`+session.UserID+`"`) {
		t.Fatalf("creating a tool with a member's token: %d %s", resp.StatusCode, body)
	}
	if m, err := st.Member(ctx, a.ID, session.UserID); err != nil || m.Role != store.MemberRoleMember {
		t.Fatalf("the token's user's membership: %+v %v", m, err)
	}
	// The provider no longer says eng: the token is refused (403: it is a good token that
	// grants nothing here). The membership stays for an admin to end: a person may hold other
	// tokens that still say eng.
	if resp, _ := sendAPI(t, ts.Client(), "GET", ts.URL+"/v1/session", is.token(t, is.claims(time.Now(), "sales")), nil); resp.StatusCode != 403 {
		t.Fatalf("a token without the group: %d", resp.StatusCode)
	}
	if m, err := st.Member(ctx, a.ID, session.UserID); err != nil || m.Role != store.MemberRoleMember {
		t.Fatalf("the membership after a token without the group: %+v %v", m, err)
	}
	token = is.token(t, is.claims(time.Now(), "eng"))
	if resp, body := sendAPI(t, ts.Client(), "GET", ts.URL+"/v1/threads/"+theirs.ID, token, nil); resp.StatusCode != 404 {
		t.Fatalf("another workspace's thread with a token: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("GET", ts.URL+"/v1/threads", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(server.WorkspaceHeader, b.ID)
	if resp, err := ts.Client().Do(req); err != nil || resp.StatusCode != 403 {
		t.Fatalf("naming a workspace the token does not grant: %v %v", resp.StatusCode, err)
	}
}

// TestTokenCheckKeptNoLongerThanItsExpiry: a token's check is kept for a second, but a token
// that expires sooner is refused from its expiry on.
func TestTokenCheckKeptNoLongerThanItsExpiry(t *testing.T) {
	is := newTokenIssuer(t)
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	var mu sync.Mutex
	second := time.Now().Truncate(time.Second)
	now := second.Add(200 * time.Millisecond)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	auth := &server.Authenticator{Keys: st, Tokens: newTokenAuth(is, st, clock)}
	c := is.claims(now, "eng")
	c["exp"] = second.Add(-server.DefaultClockSkew + time.Second).Unix() // accepted for 800 ms more
	token := is.token(t, c)
	if status, says, _ := tokenRequest(t, auth, token, ""); status != 200 {
		t.Fatalf("within its skew: %d %s", status, says)
	}
	mu.Lock()
	now = now.Add(900 * time.Millisecond) // within the second its check is kept
	mu.Unlock()
	if status, says, _ := tokenRequest(t, auth, token, ""); status != 401 || !strings.Contains(says, "expired") {
		t.Fatalf("past its expiry, within the second its check is kept: %d %s", status, says)
	}
}

// TestIssuerTrouble: a provider whose keys cannot be read makes a token's check answer 503
// (the client keeps its token), not 401, and is asked again once it is back; a key set holding
// a key this server cannot use still serves the others; a discovery document naming a token
// endpoint that is not a plain https origin is refused, and the console's page gets no wider
// policy from it.
func TestIssuerTrouble(t *testing.T) {
	is := newTokenIssuer(t)
	auth, st, clock, advance := clockedTokenAuth(t, is)
	token := is.token(t, is.claims(clock(), "eng"))
	h := auth.Require(store.KeyRoleViewer, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	status := func() (int, string) {
		req := httptest.NewRequest("GET", "/v1/anything", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	is.failKeys.Store(true)
	if code, body := status(); code != 503 || !strings.Contains(body, "identity_provider_unavailable") {
		t.Fatalf("keys that cannot be read: %d %s, want 503", code, body)
	}
	is.failKeys.Store(false)
	is.oddKey.Store(true)
	advance(time.Minute) // past the interval between fetches
	if code, body := status(); code != 200 {
		t.Fatalf("the provider back, its key set holding a key this server cannot use: %d %s", code, body)
	}

	for _, bad := range []string{"https://*/token", "http://id.example.com/token", `https://id.example.com'; script-src *`, "https://user@id.example.com/t"} {
		is2 := newTokenIssuer(t)
		is2.tokenEndpoint.Store(&bad)
		ta := newTokenAuth(is2, st, nil)
		ta.ConsoleClientID = "quiver-console"
		if _, err := ta.ConsoleSignIn(context.Background()); err == nil || !strings.Contains(err.Error(), "not an https URL") {
			t.Errorf("token_endpoint %q: %v, want refused", bad, err)
		}
		if o := ta.ConsoleOrigins(context.Background()); len(o) != 0 {
			t.Errorf("token_endpoint %q widened the console's policy with %q", bad, o)
		}
	}
}

// TestConsoleSignInParams: the console asks for a token for the server's resource unless told
// not to, with the parameters a provider needs beside; the sign-in's own cannot be replaced.
func TestConsoleSignInParams(t *testing.T) {
	is := newTokenIssuer(t)
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	ta := newTokenAuth(is, st, nil)
	ta.ConsoleClientID = "quiver-console"
	got, err := ta.ConsoleSignIn(context.Background())
	if err != nil || got["params"].(map[string]string)["resource"] != tokenAudience {
		t.Fatalf("by default: %v %v, want the resource parameter", got, err)
	}
	ta.ConsoleParams = map[string]string{"resource": "", "audience": "https://api.example.com"}
	got, err = ta.ConsoleSignIn(context.Background())
	params := got["params"].(map[string]string)
	if _, has := params["resource"]; err != nil || has || params["audience"] != "https://api.example.com" {
		t.Fatalf("resource left out, audience added: %v %v", params, err)
	}
	for _, own := range []string{"state", "redirect_uri", "code_challenge", "scope"} {
		ta.ConsoleParams = map[string]string{own: "x"}
		if err := ta.Check(); err == nil || !strings.Contains(err.Error(), "the sign-in's own") {
			t.Errorf("a console parameter %q: %v, want refused", own, err)
		}
	}
}

// BenchmarkAuthenticateToken is the cost of a request's access-token check: "checked" when the
// token is checked (its signature, claims and rules; the clock moves two seconds a request, past
// the second a check is kept), "kept" when its check of the last second is used. Beside
// BenchmarkAuthenticate, an API key's check from its cache.
func BenchmarkAuthenticateToken(b *testing.B) {
	is := newTokenIssuer(b)
	st := memstore.New()
	defer st.Close()
	start := time.Now()
	c := is.claims(start, "eng")
	c["exp"] = start.Add(365 * 24 * time.Hour).Unix()
	header := "Bearer " + is.token(b, c)
	for _, moving := range []bool{true, false} {
		name := "kept"
		if moving {
			name = "checked"
		}
		b.Run(name, func(b *testing.B) {
			var calls atomic.Int64
			clock := func() time.Time {
				if !moving {
					return start
				}
				return start.Add(time.Duration(calls.Add(1)) * 2 * time.Second)
			}
			auth := &server.Authenticator{Keys: st, Tokens: newTokenAuth(is, st, clock)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := auth.Authenticate(context.Background(), header); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
