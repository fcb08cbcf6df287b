package platform

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store"
)

// fleetState is the fleet's configuration as this platform serves it. The registries are made
// once and every workspace's registry is over them, so a new version reaches every door by
// replacing their tools; the catalog and the rest are swapped whole, behind one pointer.
type fleetState struct {
	cur atomic.Pointer[served]
	// generation counts the versions served and the changes of the remote MCP servers' tools,
	// for the doors that tell their clients the tools changed.
	generation atomic.Uint64
	// static holds the configuration's OpenAPI documents' and A2A agents' tools, over the
	// platform's own (Config.Registry); remote holds the remote MCP servers' tools, over static.
	static, remote *quiver.Registry

	loadMu sync.Mutex             // one version built at a time
	built  map[string]builtSource // the sources' tools as last built (guarded by loadMu)
	failed string                 // the digest of a version that could not be served (guarded by loadMu)

	remotes remoteSet

	listenMu  sync.Mutex
	listeners []func()
}

// lastBuilt is the sources' tools as last built or checked, for a check to reuse.
func (f *fleetState) lastBuilt() map[string]builtSource {
	f.loadMu.Lock()
	defer f.loadMu.Unlock()
	return f.built
}

// keep offers the tools a check built of a version just stored to the build that serves it
// (LoadConfiguration's, which takes those whose entry and document it has). The map is
// replaced, never changed: lastBuilt's callers read it unlocked.
func (f *fleetState) keep(built map[string]builtSource) {
	if len(built) == 0 {
		return
	}
	f.loadMu.Lock()
	defer f.loadMu.Unlock()
	next := make(map[string]builtSource, len(f.built)+len(built))
	maps.Copy(next, f.built)
	maps.Copy(next, built)
	f.built = next
}

// served is one version of the configuration as this node serves it.
type served struct {
	version int64  // 0: none from the database (Config.Catalog, or files read by a command)
	digest  string // the version's
	conf    *Configuration
	catalog *agent.Catalog
	where   string // names the catalog in errors: "the fleet's configuration (version 3)"
}

// initFleet makes the registries every workspace's registry is over, and serves Config.Catalog
// until a version of the fleet's configuration is loaded.
func (p *Platform) initFleet() {
	f := &p.fleet
	f.static = &quiver.Registry{Base: p.cfg.Registry, Logger: p.cfg.Registry.Logger}
	f.remote = &quiver.Registry{Base: f.static, Logger: p.cfg.Registry.Logger}
	where := ""
	if p.cfg.CatalogDir != "" {
		where = "in " + p.cfg.CatalogDir
	}
	f.cur.Store(&served{catalog: p.cfg.Catalog, where: where})
}

// Catalog is the catalog of agents and prompts the platform runs now: the fleet's
// configuration's when one is loaded, else Config.Catalog; nil when there is none.
func (p *Platform) Catalog() *agent.Catalog { return p.fleet.cur.Load().catalog }

// ConfigurationVersion is the version of the fleet's configuration the platform serves; 0
// when it serves none from the database.
func (p *Platform) ConfigurationVersion() int64 { return p.fleet.cur.Load().version }

// SharedGeneration changes each time the tools every workspace shares may have changed: a new
// version of the fleet's configuration, a remote MCP server's tools listed again.
func (p *Platform) SharedGeneration() uint64 { return p.fleet.generation.Load() }

// OnSharedChange calls fn (which must be quick) each time SharedGeneration changes.
func (p *Platform) OnSharedChange(fn func()) {
	p.fleet.listenMu.Lock()
	defer p.fleet.listenMu.Unlock()
	p.fleet.listeners = append(p.fleet.listeners, fn)
}

