package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quiverhq/quiver/store"
)

// This file implements store.Entities: workspaces, users, memberships, schemas, functions and
// tools (migration 0004). Every write is one transaction on the writer connection, and the
// rules that involve other records (same workspace, membership, free name) are checked inside
// it: writers take turns, so a check and the write it guards cannot be separated by another
// writer, in this process or another one.

var _ store.Entities = (*Store)(nil)

// dbtx is what the writer transaction and the read pool have in common.
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// entityNow is the store's clock for entities: UTC, without monotonic reading.
func entityNow() time.Time { return time.Now().UTC().Round(0) }

// notBefore keeps an UpdatedAt from going back when the clock does.
func notBefore(now, prev time.Time) time.Time {
	if now.Before(prev) {
		return prev
	}
	return now
}

// fail wraps err, from a rule the store checks, with the operation.
func fail(op string, err error) error { return fmt.Errorf("sqlite: %s: %w", op, err) }

// failf reports a broken rule: kind is the store error it wraps.
func failf(op string, kind error, format string, args ...any) error {
	return fmt.Errorf("sqlite: %s: %s: %w", op, fmt.Sprintf(format, args...), kind)
}

// dbFail maps a database error: no row is store.ErrNotFound, a unique constraint
// store.ErrConflict, another constraint store.ErrInvalid.
// An error that already says which rule broke (or nil) is returned as is.
func dbFail(op string, err error) error {
	switch {
	case err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid) ||
		errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrForbidden):
		return err
	case errors.Is(err, sql.ErrNoRows):
		return fail(op, store.ErrNotFound)
	case isConstraint(err) && strings.Contains(err.Error(), "UNIQUE"):
		return fmt.Errorf("sqlite: %s: %v: %w", op, err, store.ErrConflict)
	case isConstraint(err):
		return fmt.Errorf("sqlite: %s: %v: %w", op, err, store.ErrInvalid)
	}
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

func nullTime(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

// ---- workspaces

const workspaceCols = `id, name, default_runtime_user_id, retention_tier, created_at, updated_at`

func scanWorkspace(row scanner) (*store.Workspace, error) {
	var (
		w                store.Workspace
		runtime          sql.NullString
		created, updated int64
	)
	if err := row.Scan(&w.ID, &w.Name, &runtime, &w.RetentionTier, &created, &updated); err != nil {
		return nil, err
	}
	w.DefaultRuntimeUserID = runtime.String
	w.CreatedAt, w.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &w, nil
}

// CreateWorkspace stores a new workspace, setting ID (when empty), RetentionTier (when empty)
// and the times. DefaultRuntimeUserID must be empty: a new workspace has no members yet.
func (s *Store) CreateWorkspace(ctx context.Context, w *store.Workspace) error {
	op := "create workspace"
	if w == nil {
		return failf(op, store.ErrInvalid, "nil workspace")
	}
	nw := *w
	if nw.ID == "" {
		nw.ID = store.NewID(store.PrefixWorkspace)
	}
	if nw.RetentionTier == "" {
		nw.RetentionTier = store.DefaultRetentionTier
	}
	if err := nw.Check(); err != nil {
		return fail(op, err)
	}
	if nw.DefaultRuntimeUserID != "" {
		return failf(op, store.ErrInvalid, "a new workspace has no members to run tools as: add members, then set the default runtime user")
	}
	now := entityNow()
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO workspaces (`+workspaceCols+`) VALUES (?, ?, NULL, ?, ?, ?)`,
			nw.ID, nw.Name, nw.RetentionTier, now.UnixNano(), now.UnixNano())
		if isConstraint(err) {
			return failf(op, store.ErrConflict, "id %s is taken", nw.ID)
		}
		return err
	})
	if err != nil {
		return dbFail(op, err)
	}
	nw.CreatedAt, nw.UpdatedAt = now, now
	*w = nw
	return nil
}

// Workspace returns the workspace, or store.ErrNotFound.
func (s *Store) Workspace(ctx context.Context, id string) (*store.Workspace, error) {
	w, err := scanWorkspace(s.r.QueryRowContext(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE id = ?`, id))
	if err != nil {
		return nil, dbFail("workspace "+id, err)
	}
	return w, nil
}

