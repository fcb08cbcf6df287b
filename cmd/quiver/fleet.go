package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/quiverhq/quiver/platform"
)

// A node of a fleet serves the fleet's configuration, which the database keeps (see
// platform's fleet configuration); the files it is started with (--agents, --config) are
// applied at start only when the database has none yet, and otherwise compared with it: a
// node whose files differ says so and serves the fleet's. quiver apply changes the fleet's.

// nodeConfigFile is the configuration file a node was started with: --config, else
// $QUIVER_CONFIG, else the data directory's when it exists; "" for none.
func nodeConfigFile(configFlag string) string {
	path, named, err := configPath(configFlag)
	if err != nil {
		return ""
	}
	if _, statErr := os.Stat(path); named || statErr == nil {
		return path
	}
	return ""
}

// adoptFleet serves the fleet's configuration on p from the node's start on (see
// platform.AdoptConfiguration) and watches it; stop ends the watch. The node's files are its
// agents directory (agentsDir, "" for none) and its configuration file (see nodeConfigFile).
// What the node did with them is said on stderr. Without apply (quiver mcp stdio, a client's
// tool server more than a node) the files are served, not stored, where the database has no
// configuration.
func (a *app) adoptFleet(ctx context.Context, p *platform.Platform, agentsDir, configFlag string, apply bool) (stop func(), err error) {
	configFile := nodeConfigFile(configFlag)
	files, err := platform.NodeConfiguration(ctx, agentsDir, configFile)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	var adopted *platform.Adoption
	if apply {
		adopted, err = p.AdoptConfiguration(ctx, files, "quiver serve at start on "+cmp.Or(host, "a node"))
	} else {
		adopted, err = p.ServeConfiguration(ctx, files)
	}
	if err != nil {
		return nil, err
	}
	given := givenFiles(agentsDir, configFile)
	switch {
	case adopted.Applied:
		fmt.Fprintf(a.stderr, "quiver: the database had no fleet configuration: %s became its version %d\n", given, adopted.Version)
	case len(adopted.Differs) > 0:
		names := make([]string, len(adopted.Differs))
		for i, c := range adopted.Differs {
			names[i] = c.String()
		}
		fmt.Fprintf(a.stderr, "quiver: warning: %s differ from the fleet's configuration (version %d), which this node serves: applying them would "+
			"change %s. The database's configuration is the fleet's: quiver apply -f DIR changes it for every node\n",
			given, adopted.Version, strings.Join(names, ", "))
	}
	return p.WatchConfiguration(ctx, 0), nil
}

// givenFiles names a node's files for what it says of them: "this node's files (agents ./agents,
// configuration quiver.yaml)".
func givenFiles(agentsDir, configFile string) string {
	var parts []string
	if agentsDir != "" {
		parts = append(parts, "agents "+agentsDir)
	}
	if configFile != "" {
		parts = append(parts, "configuration "+configFile)
	}
	return "this node's files (" + strings.Join(parts, ", ") + ")"
}
