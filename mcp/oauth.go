package mcp

import (
	"context"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// OAuth configures OAuth 2.1 authorization (the MCP authorization specification) for a remote
// reached over streamable HTTP. When the remote answers 401 or 403, Quiver discovers its
// authorization server (protected resource metadata, then authorization server or OpenID
// metadata), registers as a client, takes a user through the authorization code flow with
// PKCE, and sends the access token with every request; tokens are refreshed and, with an
// [ImportOptions.Tokens] store, kept across restarts.
//
// Registration is tried in this order: a client ID metadata document (ClientMetadataURL) when
// the authorization server supports them, a client registered beforehand (ClientID), then
// dynamic client registration.
type OAuth struct {
	// ClientID and ClientSecret identify a client registered beforehand with the
	// authorization server. Without a secret Quiver is a public client.
	ClientID     string
	ClientSecret string
	// ClientMetadataURL is the https URL of a client ID metadata document describing Quiver
	// as a client (its redirect URIs among them); it is the client id where supported.
	ClientMetadataURL string
	// RedirectURL is where the authorization server sends the user back with the code: a URL
	// served by [Callbacks]. [Import] needs it; quiver serve, which serves Callbacks at
	// /oauth/callback, defaults it to that path on its own address.
	RedirectURL string
	// Scopes, when set, are requested instead of those the server advertises.
	Scopes []string
}

// Validate checks the configuration; name is the remote's, for the message.
func (o *OAuth) Validate(name string) error {
	if o.RedirectURL != "" && !isWebURL(o.RedirectURL) {
		return fmt.Errorf("MCP server %q: oauth redirect_url %q is not an http or https URL", name, truncate(o.RedirectURL, 80))
	}
	if o.ClientSecret != "" && o.ClientID == "" {
		return fmt.Errorf("MCP server %q: oauth has a client_secret but no client_id", name)
	}
	if o.ClientMetadataURL != "" && !isMetadataURL(o.ClientMetadataURL) {
		return fmt.Errorf("MCP server %q: oauth client_metadata_url %q must be an https URL with a path (a client ID metadata document)", name, truncate(o.ClientMetadataURL, 80))
	}
	return nil
}

// isWebURL reports whether s is an http or https URL with a host.
func isWebURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// isMetadataURL reports whether s can be a client ID metadata document's URL: https, with a
// path.
func isMetadataURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "https" && u.Path != "" && u.Path != "/"
}

// Authorizer takes a user through an OAuth authorization: it directs them to authURL, the
// authorization server's page, and returns what the server sent back to the redirect URL.
type Authorizer interface {
	Authorize(ctx context.Context, remote, authURL string) (*auth.AuthorizationResult, error)
}

// AuthorizerFunc adapts a function to [Authorizer].
type AuthorizerFunc func(ctx context.Context, remote, authURL string) (*auth.AuthorizationResult, error)

// Authorize calls f.
func (f AuthorizerFunc) Authorize(ctx context.Context, remote, authURL string) (*auth.AuthorizationResult, error) {
	return f(ctx, remote, authURL)
}

// TokenStore keeps what a remote's authorization produced (tokens and the client they were
// issued to) so a restart does not ask the user again. What it holds is secret.
type TokenStore interface {
	// LoadToken returns the grant saved for the remote, or nil when there is none.
	LoadToken(ctx context.Context, remote string) (*Grant, error)
	// SaveToken replaces the grant saved for the remote.
	SaveToken(ctx context.Context, remote string, g *Grant) error
}

// Grant is an authorization of Quiver by a remote's authorization server: the token, and what
// refreshing it needs.
type Grant struct {
	// ServerURL is the remote's URL the grant was obtained for: a grant is never sent to
	// another URL, even under the same remote name.
	ServerURL    string           `json:"server_url"`
	ClientID     string           `json:"client_id"`
	ClientSecret string           `json:"client_secret,omitempty"`
	AuthURL      string           `json:"auth_url"`
	TokenURL     string           `json:"token_url"`
	AuthStyle    oauth2.AuthStyle `json:"auth_style"`
	Scopes       []string         `json:"scopes,omitempty"`
	Token        *oauth2.Token    `json:"token"`
}

