package mcp_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// authServer stands for a third-party OAuth 2.1 authorization server: what the MCP
// authorization flow uses, with the checks a strict server makes, and hit counters so tests
// can tell which steps Quiver took.
type authServer struct {
	*httptest.Server
	expiresIn atomic.Int64 // seconds
	deny      atomic.Bool  // the user refuses: /authorize answers access_denied

	registers, authorizes, codeGrants, refreshGrants atomic.Int64

	mu       sync.Mutex
	clients  map[string][]string // client id -> registered redirect URIs
	codes    map[string]issuedCode
	access   map[string]time.Time // access token -> expiry
	refreshs map[string]string    // refresh token -> client id
}

type issuedCode struct{ client, redirect, challenge string }

func newAuthServer(t *testing.T) *authServer {
	as := &authServer{clients: map[string][]string{}, codes: map[string]issuedCode{}, access: map[string]time.Time{}, refreshs: map[string]string{}}
	as.expiresIn.Store(3600)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", as.metadata)
	mux.HandleFunc("POST /register", as.register)
	mux.HandleFunc("GET /authorize", as.authorize)
	mux.HandleFunc("POST /token", as.token)
	as.Server = httptest.NewServer(mux)
	t.Cleanup(as.Close)
	return as
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, code string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code})
}

func (as *authServer) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                as.URL,
		"authorization_endpoint":                as.URL + "/authorize",
		"token_endpoint":                        as.URL + "/token",
		"registration_endpoint":                 as.URL + "/register",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"none", "client_secret_post", "client_secret_basic"},
		// With iss sent back and advertised, the flow fails unless Callbacks forwards it.
		"authorization_response_iss_parameter_supported": true,
	})
}

func (as *authServer) register(w http.ResponseWriter, r *http.Request) {
	as.registers.Add(1)
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.RedirectURIs) == 0 {
		oauthError(w, "invalid_redirect_uri")
		return
	}
	id := "client-" + rand.Text()
	as.mu.Lock()
	as.clients[id] = req.RedirectURIs
	as.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"client_id": id, "redirect_uris": req.RedirectURIs,
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}})
}

