// Package platform is Quiver assembled: the store, the tools each workspace calls and the
// dispatcher every door calls them through, the recording of calls (through a journal when
// there is one), the variable resolver, the agents, the runner, the background runs and the
// fleet's shared configuration, built once and the same way for quiver serve, quiver mcp
// stdio, quiver run, the CLI's other commands and programs that embed Quiver. The doors (the
// HTTP API, MCP over HTTP or stdio, A2A, the console, the CLI) hold a Platform and translate
// to its operations.
//
// Its operations (tools, functions, workspaces, members, keys, threads, runs, decisions,
// variables, governance) take the Actor who asks and check their own rules (role, workspace,
// input), returning an *Error whose Kind and Field each door turns into its own answer. A door
// holds no rule.
package platform

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"golang.org/x/sync/singleflight"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/platform/connect"
	"github.com/quiverhq/quiver/platform/limits"
	"github.com/quiverhq/quiver/platform/usage"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/journal"
	"github.com/quiverhq/quiver/store/vars"
	"github.com/quiverhq/quiver/thread"
)

// Config is what a Platform is assembled from. Store is required.
type Config struct {
	// Store keeps threads, messages, files, workspaces, their stored tools, keys and
	// variables.
	Store store.Backend
	// Registry holds the tools every workspace shares (built-in, configured and imported);
	// quiver.Default when nil.
	Registry *quiver.Registry
	// Resolver supplies the values of the tools' declared variables, and those a thread for an
	// agent is checked against when it is created; nil resolves none, so that a thread for an
	// agent that requires variables is refused.
	Resolver *vars.Resolver
	// Catalog holds the agents runs are started with and the prompts they call as tools; nil
	// holds none. CatalogDir says where it was loaded from, for errors that name an agent.
	Catalog    *agent.Catalog
	CatalogDir string
	// Model runs the prompts that name no model; nil leaves them unable to run.
	Model model.Model
	// OpenModel opens the model a prompt names; nil means model.Open.
	OpenModel func(spec string) (model.Model, error)
	// VariablesRequestURL names where the variables a deferred sub-agent waits for are
	// provided (server.VariablesRequestPath when the platform serves the API); nil names none.
	VariablesRequestURL func(parentID, requestID string) string
	// FunctionLimits bound each call of a workspace's stored JavaScript tools;
	// jsfunc.DefaultLimits when zero.
	FunctionLimits jsfunc.Limits
	// Policy restricts which tools the workspaces' dispatchers serve and call, at every door.
	Policy quiver.Policy
	// MaxResultBytes caps each result a workspace's dispatcher answers and records, all its
	// parts together (quiver.Dispatcher.MaxResultBytes); zero means
	// quiver.DefaultMaxResultBytes (1 MiB).
	MaxResultBytes int
	// OpenAPIInternal are the hosts ("host" or "host:port") the tools of a workspace's OpenAPI
	// documents may reach though they are not public addresses; all others that are not are
	// refused (see openapi.Source.PublicOnly).
	OpenAPIInternal []string
	// Governance are the operator's rules over every workspace's tools (the configuration's
	// governance block); SetOperatorRules replaces them.
	Governance []quiver.Rule
	// ServerWorkspace is the server's own workspace (quiver serve's default): the fleet's
	// configuration's entitlements block is its entitlements. "" applies the block to none.
	ServerWorkspace string
	// Logger receives what goes wrong in the background; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock the workspaces' limits count by; nil means time.Now. Every node of a
	// fleet must read the same time, to within a small part of a second, as NTP keeps them.
	Now func() time.Time
	// UsageEvery is how often each process writes the usage it metered (see package usage);
	// 0 means usage.DefaultEvery.
	UsageEvery time.Duration
	// UsageRetention is how long hour and day rows of usage are kept (minute rows: 48 hours);
	// the retention purge deletes older ones. 0 means DefaultUsageRetention.
	UsageRetention time.Duration
}

// DefaultUsageRetention is how long usage is kept unless Config.UsageRetention says otherwise.
const DefaultUsageRetention = 90 * 24 * time.Hour

