package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/quiverhq/quiver/store"
)

// A workspace's versioned documents, its governance rules (store.Governances; migration 0016)
// and its entitlements (store.Entitlements; migration 0018), are kept alike: one row per
// workspace in a table of their own, part of Entities (a change to either changes ToolsStamp,
// like a change to the tools). One read and one write serve both.

// docTable is where a kind of workspace document is kept: its table and the column of the
// document; name and what word its errors ("put the governance of workspace wsp_1: the rules
// are at version 2").
type docTable struct{ table, column, name, what string }

var (
	governanceTable   = docTable{"workspace_governance", "rules", "governance", "rules"}
	entitlementsTable = docTable{"workspace_entitlements", "document", "entitlements", "entitlements"}
	limitsTable       = docTable{"workspace_limits", "document", "limits", "limits"}
)

// workspaceDoc is one version of a workspace's document as its table keeps it.
type workspaceDoc struct {
	doc       []byte
	version   int64
	updatedBy string
	updatedAt time.Time
}

// workspaceDoc returns the workspace's document of t; the zero workspaceDoc when it never
// stored one. ErrNotFound for no such workspace.
func (e *Entities) workspaceDoc(ctx context.Context, t docTable, workspaceID string) (workspaceDoc, error) {
	d, err := e.readWorkspaceDoc(ctx, e.read, t, workspaceID)
	if err != nil {
		return d, e.d.Err(t.name+" of workspace "+workspaceID, err)
	}
	if d.version == 0 {
		// No document: the workspace must exist all the same.
		if _, err := e.Workspace(ctx, workspaceID); err != nil {
			return d, err
		}
	}
	return d, nil
}

func (e *Entities) readWorkspaceDoc(ctx context.Context, q Querier, t docTable, workspaceID string) (workspaceDoc, error) {
	var d workspaceDoc
	var doc string
	err := q.QueryRowContext(ctx, `SELECT `+t.column+`, version, updated_by, updated_at FROM `+t.table+` WHERE workspace_id = $1`,
		workspaceID).Scan(&doc, &d.version, &d.updatedBy, scanTime{&d.updatedAt})
	if errors.Is(err, sql.ErrNoRows) {
		return workspaceDoc{}, nil
	}
	if err != nil {
		return workspaceDoc{}, err
	}
	d.doc = []byte(doc)
	return d, nil
}

// putWorkspaceDoc stores doc, already checked, as the workspace's next version of its
// document of t when its current one is after, and sets *version and *at to the new version
// and its time. The workspace's row is locked first, so that two writers take turns and the
// second finds the first's version.
func (e *Entities) putWorkspaceDoc(ctx context.Context, t docTable, workspaceID string, doc []byte, by string, after int64,
	version *int64, at *time.Time) error {
	op := "put the " + t.name + " of workspace " + workspaceID
	var now time.Time
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		if _, err := e.lockWorkspace(ctx, tx, op, workspaceID); err != nil {
			return err
		}
		cur, err := e.readWorkspaceDoc(ctx, tx, t, workspaceID)
		if err != nil {
			return e.d.Err(op, err)
		}
		if cur.version != after {
			return e.d.failf(op, store.ErrConflict, "the %s are at version %d, not %d: read them again", t.what, cur.version, after)
		}
		if now, err = e.now(ctx, tx, op); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO `+t.table+` (workspace_id, `+t.column+`, version, updated_by, updated_at)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (workspace_id) DO UPDATE SET `+t.column+` = $2, version = $3, updated_by = $4, updated_at = $5`,
			workspaceID, string(doc), after+1, by, e.d.Time(now))
		return e.d.Err(op, err)
	})
	if err != nil {
		return err
	}
	*version, *at = after+1, now
	return nil
}

// WorkspaceGovernance returns the workspace's rules (see store.Governances).
func (e *Entities) WorkspaceGovernance(ctx context.Context, workspaceID string) (*store.WorkspaceGovernance, error) {
	d, err := e.workspaceDoc(ctx, governanceTable, workspaceID)
	if err != nil {
		return nil, err
	}
	return &store.WorkspaceGovernance{WorkspaceID: workspaceID, Rules: d.doc, Version: d.version, UpdatedBy: d.updatedBy, UpdatedAt: d.updatedAt}, nil
}

// PutWorkspaceGovernance stores the workspace's next version of its rules when its current
// one is after (see store.Governances).
func (e *Entities) PutWorkspaceGovernance(ctx context.Context, g *store.WorkspaceGovernance, after int64) error {
	if err := store.CheckGovernance(g); err != nil {
		return e.d.fail("put governance rules", err)
	}
	return e.putWorkspaceDoc(ctx, governanceTable, g.WorkspaceID, g.Rules, g.UpdatedBy, after, &g.Version, &g.UpdatedAt)
}

// WorkspaceEntitlements returns the workspace's entitlement document (see
// store.Entitlements).
func (e *Entities) WorkspaceEntitlements(ctx context.Context, workspaceID string) (*store.WorkspaceEntitlements, error) {
	d, err := e.workspaceDoc(ctx, entitlementsTable, workspaceID)
	if err != nil {
		return nil, err
	}
	return &store.WorkspaceEntitlements{WorkspaceID: workspaceID, Document: d.doc, Version: d.version, UpdatedBy: d.updatedBy, UpdatedAt: d.updatedAt}, nil
}

// PutWorkspaceEntitlements stores the workspace's next version of its entitlement document
// when its current one is after (see store.Entitlements).
func (e *Entities) PutWorkspaceEntitlements(ctx context.Context, w *store.WorkspaceEntitlements, after int64) error {
	if err := store.CheckEntitlements(w); err != nil {
		return e.d.fail("put entitlements", err)
	}
	return e.putWorkspaceDoc(ctx, entitlementsTable, w.WorkspaceID, w.Document, w.UpdatedBy, after, &w.Version, &w.UpdatedAt)
}

// WorkspaceLimits returns the workspace's limits document (see store.Limits).
func (e *Entities) WorkspaceLimits(ctx context.Context, workspaceID string) (*store.WorkspaceLimits, error) {
	d, err := e.workspaceDoc(ctx, limitsTable, workspaceID)
	if err != nil {
		return nil, err
	}
	return &store.WorkspaceLimits{WorkspaceID: workspaceID, Document: d.doc, Version: d.version, UpdatedBy: d.updatedBy, UpdatedAt: d.updatedAt}, nil
}

// PutWorkspaceLimits stores the workspace's next version of its limits document when its
// current one is after (see store.Limits).
func (e *Entities) PutWorkspaceLimits(ctx context.Context, l *store.WorkspaceLimits, after int64) error {
	if err := store.CheckLimits(l); err != nil {
		return e.d.fail("put limits", err)
	}
	return e.putWorkspaceDoc(ctx, limitsTable, l.WorkspaceID, l.Document, l.UpdatedBy, after, &l.Version, &l.UpdatedAt)
}
