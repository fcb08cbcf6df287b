package platform

import (
	"context"
	"errors"
	"fmt"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store"
)

// Applied is what ApplyConfiguration did, or in a dry run would do.
type Applied struct {
	// From is the version before (0: none); Version the version after, From when nothing
	// changed (and in a dry run, the version it would make).
	From, Version int64
	// Changes lists what differs from version From.
	Changes []Change
	// DryRun says nothing was written.
	DryRun bool
}

// Unchanged says the configuration given is the fleet's already.
func (a *Applied) Unchanged() bool { return len(a.Changes) == 0 }

// ApplyOptions are ApplyConfiguration's.
type ApplyOptions struct {
	// DryRun computes the changes and writes nothing.
	DryRun bool
	// AppliedBy says who applies, for the history ("quiver apply").
	AppliedBy string
}

// ApplyConfiguration makes files the fleet's configuration, as its next version: the parts
// files give (see Parts) replace the latest version's, the rest is kept. Applying what the
// fleet has already makes no version. The configuration is checked first (its agents load,
// its sources make tools, its rules and entitlements hold): one that would not serve is
// refused, whole. Only the operator may apply: the configuration is every workspace's. Every
// node serves the new version within its watch interval (this platform too: LoadConfiguration
// serves it at once); its entitlements block is stored as the server's own workspace's
// document at once (see applyDocuments).
func (p *Platform) ApplyConfiguration(ctx context.Context, a Actor, files *Configuration, o ApplyOptions) (*Applied, error) {
	if !a.Operator {
		return nil, &Error{Kind: Forbidden, Message: a.who() + " may not change the fleet's configuration: the operator applies it (quiver apply)"}
	}
	fc := p.fleetConfigs()
	if fc == nil {
		return nil, &Error{Kind: Unavailable, Message: "this store keeps no fleet configuration", Cause: errNoFleetConfigs}
	}
	latest, err := p.latestConfiguration(ctx, fc)
	if err != nil {
		return nil, &Error{Kind: Internal, Message: "the fleet's configuration cannot be read", Cause: err}
	}
	next := files.merged(latest.conf)
	out := &Applied{From: latest.version, Version: latest.version, Changes: Diff(latest.conf, next), DryRun: o.DryRun}
	built, err := checkConfiguration(ctx, next, p.cfg.Registry, "the configuration applied", p.fleet.lastBuilt())
	if err != nil {
		return nil, &Error{Kind: Invalid, Message: err.Error(), Cause: err}
	}
	if out.Unchanged() {
		return out, nil
	}
	if o.DryRun {
		out.Version = latest.version + 1
		return out, nil
	}
	v, err := next.encode()
	if err != nil {
		return nil, &Error{Kind: Internal, Message: "the configuration cannot be encoded", Cause: err}
	}
	v.AppliedBy = o.AppliedBy
	if _, err := fc.PutFleetConfig(ctx, v, latest.version); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, &Error{Kind: Conflict, Message: "the fleet's configuration changed while this one was applied: apply again, to see and apply the changes from the new version", Cause: err}
		}
		return nil, storeError(err, "the fleet's configuration", "")
	}
	p.fleet.keep(built)
	out.Version = v.Version
	// Stored now, the workspace's entitlements need no node serving the version to follow.
	p.applyDocuments(ctx, next.File, versionWhere(v.Version))
	return out, nil
}

// latestConfiguration reads the latest version (version 0 and conf nil when none is stored).
func (p *Platform) latestConfiguration(ctx context.Context, fc store.FleetConfigs) (*served, error) {
	v, err := fc.FleetConfig(ctx, 0)
	if errors.Is(err, store.ErrNotFound) {
		return &served{}, nil
	}
	if err != nil {
		return nil, err
	}
	conf, err := decodeConfiguration(v, versionWhere(v.Version))
	if err != nil {
		return nil, err
	}
	return &served{version: v.Version, digest: v.Digest, conf: conf}, nil
}

// Adoption is what a node did with the files it was started with.
type Adoption struct {
	// Version is the version of the fleet's configuration the node serves (0: none).
	Version int64
	// Applied says the database had no configuration, and the files became its first version.
	Applied bool
	// Differs lists what applying the node's files would change: they differ from the fleet's
	// configuration, which the node serves. quiver apply is how to change it.
	Differs []Change
}

