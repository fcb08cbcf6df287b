package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
		nw.ID = store.NewID(store.PrefixWorkspace)
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
		w, err := e.lockWorkspace(ctx, tx, op, id)
		if err != nil {
			return err
		}
		before := *w
		if err := fn(w); err != nil {
			return err
		}
		if w.ID != before.ID || !w.CreatedAt.Equal(before.CreatedAt) || !w.UpdatedAt.Equal(before.UpdatedAt) {
			return e.d.failf(op, store.ErrInvalid, "only the name, default runtime user and retention tier may change")
		}
		if err := w.Check(); err != nil {
			return e.d.fail(op, err)
		}
		if w.DefaultRuntimeUserID != before.DefaultRuntimeUserID {
			if err := e.checkRuntimeUser(ctx, tx, op, id, callerUserID, w.DefaultRuntimeUserID, "the workspace's default runtime user"); err != nil {
				return err
			}
		}
		now, err := e.now(ctx, tx, op)
		if err != nil {
			return err
		}
		now = notBefore(now, before.UpdatedAt)
		if _, err := tx.ExecContext(ctx, `UPDATE workspaces SET name = $1, default_runtime_user_id = $2, retention_tier = $3, updated_at = $4
			WHERE id = $5`, w.Name, nullString(w.DefaultRuntimeUserID), w.RetentionTier, e.d.Time(now), id); err != nil {
			return e.d.Err(op, err)
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

// checkRuntimeUser enforces E3 for setting a runtime user (what names the setting): caller must
// be an admin of the workspace and the new user ("" clears it) a member.
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

// ---- users

const userCols = `id, email, name, created_at`

func scanUser(row scanner) (*store.User, error) {
	var u store.User
	if err := row.Scan(&u.ID, &u.Email, &u.Name, scanTime{&u.CreatedAt}); err != nil {
		return nil, err
	}
	return &u, nil
}

// CreateUser stores a new user, setting ID (when empty) and CreatedAt. An email already used,
// ignoring case, is store.ErrConflict.
func (e *Entities) CreateUser(ctx context.Context, u *store.User) error {
	op := "create user"
	if u == nil {
		return e.d.failf(op, store.ErrInvalid, "nil user")
	}
	key, err := store.NormalizeEmail(u.Email)
	if err != nil {
		return e.d.fail(op, err)
	}
	id := u.ID
	if id == "" {
		id = store.NewID(store.PrefixUser)
	}
	email := strings.TrimSpace(u.Email)
	var at time.Time
	err = e.write(ctx, func(ctx context.Context, tx Querier) error {
		var other string
		err := tx.QueryRowContext(ctx, `SELECT id FROM users WHERE email_key = $1`, key).Scan(&other)
		if err == nil {
			return e.d.failf(op, store.ErrConflict, "email %s is already used by user %s", email, other)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if at, err = e.now(ctx, tx, op); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO users (id, email, email_key, name, created_at) VALUES ($1, $2, $3, $4, $5)`,
			id, email, key, u.Name, e.d.Time(at))
		return err
	})
	if err != nil {
		return e.d.Err(op, err)
	}
	u.ID, u.Email, u.CreatedAt = id, email, at
	return nil
}

// User returns the user, or store.ErrNotFound.
func (e *Entities) User(ctx context.Context, id string) (*store.User, error) {
	u, err := scanUser(e.read.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE id = $1`, id))
	if err != nil {
		return nil, e.d.Err("user "+id, err)
	}
	return u, nil
}

// UserByEmail returns the user with that email, ignoring case, or store.ErrNotFound.
func (e *Entities) UserByEmail(ctx context.Context, email string) (*store.User, error) {
	op := "user by email"
	key, err := store.NormalizeEmail(email)
	if err != nil {
		return nil, e.d.fail(op, err)
	}
	u, err := scanUser(e.read.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE email_key = $1`, key))
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	return u, nil
}

// ---- memberships

const membershipCols = `workspace_id, user_id, role, created_at`

func scanMembership(row scanner) (*store.Membership, error) {
	var m store.Membership
	if err := row.Scan(&m.WorkspaceID, &m.UserID, &m.Role, scanTime{&m.CreatedAt}); err != nil {
		return nil, err
	}
	return &m, nil
}

// AddMember makes a user a member of a workspace, setting CreatedAt: store.ErrNotFound when
// either is missing, store.ErrConflict when the user is already a member.
func (e *Entities) AddMember(ctx context.Context, m *store.Membership) error {
	if m == nil {
		return e.d.failf("add member", store.ErrInvalid, "nil membership")
	}
	op := fmt.Sprintf("add user %s to workspace %s", m.UserID, m.WorkspaceID)
	if !m.Role.Valid() {
		return e.d.failf(op, store.ErrInvalid, "role %q is neither admin nor member", m.Role)
	}
	var at time.Time
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		if _, err := e.lockWorkspace(ctx, tx, op, m.WorkspaceID); err != nil {
			return err
		}
		if err := e.d.exists(ctx, tx, op, `SELECT 1 FROM users WHERE id = $1`, "no such user", m.UserID); err != nil {
			return err
		}
		role, err := e.memberRole(ctx, tx, op, m.WorkspaceID, m.UserID)
		if err != nil {
			return err
		}
		if role != "" {
			return e.d.failf(op, store.ErrConflict, "already a member (%s)", role)
		}
		if at, err = e.now(ctx, tx, op); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO memberships (`+membershipCols+`) VALUES ($1, $2, $3, $4)`,
			m.WorkspaceID, m.UserID, m.Role, e.d.Time(at))
		return err
	})
	if err != nil {
		return e.d.Err(op, err)
	}
	m.CreatedAt = at
	return nil
}

