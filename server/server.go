// Package server is Quiver's HTTP doors over a platform (package platform), for many
// workspaces: MCP at /mcp (streamable HTTP, stateful sessions any node of a fleet continues),
// the JSON API under /v1 (OpenAPI 3.1 at /v1/openapi.json), A2A, the console, /healthz and
// /readyz. Every request carries an API key or an access token (see [Authenticator]) that
// decides its workspace, user and role; another workspace's records answer 404.
//
// The server holds no rules and assembles nothing a door shares: each workspace's tools and
// dispatcher, the recording of calls (through the platform's journal when it has one) and the
// thread an MCP session's calls are recorded on are the platform's, the same at every door.
// What is left here is HTTP's: authentication, routes, the MCP server of each workspace with
// its HTTP handler and sessions, the event streams, and a graceful shutdown.
package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiverhq/quiver/internal/hostcheck"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server/apidocs"
	"github.com/quiverhq/quiver/server/console"
	"github.com/quiverhq/quiver/store"
)

// DefaultAddr is where the server listens unless told otherwise: loopback only.
const DefaultAddr = "127.0.0.1:7411"

// Config configures a [Server]: the platform it serves, and the HTTP doors' own settings.
// Platform is required; the rest has defaults.
type Config struct {
	// Addr is the host:port ListenAndServe listens on; DefaultAddr when empty.
	Addr string
	// Platform is the assembled Quiver the server serves: the workspaces' tools and their
	// dispatchers (policy, result limit, recording, through its journal when it has one), the
	// variables, agents, runner and background runs (with background runs started, the API
	// runs agents: POST /v1/threads/{id}/runs and what follows).
	Platform *platform.Platform
	// WorkspaceID is the server's own workspace, created when missing: the one requests act in
	// when the server authenticates nothing (Auth nil); "wsp_local" when empty. With Auth,
	// each request acts in its key's workspace.
	WorkspaceID string
	// StartRuns, when set, starts the platform's background runs (Platform.StartJobs) once
	// the remote MCP servers of the platform's configuration (its tool sources: see
	// Platform.ServeConfiguration) have had their first connection attempt and before the
	// doors are built: a
	// run that a restart resumes finds the remotes' tools there, as a call made at start-up
	// does, rather than calling them while they connect.
	StartRuns func(context.Context) error
	// PublicURL is the server's base URL as browsers reach it; the OAuth redirect URL of
	// remotes that give none is PublicURL + "/oauth/callback". "http://" + Addr when empty.
	// Its host is accepted in the Host header of requests to /mcp besides local ones (DNS
	// rebinding protection refuses others).
	PublicURL string
	// OAuthGrants keeps the OAuth grants of remotes across restarts (see mcp.GrantFiles); nil
	// keeps them in memory, so a restart asks users to authorize again.
	OAuthGrants mcp.TokenStore
	// Authorizer takes users through the OAuth authorization of remotes; nil waits for them at
	// the server's own /oauth/callback (set it when the server is not served over HTTP).
	Authorizer mcp.Authorizer
	// MCP holds options for the MCP server (name, capabilities and handlers for servers that
	// add resources or prompts); its Session field is set by the server. Nil uses defaults.
	MCP *mcp.ServerOptions
	// SetupMCP, when set, is called with the MCP server before serving, to add resources and
	// prompts.
	SetupMCP func(*mcp.Server)
	// MaxRequestBytes caps one HTTP request body on /mcp; zero means 4 MiB.
	MaxRequestBytes int64
	// AllowedOrigins are browser origins accepted besides local ones and the server's own
	// (a request whose Origin is another is refused with 403, on every door).
	AllowedOrigins []string
	// AllowedHosts are host names (without port) accepted in the Host header besides local
	// ones, the address a request arrived on and PublicURL's host: the names clients and
	// reverse proxies reach the server by. A request with another Host is refused with 403
	// on every door but /healthz, which defeats DNS rebinding.
	AllowedHosts []string
	// SessionIdleTimeout closes an MCP session that has had no request for that long (its
	// client initializes a new one); zero means mcp.DefaultSessionIdleTimeout (5 minutes),
	// negative never.
	SessionIdleTimeout time.Duration
	// MaxSessions caps the MCP sessions open at once on the server, all workspaces together:
	// a client that would open another gets 503 until some close or expire. Zero means
	// mcp.DefaultMaxSessions (1000), negative no cap.
	MaxSessions int
	// MaxSessionsPerWorkspace is each workspace's share of MaxSessions, which no workspace
	// can exceed (503), so that one tenant cannot take every session. Zero means a quarter of
	// MaxSessions, at least 64 or all of it (without a cap on MaxSessions, none); negative no
	// cap.
	MaxSessionsPerWorkspace int
	// MaxSessionsPerOwner caps the MCP sessions one owner (see SessionOwner) has open at once:
	// beyond it, 429. Zero means mcp.DefaultMaxSessionsPerOwner (250), negative no cap.
	MaxSessionsPerOwner int
	// SessionOwner names whom a request that opens an MCP session comes from, for
	// MaxSessionsPerOwner; nil uses the client's IP address.
	SessionOwner func(*http.Request) string
	// ShutdownTimeout bounds the graceful shutdown; zero means 10 seconds.
	ShutdownTimeout time.Duration
	// DrainDelay is how long the server keeps serving, not ready (/readyz answers 503), once
	// asked to shut down and before it stops taking requests: the time a load balancer needs
	// to stop sending it new ones. Zero stops at once.
	DrainDelay time.Duration
	// Auth, when set, authenticates every request to /mcp and /v1 with an API key, which
	// decides the workspace, user and role of all the request does: a viewer key may read and
	// list the tools, a member or admin key call them too (a viewer's call is refused with
	// policy_denied) and change things. A session answers only the key that opened it, and
	// sessions are counted per key (MaxSessionsPerOwner). Nil authenticates nothing: anyone
	// who can reach the server acts in WorkspaceID and calls every tool.
	Auth *Authenticator
	// Logger receives the server's logs; nil uses slog.Default().
	Logger *slog.Logger
}