// UpdateWorkspace applies fn to the workspace in one transaction and stores its Name,
// DefaultRuntimeUserID and RetentionTier (anything else changing is store.ErrInvalid). Changing
// the default runtime user needs callerUserID to be an admin of the workspace
// (store.ErrForbidden) and the new user to be a member (store.ErrInvalid).
func (s *Store) UpdateWorkspace(ctx context.Context, id, callerUserID string, fn func(*store.Workspace) error) (*store.Workspace, error) {
	op := "update workspace " + id
	var out *store.Workspace
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		w, err := scanWorkspace(tx.QueryRowContext(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE id = ?`, id))
		if err != nil {
			return dbFail(op, err)
		}
		before := *w
		if err := fn(w); err != nil {
			return err
		}
		if w.ID != before.ID || !w.CreatedAt.Equal(before.CreatedAt) || !w.UpdatedAt.Equal(before.UpdatedAt) {
			return failf(op, store.ErrInvalid, "only the name, default runtime user and retention tier may change")
		}
		if err := w.Check(); err != nil {
			return fail(op, err)
		}
		if w.DefaultRuntimeUserID != before.DefaultRuntimeUserID {
			if err := checkRuntimeUser(ctx, tx, op, id, callerUserID, w.DefaultRuntimeUserID, "the workspace's default runtime user"); err != nil {
				return err
			}
		}
		now := notBefore(entityNow(), before.UpdatedAt)
		if _, err := tx.ExecContext(ctx, `UPDATE workspaces SET name = ?, default_runtime_user_id = ?, retention_tier = ?, updated_at = ? WHERE id = ?`,
			w.Name, nullString(w.DefaultRuntimeUserID), w.RetentionTier, now.UnixNano(), id); err != nil {
			return dbFail(op, err)
		}
		w.UpdatedAt = now
		out = w
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// memberRole returns the user's role in the workspace, "" when not a member.
func memberRole(ctx context.Context, q dbtx, workspaceID, userID string) (store.MemberRole, error) {
	var role store.MemberRole
	err := q.QueryRowContext(ctx, `SELECT role FROM memberships WHERE workspace_id = ? AND user_id = ?`, workspaceID, userID).Scan(&role)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return role, err
}

// checkRuntimeUser enforces E3 for setting a runtime user (what names the setting): caller must
// be an admin of the workspace and the new user ("" clears it) a member.
func checkRuntimeUser(ctx context.Context, tx dbtx, op, workspaceID, callerUserID, newUserID, what string) error {
	role, err := memberRole(ctx, tx, workspaceID, callerUserID)
	if err != nil {
		return dbFail(op, err)
	}
	if role != store.MemberRoleAdmin {
		who := "no caller was named"
		if callerUserID != "" {
			who = fmt.Sprintf("user %s is not an admin of workspace %s", callerUserID, workspaceID)
		}
		return failf(op, store.ErrForbidden, "only a workspace admin may set %s: %s", what, who)
	}
	if newUserID == "" {
		return nil
	}
	role, err = memberRole(ctx, tx, workspaceID, newUserID)
	if err != nil {
		return dbFail(op, err)
	}
	if role == "" {
		return failf(op, store.ErrInvalid, "%s must be a member of workspace %s, and user %s is not", what, workspaceID, newUserID)
	}
	return nil
}

// ---- users

const userCols = `id, email, name, created_at`

func scanUser(row scanner) (*store.User, error) {
	var (
		u       store.User
		created int64
	)
	if err := row.Scan(&u.ID, &u.Email, &u.Name, &created); err != nil {
		return nil, err
	}
	u.CreatedAt = fromNanos(created)
	return &u, nil
}

// CreateUser stores a new user, setting ID (when empty) and CreatedAt. An email already used,
// ignoring case, is store.ErrConflict.
func (s *Store) CreateUser(ctx context.Context, u *store.User) error {
	op := "create user"
	if u == nil {
		return failf(op, store.ErrInvalid, "nil user")
	}
	key, err := store.NormalizeEmail(u.Email)
	if err != nil {
		return fail(op, err)
	}
	id := u.ID
	if id == "" {
		id = store.NewID(store.PrefixUser)
	}
	email := strings.TrimSpace(u.Email)
	now := entityNow()
	err = s.write(ctx, func(ctx context.Context, tx querier) error {
		var other string
		err := tx.QueryRowContext(ctx, `SELECT id FROM users WHERE email_key = ?`, key).Scan(&other)
		if err == nil {
			return failf(op, store.ErrConflict, "email %s is already used by user %s", email, other)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO users (id, email, email_key, name, created_at) VALUES (?, ?, ?, ?, ?)`,
			id, email, key, u.Name, now.UnixNano())
		return err
	})
	if err != nil {
		return dbFail(op, err)
	}
	u.ID, u.Email, u.CreatedAt = id, email, now
	return nil
}

// User returns the user, or store.ErrNotFound.
func (s *Store) User(ctx context.Context, id string) (*store.User, error) {
	u, err := scanUser(s.r.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE id = ?`, id))
	if err != nil {
		return nil, dbFail("user "+id, err)
	}
	return u, nil
}

// UserByEmail returns the user with that email, ignoring case, or store.ErrNotFound.
func (s *Store) UserByEmail(ctx context.Context, email string) (*store.User, error) {
	op := "user by email"
	key, err := store.NormalizeEmail(email)
	if err != nil {
		return nil, fail(op, err)
	}
	u, err := scanUser(s.r.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE email_key = ?`, key))
	if err != nil {
		return nil, dbFail(op, err)
	}
	return u, nil
}

// ---- memberships

func scanMembership(row scanner) (*store.Membership, error) {
	var (
		m       store.Membership
		created int64
	)
	if err := row.Scan(&m.WorkspaceID, &m.UserID, &m.Role, &created); err != nil {
		return nil, err
	}
	m.CreatedAt = fromNanos(created)
	return &m, nil
}

