package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/internal/hostcheck"
	"github.com/quiverhq/quiver/internal/tracelog"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/mcp/conformance"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
)

// addrEnv names the environment variable that sets the address quiver serve listens on.
const addrEnv = "QUIVER_ADDR"

// defaultAddr is where quiver serve listens unless told otherwise; the commands that take users
// through a remote's OAuth without a server listen there too, so that one redirect URL serves
// both.
const defaultAddr = server.DefaultAddr

// publicURLEnv names the server's public URL (see quiver serve --public-url).
const publicURLEnv = "QUIVER_PUBLIC_URL"

// configEnv names the environment variable that points at the configuration file.
const configEnv = "QUIVER_CONFIG"

// serveFlags are the flags quiver serve and quiver mcp stdio share, besides the store flags.
type serveFlags struct {
	config      *string
	conformance *bool
	journal     *bool
	metricsAddr *string
	pprofAddr   *string
	// allowedHosts and allowedOrigins are the names and browser origins the server's doors
	// answer to besides local ones (DNS rebinding protection).
	allowedHosts, allowedOrigins *string
	// openAPIInternal are the internal hosts the workspaces' OpenAPI tools may reach.
	openAPIInternal *string
}

func addServeFlags(fs *flag.FlagSet) serveFlags {
	return serveFlags{
		config:      addConfigFlag(fs),
		conformance: fs.Bool("conformance", false, "also serve the fixture tools, resources and prompts of the MCP conformance suite"),
		journal: fs.Bool("journal", true, "with SQLite, record calls through a journal beside the database (DB.journal/): a client gets its answer once the record "+
			"is in the journal, and it reaches the database within milliseconds; --journal=false stores each record before answering"),
		metricsAddr: fs.String("metrics-addr", "", "serve Prometheus metrics (calls, model requests, runs, the journal) at http://HOST:PORT/metrics, "+
			"apart from the clients' address (default: none)"),
		pprofAddr: fs.String("pprof-addr", "", "serve the Go runtime's CPU, heap and other profiles (net/http/pprof) at http://HOST:PORT/debug/pprof/, "+
			"on a loopback address only (default: none)"),
		allowedHosts: fs.String("allowed-hosts", "", "comma-separated host names (no port) the server answers to besides localhost, loopback addresses, "+
			"the address a request arrives on and --public-url's host: the names clients and reverse proxies use. Any other Host header is refused "+
			"with 403 on every door but /healthz (DNS rebinding protection) (default: $"+allowedHostsEnv+")"),
		allowedOrigins: fs.String("allowed-origins", "", "comma-separated browser origins (https://console.example.com) that may drive the server "+
			"besides local ones and its own; any other Origin is refused with 403 (default: $"+allowedOriginsEnv+")"),
		openAPIInternal: fs.String("openapi-internal-hosts", "", "comma-separated hosts (HOST or HOST:PORT) that the tools of OpenAPI documents a workspace "+
			"imports through /v1 may reach although their addresses are internal (loopback, private, link-local); every other internal address is refused. "+
			"The configuration's openapi block is the operator's and reaches any address"),
	}
}

// allowedHostsEnv and allowedOriginsEnv are the defaults of --allowed-hosts and
// --allowed-origins.
const (
	allowedHostsEnv   = "QUIVER_ALLOWED_HOSTS"
	allowedOriginsEnv = "QUIVER_ALLOWED_ORIGINS"
)

// hostPolicy reads --allowed-hosts and --allowed-origins (or their variables), refusing what
// is not a bare host name or an origin.
func (f serveFlags) hostPolicy() (hostcheck.Policy, error) {
	var p hostcheck.Policy
	for _, h := range splitList(cmp.Or(*f.allowedHosts, os.Getenv(allowedHostsEnv))) {
		if strings.ContainsAny(h, ":/ @") && net.ParseIP(h) == nil {
			return p, usagef("--allowed-hosts: %q is not a host name: give names without scheme, port or path, like quiver.example.com", h)
		}
		p.Hosts = append(p.Hosts, h)
	}
	for _, o := range splitList(cmp.Or(*f.allowedOrigins, os.Getenv(allowedOriginsEnv))) {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return p, usagef("--allowed-origins: %q is not an origin: give scheme://host[:port], like https://console.example.com", o)
		}
		p.Origins = append(p.Origins, u.Scheme+"://"+u.Host)
	}
	return p, nil
}

