package store

import (
	"context"
	"fmt"
	"regexp"
	"time"
)

// OpenAPISource is an OpenAPI document a workspace imported: each operation it selects is a
// tool of the workspace, named Name.operation (see package openapi).
type OpenAPISource struct {
	WorkspaceID string
	// Name prefixes the tools; unique in the workspace: 1 to 32 letters, digits, _ and -.
	Name string
	// Document is the document as imported (JSON or YAML), at most MaxOpenAPIDocumentBytes.
	Document []byte
	// Servers, Operations, Credentials, Timeout, MaxResponseBytes, MaxOperations and Strict
	// are those of openapi.Source; empty for its defaults.
	Servers          []string
	Operations       []string
	Credentials      map[string]string
	Timeout          time.Duration
	MaxResponseBytes int64
	MaxOperations    int
	Strict           bool
	// CreatedBy is the user who imported it first ("" when unknown).
	CreatedBy string
	// CreatedAt and UpdatedAt are set by the store.
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MaxOpenAPIDocumentBytes is the largest document a workspace may import.
const MaxOpenAPIDocumentBytes = 4 << 20

// OpenAPISources stores the OpenAPI documents of workspaces. A change to them changes the
// workspace's ToolsStamp, since they are tools.
type OpenAPISources interface {
	// PutOpenAPISource stores s in its workspace, replacing the source of the same name (whose
	// CreatedAt and CreatedBy it keeps, and whose UpdatedAt it moves forward, by a microsecond
	// when the clock has not); created says whether it was new. It sets the times.
	// A workspace that does not exist is ErrNotFound.
	PutOpenAPISource(ctx context.Context, s *OpenAPISource) (created bool, err error)
	// OpenAPISource returns a source of the workspace, or ErrNotFound.
	OpenAPISource(ctx context.Context, workspaceID, name string) (*OpenAPISource, error)
	// OpenAPISources lists the sources of the workspace, by name.
	OpenAPISources(ctx context.Context, workspaceID string) ([]*OpenAPISource, error)
	// DeleteOpenAPISource removes a source of the workspace, or is ErrNotFound.
	DeleteOpenAPISource(ctx context.Context, workspaceID, name string) error
}

var openAPISourceName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// CheckOpenAPISource checks what every backend refuses alike.
func CheckOpenAPISource(s *OpenAPISource) error {
	switch {
	case s.WorkspaceID == "":
		return fmt.Errorf("an OpenAPI source needs a workspace: %w", ErrInvalid)
	case !openAPISourceName.MatchString(s.Name):
		return fmt.Errorf("OpenAPI source name %q: use 1 to 32 letters, digits, _ and -: %w", s.Name, ErrInvalid)
	case len(s.Document) == 0:
		return fmt.Errorf("OpenAPI source %s has no document: %w", s.Name, ErrInvalid)
	case len(s.Document) > MaxOpenAPIDocumentBytes:
		return fmt.Errorf("OpenAPI source %s: the document is larger than %d bytes: %w", s.Name, MaxOpenAPIDocumentBytes, ErrInvalid)
	case s.Timeout < 0 || s.MaxResponseBytes < 0 || s.MaxOperations < 0:
		return fmt.Errorf("OpenAPI source %s: a negative timeout, answer cap or operations cap: %w", s.Name, ErrInvalid)
	}
	return nil
}

// Clone returns a copy of s that shares nothing with it.
func (s *OpenAPISource) Clone() *OpenAPISource {
	c := *s
	c.Document = append([]byte(nil), s.Document...)
	c.Servers = append([]string(nil), s.Servers...)
	c.Operations = append([]string(nil), s.Operations...)
	if s.Credentials != nil {
		c.Credentials = make(map[string]string, len(s.Credentials))
		for k, v := range s.Credentials {
			c.Credentials[k] = v
		}
	}
	return &c
}
