package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store/vars"
)

// agents are the agents a command runs: a catalog, where it was loaded from (for errors that
// name an agent) and the model of prompts that name none.
type agents struct {
	catalog *agent.Catalog
	where   string
	model   model.Model
	// variablesAt names where a deferred sub-agent's variables are provided: the API's route
	// when the command serves it, nil otherwise.
	variablesAt func(parentID, requestID string) string
	// applyFiles says the command is a node of the fleet (quiver serve): its files become the
	// fleet's configuration when the database has none (see adoptFleet).
	applyFiles bool
}

// assemble builds the platform every command that runs tools or agents works on, the same
// way for all of them: db's store and variables (sealed with its key, checked against the
// database's: see keyring), reg's tools under each workspace's stored ones, and ag's agents.
// openAPIInternal are the internal hosts the tools of the workspaces' OpenAPI documents may
// reach (platform.Config.OpenAPIInternal); settings set what a door sets besides (quiver
// serve's result limit).
func assemble(db *opened, reg *quiver.Registry, ag agents, logger *slog.Logger, openAPIInternal []string,
	settings ...func(*platform.Config)) (*platform.Platform, error) {
	keys, err := keyring(db.ctx, db)
	if err != nil {
		return nil, err
	}
	cfg := platform.Config{Store: db, Registry: reg, Resolver: vars.New(db, keys),
		Catalog: ag.catalog, CatalogDir: ag.where, Model: ag.model, VariablesRequestURL: ag.variablesAt, Logger: logger,
		OpenAPIInternal: openAPIInternal, ServerWorkspace: localWorkspaceID}
	for _, set := range settings {
		set(&cfg)
	}
	return platform.New(cfg)
}

// loadAgents loads the agents quiver serve runs: those of dir, else of $QUIVER_AGENTS, else of
// ./agents when it exists (none, without an error, when it does not); files there that define
// nothing are named on stderr. A prompt that names no model uses $QUIVER_MODEL.
func loadAgents(dir string, stderr io.Writer) (agents, error) {
	var ag agents
	explicit := dir != ""
	if dir == "" {
		dir = os.Getenv("QUIVER_AGENTS")
		explicit = dir != ""
	}
	if dir == "" {
		dir = defaultAgentsDir
	}
	ag.where = dir
	if _, err := os.Stat(dir); err == nil || explicit {
		c, err := agent.LoadDir(dir)
		if err != nil {
			return ag, fmt.Errorf("the agents of %s: %w", dir, err)
		}
		for _, path := range c.Skipped {
			fmt.Fprintf(stderr, "quiver: agents: %s is not an agent or prompt definition (none of its fields is a definition's): skipped\n", path)
		}
		ag.catalog = c
	}
	if spec := os.Getenv("QUIVER_MODEL"); spec != "" {
		m, err := model.Open(spec)
		if err != nil {
			return ag, fmt.Errorf("QUIVER_MODEL: %w", err)
		}
		ag.model = m
	}
	return ag, nil
}