func (g *Grant) config() *oauth2.Config {
	return &oauth2.Config{
		ClientID:     g.ClientID,
		ClientSecret: g.ClientSecret,
		Endpoint:     oauth2.Endpoint{AuthURL: g.AuthURL, TokenURL: g.TokenURL, AuthStyle: g.AuthStyle},
		Scopes:       g.Scopes,
	}
}

// oauthHTTPTimeout bounds each request to an authorization server (metadata, registration,
// token), which the SDK would otherwise make without a deadline.
const oauthHTTPTimeout = 30 * time.Second

// newOAuthHandler builds the SDK's authorization code handler for r, starting from a saved
// grant when the store has one for r's URL.
func (r *remote) newOAuthHandler(ctx context.Context) (*auth.AuthorizationCodeHandler, error) {
	o := r.cfg.OAuth
	if o.RedirectURL == "" {
		return nil, errors.New("a redirect_url is needed, where the authorization server sends the user back (quiver serve answers at http://HOST:PORT/oauth/callback)")
	}
	client := &http.Client{Timeout: oauthHTTPTimeout}
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              o.RedirectURL,
		AuthorizationCodeFetcher: r.fetchCode,
		// Quiver keeps the refresh token (in the token store) to stay authorized across
		// restarts, so it asks for offline access where the server offers it.
		RequestRefreshToken: true,
		Client:              client,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				ClientName:   "Quiver",
				RedirectURIs: []string{o.RedirectURL},
				GrantTypes:   []string{"authorization_code", "refresh_token"},
			},
		},
		NewTokenSource: r.newTokenSource,
	}
	o.configureClient(cfg)
	if store := r.im.opts.Tokens; store != nil {
		cfg.InitialTokenSource = r.savedTokenSource(ctx, store, client)
	}
	return auth.NewAuthorizationCodeHandler(cfg)
}

// newTokenSource saves the grant of a new authorization, and keeps saving its tokens.
func (r *remote) newTokenSource(ctx context.Context, c *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
	g := &Grant{ServerURL: r.cfg.URL, ClientID: c.ClientID, ClientSecret: c.ClientSecret,
		AuthURL: c.Endpoint.AuthURL, TokenURL: c.Endpoint.TokenURL, AuthStyle: c.Endpoint.AuthStyle,
		Scopes: c.Scopes, Token: tok}
	r.saveGrant(g)
	return r.persisting(g, c.TokenSource(ctx, tok)), nil
}

// configureClient sets what the configuration says of Quiver's client: its metadata
// document, its registration, the scopes it asks for.
func (o *OAuth) configureClient(cfg *auth.AuthorizationCodeHandlerConfig) {
	if o.ClientMetadataURL != "" {
		cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: o.ClientMetadataURL}
	}
	if o.ClientID != "" {
		creds := &oauthex.ClientCredentials{ClientID: o.ClientID}
		if o.ClientSecret != "" {
			creds.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: o.ClientSecret}
		}
		cfg.PreregisteredClient = creds
	}
	if len(o.Scopes) > 0 {
		scopes := slices.Clone(o.Scopes)
		cfg.ScopeFilter = func([]string) []string { return scopes }
	}
}

// savedTokenSource is the token source of the grant the store saved for the remote's URL; nil
// without one.
func (r *remote) savedTokenSource(ctx context.Context, store TokenStore, client *http.Client) oauth2.TokenSource {
	g, err := store.LoadToken(ctx, r.cfg.Name)
	switch {
	case err != nil:
		r.logger.Warn("mcp: cannot read the saved OAuth grant; the user will be asked to authorize again", "err", err)
	case g != nil && g.Token != nil && g.ServerURL == r.cfg.URL:
		refreshCtx := context.WithValue(context.Background(), oauth2.HTTPClient, client)
		return r.persisting(g, g.config().TokenSource(refreshCtx, g.Token))
	case g != nil:
		r.logger.Warn("mcp: the saved OAuth grant was for another URL; not using it", "saved_for", g.ServerURL)
	}
	return nil
}

