package mcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
)

// Remote is a remote MCP server whose tools are imported: either a command that speaks MCP
// over stdio, or a streamable HTTP URL.
type Remote struct {
	// Name prefixes its tools: with Name "everything", the remote tool echo is imported as
	// everything.echo. 1 to 32 characters of [a-zA-Z0-9_-].
	Name string
	// Command and Args start a server speaking MCP on its standard input and output; Env adds
	// to the environment it inherits, Dir is its working directory. Stderr, when set, receives
	// its standard error.
	Command string
	Args    []string
	Env     map[string]string
	Dir     string
	Stderr  io.Writer
	// URL is the endpoint of a server speaking streamable HTTP; Headers are sent with every
	// request (an Authorization header, say).
	URL     string
	Headers map[string]string
	// OAuth, when set, authorizes Quiver with the remote's authorization server (URL remotes
	// only); see [OAuth].
	OAuth *OAuth
	// Connection, when set, has each call carry the calling person's token at a provider of
	// the workspace's connections (quiver.UserToken) as its bearer token, in a session of that
	// person's own; Headers and OAuth still list the tools. URL remotes only. A person who has
	// not connected the provider is asked to, as for any tool that needs a connection.
	Connection *quiver.ConnectionNeed
	// Timeout bounds one call of an imported tool; zero means 60 seconds. A call that runs
	// longer is cancelled (the remote is told) and gets a timeout error result.
	Timeout time.Duration
}

// ImportOptions configures [Import]. The zero value is usable.
type ImportOptions struct {
	// Logger receives connection events and the remotes' log messages; nil discards them.
	Logger *slog.Logger
	// ClientName and ClientVersion identify Quiver to the remotes; "quiver" and "dev" when
	// empty.
	ClientName, ClientVersion string
	// Elicit answers elicitation requests of the remotes (asking a user for input during a
	// call). Nil declares no elicitation support, so remotes do not ask.
	Elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)
	// OnChange is called after the set of imported tools changed: a remote connected,
	// reconnected with different tools, or announced a new list. A [Server] passes
	// [Server.ToolsChanged] here.
	OnChange func()
	// ConnectTimeout bounds one connection attempt (start, handshake and tool listing); zero
	// means 30 seconds.
	ConnectTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnection attempts, which doubles
	// after each failure; zero means 250 milliseconds and 30 seconds.
	MinBackoff, MaxBackoff time.Duration
	// KeepAlive is how often a connected remote is pinged to notice it went away; zero means
	// 30 seconds, negative never.
	KeepAlive time.Duration
	// Authorizer takes a user through the OAuth authorization of remotes configured with
	// [Remote.OAuth] (a [Callbacks] served at their redirect URL, typically). Without it such
	// remotes can only use saved grants.
	Authorizer Authorizer
	// Tokens keeps OAuth grants across restarts; nil keeps them in memory only.
	Tokens TokenStore
	// AuthorizeTimeout bounds how long a connection attempt waits for a user to authorize;
	// zero means 15 minutes. That wait does not count against ConnectTimeout.
	AuthorizeTimeout time.Duration
}

// Importer keeps remote MCP servers connected and their tools registered. Close it to
// disconnect and unregister the tools.
type Importer struct {
	reg     *quiver.Registry
	opts    ImportOptions
	logger  *slog.Logger
	remotes []*remote
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	// unexplain removes the explanation of the tools of remotes that are not connected.
	unexplain func()

	changeMu sync.Mutex
	change   chan struct{} // closed and replaced when a remote connects
}

// RemoteStatus is the state of one remote, for health reports.
type RemoteStatus struct {
	Name      string `json:"name"`
	Connected bool   `json:"connected"`
	Tools     int    `json:"tools"`
	// LastError is the most recent connection failure ("" when none).
	LastError string `json:"last_error,omitempty"`
	// LastAttempt is when that failure happened: a connection attempt that failed, or the
	// connection lost (zero when none).
	LastAttempt time.Time `json:"last_attempt,omitzero"`
	// AuthorizationURL is set while the remote waits for a user to open it and authorize
	// Quiver (OAuth).
	AuthorizationURL string `json:"authorization_url,omitempty"`
}

var remoteNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)

// Validate checks a remote's configuration.
func (r *Remote) Validate() error {
	if !remoteNameRE.MatchString(r.Name) {
		return fmt.Errorf("MCP server name %q must be 1 to 32 characters of a-z, A-Z, 0-9, _ and - (it prefixes the tool names)", truncate(r.Name, 40))
	}
	if err := r.checkTransport(); err != nil {
		return err
	}
	if r.Timeout < 0 {
		return fmt.Errorf("MCP server %q: timeout must not be negative", r.Name)
	}
	if c := r.Connection; c != nil && (r.URL == "" || c.Provider == "") {
		return fmt.Errorf("MCP server %q: connection needs a url (a person's token is sent over HTTP) and a provider", r.Name)
	}
	return r.checkOAuth()
}

// checkTransport checks that the remote is reached one way: by a command (stdio) or an http or
// https URL (streamable HTTP).
func (r *Remote) checkTransport() error {
	switch {
	case r.Command == "" && r.URL == "":
		return fmt.Errorf("MCP server %q needs a command (stdio) or a url (streamable HTTP)", r.Name)
	case r.Command != "" && r.URL != "":
		return fmt.Errorf("MCP server %q has both a command and a url; give one", r.Name)
	case r.URL != "" && !strings.HasPrefix(r.URL, "http://") && !strings.HasPrefix(r.URL, "https://"):
		return fmt.Errorf("MCP server %q: url %q must start with http:// or https://", r.Name, truncate(r.URL, 80))
	}
	return nil
}

// checkOAuth checks the remote's OAuth, which applies to a server reached by URL without an
// Authorization header of its own.
func (r *Remote) checkOAuth() error {
	switch {
	case r.OAuth == nil:
		return nil
	case r.URL == "":
		return fmt.Errorf("MCP server %q: oauth applies to servers reached by url, not to a command", r.Name)
	case hasHeader(r.Headers, "Authorization"):
		return fmt.Errorf("MCP server %q has both oauth and an Authorization header; give one", r.Name)
	}
	return r.OAuth.Validate(r.Name)
}

// Import connects to the remotes and registers their tools in reg, each under its remote's
// name as prefix. It returns once every remote has had a first connection attempt, so the
// tools of reachable servers can be called at once; a remote that is down is not an error (its
// tools appear when it comes up: the Importer keeps trying in the background until Close).
// A configuration error (see [Remote.Validate], or two remotes with one name) is an error.
func Import(ctx context.Context, reg *quiver.Registry, remotes []Remote, opts *ImportOptions) (*Importer, error) {
	im := &Importer{reg: reg}
	if opts != nil {
		im.opts = *opts
	}
	im.opts.setDefaults()
	im.logger = im.opts.Logger
	if im.logger == nil {
		im.logger = slog.New(slog.DiscardHandler)
	}
	if err := im.addRemotes(ctx, remotes); err != nil {
		return nil, err
	}
	// A call to a tool of a remote that is not connected (none of its tools are registered
	// before it connects) hears that, and why, rather than "unknown tool".
	im.unexplain = reg.Explain(im.explain)
	if err := im.start(ctx); err != nil {
		return nil, err
	}
	return im, nil
}

// setDefaults sets the options left zero (or negative, but KeepAlive) to their defaults.
func (o *ImportOptions) setDefaults() {
	o.ConnectTimeout = positiveOr(o.ConnectTimeout, 30*time.Second)
	o.MinBackoff = positiveOr(o.MinBackoff, 250*time.Millisecond)
	o.MaxBackoff = max(positiveOr(o.MaxBackoff, 30*time.Second), o.MinBackoff)
	if o.KeepAlive == 0 {
		o.KeepAlive = 30 * time.Second
	}
	o.AuthorizeTimeout = positiveOr(o.AuthorizeTimeout, 15*time.Minute)
}

