package config

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/quiverhq/quiver/openapi"
)

var openAPIName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// checkOpenAPI checks the openapi block without reading the documents: names (unique, and not
// a remote MCP server's, whose tools share the name.tool form), a document each, durations.
func (f *File) checkOpenAPI() error {
	taken := map[string]string{}
	for _, r := range f.MCP.Servers {
		taken[r.Name] = "a remote MCP server"
	}
	for i, c := range f.OpenAPI {
		switch {
		case !openAPIName.MatchString(c.Name):
			return fmt.Errorf("openapi[%d]: name %q: use 1 to 32 letters, digits, _ and - (tools are named NAME.operation)", i, c.Name)
		case taken[c.Name] != "":
			return fmt.Errorf("openapi[%d]: the name %q is already %s's; names must be unique", i, c.Name, taken[c.Name])
		case strings.TrimSpace(c.Document) == "":
			return fmt.Errorf("openapi[%d] (%s): document is missing: give a file or an http(s) URL of the OpenAPI document", i, c.Name)
		case c.MaxResponseBytes < 0:
			return fmt.Errorf("openapi[%d] (%s): max_response_bytes %d is negative", i, c.Name, c.MaxResponseBytes)
		case c.MaxOperations < 0 || c.MaxOperations > openapi.MaxDocumentOperations:
			return fmt.Errorf("openapi[%d] (%s): max_operations %d: give 0 (the default, %d) to %d", i, c.Name, c.MaxOperations,
				openapi.MaxOperations, openapi.MaxDocumentOperations)
		}
		if c.Timeout != "" {
			if d, err := time.ParseDuration(c.Timeout); err != nil || d <= 0 {
				return fmt.Errorf("openapi[%d] (%s): timeout %q is not a positive duration like 30s or 2m", i, c.Name, c.Timeout)
			}
		}
		taken[c.Name] = "another OpenAPI document"
	}
	return nil
}

// OpenAPISources reads the documents of the openapi block (files relative to the
// configuration file's directory) and returns them as sources, ready for [openapi.Tools].
func (f *File) OpenAPISources(ctx context.Context) ([]openapi.Source, error) {
	var out []openapi.Source
	for i, c := range f.OpenAPI {
		src, err := c.source(ctx, f.dir)
		if err != nil {
			return nil, fmt.Errorf("openapi[%d] (%s): %w", i, c.Name, err)
		}
		out = append(out, src)
	}
	return out, nil
}

func (c OpenAPI) source(ctx context.Context, dir string) (openapi.Source, error) {
	location := c.Document
	if !strings.HasPrefix(location, "http://") && !strings.HasPrefix(location, "https://") && !filepath.IsAbs(location) && dir != "" {
		location = filepath.Join(dir, location)
	}
	doc, err := openapi.Load(ctx, location, nil)
	if err != nil {
		return openapi.Source{}, err
	}
	src := openapi.Source{Name: c.Name, Document: doc, Location: location, Servers: c.Servers, Operations: c.Operations,
		Credentials: c.Credentials, Connections: c.Connections, MaxResponseBytes: c.MaxResponseBytes, MaxOperations: c.MaxOperations,
		Strict: c.Strict}
	if c.Timeout != "" {
		src.Timeout, _ = time.ParseDuration(c.Timeout) // checked by checkOpenAPI
	}
	return src, nil
}