// persisting returns a token source that saves each new token (a refresh) into the grant.
func (r *remote) persisting(g *Grant, ts oauth2.TokenSource) oauth2.TokenSource {
	return &persistingSource{r: r, grant: *g, next: oauth2.ReuseTokenSource(g.Token, ts)}
}

type persistingSource struct {
	r     *remote
	mu    sync.Mutex
	grant Grant
	next  oauth2.TokenSource
}

func (p *persistingSource) Token() (*oauth2.Token, error) {
	tok, err := p.next.Token()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// A refresh that omits the refresh token keeps the old one: oauth2 carries it over.
	if p.grant.Token == nil || tok.AccessToken != p.grant.Token.AccessToken {
		p.grant.Token = tok
		g := p.grant
		p.r.saveGrant(&g)
	}
	return tok, nil
}

func (r *remote) saveGrant(g *Grant) {
	store := r.im.opts.Tokens
	if store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := store.SaveToken(ctx, r.cfg.Name, g); err != nil {
		// The token still works for this process; only a restart would ask again.
		r.logger.Warn("mcp: cannot save the OAuth grant; a restart will ask the user to authorize again", "err", err)
	}
}

// fetchCode is the SDK's authorization code fetcher for r: it reports that the remote waits
// for a user, hands the URL to the Authorizer, and does not count the user's time against the
// connection attempt's timeout.
func (r *remote) fetchCode(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	az := r.im.opts.Authorizer
	if az == nil {
		return nil, fmt.Errorf("the MCP server %q needs OAuth authorization, and nothing here can take a user through it (no Authorizer)", r.cfg.Name)
	}
	r.mu.Lock()
	r.authURL = args.URL
	prevErr := r.lastErr
	r.lastErr = "waiting for a user to authorize Quiver: open " + args.URL
	ready := r.ready
	r.mu.Unlock()
	r.logger.Warn("mcp: the MCP server needs authorization: open this URL to grant Quiver access", "url", args.URL)
	if ready != nil {
		ready() // a first attempt waiting for a user does not hold up start-up
	}
	if p := pausableFrom(ctx); p != nil {
		p.pause()
		defer p.resume()
	}
	actx, cancel := context.WithTimeout(ctx, r.im.opts.AuthorizeTimeout)
	defer cancel()
	res, err := az.Authorize(actx, r.cfg.Name, args.URL)
	r.mu.Lock()
	r.authURL = ""
	// An authorization during a session (a revoked token) leaves the status as it was; a
	// failed attempt to connect records its own error.
	r.lastErr = prevErr
	r.mu.Unlock()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("nobody authorized Quiver within %s", r.im.opts.AuthorizeTimeout)
		}
		return nil, err
	}
	return res, nil
}

// pausable is a connection attempt's timeout that stops running while a user authorizes.
type pausable struct {
	mu      sync.Mutex
	timer   *time.Timer
	left    time.Duration
	started time.Time
	paused  int
}

type pausableKey struct{}

func withPausableTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	p := &pausable{left: d, started: time.Now()}
	p.timer = time.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	ctx = context.WithValue(ctx, pausableKey{}, p)
	return ctx, func() { p.timer.Stop(); cancel(context.Canceled) }
}

func pausableFrom(ctx context.Context) *pausable {
	p, _ := ctx.Value(pausableKey{}).(*pausable)
	return p
}

func (p *pausable) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused++; p.paused == 1 && p.timer.Stop() {
		p.left -= time.Since(p.started)
	}
}

func (p *pausable) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused--; p.paused == 0 {
		p.started = time.Now()
		p.timer.Reset(max(p.left, 0))
	}
}

// Callbacks receives the user's return from authorization servers at a redirect URL and
// hands the code to the connection that waits for it. It is an [Authorizer] (it logs the URL
// the user must open and waits) and an [http.Handler] for the redirect URL; quiver serve
// mounts it at /oauth/callback.
type Callbacks struct {
	// Logger receives the authorization URLs users must open; nil uses slog.Default().
	Logger *slog.Logger
	// OnPending, when set, is called with each authorization URL once the callback for it is
	// awaited (to show it to a user some other way than the log, or open a browser).
	OnPending func(remote, authURL string)

	mu      sync.Mutex
	pending map[string]chan callbackResult // by state
}

