package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// WorkspaceEntitlements is a workspace's entitlement document: who may see and call which of
// its tools (see platform's entitlements). The store keeps Document as the platform encodes
// it (a JSON object) and never reads it. A change to it changes Entities.ToolsStamp, so that
// every node serving the workspace sees it within a recheck.
type WorkspaceEntitlements struct {
	WorkspaceID string
	// Document is a JSON object, at most MaxEntitlementsBytes.
	Document json.RawMessage
	// Version counts the workspace's changes to its document: 1, 2, ...; 0 when none was ever
	// stored. Set by the store.
	Version int64
	// UpdatedBy is the user who stored this version.
	UpdatedBy string
	UpdatedAt time.Time
}

// MaxEntitlementsBytes bounds a workspace's entitlement document: larger than the governance
// rules' bound, since it may list callers one by one.
const MaxEntitlementsBytes = 8 << 20

// Entitlements keeps each workspace's entitlement document, versioned as the governance rules
// are (see Governances), so that two admins editing it at once never lose a change silently.
type Entitlements interface {
	// WorkspaceEntitlements returns the workspace's document; Version 0 and no Document when
	// it never stored one. ErrNotFound for no such workspace.
	WorkspaceEntitlements(ctx context.Context, workspaceID string) (*WorkspaceEntitlements, error)
	// PutWorkspaceEntitlements stores e's Document as the workspace's next version when its
	// current version is after (ErrConflict otherwise), setting e's Version and UpdatedAt. A
	// Document that is not a JSON object, or over MaxEntitlementsBytes, is ErrInvalid;
	// ErrNotFound for no such workspace.
	PutWorkspaceEntitlements(ctx context.Context, e *WorkspaceEntitlements, after int64) error
}

// CheckEntitlements reports, wrapping ErrInvalid, an entitlement document no store keeps.
func CheckEntitlements(e *WorkspaceEntitlements) error {
	if e == nil {
		return checkWorkspaceDocument("the entitlement document", "", nil, MaxEntitlementsBytes, '{')
	}
	return checkWorkspaceDocument("the entitlement document", e.WorkspaceID, e.Document, MaxEntitlementsBytes, '{')
}

// checkWorkspaceDocument reports, wrapping ErrInvalid, a workspace's versioned document (its
// governance rules, its entitlements) that no store keeps: one without a workspace, over limit
// bytes, or not JSON opening with open ('[' for an array, '{' for an object).
func checkWorkspaceDocument(what, workspaceID string, doc json.RawMessage, limit int, open byte) error {
	kind := map[byte]string{'[': "array", '{': "object"}[open]
	trimmed := bytes.TrimLeft(doc, " \t\r\n")
	switch {
	case workspaceID == "":
		return fmt.Errorf("%s needs a workspace: %w", what, ErrInvalid)
	case len(doc) > limit:
		return fmt.Errorf("%s of workspace %s is %d bytes, over the %d byte bound: %w", what, workspaceID, len(doc), limit, ErrInvalid)
	case len(trimmed) == 0 || trimmed[0] != open || !json.Valid(doc):
		return fmt.Errorf("%s of workspace %s must be a JSON %s: %w", what, workspaceID, kind, ErrInvalid)
	}
	return nil
}