// splitList splits a comma-separated list, dropping empty items and spaces around them.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// addConfigFlag adds --config, which names the configuration file (its remote MCP servers):
// every command that serves or calls tools takes it.
func addConfigFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "configuration file, for its remote MCP servers (default: $"+configEnv+", else "+config.FileName+" in the data directory when it exists)")
}

// loadConfig reads the configuration file the flags (or the environment) name; the default
// file in the data directory is optional.
func loadConfig(flagValue string) (*config.File, error) {
	path, named, err := configPath(flagValue)
	if err != nil {
		return &config.File{}, nil // no data directory: no default configuration either
	}
	return config.Load(path, !named)
}

// configPath is where the configuration file is: --config, else $QUIVER_CONFIG (named), else
// quiver.yaml in the data directory.
func configPath(flagValue string) (path string, named bool, _ error) {
	if path = cmp.Or(flagValue, os.Getenv(configEnv)); path != "" {
		return path, true, nil
	}
	dir, err := dataDir()
	if err != nil {
		return "", false, err
	}
	return filepath.Join(dir, config.FileName), false, nil
}

// serving is what quiver serve and quiver mcp stdio serve, whatever the transport: the platform
// (see assemble) over a registry of their own holding the built-in tools and, with
// --conformance, the suite's fixtures, serving the fleet's configuration (its agents, OpenAPI
// and A2A tools and governance; its remote MCP servers once the door connects them, taking
// users through their OAuth); and the database the store flags name.
type serving struct {
	p      *platform.Platform
	db     *opened
	logger *slog.Logger
	// grants keeps the OAuth grants of the fleet's remote MCP servers across restarts.
	grants mcp.TokenStore
	// journalDir is where calls are recorded before they reach the database (--journal, on
	// SQLite; "" for none): the door opens it once it is the database's only server.
	journalDir string
	// mcp and setupMCP are the MCP server's options and additions (the conformance suite's).
	mcp      *mcp.ServerOptions
	setupMCP func(*mcp.Server)
	// stopWatch stops serving each new version of the fleet's configuration (adoptFleet).
	stopWatch func()
}

// prepareServed prepares what quiver serve and quiver mcp stdio serve (see serving): settings
// are the platform's the door sets (its result limit).
func (a *app) prepareServed(ctx context.Context, inv *invocation, f serveFlags, ag agents, settings ...func(*platform.Config)) (*serving, error) {
	file, err := loadConfig(*f.config)
	if err != nil {
		return nil, err
	}
	if a.rules, err = file.Rules(); err != nil {
		return nil, err
	}
	sv := &serving{}
	reg, err := a.servedRegistry(*f.conformance)
	if err != nil {
		return nil, err
	}
	level, err := logLevel()
	if err != nil {
		return nil, err
	}
	// Lines logged about a call or a run carry its trace_id and span_id; the libraries'
	// routine lines are kept for debugging (see quietLibraries).
	sv.logger = slog.New(quietLibraries{tracelog.Handler(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))})
	if *f.conformance {
		sv.mcp, sv.setupMCP = conformance.ServerOptions(), conformance.Setup
	}
	if sv.db, err = inv.open(ctx); err != nil {
		return nil, err
	}
	if sv.p, err = assemble(sv.db, reg, ag, sv.logger, splitList(*f.openAPIInternal), settings...); err != nil {
		return nil, err
	}
	if err := sv.p.SetOperatorRules(ctx, a.rules); err != nil {
		return nil, err
	}
	// The agents, tool sources and governance are the fleet's configuration, which the
	// database keeps: the node's files are applied when it has none.
	agentsDir := ""
	if ag.catalog != nil {
		agentsDir = ag.where
	}
	if sv.stopWatch, err = a.adoptFleet(ctx, sv.p, agentsDir, *f.config, ag.applyFiles); err != nil {
		return nil, err
	}
	if *f.journal && sv.db.SQLitePath != "" {
		sv.journalDir = sv.db.SQLitePath + ".journal"
	}
	// A version applied later may add a server that uses OAuth.
	if sv.grants, err = oauthGrants(sv.db.KeyPath); err != nil {
		return nil, err
	}
	return sv, nil
}

