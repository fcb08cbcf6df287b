package main

import (
	"cmp"
	"context"
	"errors"
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
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/hostcheck"
	"github.com/quiverhq/quiver/internal/tracelog"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/mcp/conformance"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/vars"
)

// addrEnv names the environment variable that sets the address quiver serve listens on.
const addrEnv = "QUIVER_ADDR"

// publicURLEnv names the server's public URL (see quiver serve --public-url).
const publicURLEnv = "QUIVER_PUBLIC_URL"

// configEnv names the environment variable that points at the configuration file.
const configEnv = "QUIVER_CONFIG"

// serveFlags are the flags quiver serve and quiver mcp stdio share.
type serveFlags struct {
	store       storeFlags
	config      *string
	conformance *bool
	journal     *bool
	metricsAddr *string
	// allowedHosts and allowedOrigins are the names and browser origins the server's doors
	// answer to besides local ones (DNS rebinding protection).
	allowedHosts, allowedOrigins *string
}

func addServeFlags(fs *flag.FlagSet) serveFlags {
	return serveFlags{
		store:       addStoreFlags(fs),
		config:      addConfigFlag(fs),
		conformance: fs.Bool("conformance", false, "also serve the fixture tools, resources and prompts of the MCP conformance suite"),
		journal: fs.Bool("journal", true, "with SQLite, record calls through a journal beside the database (DB.journal/): a client gets its answer once the record "+
			"is in the journal, and it reaches the database within milliseconds; --journal=false stores each record before answering"),
		metricsAddr: fs.String("metrics-addr", "", "serve Prometheus metrics (calls, model requests, runs, the journal) at http://HOST:PORT/metrics, "+
			"apart from the clients' address (default: none)"),
		allowedHosts: fs.String("allowed-hosts", "", "comma-separated host names (no port) the server answers to besides localhost, loopback addresses, "+
			"the address a request arrives on and --public-url's host: the names clients and reverse proxies use. Any other Host header is refused "+
			"with 403 on every door but /healthz (DNS rebinding protection) (default: $"+allowedHostsEnv+")"),
		allowedOrigins: fs.String("allowed-origins", "", "comma-separated browser origins (https://console.example.com) that may drive the server "+
			"besides local ones and its own; any other Origin is refused with 403 (default: $"+allowedOriginsEnv+")"),
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
	return fs.String("config", "", "configuration file, for its remote MCP servers (default: $"+configEnv+", else "+server.ConfigFileName+" in the data directory when it exists)")
}

// loadConfig reads the configuration file the flags (or the environment) name; the default
// file in the data directory is optional.
func loadConfig(flagValue string) (*server.File, error) {
	path := flagValue
	if path == "" {
		path = os.Getenv(configEnv)
	}
	if path != "" {
		return server.LoadConfig(path, false)
	}
	dir, err := dataDir()
	if err != nil {
		return &server.File{}, nil // no data directory: no default configuration either
	}
	return server.LoadConfig(filepath.Join(dir, server.ConfigFileName), true)
}

// serverConfig prepares what quiver serve and quiver mcp stdio serve: a registry of their own
// holding the built-in tools (imported tools are added to it), the configured remote MCP
// servers and, with --conformance, the suite's fixtures.
func (a *app) serverConfig(ctx context.Context, f serveFlags) (server.Config, func(), error) {
	file, err := loadConfig(*f.config)
	if err != nil {
		return server.Config{}, nil, err
	}
	remotes, err := file.Remotes()
	if err != nil {
		return server.Config{}, nil, err
	}
	reg := &quiver.Registry{Logger: a.registry.Logger}
	if err := reg.Register(a.registry.Tools()...); err != nil {
		return server.Config{}, nil, err
	}
	cfg := server.Config{Registry: reg, Remotes: remotes, WorkspaceID: localWorkspaceID,
		// Lines logged about a call or a run carry its trace_id and span_id.
		Logger: slog.New(tracelog.Handler(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))}
	if *f.conformance {
		if err := reg.Register(conformance.Tools()...); err != nil {
			return server.Config{}, nil, err
		}
		cfg.MCP = conformance.ServerOptions()
		cfg.SetupMCP = conformance.Setup
	}
	st, err := f.store.open(ctx)
	if err != nil {
		return server.Config{}, nil, err
	}
	cfg.Store = st
	// Calls over MCP resolve variables as every other door does: on the session's thread, then
	// its agent, user and the instance (quiver vars set).
	keys, err := vars.LoadKeyring(st.KeyPath)
	if err != nil {
		st.Close()
		return server.Config{}, nil, err
	}
	cfg.Resolver = vars.New(st, keys)
	if *f.journal && st.SQLitePath != "" {
		cfg.JournalDir = st.SQLitePath + ".journal"
	}
	if usesOAuth(remotes) {
		grants, err := oauthGrants(st.KeyPath)
		if err != nil {
			st.Close()
			return server.Config{}, nil, err
		}
		cfg.OAuthGrants = grants
	}
	return cfg, func() { st.Close() }, nil
}

func (a *app) serve(ctx context.Context, args []string) (int, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "", "HOST:PORT to listen on (default: $"+addrEnv+", else "+server.DefaultAddr+")")
	maxBody := fs.Int64("max-request-bytes", 0, "largest HTTP request body accepted on /mcp, in bytes (default 4 MiB)")
	maxResult := fs.Int("max-result-bytes", 0, "largest result of a call, all its parts together, in bytes; the rest is cut with a note saying how much (default 1 MiB)")
	publicURL := fs.String("public-url", "", "the server's URL as browsers reach it, for OAuth redirects from remote MCP servers' authorization; "+
		"its host is also accepted in the Host header of MCP requests (default: $"+publicURLEnv+", else http://ADDR)")
	maxSessions := fs.Int("max-sessions", mcp.DefaultMaxSessions, "MCP sessions open at once on the server, all workspaces together; a client that would open another gets 503 until some close or expire (0: no limit)")
	maxPerWorkspace := fs.Int("max-sessions-per-workspace", 0, "each workspace's share of --max-sessions, which no workspace can exceed (503) (default: a quarter of --max-sessions, at least 64 or all of it)")
	maxPerClient := fs.Int("max-sessions-per-client", mcp.DefaultMaxSessionsPerOwner, "MCP sessions one client (IP address) has open at once; beyond it, 429 (0: no limit)")
	idleTimeout := fs.Duration("session-idle-timeout", mcp.DefaultSessionIdleTimeout, "close an MCP session after this long without a request (0: never)")
	agentsDir := fs.String("agents", "", "the directory of agent and prompt definitions the API runs (default: $QUIVER_AGENTS, else ./"+defaultAgentsDir+" when it exists)")
	insecure := fs.Bool("insecure-local", false, "serve without API keys: anyone who can reach the port calls every tool, run_code included; "+
		"refused unless --addr is a loopback address")
	f := addServeFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return exitUsage, err
	}
	if len(pos) > 0 {
		return exitUsage, usagef("serve takes no arguments, got %q", pos[0])
	}
	if *addr == "" {
		*addr = os.Getenv(addrEnv)
	}
	if *addr == "" {
		*addr = server.DefaultAddr
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return exitUsage, usagef("--addr %q must be HOST:PORT, like 127.0.0.1:7411", *addr)
	}
	if ip := net.ParseIP(host); *insecure && (ip == nil || !ip.IsLoopback()) && host != "localhost" {
		return exitUsage, usagef("--insecure-local serves without API keys, so only on a loopback address (--addr 127.0.0.1:PORT), not %s", *addr)
	}
	if *maxResult < 0 {
		return exitUsage, usagef("--max-result-bytes must not be negative (0: the default, 1 MiB)")
	}
	if *maxBody < 0 {
		return exitUsage, usagef("--max-request-bytes must not be negative")
	}
	for _, n := range []struct {
		flag string
		v    *int
	}{{"max-sessions", maxSessions}, {"max-sessions-per-client", maxPerClient}} {
		switch {
		case *n.v < 0:
			return exitUsage, usagef("--%s must not be negative (0: no limit)", n.flag)
		case *n.v == 0:
			*n.v = -1 // server.Config's "no cap"
		}
	}
	if *maxPerWorkspace < 0 {
		return exitUsage, usagef("--max-sessions-per-workspace must not be negative (0: the default)")
	}
	switch {
	case *idleTimeout < 0:
		return exitUsage, usagef("--session-idle-timeout must not be negative (0: never)")
	case *idleTimeout == 0:
		*idleTimeout = -1 // server.Config's "never"
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopMetrics, err := a.startMetrics(f)
	if err != nil {
		return exitError, err
	}
	defer stopMetrics()
	cfg, closeStore, err := a.serverConfig(ctx, f)
	if err != nil {
		return exitError, err
	}
	defer closeStore()
	cfg.Addr = *addr
	cfg.MaxRequestBytes, cfg.MaxResultBytes = *maxBody, *maxResult
	cfg.PublicURL = cmp.Or(*publicURL, os.Getenv(publicURLEnv))
	guard, err := f.hostPolicy()
	if err != nil {
		return exitUsage, err
	}
	cfg.AllowedHosts, cfg.AllowedOrigins = guard.Hosts, guard.Origins
	cfg.MaxSessions, cfg.MaxSessionsPerOwner, cfg.SessionIdleTimeout = *maxSessions, *maxPerClient, *idleTimeout
	cfg.MaxSessionsPerWorkspace = *maxPerWorkspace
	if !*insecure {
		keys, ok := cfg.Store.(backend)
		if !ok {
			return exitError, errors.New("the database keeps no API keys")
		}
		if err := ensureFirstKey(ctx, keys, a.stderr); err != nil {
			return exitError, err
		}
		cfg.Auth = &server.Authenticator{Keys: keys}
	}
	regs := &serverRegistries{}
	stopRuns, err := a.startRuns(ctx, &cfg, *agentsDir, regs)
	if err != nil {
		return exitError, err
	}
	defer stopRuns()
	srv, err := server.New(ctx, cfg)
	regs.set(srv)
	if err != nil {
		return exitError, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		srv.Close()
		return exitError, fmt.Errorf("listening on %s: %w (is another quiver serve running? choose another port with --addr)", cfg.Addr, err)
	}
	releaseStartupGarbage()
	fmt.Fprintf(a.stderr, "quiver: serving MCP at http://%s/mcp (health: /healthz); Ctrl-C stops\n", ln.Addr())
	if *insecure {
		fmt.Fprintln(a.stderr, "quiver: WARNING: --insecure-local: no API key is asked for; anything on this machine can call every tool, run_code included")
	}
	if err := srv.Serve(ctx, ln); err != nil {
		return exitError, err
	}
	return exitOK, nil
}

