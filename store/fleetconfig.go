package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// FleetConfig is one version of the configuration every node of a fleet shares: its agents and
// prompts, the tool sources it imports (OpenAPI documents, remote MCP servers, A2A agents) and
// how they are governed. The store keeps it as the platform encodes it (Content) and never
// reads it; the documents it refers to (OpenAPI documents) are kept apart, by the digest of
// their content, so that a version that changes an agent does not copy every document.
//
// Versions are numbered 1, 2, 3... in the order they were stored, and never change once stored:
// the latest is the fleet's configuration, the others its history.
type FleetConfig struct {
	// Version is set by the store: one more than the latest when stored.
	Version int64
	// Digest is the SHA-256 of Content, in hex (see FleetDigest): equal digests, equal
	// configurations.
	Digest string
	// Content is the configuration as the platform encodes it, at most MaxFleetConfigBytes.
	Content []byte
	// Documents are the documents Content refers to, by the FleetDigest of each; at most
	// MaxFleetDocuments of them, each at most MaxFleetDocumentBytes.
	Documents map[string][]byte
	// AppliedBy says who stored it ("quiver apply", "quiver serve at start"), for the history.
	AppliedBy string
	// CreatedAt is set by the store.
	CreatedAt time.Time
}

// Bounds of a fleet configuration.
const (
	MaxFleetConfigBytes = 8 << 20
	MaxFleetDocuments   = 256
	// MaxFleetDocumentBytes bounds one document: the most the operator's configuration may
	// name (openapi.MaxDocumentBytes, 16 MiB; GitHub's REST description is 13 MB), more than
	// a workspace imports (MaxOpenAPIDocumentBytes).
	MaxFleetDocumentBytes = 16 << 20
	// MaxFleetAppliedByBytes bounds AppliedBy.
	MaxFleetAppliedByBytes = 200
)

// FleetConfigs keeps the versions of the fleet's configuration. It is shared by every
// workspace: what it holds is the operator's, not a tenant's.
type FleetConfigs interface {
	// FleetConfigVersion returns the latest version's number and digest, 0 and "" when none is
	// stored: what each node asks, often, to learn that the configuration changed.
	FleetConfigVersion(ctx context.Context) (version int64, digest string, err error)
	// FleetConfig returns a version with its documents (0: the latest), or ErrNotFound.
	FleetConfig(ctx context.Context, version int64) (*FleetConfig, error)
	// FleetConfigHistory lists up to limit versions (1 to 1000), newest first, without their
	// content and documents.
	FleetConfigHistory(ctx context.Context, limit int) ([]*FleetConfig, error)
	// PutFleetConfig stores c as a new version unless the latest has c's digest, in which case
	// it stores nothing and reports created false; either way it sets c's Version, AppliedBy
	// and CreatedAt to the version that is now the latest. With after >= 0 it stores c only
	// when the latest version is after (0: none is stored), and is ErrConflict otherwise:
	// a writer that decided from what it read stores nothing when another wrote meanwhile.
	// c must pass CheckFleetConfig (ErrInvalid).
	PutFleetConfig(ctx context.Context, c *FleetConfig, after int64) (created bool, err error)
}

// FleetDigest is the digest a fleet configuration or document is known by: its SHA-256, in hex.
func FleetDigest(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// CheckFleetConfig checks what every backend refuses alike: a digest that is not Content's, a
// document whose key is not its digest, sizes over the bounds.
func CheckFleetConfig(c *FleetConfig) error {
	switch {
	case len(c.Content) == 0:
		return fmt.Errorf("a fleet configuration has no content: %w", ErrInvalid)
	case len(c.Content) > MaxFleetConfigBytes:
		return fmt.Errorf("a fleet configuration of %d bytes is over the %d byte bound: %w", len(c.Content), MaxFleetConfigBytes, ErrInvalid)
	case c.Digest != FleetDigest(c.Content):
		return fmt.Errorf("a fleet configuration's digest %q is not its content's: %w", c.Digest, ErrInvalid)
	case len(c.Documents) > MaxFleetDocuments:
		return fmt.Errorf("a fleet configuration with %d documents is over the bound of %d: %w", len(c.Documents), MaxFleetDocuments, ErrInvalid)
	case len(c.AppliedBy) > MaxFleetAppliedByBytes:
		return fmt.Errorf("a fleet configuration's applied_by is over %d bytes: %w", MaxFleetAppliedByBytes, ErrInvalid)
	}
	for digest, doc := range c.Documents {
		switch {
		case len(doc) > MaxFleetDocumentBytes:
			return fmt.Errorf("fleet document %.12s is over the %d byte bound: %w", digest, MaxFleetDocumentBytes, ErrInvalid)
		case digest != FleetDigest(doc):
			return fmt.Errorf("fleet document %.12s is not known by its digest: %w", digest, ErrInvalid)
		}
	}
	return nil
}

// CheckHistoryLimit checks FleetConfigHistory's limit.
func CheckHistoryLimit(limit int) error {
	if limit < 1 || limit > 1000 {
		return fmt.Errorf("a history of %d versions: give 1 to 1000: %w", limit, ErrInvalid)
	}
	return nil
}