func (as *authServer) authorize(w http.ResponseWriter, r *http.Request) {
	as.authorizes.Add(1)
	q := r.URL.Query()
	as.mu.Lock()
	uris, known := as.clients[q.Get("client_id")]
	as.mu.Unlock()
	// An unknown client or redirect URI is never redirected to (RFC 6749 4.1.2.1).
	if !known || !slices.Contains(uris, q.Get("redirect_uri")) {
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	back, _ := url.Parse(q.Get("redirect_uri"))
	v := back.Query()
	v.Set("state", q.Get("state"))
	v.Set("iss", as.URL)
	switch {
	case q.Get("response_type") != "code" || q.Get("state") == "" || q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		v.Set("error", "invalid_request")
	case as.deny.Load():
		v.Set("error", "access_denied")
		v.Set("error_description", "the user said no")
	default:
		code := rand.Text()
		as.mu.Lock()
		as.codes[code] = issuedCode{client: q.Get("client_id"), redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge")}
		as.mu.Unlock()
		v.Set("code", code)
	}
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (as *authServer) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f, client := r.PostForm, r.PostForm.Get("client_id")
	if u, _, ok := r.BasicAuth(); ok {
		client = u
	}
	switch f.Get("grant_type") {
	case "authorization_code":
		as.codeGrants.Add(1)
		as.mu.Lock()
		c, ok := as.codes[f.Get("code")]
		delete(as.codes, f.Get("code")) // codes are single-use
		as.mu.Unlock()
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		if !ok || c.client != client || c.redirect != f.Get("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
			oauthError(w, "invalid_grant")
			return
		}
		access, refresh := as.mint(client)
		writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": as.expiresIn.Load(), "refresh_token": refresh})
	case "refresh_token":
		as.refreshGrants.Add(1)
		as.mu.Lock()
		owner, ok := as.refreshs[f.Get("refresh_token")]
		as.mu.Unlock()
		if !ok || owner != client {
			oauthError(w, "invalid_grant")
			return
		}
		// The refresh token is not rotated, and not sent again: the client must keep it.
		access, _ := as.mint(client)
		writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": as.expiresIn.Load()})
	default:
		oauthError(w, "unsupported_grant_type")
	}
}

// mint issues an access token and a refresh token to client.
func (as *authServer) mint(client string) (access, refresh string) {
	access, refresh = "at-"+rand.Text(), "rt-"+rand.Text()
	as.mu.Lock()
	defer as.mu.Unlock()
	as.access[access] = time.Now().Add(time.Duration(as.expiresIn.Load()) * time.Second)
	as.refreshs[refresh] = client
	return access, refresh
}

// valid reports whether the access token is one the server issued and when it expires.
func (as *authServer) valid(token string) (time.Time, bool) {
	as.mu.Lock()
	defer as.mu.Unlock()
	exp, ok := as.access[token]
	return exp, ok
}

// protectedServer is an MCP server behind bearer tokens of an authServer, as the go-sdk
// serves one; it records every bearer token presented to it.
type protectedServer struct {
	URL  string // the MCP endpoint, the OAuth resource
	mu   sync.Mutex
	seen map[string]bool
}

func newProtectedServer(t *testing.T, as *authServer) *protectedServer {
	srv := sdk.NewServer(&sdk.Implementation{Name: "protected", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "whoami", Description: "Says whose token called.", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "you are " + req.Extra.TokenInfo.UserID}}}, nil
		})
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		exp, ok := as.valid(token)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "alice", Expiration: exp}, nil
	}
	ps := &protectedServer{seen: map[string]bool{}}
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close) // registered before any importer's cleanup, so it runs after
	ps.URL = ts.URL + "/mcp"
	prm := ts.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle(prm[len(ts.URL):], auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: ps.URL, AuthorizationServers: []string{as.URL}}))
	mcp := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prm})(
		sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			ps.mu.Lock()
			ps.seen[tok] = true
			ps.mu.Unlock()
		}
		mcp.ServeHTTP(w, r)
	})
	return ps
}

func (ps *protectedServer) saw(token string) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.seen[token]
}

// memStore is a TokenStore in memory that copies grants in and out, as a file would.
type memStore struct {
	mu     sync.Mutex
	grants map[string]qmcp.Grant
	saves  int
}

func cloneGrant(g qmcp.Grant) *qmcp.Grant {
	if g.Token != nil {
		tok := *g.Token
		g.Token = &tok
	}
	g.Scopes = slices.Clone(g.Scopes)
	return &g
}

func (s *memStore) LoadToken(_ context.Context, remote string) (*qmcp.Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.grants[remote]
	if !ok {
		return nil, nil
	}
	return cloneGrant(g), nil
}

func (s *memStore) SaveToken(_ context.Context, remote string, g *qmcp.Grant) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants[remote] = *cloneGrant(*g)
	s.saves++
	return nil
}

func (s *memStore) get(remote string) (*qmcp.Grant, int) {
	g, _ := s.LoadToken(context.Background(), remote)
	s.mu.Lock()
	defer s.mu.Unlock()
	return g, s.saves
}

// oauthEnv is an authorization server, a server it protects, Quiver's callback endpoint on
// a loopback port, a token store, and a user who opens the authorization URLs.
type oauthEnv struct {
	as       *authServer
	mcp      *protectedServer
	cb       *qmcp.Callbacks
	redirect string
	store    *memStore
	urls     chan string  // authorization URLs awaited, as OnPending got them
	answers  atomic.Int64 // status of the user's last callback page
}