// servedRegistry is the registry of the tools every workspace served shares beside the fleet's
// configuration's (which the platform builds: see adoptFleet): the app's and, with
// conformance, the conformance suite's fixtures.
func (a *app) servedRegistry(withConformance bool) (*quiver.Registry, error) {
	reg := &quiver.Registry{Logger: a.registry.Logger}
	if err := reg.Register(a.registry.Tools()...); err != nil {
		return nil, err
	}
	if withConformance {
		if err := reg.Register(conformance.Tools()...); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// openJournal opens the journal calls are recorded through, when there is one; the platform's
// Close closes it.
func (sv *serving) openJournal(ctx context.Context) error {
	if sv.journalDir == "" {
		return nil
	}
	return sv.p.OpenJournal(ctx, sv.journalDir)
}

// newServer opens the journal and builds the HTTP server over the platform with cfg. Once the
// server has shut down, the caller closes the platform, which stores what the journal holds.
func (sv *serving) newServer(ctx context.Context, cfg server.Config) (*server.Server, error) {
	if err := sv.openJournal(ctx); err != nil {
		return nil, err
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		_ = sv.p.Close()
		return nil, err
	}
	return srv, nil
}

// serveRequest is what quiver serve was asked to do: its flags, checked, with the defaults
// and the "no limit" values server.Config takes.
type serveRequest struct {
	addr, publicURL, agentsDir              string
	maxBody                                 int64
	maxResult, maxSessions, maxPerWorkspace int
	maxPerClient                            int
	idleTimeout, drainDelay, usageRetention time.Duration
	insecure                                bool
	flags                                   serveFlags
	oidc                                    *oidcFlags
}

// parseServe reads and checks quiver serve's flags.
func parseServe(inv *invocation) (serveRequest, error) {
	var r serveRequest
	fs := inv.fs
	fs.StringVar(&r.addr, "addr", "", "HOST:PORT to listen on (default: $"+addrEnv+", else "+defaultAddr+")")
	fs.Int64Var(&r.maxBody, "max-request-bytes", 0, "largest HTTP request body accepted on /mcp, in bytes (default 4 MiB)")
	fs.IntVar(&r.maxResult, "max-result-bytes", 0, "largest result of a call, all its parts together, in bytes; the rest is cut with a note saying how much (default 1 MiB)")
	fs.StringVar(&r.publicURL, "public-url", "", "the server's URL as browsers reach it, for OAuth redirects from remote MCP servers' authorization; "+
		"its host is also accepted in the Host header of MCP requests (default: $"+publicURLEnv+", else http://ADDR)")
	fs.IntVar(&r.maxSessions, "max-sessions", mcp.DefaultMaxSessions, "MCP sessions open at once on the server, all workspaces together; a client that would open another gets 503 until some close or expire (0: no limit)")
	fs.IntVar(&r.maxPerWorkspace, "max-sessions-per-workspace", 0, "each workspace's share of --max-sessions, which no workspace can exceed (503) (default: a quarter of --max-sessions, at least 64 or all of it)")
	fs.IntVar(&r.maxPerClient, "max-sessions-per-client", mcp.DefaultMaxSessionsPerOwner, "MCP sessions one client (IP address) has open at once; beyond it, 429 (0: no limit)")
	fs.DurationVar(&r.idleTimeout, "session-idle-timeout", mcp.DefaultSessionIdleTimeout, "close an MCP session after this long without a request (0: never)")
	fs.DurationVar(&r.drainDelay, "drain-delay", 0, "on SIGTERM, keep serving this long with /readyz answering 503 before stopping: the time a load balancer takes to send new work elsewhere (0: stop at once)")
	fs.DurationVar(&r.usageRetention, "usage-retention", platform.DefaultUsageRetention, "how long usage (GET /v1/usage) is kept by the hour and the day; "+
		"by the minute, 48 hours")
	fs.StringVar(&r.agentsDir, "agents", "", "the directory of agent and prompt definitions the API runs (default: $QUIVER_AGENTS, else ./"+defaultAgentsDir+" when it exists)")
	fs.BoolVar(&r.insecure, "insecure-local", false, "serve without API keys: anyone who can reach the port calls every tool, run_code included; "+
		"refused unless --addr is a loopback address")
	r.flags = addServeFlags(fs)
	r.oidc = addOIDCFlags(fs)
	if err := inv.parseNone(""); err != nil {
		return r, err
	}
	r.addr = cmp.Or(r.addr, os.Getenv(addrEnv), defaultAddr)
	host, _, err := net.SplitHostPort(r.addr)
	if err != nil {
		return r, usagef("--addr %q must be HOST:PORT, like 127.0.0.1:7411", r.addr)
	}
	if ip := net.ParseIP(host); r.insecure && (ip == nil || !ip.IsLoopback()) && host != "localhost" {
		return r, usagef("--insecure-local serves without API keys, so only on a loopback address (--addr 127.0.0.1:PORT), not %s", r.addr)
	}
	return r, r.checkLimits()
}

// checkLimits refuses negative limits and turns the flags' "0: no limit" and "0: never" into
// server.Config's -1.
func (r *serveRequest) checkLimits() error {
	if r.maxResult < 0 {
		return usagef("--max-result-bytes must not be negative (0: the default, 1 MiB)")
	}
	if r.usageRetention < time.Hour {
		return usagef("--usage-retention must be at least 1h, like 2160h for 90 days")
	}
	if r.maxBody < 0 {
		return usagef("--max-request-bytes must not be negative")
	}
	for _, n := range []struct {
		flag string
		v    *int
	}{{"max-sessions", &r.maxSessions}, {"max-sessions-per-client", &r.maxPerClient}} {
		switch {
		case *n.v < 0:
			return usagef("--%s must not be negative (0: no limit)", n.flag)
		case *n.v == 0:
			*n.v = -1
		}
	}
	if r.maxPerWorkspace < 0 {
		return usagef("--max-sessions-per-workspace must not be negative (0: the default)")
	}
	switch {
	case r.drainDelay < 0:
		return usagef("--drain-delay must not be negative (0: stop at once)")
	case r.idleTimeout < 0:
		return usagef("--session-idle-timeout must not be negative (0: never)")
	case r.idleTimeout == 0:
		r.idleTimeout = -1
	}
	return nil
}

func (a *app) serve(ctx context.Context, inv *invocation) (int, error) {
	r, err := parseServe(inv)
	if err != nil {
		return exitUsage, err
	}
	f := r.flags
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopWatching, err := a.startWatching(f)
	if err != nil {
		return exitError, err
	}
	defer stopWatching()
	// The database closes (checkpointing SQLite's log) before the signals are let go: a second
	// SIGTERM meanwhile is ignored, as during the rest of the shutdown. Dispatch's close is then
	// a no-op.
	defer inv.close()
	ag, err := loadAgents(r.agentsDir, a.stderr)
	if err != nil {
		return exitError, err
	}
	// Calls over MCP resolve variables as every other door does: on the session's thread, then
	// its agent, user and the instance (quiver vars set); a deferred sub-agent's are provided
	// through the API.
	ag.variablesAt = server.VariablesRequestPath
	ag.applyFiles = true
	sv, err := a.prepareServed(ctx, inv, f, ag, func(c *platform.Config) {
		c.MaxResultBytes, c.UsageRetention = r.maxResult, r.usageRetention
	})
	if err != nil {
		return exitError, err
	}
	defer sv.stopWatch()
	db := sv.db
	if db.SQLitePath != "" {
		release, err := lockServing(db.SQLitePath)
		if err != nil {
			return exitError, err
		}
		defer release()
	}
	cfg, err := r.serverConfig(sv)
	if err != nil {
		return exitUsage, err
	}
	file, err := loadConfig(*f.config) // read again for its oidc block; prepareServed took its remotes
	if err != nil {
		return exitError, err
	}
	tokens, err := r.oidc.tokenAuth(ctx, db, cmp.Or(cfg.PublicURL, "http://"+cfg.Addr), r.insecure, file)
	if err != nil {
		return exitUsage, err
	}
	// The server listens before the first key is made: a start that cannot listen must not make
	// the one key that is shown only once, and then exit with it scrolled away.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return exitError, listenFailed(ctx, cfg.Addr, err, db, r.insecure)
	}
	if !r.insecure {
		cfg.Auth = &server.Authenticator{Keys: db, Tokens: tokens}
	}
	stopRuns := func() {}
	defer func() { stopRuns() }()
	// The runs start once the remote MCP servers had their first connection attempt: a run a
	// restart resumes finds their tools as a call made at start-up does.
	cfg.StartRuns = func(ctx context.Context) error {
		stop, err := startRuns(ctx, sv.p, db)
		if err == nil {
			stopRuns = stop
		}
		return err
	}
	srv, err := sv.newServer(ctx, cfg)
	if err != nil {
		ln.Close()
		return exitError, err
	}
	// Once the server has shut down, what the journal holds is stored.
	defer sv.p.Close()
	// The key is made last, when only serving is left, and shown with the addresses below the
	// start-up's logs, where it is not missed.
	var first *firstKey
	if !r.insecure {
		if first, err = makeFirstKey(ctx, db); err != nil {
			srv.Close()
			ln.Close()
			return exitError, err
		}
	}
	releaseStartupGarbage()
	fmt.Fprint(a.stderr, serveBanner(ln.Addr(), db, first, r.insecure))
	if err := srv.Serve(ctx, ln); err != nil {
		if first != nil {
			err = fmt.Errorf("%w (the API key shown above stays valid: it is stored in the database)", err)
		}
		return exitError, err
	}
	return exitOK, nil
}

// serverConfig is the HTTP server's configuration: the platform and remotes of sv, and the
// doors' settings of the request.
func (r *serveRequest) serverConfig(sv *serving) (server.Config, error) {
	cfg := server.Config{Platform: sv.p, WorkspaceID: localWorkspaceID, Logger: sv.logger,
		MCP: sv.mcp, SetupMCP: sv.setupMCP, Addr: r.addr, MaxRequestBytes: r.maxBody,
		PublicURL:   cmp.Or(r.publicURL, os.Getenv(publicURLEnv)),
		MaxSessions: r.maxSessions, MaxSessionsPerOwner: r.maxPerClient, MaxSessionsPerWorkspace: r.maxPerWorkspace,
		SessionIdleTimeout: r.idleTimeout, DrainDelay: r.drainDelay, OAuthGrants: sv.grants}
	guard, err := r.flags.hostPolicy()
	if err != nil {
		return cfg, err
	}
	cfg.AllowedHosts, cfg.AllowedOrigins = guard.Hosts, guard.Origins
	return cfg, nil
}

// importConfigured adds the tools of the OpenAPI documents and imports those of the remote MCP
// servers in the configuration file (config,
// else $QUIVER_CONFIG, else the data directory's), when there is one, into the app's registry,
// for quiver call and quiver tools. The returned function disconnects.
func (a *app) importConfigured(ctx context.Context, sf storeFlags, config string) (func(), error) {
	file, err := loadConfig(config)
	if err != nil {
		return nil, err
	}
	if a.rules, err = file.Rules(); err != nil {
		return nil, err
	}
	if err := registerOpenAPI(ctx, file, a.registry, a.stderr); err != nil {
		return nil, err
	}
	if err := registerA2A(ctx, file, a.registry, a.stderr); err != nil {
		return nil, err
	}
	remotes, err := file.Remotes()
	if err != nil || len(remotes) == 0 {
		return func() {}, err
	}
	opts := &mcp.ImportOptions{
		Logger: slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	}
	closeAuth := func() {}
	if usesOAuth(remotes) {
		remotes = mcp.WithOAuthRedirect(remotes, defaultBaseURL())
		keyPath, err := sf.keyPath()
		if err != nil {
			return nil, err
		}
		if opts.Tokens, err = oauthGrants(keyPath); err != nil {
			return nil, err
		}
		az := newTerminalAuthorizer(a.stderr)
		opts.Authorizer, closeAuth = az, az.Close
	}
	im, err := mcp.Import(ctx, a.registry, remotes, opts)
	if err != nil {
		closeAuth()
		return nil, err
	}
	a.imported = im
	// A remote waiting for the user to authorize Quiver is waited for: the command was run to
	// use it. Others that are down give error results, as in the server.
	for _, st := range im.Status() {
		if st.AuthorizationURL != "" {
			wctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
			err := im.WaitConnected(wctx)
			cancel()
			if err != nil {
				fmt.Fprintf(a.stderr, "quiver: warning: %v\n", err)
			}
			break
		}
	}
	return func() { im.Close(); closeAuth() }, nil
}

// releaseStartupGarbage returns the heap that start-up used and dropped to the operating
// system, once, before a server starts answering. The package initialisers of the libraries
// linked in (the JSON Schema metaschemas, the provider SDKs' type registries, ...) and the
// opening of the store allocate about 4 MB of which about 1.5 MB stays live; the Go runtime
// would otherwise keep the rest resident until its scavenger gets to it, and a server that
// then sits idle holds it for nothing (about 1.2 MB of its idle RSS, measured with
// bench/peers/cmd/serverbench). It costs one garbage collection, about a millisecond.
func releaseStartupGarbage() { debug.FreeOSMemory() }

// startMetrics serves metrics when --metrics-addr asks for them; the returned function stops.
func (a *app) startMetrics(f serveFlags) (func(), error) {
	if *f.metricsAddr == "" {
		return func() {}, nil
	}
	if _, _, err := net.SplitHostPort(*f.metricsAddr); err != nil {
		return nil, usagef("--metrics-addr %q must be HOST:PORT, like 127.0.0.1:9464", *f.metricsAddr)
	}
	guard, err := f.hostPolicy()
	if err != nil {
		return nil, err
	}
	stop, err := startMetrics(*f.metricsAddr, guard, a.stderr)
	if err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stop(ctx)
	}, nil
}

// startRuns runs agents in the background for the API (package jobs: River, in the same
// database as the store). The returned function stops them.
func startRuns(ctx context.Context, p *platform.Platform, db *opened) (func(), error) {
	var pool *pgxpool.Pool
	err := p.StartJobs(ctx, func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) {
		if db.SQLitePath != "" {
			return jobs.StartSQLite(ctx, db.SQLitePath, c)
		}
		var err error
		if pool, err = pgxpool.New(ctx, db.DSN); err != nil {
			return nil, fmt.Errorf("connecting the background runs to PostgreSQL: %w", err)
		}
		j, err := jobs.StartPostgres(ctx, pool, c)
		if err != nil {
			pool.Close()
		}
		return j, err
	})
	if err != nil {
		return nil, err
	}
	return func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Stop(stop)
		if pool != nil {
			pool.Close()
		}
	}, nil
}