// Member returns the user's membership of the workspace, or store.ErrNotFound.
func (e *Entities) Member(ctx context.Context, workspaceID, userID string) (*store.Membership, error) {
	m, err := scanMembership(e.read.QueryRowContext(ctx, `SELECT `+membershipCols+` FROM memberships
		WHERE workspace_id = $1 AND user_id = $2`, workspaceID, userID))
	if err != nil {
		return nil, e.d.Err(fmt.Sprintf("membership of user %s in workspace %s", userID, workspaceID), err)
	}
	return m, nil
}

// Members lists the members of the workspace, oldest first.
func (e *Entities) Members(ctx context.Context, workspaceID string) ([]*store.Membership, error) {
	op := "members of workspace " + workspaceID
	rows, err := e.read.QueryContext(ctx, `SELECT `+membershipCols+` FROM memberships
		WHERE workspace_id = $1 ORDER BY created_at, user_id`, workspaceID)
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	return collect(&e.d, rows, op, scanMembership)
}

// lockMember locks the user's membership for a change and returns the role; store.ErrNotFound
// when not a member. The workspace row must be locked already.
func (e *Entities) lockMember(ctx context.Context, tx Querier, op, workspaceID, userID string) (store.MemberRole, error) {
	var role store.MemberRole
	err := tx.QueryRowContext(ctx, `SELECT role FROM memberships WHERE workspace_id = $1 AND user_id = $2`+e.d.lock("FOR UPDATE"),
		workspaceID, userID).Scan(&role)
	if errors.Is(err, sql.ErrNoRows) {
		return "", e.d.failf(op, store.ErrNotFound, "not a member")
	}
	return role, e.d.Err(op, err)
}

// lastAdmin reports whether userID is the only admin of the workspace.
func (e *Entities) lastAdmin(ctx context.Context, tx Querier, op, workspaceID, userID string) (bool, error) {
	var others bool
	err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM memberships WHERE workspace_id = $1 AND role = 'admin' AND user_id <> $2)`,
		workspaceID, userID).Scan(&others)
	return !others, e.d.Err(op, err)
}

// SetMemberRole changes a member's role (store.ErrNotFound for a user who is not a member).
// Demoting the last admin is store.ErrInvalid.
func (e *Entities) SetMemberRole(ctx context.Context, workspaceID, userID string, role store.MemberRole) error {
	op := fmt.Sprintf("set the role of user %s in workspace %s", userID, workspaceID)
	if !role.Valid() {
		return e.d.failf(op, store.ErrInvalid, "role %q is neither admin nor member", role)
	}
	return e.write(ctx, func(ctx context.Context, tx Querier) error {
		if _, err := e.lockWorkspace(ctx, tx, op, workspaceID); err != nil {
			return err
		}
		cur, err := e.lockMember(ctx, tx, op, workspaceID, userID)
		if err != nil {
			return err
		}
		if cur == store.MemberRoleAdmin && role != store.MemberRoleAdmin {
			last, err := e.lastAdmin(ctx, tx, op, workspaceID, userID)
			if err != nil {
				return err
			}
			if last {
				return e.d.failf(op, store.ErrInvalid, "the workspace's last admin cannot be demoted: make another member admin first")
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE memberships SET role = $1 WHERE workspace_id = $2 AND user_id = $3`, role, workspaceID, userID)
		return e.d.Err(op, err)
	})
}