type callbackResult struct {
	res *auth.AuthorizationResult
	err error
}

// Authorize logs authURL for a user to open and waits until the authorization server sends
// them back to the handler, or ctx ends.
func (c *Callbacks) Authorize(ctx context.Context, remote, authURL string) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return nil, fmt.Errorf("the authorization URL is malformed: %w", err)
	}
	state := u.Query().Get("state")
	if state == "" {
		return nil, errors.New("the authorization URL carries no state to match the callback with")
	}
	ch := make(chan callbackResult, 1)
	c.mu.Lock()
	if c.pending == nil {
		c.pending = map[string]chan callbackResult{}
	}
	c.pending[state] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, state)
		c.mu.Unlock()
	}()
	logger := c.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.Warn("quiver: authorize access to an MCP server by opening this URL in a browser", "mcp_server", remote, "url", authURL)
	if c.OnPending != nil {
		c.OnPending(remote, authURL)
	}
	select {
	case r := <-ch:
		return r.res, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ServeHTTP answers the authorization server's redirect: it delivers the code (or the error
// the server reports, such as access_denied) to the waiting connection, once per state.
func (c *Callbacks) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	state := q.Get("state")
	c.mu.Lock()
	ch := c.pending[state]
	delete(c.pending, state)
	c.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if state == "" || ch == nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, page("Quiver: unknown authorization", "Nothing is waiting for this authorization: it was already used, it expired, or it was not started by this Quiver server. Start again from the URL Quiver logs."))
		return
	}
	if e := q.Get("error"); e != "" {
		msg := "the authorization server refused: " + e
		if d := q.Get("error_description"); d != "" {
			msg += " (" + truncate(d, 200) + ")"
		}
		ch <- callbackResult{err: errors.New(msg)}
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, page("Quiver: authorization refused", msg))
		return
	}
	code := q.Get("code")
	if code == "" {
		ch <- callbackResult{err: errors.New("the authorization server sent the user back without a code")}
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, page("Quiver: authorization failed", "The authorization server sent no code."))
		return
	}
	ch <- callbackResult{res: &auth.AuthorizationResult{Code: code, State: state, Iss: q.Get("iss")}}
	fmt.Fprint(w, page("Quiver is authorized", "Quiver can now use the MCP server. You can close this tab."))
}

func page(title, text string) string {
	return "<!doctype html><title>" + html.EscapeString(title) + "</title><h1>" + html.EscapeString(title) + "</h1><p>" + html.EscapeString(text) + "</p>\n"
}

// ListenForCallbacks serves c at redirectURL, which must be an http URL on a loopback host
// (http://127.0.0.1:PORT/..., http://localhost:PORT/...), for commands that do not run a
// server, until ctx ends or stop is called. With port 0 a free port is chosen: the URL
// returned is the one to redirect to.
func ListenForCallbacks(ctx context.Context, c *Callbacks, redirectURL string) (listening string, stop func(), err error) {
	u, err := url.Parse(redirectURL)
	if err != nil || u.Scheme != "http" {
		return "", nil, fmt.Errorf("redirect_url %q: only an http loopback URL can be served here", truncate(redirectURL, 80))
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); !(host == "localhost" || (ip != nil && ip.IsLoopback())) {
		return "", nil, fmt.Errorf("redirect_url %q: only a loopback host (127.0.0.1, localhost, [::1]) can be served here; quiver serve serves any host at /oauth/callback", truncate(redirectURL, 80))
	}
	if u.Port() == "" {
		return "", nil, fmt.Errorf("redirect_url %q needs a port to listen at, like http://127.0.0.1:7411/oauth/callback", truncate(redirectURL, 80))
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return "", nil, fmt.Errorf("listening for the OAuth redirect at %s: %w", u.Host, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	u.Host = net.JoinHostPort(host, port)
	path := u.Path
	if path == "" {
		path = "/"
	}
	mux := http.NewServeMux()
	mux.Handle(path, c)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	stop = func() { _ = srv.Close() }
	context.AfterFunc(ctx, stop)
	return u.String(), stop, nil
}
