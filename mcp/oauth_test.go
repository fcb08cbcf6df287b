package mcp_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/oauthtest"
	qmcp "github.com/quiverhq/quiver/mcp"
)

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
	as       *oauthtest.AuthServer
	mcp      *oauthtest.ProtectedServer
	cb       *qmcp.Callbacks
	redirect string
	store    *memStore
	urls     chan string  // authorization URLs awaited, as OnPending got them
	answers  atomic.Int64 // status of the user's last callback page
}

// newOAuthEnv: with auto, the user opens each URL at once; otherwise the test does, with
// visit, taking its URLs from urls.
func newOAuthEnv(t *testing.T, auto bool) *oauthEnv {
	env := &oauthEnv{as: oauthtest.NewAuthServer(t), store: &memStore{grants: map[string]qmcp.Grant{}}, urls: make(chan string, 100)}
	env.mcp = oauthtest.NewProtectedServer(t, env.as)
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
	if h := env.as.Hits(); h != (oauthtest.Hits{Registers: 1, Authorizes: 1, Codes: 1}) {
		t.Errorf("authorization server hits = %+v, want one registration, authorization and code exchange", h)
	}
	g, _ := env.store.get("prot")
	if g == nil || g.Token == nil {
		t.Fatal("no grant saved")
	}
	if _, ok := env.as.Valid(g.Token.AccessToken); g.ServerURL != env.mcp.URL || g.Token.RefreshToken == "" || !ok || g.TokenURL != env.as.URL+"/token" || !strings.HasPrefix(g.ClientID, "client-") {
		t.Errorf("saved grant = %+v (token %+v), want one for %s with a refresh token", g, g.Token, env.mcp.URL)
	}
}

// A token revoked during a session is replaced by a new authorization inside the call that
// met the 401; the status afterwards is that of a connected remote, not a stale "waiting".
func TestOAuthReauthorizationDuringASession(t *testing.T) {
	env := newOAuthEnv(t, true)
	im, reg := env.connect(t)
	env.as.RevokeAccessTokens()
	whoami(t, reg)
	if h := env.as.Hits(); h.Authorizes != 2 {
		t.Errorf("authorizations = %d, want 2 (the first, then after the revocation)", h.Authorizes)
	}
	if st := im.Status()[0]; !st.Connected || st.LastError != "" || st.AuthorizationURL != "" {
		t.Errorf("status after re-authorizing = %+v, want connected and clean", st)
	}
}

func TestOAuthSavedGrantIsReused(t *testing.T) {
	env := newOAuthEnv(t, true)
	first, _ := env.connect(t)
	first.Close()
	before := env.as.Hits()
	// A restart: a new Importer with the same store.
	_, reg := env.connect(t)
	whoami(t, reg)
	if h := env.as.Hits(); h != before || before.Authorizes != 1 {
		t.Errorf("hits after the restart = %+v, before %+v: the saved grant should have been used", h, before)
	}
}

func TestOAuthRefreshesAnExpiredGrant(t *testing.T) {
	env := newOAuthEnv(t, true)
	env.as.ExpiresIn.Store(1)
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
	before := env.as.Hits()
	_, reg := env.connect(t)
	whoami(t, reg)
	after := env.as.Hits()
	if after.Authorizes != before.Authorizes || after.Registers != before.Registers || after.Refreshes <= before.Refreshes {
		t.Errorf("hits %+v then %+v: want a refresh and no new authorization", before, after)
	}
	g, _ := env.store.get("prot")
	if g.Token.AccessToken == old.Token.AccessToken || !env.mcp.Saw(g.Token.AccessToken) || g.Token.RefreshToken != old.Token.RefreshToken {
		t.Errorf("saved token after the refresh = %+v, before %+v: want the new access token, the refresh token kept", g.Token, old.Token)
	}
}

func TestOAuthGrantForAnotherURLIsNotSent(t *testing.T) {
	env := newOAuthEnv(t, true)
	// A token the authorization server accepts: only the URL check keeps it from the server.
	access, refresh := env.as.Mint("elsewhere")
	env.store.grants["prot"] = qmcp.Grant{ServerURL: "http://127.0.0.1:1/mcp", ClientID: "elsewhere",
		AuthURL: env.as.URL + "/authorize", TokenURL: env.as.URL + "/token", AuthStyle: oauth2.AuthStyleInParams,
		Token: &oauth2.Token{AccessToken: access, RefreshToken: refresh, TokenType: "Bearer", Expiry: time.Now().Add(time.Hour)}}
	_, reg := env.connect(t)
	whoami(t, reg)
	if env.mcp.Saw(access) {
		t.Error("the grant saved for another URL was sent to the server")
	}
	if h := env.as.Hits(); h.Authorizes != 1 || h.Refreshes != 0 {
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
			env.as.Deny.Store(c.deny)
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
			if g, saves := env.store.get("prot"); g != nil || saves != 0 || env.as.CodeGrants.Load() != 0 {
				t.Errorf("grant %+v saved (%d saves), %d code exchanges, without authorization", g, saves, env.as.CodeGrants.Load())
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
	if len(env.urls) != 0 || env.as.Authorizes.Load() != 1 {
		t.Errorf("%d more authorizations asked, %d /authorize hits, want none and 1", len(env.urls), env.as.Authorizes.Load())
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
