package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// Entities implements store.Entities (workspaces, users, memberships, schemas, functions and
// tools; migration 0004) for both backends, which embed it.
//
// Every write is one transaction, and the rules that involve other records (same workspace,
// membership, free name) are checked inside it, so a check and the write it guards cannot be
// separated by another writer:
//
//   - where writers take turns (SQLite), that is all it takes;
//   - where they run side by side (PostgreSQL at READ COMMITTED, Dialect.RowLocks), the
//     transaction also locks what its checks read: changes to a workspace and to its
//     memberships lock the workspace row first, so they take turns (no two admins demoting
//     each other, no removing a member while they become the default runtime user); a
//     membership a write relies on (the caller is an admin, the runtime user or creator is a
//     member) is read FOR SHARE, and RemoveMember locks it FOR UPDATE before checking that no
//     active tool runs as the user; versions lock their function row, so version numbers are
//     assigned one at a time; and a tool's name is checked, with the unique index tools_name
//     settling concurrent creations (reported as store.ErrConflict).
//
// Times come from Dialect.Now; a change never moves UpdatedAt back.
type Entities struct{ db }

var _ store.Entities = (*Entities)(nil)

// now is the time of a write in tx (see Dialect.Now).
func (e *Entities) now(ctx context.Context, tx Querier, op string) (time.Time, error) {
	t, err := e.d.Now(ctx, tx)
	if err != nil {
		return time.Time{}, e.d.Err(op, err)
	}
	return t, nil
}

// ---- workspaces

const workspaceCols = `id, name, default_runtime_user_id, retention_tier, created_at, updated_at`

func scanWorkspace(row scanner) (*store.Workspace, error) {
	var (
		w       store.Workspace
		runtime sql.NullString
	)
	if err := row.Scan(&w.ID, &w.Name, &runtime, &w.RetentionTier, scanTime{&w.CreatedAt}, scanTime{&w.UpdatedAt}); err != nil {
		return nil, err
	}
	w.DefaultRuntimeUserID = runtime.String
	return &w, nil
}

// CreateWorkspace stores a new workspace, setting ID (when empty), RetentionTier (when empty)
// and the times. DefaultRuntimeUserID must be empty: a new workspace has no members yet.
func (e *Entities) CreateWorkspace(ctx context.Context, w *store.Workspace) error {
	op := "create workspace"
	if w == nil {
		return e.d.failf(op, store.ErrInvalid, "nil workspace")
	}
	nw := *w
	if nw.ID == "" {
		nw.ID = stamp.ID(ctx, store.PrefixWorkspace)
	}
	if nw.RetentionTier == "" {
		nw.RetentionTier = store.DefaultRetentionTier
	}
	if err := nw.Check(); err != nil {
		return e.d.fail(op, err)
	}
	if nw.DefaultRuntimeUserID != "" {
		return e.d.failf(op, store.ErrInvalid, "a new workspace has no members to run tools as: add members, then set the default runtime user")
	}
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		now, err := e.now(ctx, tx, op)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO workspaces (`+workspaceCols+`) VALUES ($1, $2, NULL, $3, $4, $4)`,
			nw.ID, nw.Name, nw.RetentionTier, e.d.Time(now)); err != nil {
			return err
		}
		nw.CreatedAt, nw.UpdatedAt = now, now
		return nil
	})
	if err != nil {
		return e.d.Err(op, err)
	}
	*w = nw
	return nil
}

// Workspace returns the workspace, or store.ErrNotFound.
func (e *Entities) Workspace(ctx context.Context, id string) (*store.Workspace, error) {
	w, err := scanWorkspace(e.read.QueryRowContext(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE id = $1`, id))
	if err != nil {
		return nil, e.d.Err("workspace "+id, err)
	}
	return w, nil
}

