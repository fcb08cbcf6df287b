package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// A workspace's versioned documents, its governance rules (store.Governances) and its
// entitlements (store.Entitlements), are kept and versioned alike: one read and one write
// serve both, as in sqlstore.

// docKind is a kind of workspace document; name and what word its errors ("put the governance
// of workspace wsp_1: the rules are at version 2"), as sqlstore words them.
type docKind struct{ name, what string }

var (
	docGovernance   = docKind{"governance", "rules"}
	docEntitlements = docKind{"entitlements", "entitlements"}
	docLimits       = docKind{"limits", "limits"}
)

// docKey finds a workspace's document of a kind.
type docKey struct {
	kind        docKind
	workspaceID string
}

// workspaceDoc is one version of a workspace's document, the Store's own copy.
type workspaceDoc struct {
	doc       []byte
	version   int64
	updatedBy string
	updatedAt time.Time
}

// workspaceDoc returns a copy of the workspace's document of kind; the zero workspaceDoc when
// it never stored one. ErrNotFound for no such workspace.
func (s *Store) workspaceDoc(kind docKind, workspaceID string) (workspaceDoc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ent.workspaces[workspaceID] == nil {
		return workspaceDoc{}, entityOp(kind.name+" of workspace "+workspaceID).failf(store.ErrNotFound, "no workspace %s", workspaceID)
	}
	if d := s.ent.docs[docKey{kind, workspaceID}]; d != nil {
		c := *d
		c.doc = slices.Clone(d.doc)
		return c, nil
	}
	return workspaceDoc{}, nil
}

// putWorkspaceDoc stores doc, already checked, as the workspace's next version of its document
// of kind when its current version is after, and sets *version and *at to the new version and
// its time. A change to either document changes the workspace's ToolsStamp: both govern its
// tools.
func (s *Store) putWorkspaceDoc(ctx context.Context, kind docKind, workspaceID string, doc []byte, by string, after int64,
	version *int64, at *time.Time) error {
	op := entityOp("put the " + kind.name + " of workspace " + workspaceID)
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	if d.workspaces[workspaceID] == nil {
		return op.failf(store.ErrNotFound, "no workspace %s", workspaceID)
	}
	key := docKey{kind, workspaceID}
	var cur int64
	if old := d.docs[key]; old != nil {
		cur = old.version
	}
	if cur != after {
		return op.failf(store.ErrConflict, "the %s are at version %d, not %d: read them again", kind.what, cur, after)
	}
	if d.docs == nil {
		d.docs = map[docKey]*workspaceDoc{}
	}
	next := &workspaceDoc{doc: slices.Clone(doc), version: after + 1, updatedBy: by, updatedAt: stamp.Now(ctx)}
	d.docs[key] = next
	d.scopes[workspaceID].rev++
	*version, *at = next.version, next.updatedAt
	return nil
}

// WorkspaceGovernance returns the workspace's rules (see store.Governances).
func (s *Store) WorkspaceGovernance(_ context.Context, workspaceID string) (*store.WorkspaceGovernance, error) {
	d, err := s.workspaceDoc(docGovernance, workspaceID)
	if err != nil {
		return nil, err
	}
	return &store.WorkspaceGovernance{WorkspaceID: workspaceID, Rules: d.doc, Version: d.version, UpdatedBy: d.updatedBy, UpdatedAt: d.updatedAt}, nil
}

// PutWorkspaceGovernance stores the workspace's next version of its rules when its current
// one is after (see store.Governances).
func (s *Store) PutWorkspaceGovernance(ctx context.Context, g *store.WorkspaceGovernance, after int64) error {
	if err := store.CheckGovernance(g); err != nil {
		return entityOp("put governance rules").fail(err)
	}
	return s.putWorkspaceDoc(ctx, docGovernance, g.WorkspaceID, g.Rules, g.UpdatedBy, after, &g.Version, &g.UpdatedAt)
}

// WorkspaceEntitlements returns the workspace's entitlement document (see store.Entitlements).
func (s *Store) WorkspaceEntitlements(_ context.Context, workspaceID string) (*store.WorkspaceEntitlements, error) {
	d, err := s.workspaceDoc(docEntitlements, workspaceID)
	if err != nil {
		return nil, err
	}
	return &store.WorkspaceEntitlements{WorkspaceID: workspaceID, Document: d.doc, Version: d.version, UpdatedBy: d.updatedBy, UpdatedAt: d.updatedAt}, nil
}

// PutWorkspaceEntitlements stores the workspace's next version of its entitlement document
// when its current one is after (see store.Entitlements).
func (s *Store) PutWorkspaceEntitlements(ctx context.Context, e *store.WorkspaceEntitlements, after int64) error {
	if err := store.CheckEntitlements(e); err != nil {
		return entityOp("put entitlements").fail(err)
	}
	return s.putWorkspaceDoc(ctx, docEntitlements, e.WorkspaceID, e.Document, e.UpdatedBy, after, &e.Version, &e.UpdatedAt)
}

// WorkspaceLimits returns the workspace's limits document (see store.Limits).
func (s *Store) WorkspaceLimits(_ context.Context, workspaceID string) (*store.WorkspaceLimits, error) {
	d, err := s.workspaceDoc(docLimits, workspaceID)
	if err != nil {
		return nil, err
	}
	return &store.WorkspaceLimits{WorkspaceID: workspaceID, Document: d.doc, Version: d.version, UpdatedBy: d.updatedBy, UpdatedAt: d.updatedAt}, nil
}

// PutWorkspaceLimits stores the workspace's next version of its limits document when its
// current one is after (see store.Limits).
func (s *Store) PutWorkspaceLimits(ctx context.Context, l *store.WorkspaceLimits, after int64) error {
	if err := store.CheckLimits(l); err != nil {
		return entityOp("put limits").fail(err)
	}
	return s.putWorkspaceDoc(ctx, docLimits, l.WorkspaceID, l.Document, l.UpdatedBy, after, &l.Version, &l.UpdatedAt)
}