// Server is a configured Quiver server. Create it with [New]; it serves until the context
// given to [Server.Serve] ends.
type Server struct {
	cfg Config
	p   *platform.Platform
	// describeRuns describes the run operations without a platform that runs them (OpenAPI).
	describeRuns bool
	logger       *slog.Logger
	disconnect   func() // from the fleet's remote MCP servers (connectFleet)
	mux          *http.ServeMux
	guard        hostcheck.Policy // the names and origins every door but /healthz answers to
	// tenants hold each workspace's MCP server and sessions (see tenants.go); own is the
	// server's own workspace's, served from the start.
	tenants    tenants
	own        *tenant
	mcpOptions *mcp.HTTPOptions
	// sessionLimits and sessionTTL are the MCP sessions' caps and idle timeout, as leases.
	sessionLimits store.LeaseLimits
	sessionTTL    time.Duration
	// streams counts the open event streams, to cap them; they are held under node's lease.
	streams streamSlots
	node    *nodeLease
	// closing is closed when the server shuts down, to end long-lived event streams.
	closing  chan struct{}
	draining atomic.Bool // asked to shut down: not ready for new work

	readyMu   sync.Mutex // the store's last answer to a readiness read, and when
	readyAt   time.Time
	readyErr  error
	closeOnce sync.Once
}

// withDefaults is cfg with the defaults of what it leaves unset.
func (cfg Config) withDefaults() Config {
	cfg.Addr = cmp.Or(cfg.Addr, DefaultAddr)
	cfg.WorkspaceID = cmp.Or(cfg.WorkspaceID, "wsp_local")
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	return cfg
}

// New builds a server: it makes sure the workspace exists, connects to the remote MCP servers
// (one that is down is retried in the background, not an error) and prepares the handlers.
func New(ctx context.Context, cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if cfg.Platform == nil {
		return nil, errors.New("server: a platform is required")
	}
	s := &Server{cfg: cfg, p: cfg.Platform, logger: cfg.Logger, closing: make(chan struct{})}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if err := s.ensureWorkspace(ctx); err != nil {
		return nil, err
	}
	callbacks := &mcp.Callbacks{Logger: s.logger}
	s.connectFleet(ctx, callbacks)
	if cfg.StartRuns != nil {
		if err := cfg.StartRuns(ctx); err != nil {
			s.disconnect()
			return nil, err
		}
	}
	s.mux = http.NewServeMux()
	s.mux.Handle("GET "+mcp.OAuthCallbackPath, callbacks)
	s.guard = cfg.hostPolicy()
	s.mcpOptions = s.sessionOptions()
	s.node = startNodeLease(ctx, s.p.Store(), s.logger)
	s.streams = streamSlots{leases: s.p.Store(), node: s.node, logger: s.logger}
	// The server's own workspace is served from the start; others from their first request.
	s.own = s.tenant(ctx, cfg.WorkspaceID)
	s.p.SetConnectLink(s.connectLink)
	s.routes()
	return s, nil
}