// newOAuthEnv: with auto, the user opens each URL at once; otherwise the test does, with
// visit, taking its URLs from urls.
func newOAuthEnv(t *testing.T, auto bool) *oauthEnv {
	env := &oauthEnv{as: newAuthServer(t), store: &memStore{grants: map[string]qmcp.Grant{}}, urls: make(chan string, 100)}
	env.mcp = newProtectedServer(t, env.as)
	env.cb = &qmcp.Callbacks{Logger: slog.New(slog.DiscardHandler), OnPending: func(_, authURL string) {
		select {
		case env.urls <- authURL:
		default:
		}
		if auto {
			env.answers.Store(int64(visit(t, authURL)))
		}
	}}
	redirect, stop, err := qmcp.ListenForCallbacks(context.Background(), env.cb, "http://127.0.0.1:0/oauth/callback")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	env.redirect = redirect
	return env
}

// visit opens authURL as a browser would, following the authorization server's redirect
// to the callback, and returns the status of the last page.
func visit(t *testing.T, authURL string) int {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(authURL)
	if err != nil {
		t.Errorf("the user could not open %s: %v", authURL, err)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func (env *oauthEnv) remote() qmcp.Remote {
	return qmcp.Remote{Name: "prot", URL: env.mcp.URL, OAuth: &qmcp.OAuth{RedirectURL: env.redirect}}
}

func (env *oauthEnv) options() *qmcp.ImportOptions {
	return &qmcp.ImportOptions{Authorizer: env.cb, Tokens: env.store, Logger: slog.New(slog.DiscardHandler),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, KeepAlive: -1, ConnectTimeout: 5 * time.Second}
}

// connect imports the remote and waits until it is connected.
func (env *oauthEnv) connect(t *testing.T) (*qmcp.Importer, *quiver.Registry) {
	t.Helper()
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	im := importInto(t, reg, []qmcp.Remote{env.remote()}, env.options())
	mustConnect(t, im)
	return im, reg
}

func mustConnect(t *testing.T, im *qmcp.Importer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := im.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
}

func whoami(t *testing.T, reg *quiver.Registry) {
	t.Helper()
	r, err := (&quiver.Dispatcher{Registry: reg}).Dispatch(context.Background(), quiver.Call{Name: "prot.whoami"})
	if err != nil || r.Text != "you are alice" {
		t.Fatalf("prot.whoami: %v %+v", err, r)
	}
}

// nextURL returns the next authorization URL awaited.
func (env *oauthEnv) nextURL(t *testing.T) string {
	t.Helper()
	select {
	case u := <-env.urls:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no authorization awaited")
		return ""
	}
}

func closeWithin(t *testing.T, im *qmcp.Importer) {
	t.Helper()
	closed := make(chan struct{})
	go func() { im.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs")
	}
}

type hits struct{ registers, authorizes, codes, refreshes int64 }

func (as *authServer) hits() hits {
	return hits{as.registers.Load(), as.authorizes.Load(), as.codeGrants.Load(), as.refreshGrants.Load()}
}

func TestOAuthFullFlow(t *testing.T) {
	env := newOAuthEnv(t, false)
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	// Import returns while the remote waits for the user: start-up is not held up.
	started := make(chan error, 1)
	var im *qmcp.Importer
	go func() {
		var err error
		im, err = qmcp.Import(context.Background(), reg, []qmcp.Remote{env.remote()}, env.options())
		started <- err
	}()
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { im.Close() })
	case <-time.After(10 * time.Second):
		t.Fatal("Import waits for the user to authorize")
	}
	authURL := env.nextURL(t)
	if st := im.Status()[0]; st.Connected || st.AuthorizationURL != authURL || !strings.Contains(st.LastError, authURL) {
		t.Errorf("status while waiting for the user = %+v, want the URL %s to open", st, authURL)
	}
	if n := names(reg); len(n) != 0 {
		t.Errorf("tools before authorization: %v", n)
	}
	q, _ := url.Parse(authURL)
	if p := q.Query(); !strings.HasPrefix(authURL, env.as.URL+"/authorize?") || p.Get("redirect_uri") != env.redirect || p.Get("resource") != env.mcp.URL || p.Get("code_challenge_method") != "S256" {
		t.Errorf("authorization URL %s: want the server's endpoint, our redirect, the resource and PKCE", authURL)
	}
	if code := visit(t, authURL); code != http.StatusOK {
		t.Errorf("the callback page answered %d, want 200", code)
	}
	mustConnect(t, im)
	if st := im.Status()[0]; !st.Connected || st.AuthorizationURL != "" || st.LastError != "" || st.Tools != 1 {
		t.Errorf("status once authorized = %+v", st)
	}
	whoami(t, reg)
	if h := env.as.hits(); h != (hits{registers: 1, authorizes: 1, codes: 1}) {
		t.Errorf("authorization server hits = %+v, want one registration, authorization and code exchange", h)
	}
	g, _ := env.store.get("prot")
	if g == nil || g.Token == nil {
		t.Fatal("no grant saved")
	}
	if _, ok := env.as.valid(g.Token.AccessToken); g.ServerURL != env.mcp.URL || g.Token.RefreshToken == "" || !ok || g.TokenURL != env.as.URL+"/token" || !strings.HasPrefix(g.ClientID, "client-") {
		t.Errorf("saved grant = %+v (token %+v), want one for %s with a refresh token", g, g.Token, env.mcp.URL)
	}
}