// AddMember makes a user a member of a workspace, setting CreatedAt: store.ErrNotFound when
// either is missing, store.ErrConflict when the user is already a member.
func (s *Store) AddMember(ctx context.Context, m *store.Membership) error {
	if m == nil {
		return failf("add member", store.ErrInvalid, "nil membership")
	}
	op := fmt.Sprintf("add user %s to workspace %s", m.UserID, m.WorkspaceID)
	if !m.Role.Valid() {
		return failf(op, store.ErrInvalid, "role %q is neither admin nor member", m.Role)
	}
	now := entityNow()
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		if err := exists(ctx, tx, op, `SELECT 1 FROM workspaces WHERE id = ?`, "no such workspace", m.WorkspaceID); err != nil {
			return err
		}
		if err := exists(ctx, tx, op, `SELECT 1 FROM users WHERE id = ?`, "no such user", m.UserID); err != nil {
			return err
		}
		role, err := memberRole(ctx, tx, m.WorkspaceID, m.UserID)
		if err != nil {
			return err
		}
		if role != "" {
			return failf(op, store.ErrConflict, "already a member (%s)", role)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO memberships (workspace_id, user_id, role, created_at) VALUES (?, ?, ?, ?)`,
			m.WorkspaceID, m.UserID, m.Role, now.UnixNano())
		return err
	})
	if err != nil {
		return dbFail(op, err)
	}
	m.CreatedAt = now
	return nil
}

// exists fails with store.ErrNotFound (saying what) when query finds no row.
func exists(ctx context.Context, q dbtx, op, query, what string, args ...any) error {
	var one int
	err := q.QueryRowContext(ctx, query, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return failf(op, store.ErrNotFound, "%s", what)
	}
	return err
}

// Member returns the user's membership of the workspace, or store.ErrNotFound.
func (s *Store) Member(ctx context.Context, workspaceID, userID string) (*store.Membership, error) {
	m, err := scanMembership(s.r.QueryRowContext(ctx, `SELECT workspace_id, user_id, role, created_at FROM memberships
		WHERE workspace_id = ? AND user_id = ?`, workspaceID, userID))
	if err != nil {
		return nil, dbFail(fmt.Sprintf("membership of user %s in workspace %s", userID, workspaceID), err)
	}
	return m, nil
}

// Members lists the members of the workspace, oldest first.
func (s *Store) Members(ctx context.Context, workspaceID string) ([]*store.Membership, error) {
	op := "members of workspace " + workspaceID
	rows, err := s.r.QueryContext(ctx, `SELECT workspace_id, user_id, role, created_at FROM memberships
		WHERE workspace_id = ? ORDER BY created_at, user_id`, workspaceID)
	if err != nil {
		return nil, dbFail(op, err)
	}
	return collect(rows, op, scanMembership)
}

// collect reads every row with scan.
func collect[T any](rows *sql.Rows, op string, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, dbFail(op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, dbFail(op, err)
	}
	return out, nil
}

// lastAdmin reports whether userID is the only admin of the workspace.
func lastAdmin(ctx context.Context, tx dbtx, workspaceID, userID string) (bool, error) {
	var others int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM memberships WHERE workspace_id = ? AND role = 'admin' AND user_id <> ?`,
		workspaceID, userID).Scan(&others)
	return others == 0, err
}