// mcpStdio serves the tools over MCP on standard input and output, recording calls like
// quiver serve does.
func (a *app) mcpStdio(ctx context.Context, args []string) (int, error) {
	fs := flag.NewFlagSet("mcp stdio", flag.ContinueOnError)
	f := addServeFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return exitUsage, err
	}
	if len(pos) > 0 {
		return exitUsage, usagef("mcp stdio takes no arguments, got %q", pos[0])
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopMetrics, err := a.startMetrics(f)
	if err != nil {
		return exitError, err
	}
	defer stopMetrics()
	cfg, closeStore, err := a.serverConfig(ctx, f)
	if err != nil {
		return exitError, err
	}
	defer closeStore()
	// No HTTP server here to come back to from an authorization: listen at the redirect URL
	// while a user authorizes.
	az := newTerminalAuthorizer(a.stderr)
	defer az.Close()
	cfg.Authorizer, cfg.PublicURL = az, defaultBaseURL()
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return exitError, err
	}
	defer srv.Close()
	releaseStartupGarbage()
	// A line is capped like a request body on /mcp.
	maxLine := cmp.Or(cfg.MaxRequestBytes, sdk.DefaultMaxRequestBodyBytes)
	err = srv.MCP().Run(ctx, mcp.StdioTransport(a.stdin, a.stdout, int(maxLine)))
	if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		return exitError, err
	}
	return exitOK, nil
}