// A token revoked during a session is replaced by a new authorization inside the call that
// met the 401; the status afterwards is that of a connected remote, not a stale "waiting".
func TestOAuthReauthorizationDuringASession(t *testing.T) {
	env := newOAuthEnv(t, true)
	im, reg := env.connect(t)
	env.as.mu.Lock()
	clear(env.as.access)
	env.as.mu.Unlock()
	whoami(t, reg)
	if h := env.as.hits(); h.authorizes != 2 {
		t.Errorf("authorizations = %d, want 2 (the first, then after the revocation)", h.authorizes)
	}
	if st := im.Status()[0]; !st.Connected || st.LastError != "" || st.AuthorizationURL != "" {
		t.Errorf("status after re-authorizing = %+v, want connected and clean", st)
	}
}

func TestOAuthSavedGrantIsReused(t *testing.T) {
	env := newOAuthEnv(t, true)
	first, _ := env.connect(t)
	first.Close()
	before := env.as.hits()
	// A restart: a new Importer with the same store.
	_, reg := env.connect(t)
	whoami(t, reg)
	if h := env.as.hits(); h != before || before.authorizes != 1 {
		t.Errorf("hits after the restart = %+v, before %+v: the saved grant should have been used", h, before)
	}
}

func TestOAuthRefreshesAnExpiredGrant(t *testing.T) {
	env := newOAuthEnv(t, true)
	env.as.expiresIn.Store(1)
	first, _ := env.connect(t)
	first.Close()
	old, _ := env.store.get("prot")
	if old == nil || old.Token.RefreshToken == "" {
		t.Fatalf("saved grant = %+v", old)
	}
	// Let the saved access token expire, for the server too: only a refresh can help.
	for deadline := time.Now().Add(10 * time.Second); !time.Now().After(old.Token.Expiry); {
		if time.Now().After(deadline) {
			t.Fatalf("token expiry %v too far", old.Token.Expiry)
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := env.as.hits()
	_, reg := env.connect(t)
	whoami(t, reg)
	after := env.as.hits()
	if after.authorizes != before.authorizes || after.registers != before.registers || after.refreshes <= before.refreshes {
		t.Errorf("hits %+v then %+v: want a refresh and no new authorization", before, after)
	}
	g, _ := env.store.get("prot")
	if g.Token.AccessToken == old.Token.AccessToken || !env.mcp.saw(g.Token.AccessToken) || g.Token.RefreshToken != old.Token.RefreshToken {
		t.Errorf("saved token after the refresh = %+v, before %+v: want the new access token, the refresh token kept", g.Token, old.Token)
	}
}

func TestOAuthGrantForAnotherURLIsNotSent(t *testing.T) {
	env := newOAuthEnv(t, true)
	// A token the authorization server accepts: only the URL check keeps it from the server.
	access, refresh := env.as.mint("elsewhere")
	env.store.grants["prot"] = qmcp.Grant{ServerURL: "http://127.0.0.1:1/mcp", ClientID: "elsewhere",
		AuthURL: env.as.URL + "/authorize", TokenURL: env.as.URL + "/token", AuthStyle: oauth2.AuthStyleInParams,
		Token: &oauth2.Token{AccessToken: access, RefreshToken: refresh, TokenType: "Bearer", Expiry: time.Now().Add(time.Hour)}}
	_, reg := env.connect(t)
	whoami(t, reg)
	if env.mcp.saw(access) {
		t.Error("the grant saved for another URL was sent to the server")
	}
	if h := env.as.hits(); h.authorizes != 1 || h.refreshes != 0 {
		t.Errorf("hits = %+v, want a new authorization", h)
	}
	if g, _ := env.store.get("prot"); g.ServerURL != env.mcp.URL || g.Token.AccessToken == access {
		t.Errorf("saved grant = %+v, want the new one for %s", g, env.mcp.URL)
	}
}

func TestOAuthDoesNotConnectWithoutAuthorization(t *testing.T) {
	cases := []struct {
		name  string
		deny  bool // the user goes and refuses
		setup func(*qmcp.ImportOptions)
		want  []string
	}{
		{"access denied", true, func(o *qmcp.ImportOptions) { o.AuthorizeTimeout = 5 * time.Second },
			[]string{"refused: access_denied", "the user said no"}},
		{"nobody comes in time", false, func(o *qmcp.ImportOptions) { o.AuthorizeTimeout = 100 * time.Millisecond },
			[]string{"nobody authorized Quiver within 100ms"}},
		{"no Authorizer", false, func(o *qmcp.ImportOptions) { o.Authorizer = nil },
			[]string{"nothing here can take a user through it"}},
		// 15 minutes to authorize: Close must not wait for them.
		{"closed while awaiting the user", false, func(*qmcp.ImportOptions) {}, []string{"waiting for a user to authorize Quiver: open http"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newOAuthEnv(t, c.deny)
			env.as.deny.Store(c.deny)
			opts := env.options()
			opts.ConnectTimeout = 2 * time.Second
			c.setup(opts)
			reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
			im := importInto(t, reg, []qmcp.Remote{env.remote()}, opts)
			var st qmcp.RemoteStatus
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if st = im.Status()[0]; strings.Contains(st.LastError, c.want[0]) || time.Now().After(deadline) {
					break
				}
			}
			for _, w := range c.want {
				if !strings.Contains(st.LastError, w) {
					t.Errorf("last error %q, want it to say %q", st.LastError, w)
				}
			}
			if st.Connected || len(names(reg)) != 0 {
				t.Errorf("status = %+v, tools %v: connected without authorization", st, names(reg))
			}
			if c.deny && env.answers.Load() != http.StatusForbidden {
				t.Errorf("the refusal page answered %d, want 403", env.answers.Load())
			}
			closeWithin(t, im)
			// Nothing waits for a callback any more.
			for len(env.urls) > 0 {
				if code := visit(t, <-env.urls); code != http.StatusBadRequest {
					t.Errorf("a callback after Close answered %d, want 400", code)
				}
			}
			if g, saves := env.store.get("prot"); g != nil || saves != 0 || env.as.codeGrants.Load() != 0 {
				t.Errorf("grant %+v saved (%d saves), %d code exchanges, without authorization", g, saves, env.as.codeGrants.Load())
			}
		})
	}
}

func TestOAuthUserTimeDoesNotCountAgainstConnectTimeout(t *testing.T) {
	env := newOAuthEnv(t, false)
	opts := env.options()
	opts.ConnectTimeout = 500 * time.Millisecond
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	im := importInto(t, reg, []qmcp.Remote{env.remote()}, opts)
	authURL := env.nextURL(t)
	time.Sleep(2 * opts.ConnectTimeout) // the user takes longer than a connection attempt may
	if code := visit(t, authURL); code != http.StatusOK {
		t.Fatalf("the callback answered %d: the attempt waiting for the user was given up (%+v)", code, im.Status())
	}
	mustConnect(t, im)
	whoami(t, reg)
	if len(env.urls) != 0 || env.as.authorizes.Load() != 1 {
		t.Errorf("%d more authorizations asked, %d /authorize hits, want none and 1", len(env.urls), env.as.authorizes.Load())
	}
}

func TestCallbacksBadInput(t *testing.T) {
	cb := &qmcp.Callbacks{Logger: slog.New(slog.DiscardHandler)}
	pending := make(chan string, 1)
	cb.OnPending = func(_, u string) { pending <- u }
	base, stop, err := qmcp.ListenForCallbacks(context.Background(), cb, "http://127.0.0.1:0/oauth/callback")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	get := func(query string) (int, string) {
		t.Helper()
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(base + "?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	type outcome struct {
		res *auth.AuthorizationResult
		err error
	}
	// await starts an authorization with state and returns its outcome once it is pending.
	await := func(ctx context.Context, state string) chan outcome {
		out := make(chan outcome, 1)
		go func() {
			res, err := cb.Authorize(ctx, "r", "https://as.example/authorize?client_id=c&state="+state)
			out <- outcome{res, err}
		}()
		<-pending
		return out
	}
	result := func(out chan outcome) outcome {
		t.Helper()
		select {
		case o := <-out:
			return o
		case <-time.After(10 * time.Second):
			t.Fatal("Authorize did not return")
			return outcome{}
		}
	}

	for _, q := range []string{"", "code=x", "state=unknown&code=x"} {
		if code, body := get(q); code != http.StatusBadRequest || !strings.Contains(body, "Nothing is waiting for this authorization") {
			t.Errorf("callback ?%s: %d %q, want 400 saying nothing waits", q, code, body)
		}
	}

	cases := []struct {
		state, query string
		status       int
		page, err    string // err "" for a code delivered
	}{
		{"refusal", "error=access_denied&error_description=the+user+said+no", http.StatusForbidden, "access_denied", "refused: access_denied (the user said no)"},
		{"nocode", "", http.StatusBadRequest, "sent no code", "without a code"},
		{"code", "code=c3&iss=https%3A%2F%2Fas.example", http.StatusOK, "Quiver is authorized", ""},
	}
	for _, c := range cases {
		out := await(context.Background(), c.state)
		q := "state=" + c.state + "&" + c.query
		if code, body := get(q); code != c.status || !strings.Contains(body, c.page) {
			t.Errorf("%s: callback answered %d %q, want %d %q", c.state, code, body, c.status, c.page)
		}
		// Replayed, before the waiting Authorize even took the first: a state is single-use.
		if code, body := get(q); code != http.StatusBadRequest || !strings.Contains(body, "already used") {
			t.Errorf("%s: the same callback again answered %d %q, want 400", c.state, code, body)
		}
		o := result(out)
		switch want := (auth.AuthorizationResult{Code: "c3", State: c.state, Iss: "https://as.example"}); {
		case c.err != "" && (o.err == nil || !strings.Contains(o.err.Error(), c.err)):
			t.Errorf("%s: Authorize = %+v, want an error saying %q", c.state, o, c.err)
		case c.err == "" && (o.err != nil || *o.res != want):
			t.Errorf("%s: Authorize = %+v %v, want %+v", c.state, o.res, o.err, want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	out := await(ctx, "s4")
	cancel()
	if o := result(out); o.err != context.Canceled {
		t.Errorf("cancelled Authorize = %+v", o)
	}
	if code, _ := get("state=s4&code=late"); code != http.StatusBadRequest {
		t.Errorf("a callback for an abandoned authorization answered %d, want 400", code)
	}

	if _, err := cb.Authorize(context.Background(), "r", "https://as.example/authorize?client_id=c"); err == nil || !strings.Contains(err.Error(), "no state") {
		t.Errorf("Authorize of a URL without state: %v", err)
	}
}

func TestOAuthValidate(t *testing.T) {
	const cb = "http://127.0.0.1:8080/oauth/callback"
	web := func(o qmcp.OAuth) qmcp.Remote {
		return qmcp.Remote{Name: "r", URL: "https://mcp.example/mcp", OAuth: &o}
	}
	cases := []struct {
		name   string
		remote qmcp.Remote
		want   string // "" for valid
	}{
		{"valid", web(qmcp.OAuth{RedirectURL: cb, ClientID: "id", ClientSecret: "s", ClientMetadataURL: "https://quiver.example/client.json"}), ""},
		{"on a command", qmcp.Remote{Name: "r", Command: "srv", OAuth: &qmcp.OAuth{RedirectURL: cb}}, "not to a command"},
		{"with an Authorization header", qmcp.Remote{Name: "r", URL: "https://mcp.example/mcp", Headers: map[string]string{"authorization": "Bearer x"}, OAuth: &qmcp.OAuth{RedirectURL: cb}}, "both oauth and an Authorization header"},
		// Left to the caller: quiver serve fills in its own /oauth/callback; Import refuses it.
		{"no redirect_url", web(qmcp.OAuth{}), ""},
		{"redirect_url not http", web(qmcp.OAuth{RedirectURL: "ftp://127.0.0.1/cb"}), "not an http or https URL"},
		{"redirect_url without host", web(qmcp.OAuth{RedirectURL: "http:///cb"}), "not an http or https URL"},
		{"redirect_url relative", web(qmcp.OAuth{RedirectURL: "/oauth/callback"}), "not an http or https URL"},
		{"secret without id", web(qmcp.OAuth{RedirectURL: cb, ClientSecret: "s"}), "client_secret but no client_id"},
		{"metadata over http", web(qmcp.OAuth{RedirectURL: cb, ClientMetadataURL: "http://quiver.example/client.json"}), "must be an https URL with a path"},
		{"metadata without path", web(qmcp.OAuth{RedirectURL: cb, ClientMetadataURL: "https://quiver.example"}), "must be an https URL with a path"},
		{"metadata at the root", web(qmcp.OAuth{RedirectURL: cb, ClientMetadataURL: "https://quiver.example/"}), "must be an https URL with a path"},
	}
	for _, c := range cases {
		err := c.remote.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"r"`)):
			t.Errorf("%s: err = %v, want it to name the remote and say %q", c.name, err, c.want)
		}
	}
	// Import refuses it before connecting anywhere.
	if _, err := qmcp.Import(context.Background(), &quiver.Registry{}, []qmcp.Remote{cases[3].remote}, nil); err == nil || !strings.Contains(err.Error(), `"r"`) || !strings.Contains(err.Error(), "redirect_url is needed") {
		t.Errorf("Import of a remote without redirect_url: %v", err)
	}
}

func TestListenForCallbacksRefuses(t *testing.T) {
	cases := []struct{ url, want string }{
		{"http://example.com:0/oauth/callback", "only a loopback host"},
		{"http://localhost/oauth/callback", "needs a port"},
		{"http://192.0.2.1:0/oauth/callback", "only a loopback host"},
		{"http://0.0.0.0:0/oauth/callback", "only a loopback host"},
		{"https://127.0.0.1:0/oauth/callback", "only an http loopback URL"},
		{"ftp://127.0.0.1:0/oauth/callback", "only an http loopback URL"},
		{"127.0.0.1:0/oauth/callback", "only an http loopback URL"},
	}
	for _, c := range cases {
		u, stop, err := qmcp.ListenForCallbacks(context.Background(), &qmcp.Callbacks{}, c.url)
		if err == nil {
			stop()
			t.Errorf("%s: served at %s", c.url, u)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.url, err, c.want)
		}
	}
	// It stops serving when its context ends.
	ctx, cancel := context.WithCancel(context.Background())
	u, stop, err := qmcp.ListenForCallbacks(ctx, &qmcp.Callbacks{}, "http://127.0.0.1:0/cb")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cancel()
	browser := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := browser.Get(u)
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("still serving after its context ended")
		}
	}
}