// SetMemberRole changes a member's role (store.ErrNotFound for a user who is not a member).
// Demoting the last admin is store.ErrInvalid.
func (s *Store) SetMemberRole(ctx context.Context, workspaceID, userID string, role store.MemberRole) error {
	op := fmt.Sprintf("set the role of user %s in workspace %s", userID, workspaceID)
	if !role.Valid() {
		return failf(op, store.ErrInvalid, "role %q is neither admin nor member", role)
	}
	return s.write(ctx, func(ctx context.Context, tx querier) error {
		cur, err := memberRole(ctx, tx, workspaceID, userID)
		if err != nil {
			return dbFail(op, err)
		}
		if cur == "" {
			return failf(op, store.ErrNotFound, "not a member")
		}
		if cur == store.MemberRoleAdmin && role != store.MemberRoleAdmin {
			last, err := lastAdmin(ctx, tx, workspaceID, userID)
			if err != nil {
				return dbFail(op, err)
			}
			if last {
				return failf(op, store.ErrInvalid, "the workspace's last admin cannot be demoted: make another member admin first")
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE memberships SET role = ? WHERE workspace_id = ? AND user_id = ?`, role, workspaceID, userID)
		return dbFail(op, err)
	})
}

// RemoveMember ends a membership (store.ErrNotFound for a user who is not a member). The last
// admin, the workspace's default runtime user and the runtime user of an active tool cannot be
// removed (store.ErrInvalid): change those first.
func (s *Store) RemoveMember(ctx context.Context, workspaceID, userID string) error {
	op := fmt.Sprintf("remove user %s from workspace %s", userID, workspaceID)
	return s.write(ctx, func(ctx context.Context, tx querier) error {
		cur, err := memberRole(ctx, tx, workspaceID, userID)
		if err != nil {
			return dbFail(op, err)
		}
		if cur == "" {
			return failf(op, store.ErrNotFound, "not a member")
		}
		if cur == store.MemberRoleAdmin {
			last, err := lastAdmin(ctx, tx, workspaceID, userID)
			if err != nil {
				return dbFail(op, err)
			}
			if last {
				return failf(op, store.ErrInvalid, "the workspace's last admin cannot be removed")
			}
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM workspaces WHERE id = ? AND default_runtime_user_id = ?`,
			workspaceID, userID).Scan(&n); err != nil {
			return dbFail(op, err)
		}
		if n > 0 {
			return failf(op, store.ErrInvalid, "the user is the workspace's default runtime user: change it first")
		}
		var tool string
		err = tx.QueryRowContext(ctx, `SELECT id FROM tools WHERE workspace_id = ? AND runtime_user_id = ? AND deleted_at IS NULL LIMIT 1`,
			workspaceID, userID).Scan(&tool)
		if err == nil {
			return failf(op, store.ErrInvalid, "the user is the runtime user of tool %s: change it first", tool)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return dbFail(op, err)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM memberships WHERE workspace_id = ? AND user_id = ?`, workspaceID, userID)
		return dbFail(op, err)
	})
}

// ---- schemas

// visible is the condition for a record of the workspace ?, or a system record.
const visible = `(workspace_id IS NULL OR workspace_id = ?)`

// CreateSchema stores a schema (a JSON object or boolean), setting ID (when empty) and
// CreatedAt. Its workspace, when set, must exist (store.ErrNotFound).
func (s *Store) CreateSchema(ctx context.Context, sc *store.Schema) error {
	op := "create schema"
	if sc == nil {
		return failf(op, store.ErrInvalid, "nil schema")
	}
	if err := store.CheckSchemaContent(sc.Content); err != nil {
		return fail(op, err)
	}
	id := sc.ID
	if id == "" {
		id = store.NewID(store.PrefixSchema)
	}
	now := entityNow()
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		if sc.WorkspaceID != "" {
			if err := exists(ctx, tx, op, `SELECT 1 FROM workspaces WHERE id = ?`, "no workspace "+sc.WorkspaceID, sc.WorkspaceID); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO schemas (id, workspace_id, content, created_at) VALUES (?, ?, ?, ?)`,
			id, nullString(sc.WorkspaceID), string(sc.Content), now.UnixNano())
		return err
	})
	if err != nil {
		return dbFail(op, err)
	}
	sc.ID, sc.CreatedAt = id, now
	return nil
}

// Schema returns a schema of the workspace, or a system schema, or store.ErrNotFound.
func (s *Store) Schema(ctx context.Context, workspaceID, id string) (*store.Schema, error) {
	var (
		sc      store.Schema
		ws      sql.NullString
		content string
		created int64
	)
	err := s.r.QueryRowContext(ctx, `SELECT id, workspace_id, content, created_at FROM schemas WHERE id = ? AND `+visible,
		id, workspaceID).Scan(&sc.ID, &ws, &content, &created)
	if err != nil {
		return nil, dbFail("schema "+id, err)
	}
	sc.WorkspaceID, sc.Content, sc.CreatedAt = ws.String, json.RawMessage(content), fromNanos(created)
	return &sc, nil
}

// checkSchema fails with store.ErrNotFound unless id names a schema that a record of workspace
// scope ("" for system) may use: one of the workspace, or a system schema.
func checkSchema(ctx context.Context, tx dbtx, op, scope, role, id string) error {
	return exists(ctx, tx, op, `SELECT 1 FROM schemas WHERE id = ? AND `+visible,
		fmt.Sprintf("%s schema %s is not in the workspace", role, id), id, scope)
}

// ---- functions

const functionCols = `id, workspace_id, name, default_version_id, created_at, updated_at`

func scanFunction(row scanner) (*store.Function, error) {
	var (
		f                store.Function
		ws, def          sql.NullString
		created, updated int64
	)
	if err := row.Scan(&f.ID, &ws, &f.Name, &def, &created, &updated); err != nil {
		return nil, err
	}
	f.WorkspaceID, f.DefaultVersionID = ws.String, def.String
	f.CreatedAt, f.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &f, nil
}

// CreateFunction stores a function without versions, setting ID (when empty) and the times.
// Its workspace (when set) must exist, and its name be free there (store.ErrConflict).
func (s *Store) CreateFunction(ctx context.Context, f *store.Function) error {
	op := "create function"
	if f == nil {
		return failf(op, store.ErrInvalid, "nil function")
	}
	if err := f.Check(); err != nil {
		return fail(op, err)
	}
	if f.DefaultVersionID != "" {
		return failf(op, store.ErrInvalid, "a new function has no versions: its first version becomes the default")
	}
	id := f.ID
	if id == "" {
		id = store.NewID(store.PrefixFunction)
	}
	now := entityNow()
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		if f.WorkspaceID != "" {
			if err := exists(ctx, tx, op, `SELECT 1 FROM workspaces WHERE id = ?`, "no workspace "+f.WorkspaceID, f.WorkspaceID); err != nil {
				return err
			}
		}
		var other string
		err := tx.QueryRowContext(ctx, `SELECT id FROM functions WHERE coalesce(workspace_id, '') = ? AND name = ?`, f.WorkspaceID, f.Name).Scan(&other)
		if err == nil {
			return failf(op, store.ErrConflict, "the workspace already has a function named %q (%s)", f.Name, other)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO functions (`+functionCols+`) VALUES (?, ?, ?, NULL, ?, ?)`,
			id, nullString(f.WorkspaceID), f.Name, now.UnixNano(), now.UnixNano())
		return err
	})
	if err != nil {
		return dbFail(op, err)
	}
	f.ID, f.CreatedAt, f.UpdatedAt = id, now, now
	return nil
}

// Function returns a function of the workspace, or a system function, or store.ErrNotFound.
func (s *Store) Function(ctx context.Context, workspaceID, id string) (*store.Function, error) {
	f, err := scanFunction(s.r.QueryRowContext(ctx, `SELECT `+functionCols+` FROM functions WHERE id = ? AND `+visible, id, workspaceID))
	if err != nil {
		return nil, dbFail("function "+id, err)
	}
	return f, nil
}

// Functions lists the functions of the workspace ("": the system functions), oldest first.
func (s *Store) Functions(ctx context.Context, workspaceID string) ([]*store.Function, error) {
	op := "functions of workspace " + workspaceID
	rows, err := s.r.QueryContext(ctx, `SELECT `+functionCols+` FROM functions WHERE coalesce(workspace_id, '') = ?
		ORDER BY created_at, id`, workspaceID)
	if err != nil {
		return nil, dbFail(op, err)
	}
	return collect(rows, op, scanFunction)
}

// ownFunction reads a function for writing: one of the workspace itself (scope "" for a
// system function), never a system function through a workspace.
func ownFunction(ctx context.Context, tx dbtx, op, scope, id string) (*store.Function, error) {
	f, err := scanFunction(tx.QueryRowContext(ctx, `SELECT `+functionCols+` FROM functions WHERE id = ? AND coalesce(workspace_id, '') = ?`, id, scope))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, failf(op, store.ErrNotFound, "function %s is not in the workspace", id)
	}
	if err != nil {
		return nil, dbFail(op, err)
	}
	return f, nil
}

const versionCols = `v.id, f.workspace_id, v.function_id, v.version, v.code, v.input_schema_id, v.output_schema_id, v.created_at`

func scanVersion(row scanner) (*store.FunctionVersion, error) {
	var (
		v           store.FunctionVersion
		ws, in, out sql.NullString
		created     int64
	)
	if err := row.Scan(&v.ID, &ws, &v.FunctionID, &v.Version, &v.Code, &in, &out, &created); err != nil {
		return nil, err
	}
	v.WorkspaceID, v.InputSchemaID, v.OutputSchemaID = ws.String, in.String, out.String
	v.CreatedAt = fromNanos(created)
	return &v, nil
}

// CreateFunctionVersion adds a version to function v.FunctionID of workspace v.WorkspaceID,
// setting ID (when empty), Version and CreatedAt; the function's first version becomes its
// default. Schema ids, when set, must name schemas the workspace can use (store.ErrNotFound).
func (s *Store) CreateFunctionVersion(ctx context.Context, v *store.FunctionVersion) error {
	op := "create function version"
	if v == nil {
		return failf(op, store.ErrInvalid, "nil version")
	}
	op += " of " + v.FunctionID
	id := v.ID
	if id == "" {
		id = store.NewID(store.PrefixFunctionVersion)
	}
	now := entityNow()
	var number int
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		f, err := ownFunction(ctx, tx, op, v.WorkspaceID, v.FunctionID)
		if err != nil {
			return err
		}
		if v.InputSchemaID != "" {
			if err := checkSchema(ctx, tx, op, v.WorkspaceID, "input", v.InputSchemaID); err != nil {
				return err
			}
		}
		if v.OutputSchemaID != "" {
			if err := checkSchema(ctx, tx, op, v.WorkspaceID, "output", v.OutputSchemaID); err != nil {
				return err
			}
		}
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) + 1 FROM function_versions WHERE function_id = ?`,
			f.ID).Scan(&number); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO function_versions
			(id, function_id, version, code, input_schema_id, output_schema_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			id, f.ID, number, v.Code, nullString(v.InputSchemaID), nullString(v.OutputSchemaID), now.UnixNano()); err != nil {
			return err
		}
		if f.DefaultVersionID == "" {
			_, err = tx.ExecContext(ctx, `UPDATE functions SET default_version_id = ?, updated_at = ? WHERE id = ?`,
				id, notBefore(now, f.UpdatedAt).UnixNano(), f.ID)
		}
		return err
	})
	if err != nil {
		return dbFail(op, err)
	}
	v.ID, v.Version, v.CreatedAt = id, number, now
	return nil
}