// mcpConformanceClient plays one client scenario of the MCP conformance suite, which runs it
// as "COMMAND URL" with the scenario in MCP_CONFORMANCE_SCENARIO.
func (a *app) mcpConformanceClient(ctx context.Context, args []string) (int, error) {
	if len(args) != 1 {
		return exitUsage, usagef("mcp conformance-client needs the server URL")
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	if scenario == "" {
		return exitUsage, usagef("MCP_CONFORMANCE_SCENARIO is not set (the conformance suite sets it)")
	}
	logger := slog.New(slog.NewTextHandler(a.stderr, nil))
	if err := conformance.RunClient(ctx, args[0], scenario, logger); err != nil {
		return exitError, fmt.Errorf("scenario %s: %w", scenario, err)
	}
	return exitOK, nil
}

// importConfigured imports the tools of the remote MCP servers in the configuration file (config,
// else $QUIVER_CONFIG, else the data directory's), when there is one, into the app's registry,
// for quiver call and quiver tools. The returned function disconnects.
func (a *app) importConfigured(ctx context.Context, sf storeFlags, config string) (func(), error) {
	file, err := loadConfig(config)
	if err != nil {
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
		remotes = server.WithOAuthRedirect(remotes, defaultBaseURL())
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
// internal/cmd/rssbench). It costs one garbage collection, about a millisecond.
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
// database) with the agents of dir, and makes the threads the API creates, checking an agent's
// required variables. A prompt that names no model uses $QUIVER_MODEL.
func (a *app) startRuns(ctx context.Context, cfg *server.Config, dir string, regs *serverRegistries) (func(), error) {
	st, ok := cfg.Store.(*opened)
	resolver, rok := cfg.Resolver.(*vars.Resolver)
	if !ok || !rok {
		return func() {}, nil
	}
	catalog, where, err := loadCatalog(dir)
	if err != nil {
		return nil, err
	}
	if catalog != nil {
		for _, path := range catalog.Skipped {
			fmt.Fprintf(a.stderr, "quiver: agents: %s is not an agent or prompt definition (none of its fields is a definition's): skipped\n", path)
		}
	}
	agents := func(_ context.Context, name string) (*agent.Agent, error) {
		if catalog == nil {
			return nil, fmt.Errorf("no agent %q: this server has no agents (quiver serve --agents DIR, $QUIVER_AGENTS, or ./%s)", name, defaultAgentsDir)
		}
		ag, ok := catalog.Agent(name)
		if !ok {
			return nil, fmt.Errorf("no agent %q in %s (agents: %v)", name, where, catalog.Names())
		}
		return ag, nil
	}
	// The background runs also resume prompt tools' flows (a child thread run by its prompt,
	// after a pause or a crash), which the API's clients cannot start: only agents are theirs.
	jobAgents := func(ctx context.Context, name string) (*agent.Agent, error) {
		if ag, err := agents(ctx, name); err == nil {
			return ag, nil
		}
		if ag, ok := catalog.Lookup(name); ok {
			return ag, nil
		}
		return agents(ctx, name)
	}
	var fallback model.Model
	if spec := os.Getenv("QUIVER_MODEL"); spec != "" {
		if fallback, err = model.Open(spec); err != nil {
			return nil, fmt.Errorf("QUIVER_MODEL: %w", err)
		}
	}
	// Runs call the tools of their thread's workspace, which the server holds; rescued runs
	// may start before the server exists, and wait for it.
	// Non-blocking sub-agents and the parents their results wake run as jobs too (jobs sets the
	// runner's Background when it starts).
	runner := &agent.Runner{Store: st, Registry: cfg.Registry, Resolver: resolver, Variables: resolver, Model: fallback,
		Registries: regs.registry, Catalog: catalog, Logger: cfg.Logger}
	jc := jobs.Config{Runner: runner, Agents: jobAgents, Logger: cfg.Logger}
	// The retention purge (deleted tools whose tier has passed) runs with the background runs.
	jc.Entities, _ = cfg.Store.(store.Entities)
	var j *jobs.Jobs
	var pool *pgxpool.Pool
	if st.SQLitePath != "" {
		j, err = jobs.StartSQLite(ctx, st.SQLitePath, jc)
	} else {
		if pool, err = pgxpool.New(ctx, st.DSN); err != nil {
			return nil, fmt.Errorf("connecting the background runs to PostgreSQL: %w", err)
		}
		if j, err = jobs.StartPostgres(ctx, pool, jc); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		return nil, err
	}
	cfg.Runs, cfg.Agents, cfg.Runner = j, agents, runner
	cfg.CreateThread = func(ctx context.Context, th *store.Thread, ag *agent.Agent) error {
		var decls []quiver.Variable
		if ag != nil {
			decls, ctx = ag.Prompt.Variables, vars.WithPrompt(ctx, ag.Prompt.Name)
		}
		return resolver.CreateThread(ctx, th, decls)
	}
	return func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = j.Stop(stop)
		if pool != nil {
			pool.Close()
		}
	}, nil
}

// loadCatalog loads the agents of dir, else of $QUIVER_AGENTS, else of ./agents when it exists
// (nil then, without an error, when it does not).
func loadCatalog(dir string) (*agent.Catalog, string, error) {
	explicit := dir != ""
	if dir == "" {
		dir = os.Getenv("QUIVER_AGENTS")
		explicit = dir != ""
	}
	if dir == "" {
		dir = defaultAgentsDir
	}
	if _, err := os.Stat(dir); err != nil && !explicit {
		return nil, dir, nil
	}
	c, err := agent.LoadDir(dir)
	if err != nil {
		return nil, dir, fmt.Errorf("the agents of %s: %w", dir, err)
	}
	return c, dir, nil
}

// serverRegistries gives background runs the tools of their workspace once the server that
// holds them exists: the job engine starts (and rescues runs a crash left) before the server
// is built, so a run that asks first waits.
type serverRegistries struct {
	once  sync.Once
	ready chan struct{}
	mu    sync.Mutex
	srv   *server.Server
}

// set makes the registries available (srv nil: the server failed to start, and runs that wait
// fail).
func (r *serverRegistries) set(srv *server.Server) {
	r.init()
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	close(r.ready)
}

func (r *serverRegistries) init() { r.once.Do(func() { r.ready = make(chan struct{}) }) }

func (r *serverRegistries) registry(ctx context.Context, workspaceID string) (*quiver.Registry, error) {
	r.init()
	select {
	case <-r.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r.mu.Lock()
	srv := r.srv
	r.mu.Unlock()
	if srv == nil {
		return nil, errors.New("the server did not start")
	}
	return srv.WorkspaceRegistry(ctx, workspaceID)
}