// routes adds the doors to the mux: /mcp and its toolsets' addresses, /v1, its document and
// reference, /healthz and the console.
func (s *Server) routes() {
	cfg := &s.cfg
	// Each request reaches the MCP server of its key's workspace, and no other, as its key's
	// actor: the workspace's dispatcher refuses a viewer's calls.
	var mcpHandler http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := platform.WithActor(r.Context(), s.actor(r.Context()))
		s.tenant(ctx, s.workspaceID(ctx)).mcpHTTP.ServeHTTP(w, r.WithContext(ctx))
	})
	// Each toolset of the workspace's entitlements at its own address (mcptoolsets.go).
	var toolsetHandler http.Handler = http.HandlerFunc(s.toolsetMCP)
	if cfg.Auth != nil {
		// A session answers only the key that opened it (its owner, see sessionOptions).
		mcpHandler = cfg.Auth.Require(store.KeyRoleViewer, mcpHandler)
		toolsetHandler = cfg.Auth.Require(store.KeyRoleViewer, toolsetHandler)
	}
	s.mux.Handle("/mcp", mcpHandler)
	s.mux.Handle("/mcp/{toolset}", toolsetHandler)
	// The catalog's agents exposed as tools, over A2A (cards public, calls behind the keys).
	s.mux.Handle(a2aPrefix, s.a2aHandler())
	api, _ := s.apiHandler()
	doc := api
	if cfg.Auth != nil {
		api = cfg.Auth.Require(store.KeyRoleViewer, api)
	}
	s.mux.Handle("/v1/", api)
	// The API's own description holds no tenant's data: served without a key, so that
	// client generators can read it from the server.
	s.mux.Handle("GET /v1/openapi.json", doc)
	s.mux.Handle("GET /v1/openapi.yaml", doc)
	// Its reference for people, read from that document by a page of the server's own.
	docs := apidocs.Handler()
	s.mux.Handle("GET "+apidocs.Path, docs)
	s.mux.Handle("GET "+apidocs.Path+"/", docs)
	if cfg.Auth != nil && cfg.Auth.Tokens != nil {
		// Where an MCP client that got a 401 finds the issuer to sign in with: public, as
		// the issuer's own discovery document is.
		meta, _ := json.Marshal(cfg.Auth.Tokens.ResourceMetadata())
		serveMeta := func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "max-age=300")
			_, _ = w.Write(meta)
		}
		s.mux.HandleFunc("GET "+cfg.Auth.Tokens.MetadataPath(), serveMeta)
		if root := MetadataPath(""); root != cfg.Auth.Tokens.MetadataPath() {
			s.mux.HandleFunc("GET "+root, serveMeta)
		}
	}
	// Where providers send people back once they connected an account: no key, the flow's
	// state says whose connection it finishes.
	s.mux.HandleFunc("GET "+ConnectionsCallbackPath, s.connectionsCallback)
	s.mux.HandleFunc("GET /healthz", s.health)
	s.mux.HandleFunc("GET /readyz", s.ready)
	// The console: a client of /v1 like any other, its key or token in each request's header.
	var uiOpts console.Options
	if cfg.Auth != nil && cfg.Auth.Tokens != nil {
		tokens := cfg.Auth.Tokens
		uiOpts.ConnectOrigins = func(r *http.Request) []string { return tokens.ConsoleOrigins(r.Context()) }
	}
	s.mux.HandleFunc("GET /console/signin.json", s.consoleSignIn)
	ui := console.HandlerWith(uiOpts)
	s.mux.Handle("GET /{$}", ui)
	s.mux.Handle("GET /console/", ui)
}

// consoleSignIn tells the console how people may sign in: with the identity provider (its
// client, scopes and endpoints) when the server has one for the console, and always with an
// API key. Public: it holds nothing a browser could not read from the provider itself.
func (s *Server) consoleSignIn(w http.ResponseWriter, r *http.Request) {
	out := map[string]any{"api_key": true}
	if a := s.cfg.Auth; a != nil && a.Tokens != nil {
		sso, err := a.Tokens.ConsoleSignIn(r.Context())
		if err != nil {
			s.logger.Warn("console sign-in with the identity provider is unavailable", "err", err)
			out["provider_error"] = "the identity provider could not be reached; sign in with an API key, or try again shortly"
		} else if sso != nil {
			out["provider"] = sso
		}
	}
	console.Secure(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}

// runsOn says whether the API runs agents: the platform's background runs are started.
func (s *Server) runsOn() bool { return s.describeRuns || (s.p != nil && s.p.Jobs() != nil) }

// hostPolicy is the names and origins every door but /healthz answers to: the configured ones
// and the public URL's, whose name browsers and proxies send as Host.
func (cfg *Config) hostPolicy() hostcheck.Policy {
	hosts, origins := slices.Clone(cfg.AllowedHosts), slices.Clone(cfg.AllowedOrigins)
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
		origins = append(origins, u.Scheme+"://"+u.Host)
	}
	return hostcheck.Policy{Hosts: hosts, Origins: origins}
}