// FunctionVersion returns a version of a function of the workspace, or of a system function,
// or store.ErrNotFound.
func (s *Store) FunctionVersion(ctx context.Context, workspaceID, id string) (*store.FunctionVersion, error) {
	v, err := scanVersion(s.r.QueryRowContext(ctx, `SELECT `+versionCols+` FROM function_versions v
		JOIN functions f ON f.id = v.function_id WHERE v.id = ? AND (f.workspace_id IS NULL OR f.workspace_id = ?)`, id, workspaceID))
	if err != nil {
		return nil, dbFail("function version "+id, err)
	}
	return v, nil
}

// FunctionVersions lists the versions of a function the workspace can see, in order
// (store.ErrNotFound for a function it cannot).
func (s *Store) FunctionVersions(ctx context.Context, workspaceID, functionID string) ([]*store.FunctionVersion, error) {
	op := "versions of function " + functionID
	if _, err := s.Function(ctx, workspaceID, functionID); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+versionCols+` FROM function_versions v
		JOIN functions f ON f.id = v.function_id WHERE v.function_id = ? AND (f.workspace_id IS NULL OR f.workspace_id = ?)
		ORDER BY v.version`, functionID, workspaceID)
	if err != nil {
		return nil, dbFail(op, err)
	}
	return collect(rows, op, scanVersion)
}