// Platform is an assembled Quiver. Make it with [New]; it is safe for concurrent use.
type Platform struct {
	cfg    Config
	logger *slog.Logger
	runner *agent.Runner
	// discovery keeps the endpoints of the providers that name their issuer.
	discovery connect.Discovery
	// refreshes has the calls that want one connection refreshed wait for one refresh.
	refreshes singleflight.Group
	// connectLink is where a person connects a provider (SetConnectLink).
	connectLink atomic.Pointer[func(provider string, scopes []string) string]
	workspaces  workspaces
	imports     importSlots                   // the OpenAPI documents being imported
	fleet       fleetState                    // the fleet's configuration served (fleetstate.go)
	operator    atomic.Pointer[[]quiver.Rule] // the operator's governance rules (governance.go)
	meter       *limits.Meter                 // counts the calls the workspaces' limits bound (limits.go)
	usage       *usage.Meter                  // meters what the workspaces use (usage.go); nil: not kept
	// callerThreads are the threads of sessionless MCP callers this node knows exist (mcpdoor.go).
	callerThreads threadSet

	// journal, when open, takes the records of the doors' calls (OpenJournal); dispatching
	// says a workspace's dispatcher was made, after which the journal cannot be opened.
	journal        atomic.Pointer[journal.Journal]
	journalMetrics metric.Registration
	dispatching    atomic.Bool

	jobsMu sync.Mutex
	jobs   *jobs.Jobs
}

// ErrNoAgent is the error of a name that is no agent of the catalog.
var ErrNoAgent = errors.New("no agent")

// New assembles a platform. Its runner runs each thread with the tools of the thread's
// workspace; non-blocking sub-agents run on goroutines of the process until StartJobs.
func New(cfg Config) (*Platform, error) {
	if cfg.Store == nil {
		return nil, errors.New("platform: Config.Store is required")
	}
	if cfg.Registry == nil {
		cfg.Registry = quiver.Default
	}
	if cfg.FunctionLimits == (jsfunc.Limits{}) {
		cfg.FunctionLimits = jsfunc.DefaultLimits
	}
	if _, err := quiver.NewGovernance(cfg.Governance, nil); err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	p := &Platform{cfg: cfg, logger: cfg.Logger, meter: newMeter(cfg.Store, cfg.Now), usage: newUsage(cfg.Store, &cfg)}
	operator := append([]quiver.Rule(nil), cfg.Governance...)
	p.operator.Store(&operator)
	if p.logger == nil {
		p.logger = slog.Default()
	}
	p.initFleet()
	p.runner = &agent.Runner{Store: cfg.Store, Registry: p.Registry(), Registries: p.registry, Model: cfg.Model,
		OpenModel: cfg.OpenModel, Catalog: cfg.Catalog, Logger: cfg.Logger, VariablesRequestURL: cfg.VariablesRequestURL,
		Rules: p.runRules}
	if cfg.Resolver != nil {
		p.runner.Resolver, p.runner.Variables = cfg.Resolver, cfg.Resolver
	}
	return p, nil
}

// Store is the platform's store.
func (p *Platform) Store() store.Backend { return p.cfg.Store }

// Registry holds the tools every workspace shares: the fleet's configuration's (its remote MCP
// servers', OpenAPI documents' and A2A agents') over Config.Registry's.
func (p *Platform) Registry() *quiver.Registry { return p.fleet.remote }

// Resolver resolves variables; nil when the platform has none.
func (p *Platform) Resolver() *vars.Resolver { return p.cfg.Resolver }

// VariableResolver is Resolver as a dispatcher takes it: nil, not a typed nil, when there is
// none.
func (p *Platform) VariableResolver() quiver.VariableResolver {
	if p.cfg.Resolver == nil {
		return nil
	}
	return p.cfg.Resolver
}

// FunctionLimits bound each call of a stored JavaScript tool.
func (p *Platform) FunctionLimits() jsfunc.Limits { return p.cfg.FunctionLimits }

// Runner runs the agents.
func (p *Platform) Runner() *agent.Runner { return p.runner }

// Agent returns the agent called name, with which runs may be started; an error wrapping
// ErrNoAgent names the agents there are. A name the catalog lacks is looked for in the
// fleet's latest configuration too, which may have been applied a moment ago.
func (p *Platform) Agent(ctx context.Context, name string) (*agent.Agent, error) {
	return agentOf(p.catalogNow(ctx, name), name)
}

