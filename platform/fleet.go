package platform

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/store"
)

// The fleet's configuration is what every node serving one database must agree on: the agents
// and prompts runs are started with, and the tool sources every workspace shares (OpenAPI
// documents, remote MCP servers, A2A agents) with the operator's governance of them. It is
// kept in the database (store.FleetConfigs), versioned: each change that changes something is
// a new version, the earlier ones stay readable. Files remain the way to write it (a
// quiver.yaml and a directory of agents): quiver apply stores them as the next version, and a
// node started with files applies them when the database has none yet. Every node watches the
// version (fleetwatch.go) and, when it changes, builds its catalog and shared tools again from
// the new version and swaps them in whole.

// Configuration is a fleet's configuration, or the part of one that files give.
type Configuration struct {
	// File is the configuration file's shared blocks (everything but oidc, each node's own);
	// nil when none are given.
	File *config.File
	// Definitions are the agents and prompts, canonical, sorted by kind and name.
	Definitions []agent.Definition
	// Documents are the OpenAPI documents of File's openapi block, by the source's name: the
	// fleet keeps them, so that no node needs the files or URLs they were read from.
	Documents map[string][]byte
	// Parts says which parts files gave: a node compares those with the fleet's, and quiver
	// apply replaces those and keeps the rest. A configuration read from the database has
	// both.
	Parts Parts
	// Skipped names the files of the agents directory that define nothing.
	Skipped []string
	// NodeOnly names the blocks of the configuration file that are each node's and so not
	// part of the fleet's configuration (oidc).
	NodeOnly []string
}

// Parts are the parts of a configuration.
type Parts uint8

// The parts of a configuration.
const (
	PartFile   Parts = 1 << iota // the configuration file's shared blocks and their documents
	PartAgents                   // the agents and prompts
	AllParts   = PartFile | PartAgents
)

// encodedConfiguration is a configuration as a version's content holds it: JSON, its maps'
// keys sorted and its lists in order, so that equal configurations encode to equal bytes (and
// so have one digest). The documents themselves are kept beside it, by digest.
type encodedConfiguration struct {
	// Format says how the rest is written; a node refuses a format it does not know rather
	// than serve part of a configuration.
	Format      int                 `json:"format"`
	File        string              `json:"file,omitempty"` // config.File.Shared
	Definitions []encodedDefinition `json:"definitions,omitempty"`
	Documents   map[string]string   `json:"documents,omitempty"` // source name: the document's digest
}

type encodedDefinition struct {
	Kind   string          `json:"kind"`
	Name   string          `json:"name"`
	Fields json.RawMessage `json:"fields"`
}

// configurationFormat is the format this build writes and reads.
const configurationFormat = 1

// encode is c as a version to store: its content, digest and documents.
func (c *Configuration) encode() (*store.FleetConfig, error) {
	e := encodedConfiguration{Format: configurationFormat}
	if c.File != nil {
		shared, err := c.File.Shared()
		if err != nil {
			return nil, err
		}
		e.File = string(shared)
	}
	for _, d := range c.Definitions {
		e.Definitions = append(e.Definitions, encodedDefinition{Kind: d.Kind, Name: d.Name, Fields: d.JSON})
	}
	docs := map[string][]byte{}
	for name, doc := range c.Documents {
		if e.Documents == nil {
			e.Documents = map[string]string{}
		}
		digest := store.FleetDigest(doc)
		e.Documents[name] = digest
		docs[digest] = doc
	}
	content, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("platform: encoding the fleet's configuration: %w", err)
	}
	return &store.FleetConfig{Content: content, Digest: store.FleetDigest(content), Documents: docs}, nil
}

// decodeConfiguration reads a stored version; where names it in errors.
func decodeConfiguration(v *store.FleetConfig, where string) (*Configuration, error) {
	var e encodedConfiguration
	if err := json.Unmarshal(v.Content, &e); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if e.Format != configurationFormat {
		return nil, fmt.Errorf("%s is written in format %d, which this version of Quiver does not read (it reads %d): upgrade this node",
			where, e.Format, configurationFormat)
	}
	f, err := config.ParseShared([]byte(e.File), where)
	if err != nil {
		return nil, err
	}
	c := &Configuration{File: f, Parts: AllParts, Documents: map[string][]byte{}}
	for _, d := range e.Definitions {
		c.Definitions = append(c.Definitions, agent.Definition{Kind: d.Kind, Name: d.Name, JSON: d.Fields})
	}
	for name, digest := range e.Documents {
		doc, ok := v.Documents[digest]
		if !ok {
			return nil, fmt.Errorf("%s: the document of OpenAPI source %s is missing", where, name)
		}
		c.Documents[name] = doc
	}
	return c, nil
}

// merged is base with the parts c gives replaced by c's: what quiver apply of some files
// stores.
func (c *Configuration) merged(base *Configuration) *Configuration {
	out := &Configuration{Parts: AllParts, File: &config.File{}, Documents: map[string][]byte{}}
	if base != nil {
		out.File, out.Definitions, out.Documents = base.File, base.Definitions, base.Documents
	}
	if c.Parts&PartFile != 0 {
		out.File, out.Documents = c.File, c.Documents
	}
	if c.Parts&PartAgents != 0 {
		out.Definitions = c.Definitions
	}
	if out.File == nil {
		out.File = &config.File{}
	}
	return out
}

// definitionNames lists the definitions of kind, by name.
func (c *Configuration) definitionNames(kind string) []string {
	var out []string
	for _, d := range c.Definitions {
		if d.Kind == kind {
			out = append(out, d.Name)
		}
	}
	slices.Sort(out)
	return out
}