// RemoveMember ends a membership (store.ErrNotFound for a user who is not a member). The last
// admin, the workspace's default runtime user and the runtime user of an active tool cannot be
// removed (store.ErrInvalid): change those first.
func (e *Entities) RemoveMember(ctx context.Context, workspaceID, userID string) error {
	op := fmt.Sprintf("remove user %s from workspace %s", userID, workspaceID)
	return e.write(ctx, func(ctx context.Context, tx Querier) error {
		w, err := e.lockWorkspace(ctx, tx, op, workspaceID)
		if err != nil {
			return err
		}
		cur, err := e.lockMember(ctx, tx, op, workspaceID, userID)
		if err != nil {
			return err
		}
		if cur == store.MemberRoleAdmin {
			last, err := e.lastAdmin(ctx, tx, op, workspaceID, userID)
			if err != nil {
				return err
			}
			if last {
				return e.d.failf(op, store.ErrInvalid, "the workspace's last admin cannot be removed")
			}
		}
		if w.DefaultRuntimeUserID == userID {
			return e.d.failf(op, store.ErrInvalid, "the user is the workspace's default runtime user: change it first")
		}
		var tool string
		err = tx.QueryRowContext(ctx, `SELECT id FROM tools WHERE workspace_id = $1 AND runtime_user_id = $2 AND deleted_at IS NULL LIMIT 1`,
			workspaceID, userID).Scan(&tool)
		if err == nil {
			return e.d.failf(op, store.ErrInvalid, "the user is the runtime user of tool %s: change it first", tool)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return e.d.Err(op, err)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM memberships WHERE workspace_id = $1 AND user_id = $2`, workspaceID, userID)
		return e.d.Err(op, err)
	})
}

// ---- schemas

// visible is the condition for a record of the workspace $2, or a system record.
const visible = `(workspace_id IS NULL OR workspace_id = $2)`

// CreateSchema stores a schema (a JSON object or boolean), setting ID (when empty) and
// CreatedAt. Its workspace, when set, must exist (store.ErrNotFound).
func (e *Entities) CreateSchema(ctx context.Context, sc *store.Schema) error {
	op := "create schema"
	if sc == nil {
		return e.d.failf(op, store.ErrInvalid, "nil schema")
	}
	if err := store.CheckSchemaContent(sc.Content); err != nil {
		return e.d.fail(op, err)
	}
	id := sc.ID
	if id == "" {
		id = store.NewID(store.PrefixSchema)
	}
	var at time.Time
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		if sc.WorkspaceID != "" {
			if err := e.d.exists(ctx, tx, op, `SELECT 1 FROM workspaces WHERE id = $1`, "no workspace "+sc.WorkspaceID, sc.WorkspaceID); err != nil {
				return err
			}
		}
		var err error
		if at, err = e.now(ctx, tx, op); err != nil {
			return err
		}
		// The content is sent as text: PostgreSQL's json column keeps it byte for byte.
		_, err = tx.ExecContext(ctx, `INSERT INTO schemas (id, workspace_id, content, created_at) VALUES ($1, $2, $3, $4)`,
			id, nullString(sc.WorkspaceID), string(sc.Content), e.d.Time(at))
		return err
	})
	if err != nil {
		return e.d.Err(op, err)
	}
	sc.ID, sc.CreatedAt = id, at
	return nil
}

// Schema returns a schema of the workspace, or a system schema, or store.ErrNotFound.
func (e *Entities) Schema(ctx context.Context, workspaceID, id string) (*store.Schema, error) {
	var (
		sc      store.Schema
		ws      sql.NullString
		content string
	)
	err := e.read.QueryRowContext(ctx, `SELECT id, workspace_id, content, created_at FROM schemas WHERE id = $1 AND `+visible,
		id, workspaceID).Scan(&sc.ID, &ws, &content, scanTime{&sc.CreatedAt})
	if err != nil {
		return nil, e.d.Err("schema "+id, err)
	}
	sc.WorkspaceID, sc.Content = ws.String, json.RawMessage(content)
	return &sc, nil
}

// checkSchema fails with store.ErrNotFound unless id names a schema that a record of workspace
// scope ("" for system) may use: one of the workspace, or a system schema.
func (e *Entities) checkSchema(ctx context.Context, tx Querier, op, scope, role, id string) error {
	return e.d.exists(ctx, tx, op, `SELECT 1 FROM schemas WHERE id = $1 AND `+visible,
		fmt.Sprintf("%s schema %s is not in the workspace", role, id), id, scope)
}

// ---- functions

const functionCols = `id, workspace_id, name, default_version_id, created_at, updated_at`

func scanFunction(row scanner) (*store.Function, error) {
	var (
		f       store.Function
		ws, def sql.NullString
	)
	if err := row.Scan(&f.ID, &ws, &f.Name, &def, scanTime{&f.CreatedAt}, scanTime{&f.UpdatedAt}); err != nil {
		return nil, err
	}
	f.WorkspaceID, f.DefaultVersionID = ws.String, def.String
	return &f, nil
}

// CreateFunction stores a function without versions, setting ID (when empty) and the times.
// Its workspace (when set) must exist, and its name be free there (store.ErrConflict).
func (e *Entities) CreateFunction(ctx context.Context, f *store.Function) error {
	op := "create function"
	if f == nil {
		return e.d.failf(op, store.ErrInvalid, "nil function")
	}
	if err := f.Check(); err != nil {
		return e.d.fail(op, err)
	}
	if f.DefaultVersionID != "" {
		return e.d.failf(op, store.ErrInvalid, "a new function has no versions: its first version becomes the default")
	}
	id := f.ID
	if id == "" {
		id = store.NewID(store.PrefixFunction)
	}
	var at time.Time
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		if f.WorkspaceID != "" {
			if err := e.d.exists(ctx, tx, op, `SELECT 1 FROM workspaces WHERE id = $1`, "no workspace "+f.WorkspaceID, f.WorkspaceID); err != nil {
				return err
			}
		}
		var other string
		err := tx.QueryRowContext(ctx, `SELECT id FROM functions WHERE COALESCE(workspace_id, '') = $1 AND name = $2`, f.WorkspaceID, f.Name).Scan(&other)
		if err == nil {
			return e.d.failf(op, store.ErrConflict, "the workspace already has a function named %q (%s)", f.Name, other)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if at, err = e.now(ctx, tx, op); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO functions (`+functionCols+`) VALUES ($1, $2, $3, NULL, $4, $4)`,
			id, nullString(f.WorkspaceID), f.Name, e.d.Time(at))
		return err
	})
	if err != nil {
		return e.d.Err(op, err)
	}
	f.ID, f.CreatedAt, f.UpdatedAt = id, at, at
	return nil
}