// lockWorkspace reads the workspace inside a write, locking its row until the transaction
// ends: changes to a workspace and its memberships take turns.
func (e *Entities) lockWorkspace(ctx context.Context, tx Querier, op, id string) (*store.Workspace, error) {
	w, err := scanWorkspace(tx.QueryRowContext(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE id = $1`+e.d.lock("FOR NO KEY UPDATE"), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, e.d.failf(op, store.ErrNotFound, "no workspace %s", id)
	}
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	return w, nil
}

// UpdateWorkspace applies fn to the workspace in one transaction and stores its Name,
// DefaultRuntimeUserID and RetentionTier (anything else changing is store.ErrInvalid). Changing
// the default runtime user needs callerUserID to be an admin of the workspace
// (store.ErrForbidden) and the new user to be a member (store.ErrInvalid).
func (e *Entities) UpdateWorkspace(ctx context.Context, id, callerUserID string, fn func(*store.Workspace) error) (*store.Workspace, error) {
	op := "update workspace " + id
	var out *store.Workspace
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		var err error
		out, err = e.updateWorkspace(ctx, tx, op, id, callerUserID, fn)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// updateWorkspace is UpdateWorkspace inside the write transaction.
func (e *Entities) updateWorkspace(ctx context.Context, tx Querier, op, id, callerUserID string, fn func(*store.Workspace) error) (*store.Workspace, error) {
	w, err := e.lockWorkspace(ctx, tx, op, id)
	if err != nil {
		return nil, err
	}
	before := *w
	if err := fn(w); err != nil {
		return nil, err
	}
	if w.ID != before.ID || !w.CreatedAt.Equal(before.CreatedAt) || !w.UpdatedAt.Equal(before.UpdatedAt) {
		return nil, e.d.failf(op, store.ErrInvalid, "only the name, default runtime user and retention tier may change")
	}
	if err := w.Check(); err != nil {
		return nil, e.d.fail(op, err)
	}
	if w.DefaultRuntimeUserID != before.DefaultRuntimeUserID {
		if err := e.checkRuntimeUser(ctx, tx, op, id, callerUserID, w.DefaultRuntimeUserID, "the workspace's default runtime user"); err != nil {
			return nil, err
		}
	}
	now, err := e.now(ctx, tx, op)
	if err != nil {
		return nil, err
	}
	now = notBefore(now, before.UpdatedAt)
	if _, err := tx.ExecContext(ctx, `UPDATE workspaces SET name = $1, default_runtime_user_id = $2, retention_tier = $3, updated_at = $4
		WHERE id = $5`, w.Name, nullString(w.DefaultRuntimeUserID), w.RetentionTier, e.d.Time(now), id); err != nil {
		return nil, e.d.Err(op, err)
	}
	w.UpdatedAt = now
	return w, nil
}

// memberRole returns the user's role in the workspace, "" when not a member, and keeps the
// membership from being changed or removed until the transaction ends.
func (b db) memberRole(ctx context.Context, tx Querier, op, workspaceID, userID string) (store.MemberRole, error) {
	var role store.MemberRole
	err := tx.QueryRowContext(ctx, `SELECT role FROM memberships WHERE workspace_id = $1 AND user_id = $2`+b.d.lock("FOR SHARE"),
		workspaceID, userID).Scan(&role)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return role, b.d.Err(op, err)
}

// checkRuntimeUser enforces who may set a runtime user (what names the setting): the caller
// must be an admin of the workspace and the new user ("" clears it) a member.
func (e *Entities) checkRuntimeUser(ctx context.Context, tx Querier, op, workspaceID, callerUserID, newUserID, what string) error {
	role, err := e.memberRole(ctx, tx, op, workspaceID, callerUserID)
	if err != nil {
		return err
	}
	if role != store.MemberRoleAdmin {
		who := "no caller was named"
		if callerUserID != "" {
			who = fmt.Sprintf("user %s is not an admin of workspace %s", callerUserID, workspaceID)
		}
		return e.d.failf(op, store.ErrForbidden, "only a workspace admin may set %s: %s", what, who)
	}
	if newUserID == "" {
		return nil
	}
	role, err = e.memberRole(ctx, tx, op, workspaceID, newUserID)
	if err != nil {
		return err
	}
	if role == "" {
		return e.d.failf(op, store.ErrInvalid, "%s must be a member of workspace %s, and user %s is not", what, workspaceID, newUserID)
	}
	return nil
}
