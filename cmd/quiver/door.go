package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
)

// The CLI is a door like the API: every rule, assembly and record goes through the platform's
// operations, as the local workspace's admin (an operator: the person at this machine owns
// the database), so that a command refuses what the API refuses, in the same words.

// localActor is who the commands act as: the local workspace's admin user (made on first use,
// see localAdmin), as an operator whom no role limits.
func localActor(ctx context.Context, st backend) (platform.Actor, error) {
	u, err := localAdmin(ctx, st)
	if err != nil {
		return platform.Actor{}, err
	}
	return platform.Operator(localWorkspaceID, u.ID), nil
}

// localPlatform opens the database the command's flags name and assembles the platform over
// it with the app's tools (see assemble), with the actor the command acts as.
func (a *app) localPlatform(ctx context.Context, inv *invocation) (*platform.Platform, platform.Actor, *opened, error) {
	db, err := inv.open(ctx)
	if err != nil {
		return nil, platform.Actor{}, nil, err
	}
	actor, err := localActor(ctx, db)
	if err != nil {
		return nil, platform.Actor{}, nil, err
	}
	p, err := assemble(db, a.registry, agents{}, nil, nil)
	if err != nil {
		return nil, platform.Actor{}, nil, err
	}
	return p, actor, db, nil
}

// refusal is a platform's refusal as the CLI says it: the operation's words, then hint (what to
// run to see what there is), which a NotFound refusal gets.
func refusal(err error, hint string) error {
	var e *platform.Error
	if hint != "" && errors.As(err, &e) && e.Kind == platform.NotFound {
		return fmt.Errorf("%w (%s)", err, hint)
	}
	return err
}

// ownRegistry gives the command a registry of its own holding the app's tools, into which the
// configuration's tools are added: the shared tools of the platform it assembles, as quiver
// serve's are. (The app's registry is quiver.Default, which the command leaves as it found it.)
func (a *app) ownRegistry() error {
	reg := &quiver.Registry{Logger: a.registry.Logger}
	if err := reg.Register(a.registry.Tools()...); err != nil {
		return err
	}
	a.registry = reg
	return nil
}

// configuredPlatformForNames is localPlatform with the configuration's tools shared in it,
// as quiver serve shares them: the names a stored tool may not take. The configuration is the
// fleet's when the database keeps one (served as a node serves it), else the configuration
// file's OpenAPI documents and A2A agents. A remote MCP server's tools are not connected for
// this: they take a connection (callPlatform makes one for the commands that call and list
// them).
func (a *app) configuredPlatformForNames(ctx context.Context, inv *invocation, config string) (*platform.Platform, platform.Actor, *opened, error) {
	if err := a.ownRegistry(); err != nil {
		return nil, platform.Actor{}, nil, err
	}
	db, err := inv.open(ctx)
	if err != nil {
		return nil, platform.Actor{}, nil, err
	}
	_, fleet, err := platform.LatestConfiguration(ctx, db)
	if err != nil {
		return nil, platform.Actor{}, nil, err
	}
	if fleet == 0 {
		file, err := loadConfig(config)
		if err != nil {
			return nil, platform.Actor{}, nil, err
		}
		if err := registerOpenAPI(ctx, file, a.registry, a.stderr); err != nil {
			return nil, platform.Actor{}, nil, err
		}
		if err := registerA2A(ctx, file, a.registry, a.stderr); err != nil {
			return nil, platform.Actor{}, nil, err
		}
	}
	p, actor, db, err := a.localPlatform(ctx, inv)
	if err != nil || fleet == 0 {
		return p, actor, db, err
	}
	a.sayFleetConfiguration(config, fleet)
	return p, actor, db, p.LoadConfiguration(ctx)
}