// Function returns a function of the workspace, or a system function, or store.ErrNotFound.
func (e *Entities) Function(ctx context.Context, workspaceID, id string) (*store.Function, error) {
	f, err := scanFunction(e.read.QueryRowContext(ctx, `SELECT `+functionCols+` FROM functions WHERE id = $1 AND `+visible, id, workspaceID))
	if err != nil {
		return nil, e.d.Err("function "+id, err)
	}
	return f, nil
}

// Functions lists the functions of the workspace ("": the system functions), oldest first.
func (e *Entities) Functions(ctx context.Context, workspaceID string) ([]*store.Function, error) {
	op := "functions of workspace " + workspaceID
	rows, err := e.read.QueryContext(ctx, `SELECT `+functionCols+` FROM functions WHERE COALESCE(workspace_id, '') = $1
		ORDER BY created_at, id`, workspaceID)
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	return collect(&e.d, rows, op, scanFunction)
}

// ownFunction reads a function inside a write: one of the workspace itself (scope "" for a
// system function), never a system function through a workspace. lock locks its row for a
// change.
func (e *Entities) ownFunction(ctx context.Context, tx Querier, op, scope, id string, lock bool) (*store.Function, error) {
	query := `SELECT ` + functionCols + ` FROM functions WHERE id = $1 AND COALESCE(workspace_id, '') = $2`
	if lock {
		query += e.d.lock("FOR NO KEY UPDATE")
	}
	f, err := scanFunction(tx.QueryRowContext(ctx, query, id, scope))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, e.d.failf(op, store.ErrNotFound, "function %s is not in the workspace", id)
	}
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	return f, nil
}

const versionCols = `v.id, f.workspace_id, v.function_id, v.version, v.code, v.input_schema_id, v.output_schema_id, v.created_at`

func scanVersion(row scanner) (*store.FunctionVersion, error) {
	var (
		v           store.FunctionVersion
		ws, in, out sql.NullString
	)
	if err := row.Scan(&v.ID, &ws, &v.FunctionID, &v.Version, &v.Code, &in, &out, scanTime{&v.CreatedAt}); err != nil {
		return nil, err
	}
	v.WorkspaceID, v.InputSchemaID, v.OutputSchemaID = ws.String, in.String, out.String
	return &v, nil
}