func agentOf(s *served, name string) (*agent.Agent, error) {
	if s.catalog == nil {
		return nil, fmt.Errorf("%w %q: this server has no agents (quiver apply -f DIR gives a fleet its agents; quiver serve --agents DIR, "+
			"$QUIVER_AGENTS or ./agents those of a database that has none)", ErrNoAgent, name)
	}
	if a, ok := s.catalog.Agent(name); ok {
		return a, nil
	}
	where := ""
	if s.where != "" {
		where = " " + s.where
	}
	return nil, fmt.Errorf("%w %q%s (agents: %v)", ErrNoAgent, name, where, s.catalog.Names())
}

// HasAgents says whether the platform has a catalog of agents.
func (p *Platform) HasAgents() bool { return p.Catalog() != nil }

// runnable is what a background run may run: an agent, or a prompt exposed as a tool, whose
// flow (a child thread run by its prompt) resumes after a pause or a crash. Clients start
// runs of agents only.
func (p *Platform) runnable(ctx context.Context, name string) (*agent.Agent, error) {
	s := p.catalogNow(ctx, name)
	if a, ok := s.catalog.Lookup(name); ok {
		return a, nil
	}
	return agentOf(s, name)
}

// CreateThread stores a new thread for ag (nil: a thread of no agent, which needs no
// variables) with values set on it, through the runner's CreateThread: refused, nothing
// written, when a variable a run of ag requires (its prompt's, its tools', its immediate
// sub-agents') has no value on the layers the thread will read, with a
// *quiver.MissingVariablesError naming every one and what requires it. th gets the thread as
// stored (its id, its times).
func (p *Platform) CreateThread(ctx context.Context, th *store.Thread, ag *agent.Agent, values ...vars.Value) error {
	if ag == nil {
		if len(values) > 0 {
			return fmt.Errorf("platform: values for a thread of no agent: %w", store.ErrInvalid)
		}
		return p.cfg.Store.CreateThread(ctx, th)
	}
	created, err := p.runner.CreateThread(ctx, thread.Options{WorkspaceID: th.WorkspaceID, AgentID: th.AgentID, UserID: th.UserID,
		ParentID: th.ParentID, Tags: th.Tags, Blocking: th.Blocking, Resumable: th.Resumable, Status: th.Status}, ag, values...)
	if err != nil {
		return err
	}
	*th = created.Info()
	return nil
}

// JobsConfig is the configuration of the platform's background runs, for StartJobs.
func (p *Platform) JobsConfig() jobs.Config {
	c := jobs.Config{Runner: p.runner, Agents: p.runnable, Logger: p.cfg.Logger}
	// The retention purge (deleted tools whose tier has passed) runs with the background runs.
	c.Entities = p.cfg.Store
	c.UsageRetention = cmp.Or(p.cfg.UsageRetention, DefaultUsageRetention)
	return c
}

// StartJobs starts the background runs with start (jobs.StartSQLite or jobs.StartPostgres on
// the platform's database) and JobsConfig; from then on, runs started through the API and
// non-blocking sub-agents run as durable jobs. Once only.
func (p *Platform) StartJobs(ctx context.Context, start func(context.Context, jobs.Config) (*jobs.Jobs, error)) error {
	p.jobsMu.Lock()
	defer p.jobsMu.Unlock()
	if p.jobs != nil {
		return errors.New("platform: the background runs are already started")
	}
	j, err := start(ctx, p.JobsConfig())
	if err != nil {
		return err
	}
	p.jobs = j
	return nil
}

// Jobs are the background runs; nil until StartJobs.
func (p *Platform) Jobs() *jobs.Jobs {
	p.jobsMu.Lock()
	defer p.jobsMu.Unlock()
	return p.jobs
}

// Subscribe calls fn with every event of every run: this process's and, once the background
// runs are started on a database that other processes serve too (PostgreSQL), the other
// nodes', until the returned function is called. fn must be quick.
func (p *Platform) Subscribe(fn func(agent.Event)) (unsubscribe func()) {
	local := p.runner.Subscribe(fn)
	j := p.Jobs()
	if j == nil {
		return local
	}
	remote := j.Subscribe(fn)
	return func() { local(); remote() }
}

// Stop stops the background runs, if started, waiting for the runs under way until ctx ends.
func (p *Platform) Stop(ctx context.Context) error {
	if j := p.Jobs(); j != nil {
		return j.Stop(ctx)
	}
	return nil
}