func (p *Platform) sharedChanged() {
	p.fleet.generation.Add(1)
	p.fleet.listenMu.Lock()
	fns := append([]func(){}, p.fleet.listeners...)
	p.fleet.listenMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// fleetConfigs is the store's record of the fleet's configuration; nil when it keeps none.
func (p *Platform) fleetConfigs() store.FleetConfigs {
	fc, _ := p.cfg.Store.(store.FleetConfigs)
	return fc
}

// catalogOf is the catalog of c's definitions.
func catalogOf(c *Configuration, where string) (*agent.Catalog, error) {
	return agent.LoadDefinitions(c.Definitions, where)
}

func versionWhere(version int64) string {
	return fmt.Sprintf("the fleet's configuration (version %d)", version)
}

// LoadConfiguration serves the latest version of the fleet's configuration, unless it is the
// one served already: it builds the shared tools of the sources that changed and swaps them
// in, then the catalog and the operator's rules, stores its entitlements block as the server's
// own workspace's document when they differ (fleetentitlements.go), and connects the remote
// MCP servers that changed (once ConnectRemotes was called). Runs under way keep the agent they started with.
// A version that cannot be served (a format this build does not read, definitions it
// refuses) leaves the one served before, and is an error, said once.
func (p *Platform) LoadConfiguration(ctx context.Context) error {
	fc := p.fleetConfigs()
	if fc == nil {
		return nil
	}
	version, digest, err := fc.FleetConfigVersion(ctx)
	if err != nil {
		return err
	}
	if cur := p.fleet.cur.Load(); version == 0 || (cur.version == version && cur.digest == digest) {
		return nil
	}
	f := &p.fleet
	f.loadMu.Lock()
	defer f.loadMu.Unlock()
	if cur := f.cur.Load(); cur.version == version && cur.digest == digest {
		return nil // another caller loaded it while this one waited
	}
	if f.failed == digest {
		return nil // said already
	}
	v, err := fc.FleetConfig(ctx, version)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := p.serve(ctx, v); err != nil {
		f.failed = v.Digest
		p.logger.ErrorContext(ctx, "platform: the fleet's configuration cannot be served; this node keeps the version it served", "version", v.Version,
			"served", f.cur.Load().version, "err", err)
		return err
	}
	return nil
}

// serve builds and swaps in version v (loadMu held).
func (p *Platform) serve(ctx context.Context, v *store.FleetConfig) error {
	f := &p.fleet
	where := versionWhere(v.Version)
	conf, err := decodeConfiguration(v, where)
	if err != nil {
		return err
	}
	catalog, err := catalogOf(conf, where)
	if err != nil {
		return err
	}
	rules, err := conf.File.Rules()
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	built := buildShared(ctx, conf, p.cfg.Registry, f.built, p.logger)
	if built.Broken != nil {
		// The sources that build are served; the log names the others.
		p.logger.WarnContext(ctx, "platform: some of the fleet's tool sources are not served", "version", v.Version, "err", built.Broken)
	}
	for _, s := range built.Skipped {
		p.logger.DebugContext(ctx, "platform: an OpenAPI operation is not a tool", "openapi", s.Source, "operation", s.Operation, "reason", s.Reason)
	}
	// The tools first, then the agents that may name them.
	if err := f.static.Replace(built.Tools...); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	f.built = built.built
	// Setting the rules loads every workspace's tools again: only when they changed.
	if !reflect.DeepEqual(rules, p.operatorRules()) && (len(rules) > 0 || len(p.operatorRules()) > 0) {
		if err := p.SetOperatorRules(ctx, rules); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	p.runner.SetCatalog(catalog)
	f.cur.Store(&served{version: v.Version, digest: v.Digest, conf: conf, catalog: catalog, where: "in " + where})
	p.sharedChanged()
	p.applyDocuments(ctx, conf.File, where)
	p.logger.InfoContext(ctx, "platform: serving the fleet's configuration", "version", v.Version, "agents", len(catalog.Agents),
		"prompts", len(catalog.Prompts), "tools", len(built.Tools))
	p.syncRemotes(ctx, conf)
	return nil
}

// DefaultWatchInterval is how often a node asks the database for the configuration's version:
// a change made through any node is served by every other within it (and the time to build).
const DefaultWatchInterval = 250 * time.Millisecond

// WatchConfiguration serves each new version of the fleet's configuration as it is stored,
// asking the database every interval (DefaultWatchInterval when zero), until ctx ends or stop
// is called. A failure to ask is logged once until asking works again.
func (p *Platform) WatchConfiguration(ctx context.Context, interval time.Duration) (stop func()) {
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		var said string
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			err := p.LoadConfiguration(ctx)
			switch {
			case err == nil:
				said = ""
			case ctx.Err() != nil:
				return
			case err.Error() != said:
				said = err.Error()
				p.logger.WarnContext(ctx, "platform: reading the fleet's configuration", "err", err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// catalogNow is the catalog, loading a newer version of the fleet's configuration first when
// it lacks name: a run or a thread may name an agent applied a moment ago, which the watch has
// not loaded yet.
func (p *Platform) catalogNow(ctx context.Context, name string) *served {
	cur := p.fleet.cur.Load()
	if _, ok := cur.catalog.Lookup(name); ok || p.fleetConfigs() == nil || (cur.version == 0 && cur.catalog != nil) {
		return cur
	}
	if err := p.LoadConfiguration(ctx); err != nil {
		p.logger.WarnContext(ctx, "platform: reading the fleet's configuration", "err", err)
	}
	return p.fleet.cur.Load()
}
