package store

import (
	"context"
	"encoding/json"
	"time"
)

// WorkspaceGovernance is the rules a workspace's admins set on the workspace's tools, over the
// operator's (see quiver.Governance). The store keeps Rules as the platform encodes them (a
// JSON array) and never reads them. It is part of a workspace's tools: a change to it changes
// Entities.ToolsStamp, so that every node serving the workspace sees it within a recheck.
type WorkspaceGovernance struct {
	WorkspaceID string
	// Rules is a JSON array, at most MaxGovernanceBytes.
	Rules json.RawMessage
	// Version counts the workspace's changes to its rules: 1, 2, ...; 0 when none were ever
	// stored. Set by the store.
	Version int64
	// UpdatedBy is the user who stored this version ("" for the operator's tools).
	UpdatedBy string
	UpdatedAt time.Time
}

// MaxGovernanceBytes bounds a workspace's rules.
const MaxGovernanceBytes = 256 << 10

// Governances keeps each workspace's governance rules.
type Governances interface {
	// WorkspaceGovernance returns the workspace's rules; Version 0 and no Rules when it never
	// stored any. ErrNotFound for no such workspace.
	WorkspaceGovernance(ctx context.Context, workspaceID string) (*WorkspaceGovernance, error)
	// PutWorkspaceGovernance stores g's Rules as the workspace's next version when its current
	// version is after (ErrConflict otherwise: a writer that decided from what it read stores
	// nothing when another wrote meanwhile), setting g's Version and UpdatedAt. Rules that
	// are not a JSON array, or over MaxGovernanceBytes, are ErrInvalid; ErrNotFound for no
	// such workspace.
	PutWorkspaceGovernance(ctx context.Context, g *WorkspaceGovernance, after int64) error
}

// CheckGovernance reports, wrapping ErrInvalid, rules no store keeps.
func CheckGovernance(g *WorkspaceGovernance) error {
	if g == nil {
		return checkWorkspaceDocument("the governance rules", "", nil, MaxGovernanceBytes, '[')
	}
	return checkWorkspaceDocument("the governance rules", g.WorkspaceID, g.Rules, MaxGovernanceBytes, '[')
}