// sessionOptions are the options of every workspace's MCP handler, and the server's caps on
// sessions (in total, per workspace, per owner), which the store's leases hold across a fleet
// (see mcpsessions.go).
func (s *Server) sessionOptions() *mcp.HTTPOptions {
	cfg := &s.cfg
	owner := cfg.SessionOwner
	if cfg.Auth != nil && owner == nil {
		owner = func(r *http.Request) string {
			p, _ := PrincipalFrom(r.Context())
			return p.Owner()
		}
	}
	total, perWorkspace := cmp.Or(cfg.MaxSessions, mcp.DefaultMaxSessions), cfg.MaxSessionsPerWorkspace
	if perWorkspace == 0 {
		perWorkspace = -1
		if total > 0 {
			perWorkspace = max(total/4, min(total, minWorkspaceShare))
		}
	}
	perOwner := cmp.Or(cfg.MaxSessionsPerOwner, mcp.DefaultMaxSessionsPerOwner)
	s.sessionLimits = store.LeaseLimits{Total: max(total, -1), PerWorkspace: max(perWorkspace, -1), PerOwner: max(perOwner, -1)}
	switch idle := cmp.Or(cfg.SessionIdleTimeout, mcp.DefaultSessionIdleTimeout); {
	case idle < 0:
		s.sessionTTL = maxSessionTTL // never idle: as long as a lease may live
	default:
		s.sessionTTL = min(max(idle, store.MinLeaseTTL), maxSessionTTL)
	}
	return &mcp.HTTPOptions{
		MaxRequestBytes:     cfg.MaxRequestBytes,
		AllowedOrigins:      s.guard.Origins,
		AllowedHosts:        s.guard.Hosts,
		SessionTimeout:      cfg.SessionIdleTimeout,
		MaxSessions:         perWorkspace,
		MaxSessionsPerOwner: cfg.MaxSessionsPerOwner,
		Pool:                mcp.NewSessionPool(total, s.logger),
		Owner:               owner,
		Logger:              s.logger,
	}
}

// maxSessionTTL is the longest an MCP session lives unused: a lease's longest life.
const maxSessionTTL = store.MaxLeaseTTL

// minWorkspaceShare is the least default share of a workspace in the server's sessions.
const minWorkspaceShare = 64

func (s *Server) ensureWorkspace(ctx context.Context) error {
	ent := s.p.Store()
	if _, err := ent.Workspace(ctx, s.cfg.WorkspaceID); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	err := ent.CreateWorkspace(ctx, &store.Workspace{ID: s.cfg.WorkspaceID, Name: "local"})
	if err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrExists) {
		return fmt.Errorf("server: creating workspace %s: %w", s.cfg.WorkspaceID, err)
	}
	return nil
}

// Handler returns the server's HTTP handler: /mcp, /v1, the console, /healthz, /readyz and
// /oauth/callback. Every door but the probes answers only to the server's own names and
// origins (Config.AllowedHosts, Config.AllowedOrigins): a web page cannot drive it through
// DNS rebinding or from another site.
func (s *Server) Handler() http.Handler {
	guarded := s.guard.Guard(s.mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			s.mux.ServeHTTP(w, r) // what a load balancer's probe needs, by any name
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// ListenAndServe listens on the configured address and serves until ctx ends.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("server: listening on %s: %w", s.cfg.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then drains for DrainDelay (serving, but not ready) and
// shuts down gracefully: MCP sessions are closed,
// requests in flight get up to ShutdownTimeout to finish, remote MCP servers are disconnected.
// It returns nil after a shutdown asked for by ctx.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.logger.Info("quiver: serving", "addr", ln.Addr().String(), "mcp", "http://"+ln.Addr().String()+"/mcp")
	select {
	case err := <-errc:
		s.Close()
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	if s.cfg.DrainDelay > 0 {
		s.logger.Info("quiver: draining", "for", s.cfg.DrainDelay)
		select {
		case <-time.After(s.cfg.DrainDelay):
		case err := <-errc:
			s.Close()
			return fmt.Errorf("server: %w", err)
		}
	}
	s.logger.Info("quiver: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	// Long-lived event streams end with their sessions; then in-flight requests drain.
	s.closeOnce.Do(func() { close(s.closing) })
	s.eachTenant(func(t *tenant) { t.mcp.Close() })
	if s.node != nil {
		s.node.close()
	}
	err := hs.Shutdown(sctx)
	s.Close()
	if err != nil {
		return fmt.Errorf("server: shutting down: %w", err)
	}
	return nil
}

// Close disconnects remote MCP servers and ends MCP sessions; Serve calls it on shutdown. The
// platform, whose journal may still take the records of calls under way, is its owner's to
// close.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.eachTenant(func(t *tenant) { t.mcp.Close() })
	if s.disconnect != nil {
		s.disconnect()
	}
}