func positiveOr[T ~int | ~int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// addRemotes checks the remotes' configurations, and that their names are unique, and sets
// each up.
func (im *Importer) addRemotes(ctx context.Context, remotes []Remote) error {
	seen := map[string]bool{}
	for _, r := range remotes {
		if err := r.Validate(); err != nil {
			return err
		}
		if seen[r.Name] {
			return fmt.Errorf("two MCP servers are named %q; names must be unique", r.Name)
		}
		seen[r.Name] = true
		rm, err := im.newRemote(ctx, r)
		if err != nil {
			return err
		}
		im.remotes = append(im.remotes, rm)
	}
	return nil
}

// newRemote sets up the remote of configuration r: its call timeout (a minute by default)
// and its OAuth.
func (im *Importer) newRemote(ctx context.Context, r Remote) (*remote, error) {
	if r.Timeout == 0 {
		r.Timeout = 60 * time.Second
	}
	rm := &remote{im: im, cfg: r, tools: map[string]*importedTool{}, attempt: make(chan struct{}), logger: im.logger.With("mcp_server", r.Name)}
	if r.OAuth == nil {
		return rm, nil
	}
	h, err := rm.newOAuthHandler(ctx)
	if err != nil {
		return nil, fmt.Errorf("MCP server %q: oauth: %w", r.Name, err)
	}
	rm.oauth = h
	return rm, nil
}

// start runs each remote's loop, and waits for the first connection attempt of each until ctx
// ends.
func (im *Importer) start(ctx context.Context) error {
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	im.cancel = cancel
	firsts := make([]chan struct{}, len(im.remotes))
	for i, r := range im.remotes {
		firsts[i] = make(chan struct{})
		im.wg.Go(func() { r.loop(loopCtx, firsts[i]) })
	}
	for _, f := range firsts {
		select {
		case <-f:
		case <-ctx.Done():
			im.Close()
			return ctx.Err()
		}
	}
	return nil
}

// Status reports the state of each remote, in configuration order.
func (im *Importer) Status() []RemoteStatus {
	out := make([]RemoteStatus, 0, len(im.remotes))
	for _, r := range im.remotes {
		r.mu.Lock()
		out = append(out, RemoteStatus{Name: r.cfg.Name, Connected: r.session != nil, Tools: len(r.tools), LastError: r.lastErr,
			LastAttempt: r.lastTry, AuthorizationURL: r.authURL})
		r.mu.Unlock()
	}
	return out
}

// changed wakes [Importer.WaitConnected].
func (im *Importer) changed() {
	im.changeMu.Lock()
	defer im.changeMu.Unlock()
	if im.change != nil {
		close(im.change)
		im.change = nil
	}
}

// WaitConnected waits until every remote is connected, for commands that cannot do without
// them (a remote waiting for a user to authorize Quiver connects once they have). It returns
// ctx's error, with the remotes still missing and why, when ctx ends first.
func (im *Importer) WaitConnected(ctx context.Context) error {
	for {
		im.changeMu.Lock()
		if im.change == nil {
			im.change = make(chan struct{})
		}
		ch := im.change
		im.changeMu.Unlock()
		var missing []string
		for _, st := range im.Status() {
			if !st.Connected {
				missing = append(missing, fmt.Sprintf("%s (%s)", st.Name, st.LastError))
			}
		}
		if missing == nil {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("MCP servers not connected: %s: %w", strings.Join(missing, ", "), ctx.Err())
		}
	}
}

// Close disconnects every remote, stops reconnecting and unregisters the imported tools.
func (im *Importer) Close() error {
	im.unexplain()
	im.cancel()
	for _, r := range im.remotes {
		r.mu.Lock()
		cs := r.session
		r.mu.Unlock()
		if cs != nil {
			_ = cs.Close()
		}
		r.people.closeAll()
	}
	im.wg.Wait()
	for _, r := range im.remotes {
		r.mu.Lock()
		for _, t := range r.tools {
			im.reg.Unregister(t.tool.Name())
		}
		r.tools = map[string]*importedTool{}
		r.mu.Unlock()
	}
	return nil
}