// CreateFunctionVersion adds a version to function v.FunctionID of workspace v.WorkspaceID,
// setting ID (when empty), Version and CreatedAt; the function's first version becomes its
// default. Schema ids, when set, must name schemas the workspace can use (store.ErrNotFound).
func (e *Entities) CreateFunctionVersion(ctx context.Context, v *store.FunctionVersion) error {
	op := "create function version"
	if v == nil {
		return e.d.failf(op, store.ErrInvalid, "nil version")
	}
	op += " of " + v.FunctionID
	id := v.ID
	if id == "" {
		id = store.NewID(store.PrefixFunctionVersion)
	}
	var (
		number int
		at     time.Time
	)
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		// Locked: versions of a function are numbered one at a time.
		f, err := e.ownFunction(ctx, tx, op, v.WorkspaceID, v.FunctionID, true)
		if err != nil {
			return err
		}
		if v.InputSchemaID != "" {
			if err := e.checkSchema(ctx, tx, op, v.WorkspaceID, "input", v.InputSchemaID); err != nil {
				return err
			}
		}
		if v.OutputSchemaID != "" {
			if err := e.checkSchema(ctx, tx, op, v.WorkspaceID, "output", v.OutputSchemaID); err != nil {
				return err
			}
		}
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(max(version), 0) + 1 FROM function_versions WHERE function_id = $1`,
			f.ID).Scan(&number); err != nil {
			return err
		}
		if at, err = e.now(ctx, tx, op); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO function_versions
			(id, function_id, version, code, input_schema_id, output_schema_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			id, f.ID, number, v.Code, nullString(v.InputSchemaID), nullString(v.OutputSchemaID), e.d.Time(at)); err != nil {
			return err
		}
		if f.DefaultVersionID == "" {
			_, err = tx.ExecContext(ctx, `UPDATE functions SET default_version_id = $1, updated_at = $2 WHERE id = $3`,
				id, e.d.Time(notBefore(at, f.UpdatedAt)), f.ID)
		}
		return err
	})
	if err != nil {
		return e.d.Err(op, err)
	}
	v.ID, v.Version, v.CreatedAt = id, number, at
	return nil
}

// FunctionVersion returns a version of a function of the workspace, or of a system function,
// or store.ErrNotFound.
func (e *Entities) FunctionVersion(ctx context.Context, workspaceID, id string) (*store.FunctionVersion, error) {
	v, err := scanVersion(e.read.QueryRowContext(ctx, `SELECT `+versionCols+` FROM function_versions v
		JOIN functions f ON f.id = v.function_id WHERE v.id = $1 AND (f.workspace_id IS NULL OR f.workspace_id = $2)`, id, workspaceID))
	if err != nil {
		return nil, e.d.Err("function version "+id, err)
	}
	return v, nil
}

// FunctionVersions lists the versions of a function the workspace can see, in order
// (store.ErrNotFound for a function it cannot).
func (e *Entities) FunctionVersions(ctx context.Context, workspaceID, functionID string) ([]*store.FunctionVersion, error) {
	op := "versions of function " + functionID
	if _, err := e.Function(ctx, workspaceID, functionID); err != nil {
		return nil, err
	}
	rows, err := e.read.QueryContext(ctx, `SELECT `+versionCols+` FROM function_versions v
		JOIN functions f ON f.id = v.function_id WHERE v.function_id = $1 AND (f.workspace_id IS NULL OR f.workspace_id = $2)
		ORDER BY v.version`, functionID, workspaceID)
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	return collect(&e.d, rows, op, scanVersion)
}

// SetDefaultVersion makes versionID, a version of the function, its default and returns the
// function; store.ErrNotFound when either is not in the workspace.
func (e *Entities) SetDefaultVersion(ctx context.Context, workspaceID, functionID, versionID string) (*store.Function, error) {
	op := "set the default version of function " + functionID
	var out *store.Function
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		f, err := e.ownFunction(ctx, tx, op, workspaceID, functionID, true)
		if err != nil {
			return err
		}
		if err := e.d.exists(ctx, tx, op, `SELECT 1 FROM function_versions WHERE id = $1 AND function_id = $2`,
			fmt.Sprintf("%s is not a version of the function", versionID), versionID, functionID); err != nil {
			return err
		}
		now, err := e.now(ctx, tx, op)
		if err != nil {
			return err
		}
		now = notBefore(now, f.UpdatedAt)
		if _, err := tx.ExecContext(ctx, `UPDATE functions SET default_version_id = $1, updated_at = $2 WHERE id = $3`,
			versionID, e.d.Time(now), functionID); err != nil {
			return e.d.Err(op, err)
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
	)
	if err := row.Scan(&t.ID, &ws, &t.Name, &desc, &t.Target, &fn, &fnv, &t.InputSchemaID, &t.OutputSchemaID, &examples,
		&t.RequiresConfirmation, &t.Enabled, &t.System, &creator, &runtime, scanNullTime{&t.DeletedAt}, &tier,
		scanTime{&t.CreatedAt}, scanTime{&t.UpdatedAt}); err != nil {
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
// its name is free among the active tools (store.ErrConflict; where writers run side by side,
// the unique index tools_name settles a race).
func (e *Entities) checkToolRefs(ctx context.Context, tx Querier, op string, t *store.Tool) error {
	scope := t.WorkspaceID
	if scope != "" {
		if err := e.d.exists(ctx, tx, op, `SELECT 1 FROM workspaces WHERE id = $1`, "no workspace "+scope, scope); err != nil {
			return err
		}
	}
	if t.FunctionID != "" {
		if _, err := e.ownFunction(ctx, tx, op, scope, t.FunctionID, false); err != nil {
			return err
		}
	}
	if t.FunctionVersionID != "" {
		var fn string
		err := tx.QueryRowContext(ctx, `SELECT v.function_id FROM function_versions v JOIN functions f ON f.id = v.function_id
			WHERE v.id = $1 AND COALESCE(f.workspace_id, '') = $2`, t.FunctionVersionID, scope).Scan(&fn)
		if errors.Is(err, sql.ErrNoRows) {
			return e.d.failf(op, store.ErrNotFound, "function version %s is not in the workspace", t.FunctionVersionID)
		}
		if err != nil {
			return e.d.Err(op, err)
		}
		if fn != t.FunctionID {
			return e.d.failf(op, store.ErrInvalid, "pinned version %s is not a version of function %s", t.FunctionVersionID, t.FunctionID)
		}
	}
	if err := e.checkSchema(ctx, tx, op, scope, "input", t.InputSchemaID); err != nil {
		return err
	}
	if err := e.checkSchema(ctx, tx, op, scope, "output", t.OutputSchemaID); err != nil {
		return err
	}
	var other string
	err := tx.QueryRowContext(ctx, `SELECT id FROM tools WHERE COALESCE(workspace_id, '') = $1 AND name = $2 AND deleted_at IS NULL AND id <> $3`,
		scope, t.Name, t.ID).Scan(&other)
	if err == nil {
		return e.d.failf(op, store.ErrConflict, "an active tool of the workspace is already named %q (%s)", t.Name, other)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return e.d.Err(op, err)
	}
	return nil
}

// CreateTool stores a new, active tool, setting ID (when empty) and the times. See
// store.Entities for the rules it must follow.
func (e *Entities) CreateTool(ctx context.Context, t *store.Tool) error {
	op := "create tool"
	if t == nil {
		return e.d.failf(op, store.ErrInvalid, "nil tool")
	}
	nt := t.Clone()
	if nt.ID == "" {
		nt.ID = store.NewID(store.PrefixTool)
	}
	op += " " + nt.Name
	if err := nt.Check(); err != nil {
		return e.d.fail(op, err)
	}
	if nt.DeletedAt != nil {
		return e.d.failf(op, store.ErrInvalid, "a new tool is not deleted")
	}
	examples, err := encodeExamples(nt.Examples)
	if err != nil {
		return e.d.fail(op, err)
	}
	err = e.write(ctx, func(ctx context.Context, tx Querier) error {
		if err := e.checkToolRefs(ctx, tx, op, nt); err != nil {
			return err
		}
		if nt.CreatedBy != "" {
			role, err := e.memberRole(ctx, tx, op, nt.WorkspaceID, nt.CreatedBy)
			if err != nil {
				return err
			}
			if role == "" {
				return e.d.failf(op, store.ErrInvalid, "creator %s is not a member of workspace %s", nt.CreatedBy, nt.WorkspaceID)
			}
		}
		if nt.RuntimeUserID != "" {
			if err := e.checkRuntimeUser(ctx, tx, op, nt.WorkspaceID, nt.CreatedBy, nt.RuntimeUserID, "a tool's runtime user"); err != nil {
				return err
			}
		}
		now, err := e.now(ctx, tx, op)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO tools (`+toolCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, NULL, NULL, $16, $16)`,
			nt.ID, nullString(nt.WorkspaceID), nt.Name, nullString(nt.Description), nt.Target, nullString(nt.FunctionID),
			nullString(nt.FunctionVersionID), nt.InputSchemaID, nt.OutputSchemaID, examples, nt.RequiresConfirmation,
			nt.Enabled, nt.System, nullString(nt.CreatedBy), nullString(nt.RuntimeUserID), e.d.Time(now)); err != nil {
			return err
		}
		nt.CreatedAt, nt.UpdatedAt = now, now
		return nil
	})
	if err != nil {
		return e.d.Err(op, err)
	}
	*t = *nt
	return nil
}

// Tool returns a tool of the workspace (active or deleted) or a system tool, or
// store.ErrNotFound.
func (e *Entities) Tool(ctx context.Context, workspaceID, id string) (*store.Tool, error) {
	t, err := scanTool(e.read.QueryRowContext(ctx, `SELECT `+toolCols+` FROM tools WHERE id = $1 AND `+visible, id, workspaceID))
	if err != nil {
		return nil, e.d.Err("tool "+id, err)
	}
	return t, nil
}

// writableTool reads and locks, inside the write transaction, a tool the workspace may
// change: a system tool is store.ErrForbidden, a deleted one store.ErrNotFound.
func (e *Entities) writableTool(ctx context.Context, tx Querier, op, workspaceID, id string) (*store.Tool, error) {
	t, err := scanTool(tx.QueryRowContext(ctx, `SELECT `+toolCols+` FROM tools WHERE id = $1 AND `+visible+e.d.lock("FOR NO KEY UPDATE"),
		id, workspaceID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, e.d.failf(op, store.ErrNotFound, "no tool %s in the workspace", id)
	}
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	if t.System {
		return nil, e.d.failf(op, store.ErrForbidden, "%s is a system tool: system tools cannot be edited or deleted", id)
	}
	if t.DeletedAt != nil {
		return nil, e.d.failf(op, store.ErrNotFound, "tool %s is deleted", id)
	}
	return t, nil
}

// UpdateTool applies fn to an active tool of the workspace in one transaction and stores the
// result. See store.Entities for what may change and the rules that apply.
func (e *Entities) UpdateTool(ctx context.Context, workspaceID, toolID, callerUserID string, fn func(*store.Tool) error) (*store.Tool, error) {
	op := "update tool " + toolID
	var out *store.Tool
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		before, err := e.writableTool(ctx, tx, op, workspaceID, toolID)
		if err != nil {
			return err
		}
		t := before.Clone()
		if err := fn(t); err != nil {
			return err
		}
		if t.ID != before.ID || t.WorkspaceID != before.WorkspaceID || t.System != before.System || t.CreatedBy != before.CreatedBy ||
			t.DeletedAt != nil || t.RetentionTier != "" || !t.CreatedAt.Equal(before.CreatedAt) || !t.UpdatedAt.Equal(before.UpdatedAt) {
			return e.d.failf(op, store.ErrInvalid, "id, workspace, system, creator, deletion and times cannot be changed")
		}
		if err := t.Check(); err != nil {
			return e.d.fail(op, err)
		}
		examples, err := encodeExamples(t.Examples)
		if err != nil {
			return e.d.fail(op, err)
		}
		if err := e.checkToolRefs(ctx, tx, op, t); err != nil {
			return err
		}
		if t.RuntimeUserID != before.RuntimeUserID {
			if err := e.checkRuntimeUser(ctx, tx, op, workspaceID, callerUserID, t.RuntimeUserID, "a tool's runtime user"); err != nil {
				return err
			}
		}
		now, err := e.now(ctx, tx, op)
		if err != nil {
			return err
		}
		now = notBefore(now, before.UpdatedAt)
		if _, err := tx.ExecContext(ctx, `UPDATE tools SET name = $1, description = $2, target = $3, function_id = $4,
			function_version_id = $5, input_schema_id = $6, output_schema_id = $7, examples = $8, requires_confirmation = $9,
			enabled = $10, runtime_user_id = $11, updated_at = $12 WHERE id = $13`,
			t.Name, nullString(t.Description), t.Target, nullString(t.FunctionID), nullString(t.FunctionVersionID),
			t.InputSchemaID, t.OutputSchemaID, examples, t.RequiresConfirmation, t.Enabled, nullString(t.RuntimeUserID),
			e.d.Time(now), toolID); err != nil {
			return e.d.Err(op, err)
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
func (e *Entities) DeleteTool(ctx context.Context, workspaceID, toolID string, tier store.RetentionTier) (*store.Tool, error) {
	op := "delete tool " + toolID
	if tier != "" && !tier.Valid() {
		return nil, e.d.failf(op, store.ErrInvalid, "unknown retention tier %q", tier)
	}
	var out *store.Tool
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		t, err := e.writableTool(ctx, tx, op, workspaceID, toolID)
		if err != nil {
			return err
		}
		if tier == "" {
			if err := tx.QueryRowContext(ctx, `SELECT retention_tier FROM workspaces WHERE id = $1`, workspaceID).Scan(&tier); err != nil {
				return e.d.Err(op, err)
			}
		}
		now, err := e.now(ctx, tx, op)
		if err != nil {
			return err
		}
		now = notBefore(now, t.UpdatedAt)
		var purge any // the tier's days after the deletion; NULL: never purged
		if keep, ok := tier.Keep(); ok {
			purge = e.d.Time(now.Add(keep))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tools SET deleted_at = $1, retention_tier = $2, purge_at = $3, updated_at = $1 WHERE id = $4`,
			e.d.Time(now), tier, purge, toolID); err != nil {
			return e.d.Err(op, err)
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
func (e *Entities) ListTools(ctx context.Context, f store.ToolFilter) (*store.ToolPage, error) {
	op := "list tools"
	if err := f.Check(); err != nil {
		return nil, e.d.fail(op, err)
	}
	after, hasCursor, err := f.DecodeCursor()
	if err != nil {
		return nil, e.d.fail(op, err)
	}
	var (
		where []string
		args  []any
	)
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	switch {
	case f.WorkspaceID == "":
		where = append(where, `workspace_id IS NULL`)
	case f.IncludeSystem:
		where = append(where, `(workspace_id = `+arg(f.WorkspaceID)+` OR workspace_id IS NULL)`)
	default:
		where = append(where, `workspace_id = `+arg(f.WorkspaceID))
	}
	if f.FunctionID != "" {
		where = append(where, `function_id = `+arg(f.FunctionID))
	}
	if f.Target != "" {
		where = append(where, `target = `+arg(string(f.Target)))
	}
	switch {
	case f.NamePrefix:
		// Not LIKE: a name may hold % and _.
		p := arg(f.Name)
		where = append(where, `substr(name, 1, length(CAST(`+p+` AS TEXT))) = `+p)
	case f.Name != "":
		where = append(where, `name = `+arg(f.Name))
	}
	if f.Names != nil {
		if len(f.Names) == 0 {
			return &store.ToolPage{}, nil
		}
		in := make([]string, len(f.Names))
		for i, n := range f.Names {
			in[i] = arg(n)
		}
		where = append(where, `name IN (`+strings.Join(in, ", ")+`)`)
	}
	if f.RequiresConfirmation != nil {
		where = append(where, `requires_confirmation = `+arg(*f.RequiresConfirmation))
	}
	switch f.Deleted {
	case "", store.DeletedExclude:
		where = append(where, `deleted_at IS NULL`)
	case store.DeletedOnly:
		where = append(where, `deleted_at IS NOT NULL`)
	}
	if hasCursor {
		where = append(where, `(created_at, id) > (`+arg(e.d.Time(after.CreatedAt))+`, `+arg(after.ID)+`)`)
	}
	limit := arg(f.Limit + 1)
	rows, err := e.read.QueryContext(ctx, `SELECT `+toolCols+` FROM tools WHERE `+strings.Join(where, " AND ")+`
		ORDER BY created_at, id LIMIT `+limit, args...)
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	tools, err := collect(&e.d, rows, op, scanTool)
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
func (e *Entities) ResolveToolVersion(ctx context.Context, workspaceID, toolID string) (*store.FunctionVersion, error) {
	op := "resolve the version of tool " + toolID
	t, err := e.Tool(ctx, workspaceID, toolID)
	if err != nil {
		return nil, err
	}
	switch {
	case t.DeletedAt != nil:
		return nil, e.d.failf(op, store.ErrNotFound, "the tool is deleted")
	case t.Target != store.TargetServer:
		return nil, e.d.failf(op, store.ErrInvalid, "a client tool runs no function")
	case t.FunctionVersionID != "":
		return e.FunctionVersion(ctx, t.WorkspaceID, t.FunctionVersionID)
	}
	f, err := e.Function(ctx, t.WorkspaceID, t.FunctionID)
	if err != nil {
		return nil, err
	}
	if f.DefaultVersionID == "" {
		return nil, e.d.failf(op, store.ErrNotFound, "function %s has no default version", f.ID)
	}
	return e.FunctionVersion(ctx, t.WorkspaceID, f.DefaultVersionID)
}

// PurgeExpired deletes for good the soft-deleted tools, of every workspace, whose DeletedAt
// plus their tier's days is at or before now (tier none: never), and returns them as they were.
func (e *Entities) PurgeExpired(ctx context.Context, now time.Time) ([]*store.Tool, error) {
	var gone []*store.Tool
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		gone = gone[:0] // a retried transaction starts again
		rows, err := tx.QueryContext(ctx, `DELETE FROM tools WHERE purge_at IS NOT NULL AND purge_at <= $1 RETURNING `+toolCols, e.d.Time(now))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			t, err := scanTool(rows)
			if err != nil {
				return err
			}
			gone = append(gone, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, e.d.Err("purge expired tools", err)
	}
	return gone, nil
}

// ToolsStamp identifies the state of a workspace's tools and functions: it changes when one
// is added, changed, deleted or purged.
func (e *Entities) ToolsStamp(ctx context.Context, workspaceID string) (string, error) {
	var nt, nf int64
	var mt, mf any
	err := e.read.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM tools WHERE workspace_id = $1), (SELECT max(updated_at) FROM tools WHERE workspace_id = $1),
		(SELECT count(*) FROM functions WHERE workspace_id = $1), (SELECT max(updated_at) FROM functions WHERE workspace_id = $1)`,
		workspaceID).Scan(&nt, &mt, &nf, &mf)
	if err != nil {
		return "", e.d.Err("read the stamp of the tools", err)
	}
	return fmt.Sprintf("%d/%v/%d/%v", nt, mt, nf, mf), nil
}
