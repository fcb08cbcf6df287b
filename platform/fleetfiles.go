package platform

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/config"
)

// AgentsDirName is the directory of agents a configuration directory may hold beside its
// quiver.yaml.
const AgentsDirName = "agents"

// ReadConfiguration reads the files at path into the parts of a configuration they give: a
// configuration file (quiver.yaml), a directory holding a quiver.yaml and/or an agents
// directory, or a directory of agents. The OpenAPI documents the file names are read (a
// relative path from the file's directory) and kept with it, and the agents are checked to
// load.
func ReadConfiguration(ctx context.Context, path string) (*Configuration, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return NodeConfiguration(ctx, "", path)
	}
	file := filepath.Join(path, config.FileName)
	if _, err := os.Stat(file); err != nil {
		file = ""
	}
	agents := filepath.Join(path, AgentsDirName)
	if st, err := os.Stat(agents); err != nil || !st.IsDir() {
		agents = ""
	}
	if file != "" || agents != "" {
		return NodeConfiguration(ctx, agents, file)
	}
	c, err := NodeConfiguration(ctx, path, "")
	if err == nil && len(c.Definitions) == 0 {
		err = fmt.Errorf("%s holds no %s, no %s directory and no agent or prompt definitions", path, config.FileName, AgentsDirName)
	}
	return c, err
}

// NodeConfiguration reads the files a node is started with, each "" when it has none: its
// agents directory and its configuration file. Parts says which it gave.
func NodeConfiguration(ctx context.Context, agentsDir, configFile string) (*Configuration, error) {
	c := &Configuration{}
	if configFile != "" {
		if err := c.readFile(ctx, configFile); err != nil {
			return nil, err
		}
	}
	if agentsDir != "" {
		if err := c.readAgents(agentsDir); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// readFile reads the configuration file's shared blocks and their documents.
func (c *Configuration) readFile(ctx context.Context, path string) error {
	f, err := config.Load(path, false)
	if err != nil {
		return err
	}
	sources, err := f.OpenAPISources(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	c.Documents = map[string][]byte{}
	for _, s := range sources {
		c.Documents[s.Name] = s.Document
	}
	// Each node keeps its identity provider: the oidc block is not the fleet's.
	shared := *f
	if shared.OIDC != nil {
		c.NodeOnly = append(c.NodeOnly, "oidc")
	}
	shared.OIDC = nil
	c.File = &shared
	c.Parts |= PartFile
	return nil
}

// readAgents reads the definitions of dir, checked to make a catalog.
func (c *Configuration) readAgents(dir string) error {
	defs, skipped, err := agent.ReadDefinitions(dir)
	if err != nil {
		return err
	}
	if _, err := agent.LoadDefinitions(defs, dir); err != nil {
		return err
	}
	c.Definitions, c.Skipped = defs, skipped
	c.Parts |= PartAgents
	return nil
}

// errNoFleetConfigs is the error of a platform whose store keeps no fleet configuration.
var errNoFleetConfigs = errors.New("platform: the store keeps no fleet configuration")
