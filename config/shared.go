package config

import (
	"bytes"
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver/openapi"
)

// A fleet keeps the part of the file its nodes must agree on in its database (see platform's
// fleet configuration): every block but oidc, which names the identity provider a node checks
// tokens with and is each node's own. It is kept as canonical YAML, the same for the same
// configuration however the file was written (comments, key order, quoting), with ${VAR} left
// as written: each node expands them from its own environment, so that no secret reaches the
// database.

// Shared returns the part of f every node of a fleet shares, as canonical YAML; empty when f
// sets nothing shared (no server, document, agent or rule).
func (f *File) Shared() ([]byte, error) {
	c := *f
	c.OIDC = nil
	out, err := yaml.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	empty, err := yaml.Marshal(&File{})
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if bytes.Equal(out, empty) {
		return nil, nil
	}
	return out, nil
}

// ParseShared reads what Shared wrote; where names it in errors. Its OpenAPI documents are not
// read from anywhere: the fleet keeps them (see OpenAPI.Source).
func ParseShared(shared []byte, where string) (*File, error) {
	if len(shared) == 0 {
		return &File{}, nil
	}
	f, err := Parse(bytes.NewReader(shared), where)
	if err != nil {
		return nil, err
	}
	if f.OIDC != nil {
		return nil, fmt.Errorf("%s: an oidc block is each node's, not the fleet's", where)
	}
	return f, nil
}

// Source is the entry as an openapi.Source over doc, its document as read already (by
// OpenAPISources where it was applied); the entry's document names it in errors.
func (c OpenAPI) Source(doc []byte) openapi.Source {
	src := openapi.Source{Name: c.Name, Document: doc, Location: c.Document, Servers: c.Servers, Operations: c.Operations,
		Credentials: c.Credentials, Connections: c.Connections, MaxResponseBytes: c.MaxResponseBytes, MaxOperations: c.MaxOperations,
		Strict: c.Strict}
	if c.Timeout != "" {
		src.Timeout, _ = time.ParseDuration(c.Timeout) // checked by checkOpenAPI
	}
	return src
}

// Entry is an entry of the file (an OpenAPI document, a remote MCP server, an A2A agent) as
// canonical YAML: two entries of the same name are the same when their YAML is.
func Entry(v any) ([]byte, error) {
	out, err := yaml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return out, nil
}