// SetDefaultVersion makes versionID, a version of the function, its default and returns the
// function; store.ErrNotFound when either is not in the workspace.
func (s *Store) SetDefaultVersion(ctx context.Context, workspaceID, functionID, versionID string) (*store.Function, error) {
	op := fmt.Sprintf("set the default version of function %s", functionID)
	var out *store.Function
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		f, err := ownFunction(ctx, tx, op, workspaceID, functionID)
		if err != nil {
			return err
		}
		if err := exists(ctx, tx, op, `SELECT 1 FROM function_versions WHERE id = ? AND function_id = ?`,
			fmt.Sprintf("%s is not a version of the function", versionID), versionID, functionID); err != nil {
			return err
		}
		now := notBefore(entityNow(), f.UpdatedAt)
		if _, err := tx.ExecContext(ctx, `UPDATE functions SET default_version_id = ?, updated_at = ? WHERE id = ?`,
			versionID, now.UnixNano(), functionID); err != nil {
			return dbFail(op, err)
		}
		f.DefaultVersionID, f.UpdatedAt = versionID, now
		out = f
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ---- tools

const toolCols = `id, workspace_id, name, description, target, function_id, function_version_id, input_schema_id,
	output_schema_id, examples, requires_confirmation, enabled, system, created_by, runtime_user_id, deleted_at,
	retention_tier, created_at, updated_at`

func scanTool(row scanner) (*store.Tool, error) {
	var (
		t                                                   store.Tool
		ws, desc, fn, fnv, examples, creator, runtime, tier sql.NullString
		deleted                                             sql.NullInt64
		created, updated                                    int64
	)
	if err := row.Scan(&t.ID, &ws, &t.Name, &desc, &t.Target, &fn, &fnv, &t.InputSchemaID, &t.OutputSchemaID, &examples,
		&t.RequiresConfirmation, &t.Enabled, &t.System, &creator, &runtime, &deleted, &tier, &created, &updated); err != nil {
		return nil, err
	}
	t.WorkspaceID, t.Description, t.FunctionID, t.FunctionVersionID = ws.String, desc.String, fn.String, fnv.String
	t.CreatedBy, t.RuntimeUserID, t.RetentionTier = creator.String, runtime.String, store.RetentionTier(tier.String)
	if examples.Valid {
		if err := json.Unmarshal([]byte(examples.String), &t.Examples); err != nil {
			return nil, fmt.Errorf("tool %s: examples: %w", t.ID, err)
		}
		if t.Examples == nil {
			t.Examples = []store.ToolExample{}
		}
	}
	if deleted.Valid {
		at := fromNanos(deleted.Int64)
		t.DeletedAt = &at
	}
	t.CreatedAt, t.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &t, nil
}

func encodeExamples(ex []store.ToolExample) (sql.NullString, error) {
	if ex == nil {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(ex)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("examples: %v: %w", err, store.ErrInvalid)
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// checkToolRefs checks, inside the write transaction, what a tool refers to: its workspace,
// function, pinned version and schemas (store.ErrNotFound when not the workspace's), and that
// its name is free among the active tools (store.ErrConflict).
func checkToolRefs(ctx context.Context, tx dbtx, op string, t *store.Tool) error {
	scope := t.WorkspaceID
	if scope != "" {
		if err := exists(ctx, tx, op, `SELECT 1 FROM workspaces WHERE id = ?`, "no workspace "+scope, scope); err != nil {
			return err
		}
	}
	if t.FunctionID != "" {
		if _, err := ownFunction(ctx, tx, op, scope, t.FunctionID); err != nil {
			return err
		}
	}
	if t.FunctionVersionID != "" {
		var fn string
		err := tx.QueryRowContext(ctx, `SELECT v.function_id FROM function_versions v JOIN functions f ON f.id = v.function_id
			WHERE v.id = ? AND coalesce(f.workspace_id, '') = ?`, t.FunctionVersionID, scope).Scan(&fn)
		if errors.Is(err, sql.ErrNoRows) {
			return failf(op, store.ErrNotFound, "function version %s is not in the workspace", t.FunctionVersionID)
		}
		if err != nil {
			return dbFail(op, err)
		}
		if fn != t.FunctionID {
			return failf(op, store.ErrInvalid, "pinned version %s is not a version of function %s", t.FunctionVersionID, t.FunctionID)
		}
	}
	if err := checkSchema(ctx, tx, op, scope, "input", t.InputSchemaID); err != nil {
		return err
	}
	if err := checkSchema(ctx, tx, op, scope, "output", t.OutputSchemaID); err != nil {
		return err
	}
	var other string
	err := tx.QueryRowContext(ctx, `SELECT id FROM tools WHERE coalesce(workspace_id, '') = ? AND name = ? AND deleted_at IS NULL AND id <> ?`,
		scope, t.Name, t.ID).Scan(&other)
	if err == nil {
		return failf(op, store.ErrConflict, "an active tool of the workspace is already named %q (%s)", t.Name, other)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return dbFail(op, err)
	}
	return nil
}

// CreateTool stores a new, active tool, setting ID (when empty) and the times. See
// store.Entities for the rules it must follow.
func (s *Store) CreateTool(ctx context.Context, t *store.Tool) error {
	op := "create tool"
	if t == nil {
		return failf(op, store.ErrInvalid, "nil tool")
	}
	nt := t.Clone()
	if nt.ID == "" {
		nt.ID = store.NewID(store.PrefixTool)
	}
	op += " " + nt.Name
	if err := nt.Check(); err != nil {
		return fail(op, err)
	}
	if nt.DeletedAt != nil {
		return failf(op, store.ErrInvalid, "a new tool is not deleted")
	}
	examples, err := encodeExamples(nt.Examples)
	if err != nil {
		return fail(op, err)
	}
	now := entityNow()
	err = s.write(ctx, func(ctx context.Context, tx querier) error {
		if err := checkToolRefs(ctx, tx, op, nt); err != nil {
			return err
		}
		if nt.CreatedBy != "" {
			role, err := memberRole(ctx, tx, nt.WorkspaceID, nt.CreatedBy)
			if err != nil {
				return dbFail(op, err)
			}
			if role == "" {
				return failf(op, store.ErrInvalid, "creator %s is not a member of workspace %s", nt.CreatedBy, nt.WorkspaceID)
			}
		}
		if nt.RuntimeUserID != "" {
			if err := checkRuntimeUser(ctx, tx, op, nt.WorkspaceID, nt.CreatedBy, nt.RuntimeUserID, "a tool's runtime user"); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO tools (`+toolCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?)`,
			nt.ID, nullString(nt.WorkspaceID), nt.Name, nullString(nt.Description), nt.Target, nullString(nt.FunctionID),
			nullString(nt.FunctionVersionID), nt.InputSchemaID, nt.OutputSchemaID, examples, nt.RequiresConfirmation,
			nt.Enabled, nt.System, nullString(nt.CreatedBy), nullString(nt.RuntimeUserID), now.UnixNano(), now.UnixNano())
		return err
	})
	if err != nil {
		return dbFail(op, err)
	}
	nt.CreatedAt, nt.UpdatedAt = now, now
	*t = *nt
	return nil
}

// Tool returns a tool of the workspace (active or deleted) or a system tool, or
// store.ErrNotFound.
func (s *Store) Tool(ctx context.Context, workspaceID, id string) (*store.Tool, error) {
	t, err := scanTool(s.r.QueryRowContext(ctx, `SELECT `+toolCols+` FROM tools WHERE id = ? AND `+visible, id, workspaceID))
	if err != nil {
		return nil, dbFail("tool "+id, err)
	}
	return t, nil
}

// writableTool reads, inside the write transaction, a tool the workspace may change: a system
// tool is store.ErrForbidden, a deleted one store.ErrNotFound.
func writableTool(ctx context.Context, tx dbtx, op, workspaceID, id string) (*store.Tool, error) {
	t, err := scanTool(tx.QueryRowContext(ctx, `SELECT `+toolCols+` FROM tools WHERE id = ? AND `+visible, id, workspaceID))
	if err != nil {
		return nil, dbFail(op, err)
	}
	if t.System {
		return nil, failf(op, store.ErrForbidden, "%s is a system tool: system tools cannot be edited or deleted", id)
	}
	if t.DeletedAt != nil {
		return nil, failf(op, store.ErrNotFound, "tool %s is deleted", id)
	}
	return t, nil
}

// UpdateTool applies fn to an active tool of the workspace in one transaction and stores the
// result. See store.Entities for what may change and the rules that apply.
func (s *Store) UpdateTool(ctx context.Context, workspaceID, toolID, callerUserID string, fn func(*store.Tool) error) (*store.Tool, error) {
	op := "update tool " + toolID
	var out *store.Tool
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		before, err := writableTool(ctx, tx, op, workspaceID, toolID)
		if err != nil {
			return err
		}
		t := before.Clone()
		if err := fn(t); err != nil {
			return err
		}
		if t.ID != before.ID || t.WorkspaceID != before.WorkspaceID || t.System != before.System || t.CreatedBy != before.CreatedBy ||
			t.DeletedAt != nil || t.RetentionTier != "" || !t.CreatedAt.Equal(before.CreatedAt) || !t.UpdatedAt.Equal(before.UpdatedAt) {
			return failf(op, store.ErrInvalid, "id, workspace, system, creator, deletion and times cannot be changed")
		}
		if err := t.Check(); err != nil {
			return fail(op, err)
		}
		examples, err := encodeExamples(t.Examples)
		if err != nil {
			return fail(op, err)
		}
		if err := checkToolRefs(ctx, tx, op, t); err != nil {
			return err
		}
		if t.RuntimeUserID != before.RuntimeUserID {
			if err := checkRuntimeUser(ctx, tx, op, workspaceID, callerUserID, t.RuntimeUserID, "a tool's runtime user"); err != nil {
				return err
			}
		}
		now := notBefore(entityNow(), before.UpdatedAt)
		if _, err := tx.ExecContext(ctx, `UPDATE tools SET name = ?, description = ?, target = ?, function_id = ?,
			function_version_id = ?, input_schema_id = ?, output_schema_id = ?, examples = ?, requires_confirmation = ?,
			enabled = ?, runtime_user_id = ?, updated_at = ? WHERE id = ?`,
			t.Name, nullString(t.Description), t.Target, nullString(t.FunctionID), nullString(t.FunctionVersionID),
			t.InputSchemaID, t.OutputSchemaID, examples, t.RequiresConfirmation, t.Enabled, nullString(t.RuntimeUserID),
			now.UnixNano(), toolID); err != nil {
			return dbFail(op, err)
		}
		t.UpdatedAt = now
		out = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteTool soft-deletes an active tool of the workspace, snapshotting the retention tier
// (tier, or the workspace's when ""), and returns it.
func (s *Store) DeleteTool(ctx context.Context, workspaceID, toolID string, tier store.RetentionTier) (*store.Tool, error) {
	op := "delete tool " + toolID
	if tier != "" && !tier.Valid() {
		return nil, failf(op, store.ErrInvalid, "unknown retention tier %q", tier)
	}
	var out *store.Tool
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		t, err := writableTool(ctx, tx, op, workspaceID, toolID)
		if err != nil {
			return err
		}
		if tier == "" {
			if err := tx.QueryRowContext(ctx, `SELECT retention_tier FROM workspaces WHERE id = ?`, workspaceID).Scan(&tier); err != nil {
				return dbFail(op, err)
			}
		}
		now := notBefore(entityNow(), t.UpdatedAt)
		var purge sql.NullInt64
		if keep, ok := tier.Keep(); ok {
			purge = sql.NullInt64{Int64: now.Add(keep).UnixNano(), Valid: true}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tools SET deleted_at = ?, retention_tier = ?, purge_at = ?, updated_at = ? WHERE id = ?`,
			now.UnixNano(), tier, purge, now.UnixNano(), toolID); err != nil {
			return dbFail(op, err)
		}
		t.DeletedAt, t.RetentionTier, t.UpdatedAt = &now, tier, now
		out = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListTools returns a page of tools, oldest first by (CreatedAt, ID). See store.ToolFilter.
func (s *Store) ListTools(ctx context.Context, f store.ToolFilter) (*store.ToolPage, error) {
	op := "list tools"
	if err := f.Check(); err != nil {
		return nil, fail(op, err)
	}
	after, hasCursor, err := f.DecodeCursor()
	if err != nil {
		return nil, fail(op, err)
	}
	var (
		where []string
		args  []any
	)
	add := func(cond string, a ...any) { where = append(where, cond); args = append(args, a...) }
	switch {
	case f.WorkspaceID == "":
		add(`workspace_id IS NULL`)
	case f.IncludeSystem:
		add(`(workspace_id = ? OR workspace_id IS NULL)`, f.WorkspaceID)
	default:
		add(`workspace_id = ?`, f.WorkspaceID)
	}
	if f.FunctionID != "" {
		add(`function_id = ?`, f.FunctionID)
	}
	if f.Target != "" {
		add(`target = ?`, f.Target)
	}
	switch {
	case f.NamePrefix:
		add(`substr(name, 1, length(?)) = ?`, f.Name, f.Name)
	case f.Name != "":
		add(`name = ?`, f.Name)
	}
	if f.RequiresConfirmation != nil {
		add(`requires_confirmation = ?`, *f.RequiresConfirmation)
	}
	switch f.Deleted {
	case "", store.DeletedExclude:
		add(`deleted_at IS NULL`)
	case store.DeletedOnly:
		add(`deleted_at IS NOT NULL`)
	}
	if hasCursor {
		add(`(created_at, id) > (?, ?)`, after.CreatedAt.UnixNano(), after.ID)
	}
	args = append(args, f.Limit+1)
	rows, err := s.r.QueryContext(ctx, `SELECT `+toolCols+` FROM tools WHERE `+strings.Join(where, " AND ")+`
		ORDER BY created_at, id LIMIT ?`, args...)
	if err != nil {
		return nil, dbFail(op, err)
	}
	tools, err := collect(rows, op, scanTool)
	if err != nil {
		return nil, err
	}
	page := &store.ToolPage{Tools: tools}
	if len(tools) > f.Limit {
		page.Tools = tools[:f.Limit]
		last := page.Tools[f.Limit-1]
		page.NextCursor = f.EncodeCursor(store.ToolCursor{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	return page, nil
}

// ResolveToolVersion returns the function version a tool of the workspace runs: its pinned
// version, or its function's default. A client tool is store.ErrInvalid; a deleted tool, or a
// function without a default version, store.ErrNotFound.
func (s *Store) ResolveToolVersion(ctx context.Context, workspaceID, toolID string) (*store.FunctionVersion, error) {
	op := "resolve the version of tool " + toolID
	t, err := s.Tool(ctx, workspaceID, toolID)
	if err != nil {
		return nil, err
	}
	switch {
	case t.DeletedAt != nil:
		return nil, failf(op, store.ErrNotFound, "the tool is deleted")
	case t.Target != store.TargetServer:
		return nil, failf(op, store.ErrInvalid, "a client tool runs no function")
	case t.FunctionVersionID != "":
		return s.FunctionVersion(ctx, t.WorkspaceID, t.FunctionVersionID)
	}
	f, err := s.Function(ctx, t.WorkspaceID, t.FunctionID)
	if err != nil {
		return nil, err
	}
	if f.DefaultVersionID == "" {
		return nil, failf(op, store.ErrNotFound, "function %s has no default version", f.ID)
	}
	return s.FunctionVersion(ctx, t.WorkspaceID, f.DefaultVersionID)
}

// PurgeExpired deletes for good the soft-deleted tools, of every workspace, whose DeletedAt
// plus their tier's days is at or before now (tier none: never), and returns how many.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM tools WHERE purge_at IS NOT NULL AND purge_at <= ?`, now.UnixNano())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, dbFail("purge expired tools", err)
	}
	return int(n), nil
}