// AdoptConfiguration serves the fleet's configuration at a node's start. The node's files (nil,
// or no part: none) become the first version when the database has none yet (when several
// nodes start at once, one's do), and are compared with the fleet's otherwise; the fleet's is
// served either way. A store that keeps no fleet configuration serves the files as they are.
func (p *Platform) AdoptConfiguration(ctx context.Context, files *Configuration, appliedBy string) (*Adoption, error) {
	fc := p.fleetConfigs()
	if fc == nil {
		return &Adoption{}, p.UseConfiguration(ctx, files)
	}
	latest, err := p.latestConfiguration(ctx, fc)
	if err != nil {
		return nil, err
	}
	out := &Adoption{}
	if files != nil && files.Parts != 0 {
		if latest.conf == nil {
			out.Applied, err = p.applyFirst(ctx, fc, files, appliedBy)
			if err != nil {
				return nil, err
			}
			if !out.Applied { // another node's files are the first version
				if latest, err = p.latestConfiguration(ctx, fc); err != nil {
					return nil, err
				}
			}
		}
		if !out.Applied {
			out.Differs = Diff(latest.conf, files.merged(latest.conf))
		}
	}
	if err := p.LoadConfiguration(ctx); err != nil {
		return nil, err
	}
	out.Version = p.ConfigurationVersion()
	return out, nil
}

// ServeConfiguration is AdoptConfiguration for a door that does not apply its files: where the
// database has no configuration, the files are served as this platform's own
// (UseConfiguration), and stored nowhere; where it has one, it is served, and the files
// compared with it.
func (p *Platform) ServeConfiguration(ctx context.Context, files *Configuration) (*Adoption, error) {
	fc := p.fleetConfigs()
	if fc == nil {
		return &Adoption{}, p.UseConfiguration(ctx, files)
	}
	if v, _, err := fc.FleetConfigVersion(ctx); err != nil || v == 0 {
		if err != nil {
			return nil, err
		}
		return &Adoption{}, p.UseConfiguration(ctx, files)
	}
	return p.AdoptConfiguration(ctx, files, "")
}

// applyFirst stores files as the first version, checked; false when another node stored one
// first.
func (p *Platform) applyFirst(ctx context.Context, fc store.FleetConfigs, files *Configuration, appliedBy string) (bool, error) {
	first := files.merged(nil)
	built, err := checkConfiguration(ctx, first, p.cfg.Registry, "the node's files", p.fleet.lastBuilt())
	if err != nil {
		return false, err
	}
	v, err := first.encode()
	if err != nil {
		return false, err
	}
	v.AppliedBy = appliedBy
	created, err := fc.PutFleetConfig(ctx, v, 0)
	if errors.Is(err, store.ErrConflict) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("storing the node's files as the fleet's configuration: %w", err)
	}
	p.fleet.keep(built)
	return created, nil
}

// UseConfiguration serves c (nil: nothing) as this platform's own, not the fleet's: what a
// command that reads files and stores nothing runs with (quiver run, call and tools on a
// database without a fleet configuration), built as a version of the fleet's would be. It
// connects no remote MCP server until ConnectRemotes.
func (p *Platform) UseConfiguration(ctx context.Context, c *Configuration) error {
	if c == nil {
		return nil
	}
	where := "the files"
	conf := c.merged(nil)
	catalog, err := catalogOf(conf, where)
	if err != nil {
		return err
	}
	rules, err := conf.File.Rules()
	if err != nil {
		return err
	}
	f := &p.fleet
	f.loadMu.Lock()
	defer f.loadMu.Unlock()
	built := buildShared(ctx, conf, p.cfg.Registry, f.built, p.logger)
	if built.Broken != nil {
		return built.Broken
	}
	if err := f.static.Replace(built.Tools...); err != nil {
		return err
	}
	f.built = built.built
	if err := p.SetOperatorRules(ctx, rules); err != nil {
		return err
	}
	if c.Parts&PartAgents == 0 {
		catalog = p.Catalog() // the agents given otherwise (Config.Catalog) stay
	}
	p.runner.SetCatalog(catalog)
	f.cur.Store(&served{conf: conf, catalog: catalog, where: where})
	p.sharedChanged()
	// The workspace's entitlements are read from the database by every door, so the files'
	// block is stored there even when the rest of the files is not.
	p.applyDocuments(ctx, conf.File, where)
	p.syncRemotes(ctx, conf)
	return nil
}

// LatestConfiguration reads the fleet's latest configuration from st, and its version; nil
// and 0 when st has none.
func LatestConfiguration(ctx context.Context, st store.FleetConfigs) (*Configuration, int64, error) {
	v, err := st.FleetConfig(ctx, 0)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	c, err := decodeConfiguration(v, versionWhere(v.Version))
	return c, v.Version, err
}

// Catalog builds the catalog of c's agents and prompts; where names them in errors.
func (c *Configuration) Catalog(where string) (*agent.Catalog, error) { return catalogOf(c, where) }
