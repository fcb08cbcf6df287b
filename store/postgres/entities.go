package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/quiverhq/quiver/store"
)

// This file implements store.Entities: workspaces, users, memberships, schemas, functions and
// tools (migration 0004). Each write is one transaction at READ COMMITTED; the rules that
// involve other records are checked inside it under row locks, so that concurrent writers,
// on any node, cannot both pass a check that only one of them may pass:
//
//   - changes to a workspace and to its memberships lock the workspace row first, so they
//     take turns (no two admins demoting each other, no removing a member while they become
//     the default runtime user);
//   - a membership that a write relies on (the caller is an admin, the runtime user or creator
//     is a member) is read FOR SHARE, and RemoveMember locks it FOR UPDATE before checking
//     that no active tool runs as the user: one of the two waits for the other and then sees
//     its result;
//   - versions lock their function row, so version numbers are assigned one at a time;
//   - a tool's name is checked, and the unique index tools_name settles concurrent creations
//     (reported as store.ErrConflict).
//
// Times come from the database clock, in UTC, to the microsecond: a new record's creation time is
// its transaction's start (now(), so CreatedAt and UpdatedAt are equal), later changes read
// clock_timestamp() and never move UpdatedAt back.

var _ store.Entities = (*Store)(nil)

// entFail wraps err, from a rule the store checks, with the operation.
func entFail(op string, err error) error { return fmt.Errorf("postgres: %s: %w", op, err) }

// entFailf reports a broken rule: kind is the store error it wraps.
func entFailf(op string, kind error, format string, args ...any) error {
	return fmt.Errorf("postgres: %s: %s: %w", op, fmt.Sprintf(format, args...), kind)
}

// entError maps a database error: no row is store.ErrNotFound, a unique violation
// store.ErrConflict, a foreign key store.ErrNotFound, a check or bad data store.ErrInvalid.
// An error that already says which rule broke (or nil) is returned as is.
func entError(op string, err error) error {
	if err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid) ||
		errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrForbidden) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return entFail(op, store.ErrNotFound)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	var kind error
	what := pe.Message
	switch {
	case pe.Code == "23505" && pe.ConstraintName == "tools_name":
		kind, what = store.ErrConflict, "an active tool of the workspace already has this name"
	case pe.Code == "23505" && pe.ConstraintName == "functions_name":
		kind, what = store.ErrConflict, "the workspace already has a function of this name"
	case pe.Code == "23505" && pe.ConstraintName == "users_email_key":
		kind, what = store.ErrConflict, "the email is already used"
	case pe.Code == "23505" && strings.HasSuffix(pe.ConstraintName, "_pkey"):
		kind, what = store.ErrConflict, "the id is already taken"
	case pe.Code == "23505":
		kind = store.ErrConflict
	case pe.Code == "23503":
		kind = store.ErrNotFound
	case pe.Code == "23514" || strings.HasPrefix(pe.Code, "22"):
		kind = store.ErrInvalid
	default:
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	return fmt.Errorf("postgres: %s: %s: %w", op, what, kind)
}

// inTx runs fn in one transaction and maps its error.
func (s *Store) inTx(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	return entError(op, pgx.BeginFunc(ctx, s.pool, fn))
}

// queryer is what a transaction and the pool have in common.
type queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// found fails with store.ErrNotFound (saying what) when query finds no row.
func found(ctx context.Context, q queryer, op, query, what string, args ...any) error {
	var one int
	err := q.QueryRow(ctx, query, args...).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return entFailf(op, store.ErrNotFound, "%s", what)
	}
	return err
}

// collectRows reads every row with scan.
func collectRows[T any](rows pgx.Rows, op string, scan func(pgx.Row) (T, error)) ([]T, error) {
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
	if err != nil {
		return nil, entError(op, err)
	}
	return out, nil
}

// ---- workspaces

const workspaceCols = `id, name, default_runtime_user_id, retention_tier, created_at, updated_at`

func scanWorkspace(row pgx.Row) (*store.Workspace, error) {
	var (
		w       store.Workspace
		runtime *string
	)
	if err := row.Scan(&w.ID, &w.Name, &runtime, &w.RetentionTier, &w.CreatedAt, &w.UpdatedAt); err != nil {
		return nil, err
	}
	w.DefaultRuntimeUserID = str(runtime)
	w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
	return &w, nil
}

// CreateWorkspace stores a new workspace, setting ID (when empty), RetentionTier (when empty)
// and the times. DefaultRuntimeUserID must be empty: a new workspace has no members yet.
func (s *Store) CreateWorkspace(ctx context.Context, w *store.Workspace) error {
	op := "create workspace"
	if w == nil {
		return entFailf(op, store.ErrInvalid, "nil workspace")
	}
	nw := *w
	if nw.ID == "" {
		nw.ID = store.NewID(store.PrefixWorkspace)
	}
	if nw.RetentionTier == "" {
		nw.RetentionTier = store.DefaultRetentionTier
	}
	if err := nw.Check(); err != nil {
		return entFail(op, err)
	}
	if nw.DefaultRuntimeUserID != "" {
		return entFailf(op, store.ErrInvalid, "a new workspace has no members to run tools as: add members, then set the default runtime user")
	}
	err := s.pool.QueryRow(ctx, `INSERT INTO workspaces (`+workspaceCols+`) VALUES ($1, $2, NULL, $3, now(), now())
RETURNING created_at`, nw.ID, nw.Name, nw.RetentionTier).Scan(&nw.CreatedAt)
	if err != nil {
		return entError(op, err)
	}
	nw.CreatedAt = nw.CreatedAt.UTC()
	nw.UpdatedAt = nw.CreatedAt
	*w = nw
	return nil
}

// Workspace returns the workspace, or store.ErrNotFound.
func (s *Store) Workspace(ctx context.Context, id string) (*store.Workspace, error) {
	w, err := scanWorkspace(s.pool.QueryRow(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE id = $1`, id))
	if err != nil {
		return nil, entError("workspace "+id, err)
	}
	return w, nil
}

// lockWorkspace reads the workspace and locks its row until the transaction ends: changes to
// a workspace and its memberships take turns.
func lockWorkspace(ctx context.Context, tx pgx.Tx, op, id string) (*store.Workspace, error) {
	w, err := scanWorkspace(tx.QueryRow(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE id = $1 FOR NO KEY UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, entFailf(op, store.ErrNotFound, "no workspace %s", id)
	}
	return w, err
}

// UpdateWorkspace applies fn to the workspace in one transaction and stores its Name,
// DefaultRuntimeUserID and RetentionTier (anything else changing is store.ErrInvalid). Changing
// the default runtime user needs callerUserID to be an admin of the workspace
// (store.ErrForbidden) and the new user to be a member (store.ErrInvalid).
func (s *Store) UpdateWorkspace(ctx context.Context, id, callerUserID string, fn func(*store.Workspace) error) (*store.Workspace, error) {
	op := "update workspace " + id
	var out *store.Workspace
	err := s.inTx(ctx, op, func(tx pgx.Tx) error {
		w, err := lockWorkspace(ctx, tx, op, id)
		if err != nil {
			return err
		}
		before := *w
		if err := fn(w); err != nil {
			return err
		}
		if w.ID != before.ID || !w.CreatedAt.Equal(before.CreatedAt) || !w.UpdatedAt.Equal(before.UpdatedAt) {
			return entFailf(op, store.ErrInvalid, "only the name, default runtime user and retention tier may change")
		}
		if err := w.Check(); err != nil {
			return entFail(op, err)
		}
		if w.DefaultRuntimeUserID != before.DefaultRuntimeUserID {
			if err := checkRuntimeUser(ctx, tx, op, id, callerUserID, w.DefaultRuntimeUserID, "the workspace's default runtime user"); err != nil {
				return err
			}
		}
		if err := tx.QueryRow(ctx, `UPDATE workspaces SET name = $2, default_runtime_user_id = $3, retention_tier = $4,
	updated_at = GREATEST(updated_at, clock_timestamp())
WHERE id = $1 RETURNING updated_at`, id, w.Name, nullable(w.DefaultRuntimeUserID), w.RetentionTier).Scan(&w.UpdatedAt); err != nil {
			return err
		}
		w.UpdatedAt = w.UpdatedAt.UTC()
		out = w
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// memberRole returns the user's role in the workspace ("" when not a member), and keeps the
// membership from being changed or removed until the transaction ends.
func memberRole(ctx context.Context, tx pgx.Tx, workspaceID, userID string) (store.MemberRole, error) {
	var role store.MemberRole
	err := tx.QueryRow(ctx, `SELECT role FROM memberships WHERE workspace_id = $1 AND user_id = $2 FOR SHARE`,
		workspaceID, userID).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return role, err
}

// checkRuntimeUser enforces E3 for setting a runtime user (what names the setting): caller must
// be an admin of the workspace and the new user ("" clears it) a member.
func checkRuntimeUser(ctx context.Context, tx pgx.Tx, op, workspaceID, callerUserID, newUserID, what string) error {
	role, err := memberRole(ctx, tx, workspaceID, callerUserID)
	if err != nil {
		return err
	}
	if role != store.MemberRoleAdmin {
		who := "no caller was named"
		if callerUserID != "" {
			who = fmt.Sprintf("user %s is not an admin of workspace %s", callerUserID, workspaceID)
		}
		return entFailf(op, store.ErrForbidden, "only a workspace admin may set %s: %s", what, who)
	}
	if newUserID == "" {
		return nil
	}
	role, err = memberRole(ctx, tx, workspaceID, newUserID)
	if err != nil {
		return err
	}
	if role == "" {
		return entFailf(op, store.ErrInvalid, "%s must be a member of workspace %s, and user %s is not", what, workspaceID, newUserID)
	}
	return nil
}

// ---- users

const userCols = `id, email, name, created_at`

func scanUser(row pgx.Row) (*store.User, error) {
	var u store.User
	if err := row.Scan(&u.ID, &u.Email, &u.Name, &u.CreatedAt); err != nil {
		return nil, err
	}
	u.CreatedAt = u.CreatedAt.UTC()
	return &u, nil
}

// CreateUser stores a new user, setting ID (when empty) and CreatedAt. An email already used,
// ignoring case, is store.ErrConflict.
func (s *Store) CreateUser(ctx context.Context, u *store.User) error {
	op := "create user"
	if u == nil {
		return entFailf(op, store.ErrInvalid, "nil user")
	}
	key, err := store.NormalizeEmail(u.Email)
	if err != nil {
		return entFail(op, err)
	}
	id := u.ID
	if id == "" {
		id = store.NewID(store.PrefixUser)
	}
	email := strings.TrimSpace(u.Email)
	var at time.Time
	err = s.pool.QueryRow(ctx, `INSERT INTO users (id, email, email_key, name, created_at) VALUES ($1, $2, $3, $4, clock_timestamp())
RETURNING created_at`, id, email, key, u.Name).Scan(&at)
	if err != nil {
		return entError(op, err)
	}
	u.ID, u.Email, u.CreatedAt = id, email, at.UTC()
	return nil
}

// User returns the user, or store.ErrNotFound.
func (s *Store) User(ctx context.Context, id string) (*store.User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE id = $1`, id))
	if err != nil {
		return nil, entError("user "+id, err)
	}
	return u, nil
}

// UserByEmail returns the user with that email, ignoring case, or store.ErrNotFound.
func (s *Store) UserByEmail(ctx context.Context, email string) (*store.User, error) {
	op := "user by email"
	key, err := store.NormalizeEmail(email)
	if err != nil {
		return nil, entFail(op, err)
	}
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE email_key = $1`, key))
	if err != nil {
		return nil, entError(op, err)
	}
	return u, nil
}

// ---- memberships

func scanMembership(row pgx.Row) (*store.Membership, error) {
	var m store.Membership
	if err := row.Scan(&m.WorkspaceID, &m.UserID, &m.Role, &m.CreatedAt); err != nil {
		return nil, err
	}
	m.CreatedAt = m.CreatedAt.UTC()
	return &m, nil
}

// AddMember makes a user a member of a workspace, setting CreatedAt: store.ErrNotFound when
// either is missing, store.ErrConflict when the user is already a member.
func (s *Store) AddMember(ctx context.Context, m *store.Membership) error {
	if m == nil {
		return entFailf("add member", store.ErrInvalid, "nil membership")
	}
	op := fmt.Sprintf("add user %s to workspace %s", m.UserID, m.WorkspaceID)
	if !m.Role.Valid() {
		return entFailf(op, store.ErrInvalid, "role %q is neither admin nor member", m.Role)
	}
	var at time.Time
	err := s.inTx(ctx, op, func(tx pgx.Tx) error {
		if _, err := lockWorkspace(ctx, tx, op, m.WorkspaceID); err != nil {
			return err
		}
		if err := found(ctx, tx, op, `SELECT 1 FROM users WHERE id = $1`, "no such user", m.UserID); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `INSERT INTO memberships (workspace_id, user_id, role, created_at) VALUES ($1, $2, $3, clock_timestamp())
RETURNING created_at`, m.WorkspaceID, m.UserID, m.Role).Scan(&at)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return entFailf(op, store.ErrConflict, "already a member")
		}
		return err
	})
	if err != nil {
		return err
	}
	m.CreatedAt = at.UTC()
	return nil
}

// Member returns the user's membership of the workspace, or store.ErrNotFound.
func (s *Store) Member(ctx context.Context, workspaceID, userID string) (*store.Membership, error) {
	m, err := scanMembership(s.pool.QueryRow(ctx, `SELECT workspace_id, user_id, role, created_at FROM memberships
WHERE workspace_id = $1 AND user_id = $2`, workspaceID, userID))
	if err != nil {
		return nil, entError(fmt.Sprintf("membership of user %s in workspace %s", userID, workspaceID), err)
	}
	return m, nil
}

// Members lists the members of the workspace, oldest first.
func (s *Store) Members(ctx context.Context, workspaceID string) ([]*store.Membership, error) {
	op := "members of workspace " + workspaceID
	rows, err := s.pool.Query(ctx, `SELECT workspace_id, user_id, role, created_at FROM memberships
WHERE workspace_id = $1 ORDER BY created_at, user_id`, workspaceID)
	if err != nil {
		return nil, entError(op, err)
	}
	return collectRows(rows, op, scanMembership)
}

// lockMember locks the user's membership for a change and returns the role; store.ErrNotFound
// when not a member. The workspace row must be locked already.
func lockMember(ctx context.Context, tx pgx.Tx, op, workspaceID, userID string) (store.MemberRole, error) {
	var role store.MemberRole
	err := tx.QueryRow(ctx, `SELECT role FROM memberships WHERE workspace_id = $1 AND user_id = $2 FOR UPDATE`,
		workspaceID, userID).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", entFailf(op, store.ErrNotFound, "not a member")
	}
	return role, err
}

// lastAdmin reports whether userID is the only admin of the workspace.
func lastAdmin(ctx context.Context, tx pgx.Tx, workspaceID, userID string) (bool, error) {
	var others bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM memberships WHERE workspace_id = $1 AND role = 'admin' AND user_id <> $2)`,
		workspaceID, userID).Scan(&others)
	return !others, err
}

// SetMemberRole changes a member's role (store.ErrNotFound for a user who is not a member).
// Demoting the last admin is store.ErrInvalid.
func (s *Store) SetMemberRole(ctx context.Context, workspaceID, userID string, role store.MemberRole) error {
	op := fmt.Sprintf("set the role of user %s in workspace %s", userID, workspaceID)
	if !role.Valid() {
		return entFailf(op, store.ErrInvalid, "role %q is neither admin nor member", role)
	}
	return s.inTx(ctx, op, func(tx pgx.Tx) error {
		if _, err := lockWorkspace(ctx, tx, op, workspaceID); err != nil {
			return err
		}
		cur, err := lockMember(ctx, tx, op, workspaceID, userID)
		if err != nil {
			return err
		}
		if cur == store.MemberRoleAdmin && role != store.MemberRoleAdmin {
			last, err := lastAdmin(ctx, tx, workspaceID, userID)
			if err != nil {
				return err
			}
			if last {
				return entFailf(op, store.ErrInvalid, "the workspace's last admin cannot be demoted: make another member admin first")
			}
		}
		_, err = tx.Exec(ctx, `UPDATE memberships SET role = $3 WHERE workspace_id = $1 AND user_id = $2`, workspaceID, userID, role)
		return err
	})
}

// RemoveMember ends a membership (store.ErrNotFound for a user who is not a member). The last
// admin, the workspace's default runtime user and the runtime user of an active tool cannot be
// removed (store.ErrInvalid): change those first.
func (s *Store) RemoveMember(ctx context.Context, workspaceID, userID string) error {
	op := fmt.Sprintf("remove user %s from workspace %s", userID, workspaceID)
	return s.inTx(ctx, op, func(tx pgx.Tx) error {
		w, err := lockWorkspace(ctx, tx, op, workspaceID)
		if err != nil {
			return err
		}
		cur, err := lockMember(ctx, tx, op, workspaceID, userID)
		if err != nil {
			return err
		}
		if cur == store.MemberRoleAdmin {
			last, err := lastAdmin(ctx, tx, workspaceID, userID)
			if err != nil {
				return err
			}
			if last {
				return entFailf(op, store.ErrInvalid, "the workspace's last admin cannot be removed")
			}
		}
		if w.DefaultRuntimeUserID == userID {
			return entFailf(op, store.ErrInvalid, "the user is the workspace's default runtime user: change it first")
		}
		var tool string
		err = tx.QueryRow(ctx, `SELECT id FROM tools WHERE workspace_id = $1 AND runtime_user_id = $2 AND deleted_at IS NULL LIMIT 1`,
			workspaceID, userID).Scan(&tool)
		if err == nil {
			return entFailf(op, store.ErrInvalid, "the user is the runtime user of tool %s: change it first", tool)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM memberships WHERE workspace_id = $1 AND user_id = $2`, workspaceID, userID)
		return err
	})
}

// ---- schemas

// visible is the condition for a record of the workspace $2, or a system record.
const visible = `(workspace_id IS NULL OR workspace_id = $2)`

// CreateSchema stores a schema (a JSON object or boolean), setting ID (when empty) and
// CreatedAt. Its workspace, when set, must exist (store.ErrNotFound).
func (s *Store) CreateSchema(ctx context.Context, sc *store.Schema) error {
	op := "create schema"
	if sc == nil {
		return entFailf(op, store.ErrInvalid, "nil schema")
	}
	if err := store.CheckSchemaContent(sc.Content); err != nil {
		return entFail(op, err)
	}
	id := sc.ID
	if id == "" {
		id = store.NewID(store.PrefixSchema)
	}
	var at time.Time
	err := s.pool.QueryRow(ctx, `INSERT INTO schemas (id, workspace_id, content, created_at) VALUES ($1, $2, $3::text::json, clock_timestamp())
RETURNING created_at`, id, nullable(sc.WorkspaceID), string(sc.Content)).Scan(&at)
	if err != nil {
		return entError(op, err)
	}
	sc.ID, sc.CreatedAt = id, at.UTC()
	return nil
}

// Schema returns a schema of the workspace, or a system schema, or store.ErrNotFound.
func (s *Store) Schema(ctx context.Context, workspaceID, id string) (*store.Schema, error) {
	var (
		sc      store.Schema
		ws      *string
		content string
	)
	err := s.pool.QueryRow(ctx, `SELECT id, workspace_id, content::text, created_at FROM schemas WHERE id = $1 AND `+visible,
		id, workspaceID).Scan(&sc.ID, &ws, &content, &sc.CreatedAt)
	if err != nil {
		return nil, entError("schema "+id, err)
	}
	sc.WorkspaceID, sc.Content, sc.CreatedAt = str(ws), json.RawMessage(content), sc.CreatedAt.UTC()
	return &sc, nil
}

// checkSchema fails with store.ErrNotFound unless id names a schema that a record of workspace
// scope ("" for system) may use: one of the workspace, or a system schema.
func checkSchema(ctx context.Context, q queryer, op, scope, role, id string) error {
	return found(ctx, q, op, `SELECT 1 FROM schemas WHERE id = $1 AND `+visible,
		fmt.Sprintf("%s schema %s is not in the workspace", role, id), id, scope)
}

// ---- functions

const functionCols = `id, workspace_id, name, default_version_id, created_at, updated_at`

func scanFunction(row pgx.Row) (*store.Function, error) {
	var (
		f       store.Function
		ws, def *string
	)
	if err := row.Scan(&f.ID, &ws, &f.Name, &def, &f.CreatedAt, &f.UpdatedAt); err != nil {
		return nil, err
	}
	f.WorkspaceID, f.DefaultVersionID = str(ws), str(def)
	f.CreatedAt, f.UpdatedAt = f.CreatedAt.UTC(), f.UpdatedAt.UTC()
	return &f, nil
}

// CreateFunction stores a function without versions, setting ID (when empty) and the times.
// Its workspace (when set) must exist, and its name be free there (store.ErrConflict).
func (s *Store) CreateFunction(ctx context.Context, f *store.Function) error {
	op := "create function"
	if f == nil {
		return entFailf(op, store.ErrInvalid, "nil function")
	}
	if err := f.Check(); err != nil {
		return entFail(op, err)
	}
	if f.DefaultVersionID != "" {
		return entFailf(op, store.ErrInvalid, "a new function has no versions: its first version becomes the default")
	}
	id := f.ID
	if id == "" {
		id = store.NewID(store.PrefixFunction)
	}
	var at time.Time
	err := s.pool.QueryRow(ctx, `INSERT INTO functions (`+functionCols+`) VALUES ($1, $2, $3, NULL, now(), now())
RETURNING created_at`, id, nullable(f.WorkspaceID), f.Name).Scan(&at)
	if err != nil {
		return entError(op, err)
	}
	f.ID, f.CreatedAt, f.UpdatedAt = id, at.UTC(), at.UTC()
	return nil
}

// Function returns a function of the workspace, or a system function, or store.ErrNotFound.
func (s *Store) Function(ctx context.Context, workspaceID, id string) (*store.Function, error) {
	f, err := scanFunction(s.pool.QueryRow(ctx, `SELECT `+functionCols+` FROM functions WHERE id = $1 AND `+visible, id, workspaceID))
	if err != nil {
		return nil, entError("function "+id, err)
	}
	return f, nil
}

// Functions lists the functions of the workspace ("": the system functions), oldest first.
func (s *Store) Functions(ctx context.Context, workspaceID string) ([]*store.Function, error) {
	op := "functions of workspace " + workspaceID
	rows, err := s.pool.Query(ctx, `SELECT `+functionCols+` FROM functions WHERE COALESCE(workspace_id, '') = $1
ORDER BY created_at, id`, workspaceID)
	if err != nil {
		return nil, entError(op, err)
	}
	return collectRows(rows, op, scanFunction)
}

// ownFunction reads a function for writing: one of the workspace itself (scope "" for a
// system function), never a system function through a workspace. lock locks its row.
func ownFunction(ctx context.Context, q queryer, op, scope, id string, lock bool) (*store.Function, error) {
	query := `SELECT ` + functionCols + ` FROM functions WHERE id = $1 AND COALESCE(workspace_id, '') = $2`
	if lock {
		query += ` FOR NO KEY UPDATE`
	}
	f, err := scanFunction(q.QueryRow(ctx, query, id, scope))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, entFailf(op, store.ErrNotFound, "function %s is not in the workspace", id)
	}
	return f, err
}

const versionCols = `v.id, f.workspace_id, v.function_id, v.version, v.code, v.input_schema_id, v.output_schema_id, v.created_at`

func scanVersion(row pgx.Row) (*store.FunctionVersion, error) {
	var (
		v           store.FunctionVersion
		ws, in, out *string
	)
	if err := row.Scan(&v.ID, &ws, &v.FunctionID, &v.Version, &v.Code, &in, &out, &v.CreatedAt); err != nil {
		return nil, err
	}
	v.WorkspaceID, v.InputSchemaID, v.OutputSchemaID = str(ws), str(in), str(out)
	v.CreatedAt = v.CreatedAt.UTC()
	return &v, nil
}

// CreateFunctionVersion adds a version to function v.FunctionID of workspace v.WorkspaceID,
// setting ID (when empty), Version and CreatedAt; the function's first version becomes its
// default. Schema ids, when set, must name schemas the workspace can use (store.ErrNotFound).
func (s *Store) CreateFunctionVersion(ctx context.Context, v *store.FunctionVersion) error {
	op := "create function version"
	if v == nil {
		return entFailf(op, store.ErrInvalid, "nil version")
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
	err := s.inTx(ctx, op, func(tx pgx.Tx) error {
		f, err := ownFunction(ctx, tx, op, v.WorkspaceID, v.FunctionID, true)
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
		if err := tx.QueryRow(ctx, `INSERT INTO function_versions
	(id, function_id, version, code, input_schema_id, output_schema_id, created_at)
SELECT $1, $2, COALESCE(max(version), 0) + 1, $3, $4, $5, clock_timestamp() FROM function_versions WHERE function_id = $2
RETURNING version, created_at`, id, f.ID, v.Code, nullable(v.InputSchemaID), nullable(v.OutputSchemaID)).Scan(&number, &at); err != nil {
			return err
		}
		if f.DefaultVersionID == "" {
			_, err = tx.Exec(ctx, `UPDATE functions SET default_version_id = $2, updated_at = GREATEST(updated_at, clock_timestamp())
WHERE id = $1`, f.ID, id)
		}
		return err
	})
	if err != nil {
		return err
	}
	v.ID, v.Version, v.CreatedAt = id, number, at.UTC()
	return nil
}

// FunctionVersion returns a version of a function of the workspace, or of a system function,
// or store.ErrNotFound.
func (s *Store) FunctionVersion(ctx context.Context, workspaceID, id string) (*store.FunctionVersion, error) {
	v, err := scanVersion(s.pool.QueryRow(ctx, `SELECT `+versionCols+` FROM function_versions v
JOIN functions f ON f.id = v.function_id WHERE v.id = $1 AND (f.workspace_id IS NULL OR f.workspace_id = $2)`, id, workspaceID))
	if err != nil {
		return nil, entError("function version "+id, err)
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
	rows, err := s.pool.Query(ctx, `SELECT `+versionCols+` FROM function_versions v
JOIN functions f ON f.id = v.function_id WHERE v.function_id = $1 AND (f.workspace_id IS NULL OR f.workspace_id = $2)
ORDER BY v.version`, functionID, workspaceID)
	if err != nil {
		return nil, entError(op, err)
	}
	return collectRows(rows, op, scanVersion)
}

// SetDefaultVersion makes versionID, a version of the function, its default and returns the
// function; store.ErrNotFound when either is not in the workspace.
func (s *Store) SetDefaultVersion(ctx context.Context, workspaceID, functionID, versionID string) (*store.Function, error) {
	op := "set the default version of function " + functionID
	var out *store.Function
	err := s.inTx(ctx, op, func(tx pgx.Tx) error {
		f, err := ownFunction(ctx, tx, op, workspaceID, functionID, true)
		if err != nil {
			return err
		}
		if err := found(ctx, tx, op, `SELECT 1 FROM function_versions WHERE id = $1 AND function_id = $2`,
			fmt.Sprintf("%s is not a version of the function", versionID), versionID, functionID); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `UPDATE functions SET default_version_id = $2, updated_at = GREATEST(updated_at, clock_timestamp())
WHERE id = $1 RETURNING updated_at`, functionID, versionID).Scan(&f.UpdatedAt); err != nil {
			return err
		}
		f.DefaultVersionID, f.UpdatedAt = versionID, f.UpdatedAt.UTC()
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
	output_schema_id, examples::text, requires_confirmation, enabled, system, created_by, runtime_user_id, deleted_at,
	retention_tier, created_at, updated_at`

func scanTool(row pgx.Row) (*store.Tool, error) {
	var (
		t                                                   store.Tool
		ws, desc, fn, fnv, examples, creator, runtime, tier *string
	)
	if err := row.Scan(&t.ID, &ws, &t.Name, &desc, &t.Target, &fn, &fnv, &t.InputSchemaID, &t.OutputSchemaID, &examples,
		&t.RequiresConfirmation, &t.Enabled, &t.System, &creator, &runtime, &t.DeletedAt, &tier, &t.CreatedAt, &t.UpdatedAt); err != nil {
		return nil, err
	}
	t.WorkspaceID, t.Description, t.FunctionID, t.FunctionVersionID = str(ws), str(desc), str(fn), str(fnv)
	t.CreatedBy, t.RuntimeUserID, t.RetentionTier = str(creator), str(runtime), store.RetentionTier(str(tier))
	if examples != nil {
		if err := json.Unmarshal([]byte(*examples), &t.Examples); err != nil {
			return nil, fmt.Errorf("tool %s: examples: %w", t.ID, err)
		}
		if t.Examples == nil {
			t.Examples = []store.ToolExample{}
		}
	}
	if t.DeletedAt != nil {
		at := t.DeletedAt.UTC()
		t.DeletedAt = &at
	}
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return &t, nil
}

func encodeExamples(ex []store.ToolExample) (*string, error) {
	if ex == nil {
		return nil, nil
	}
	b, err := json.Marshal(ex)
	if err != nil {
		return nil, fmt.Errorf("examples: %v: %w", err, store.ErrInvalid)
	}
	js := string(b)
	return &js, nil
}

// checkToolRefs checks, inside the write transaction, what a tool refers to: its workspace,
// function, pinned version and schemas (store.ErrNotFound when not the workspace's), and that
// its name is free among the active tools (store.ErrConflict; the unique index tools_name
// settles a race).
func checkToolRefs(ctx context.Context, tx pgx.Tx, op string, t *store.Tool) error {
	scope := t.WorkspaceID
	if scope != "" {
		if err := found(ctx, tx, op, `SELECT 1 FROM workspaces WHERE id = $1`, "no workspace "+scope, scope); err != nil {
			return err
		}
	}
	if t.FunctionID != "" {
		if _, err := ownFunction(ctx, tx, op, scope, t.FunctionID, false); err != nil {
			return err
		}
	}
	if t.FunctionVersionID != "" {
		var fn string
		err := tx.QueryRow(ctx, `SELECT v.function_id FROM function_versions v JOIN functions f ON f.id = v.function_id
WHERE v.id = $1 AND COALESCE(f.workspace_id, '') = $2`, t.FunctionVersionID, scope).Scan(&fn)
		if errors.Is(err, pgx.ErrNoRows) {
			return entFailf(op, store.ErrNotFound, "function version %s is not in the workspace", t.FunctionVersionID)
		}
		if err != nil {
			return err
		}
		if fn != t.FunctionID {
			return entFailf(op, store.ErrInvalid, "pinned version %s is not a version of function %s", t.FunctionVersionID, t.FunctionID)
		}
	}
	if err := checkSchema(ctx, tx, op, scope, "input", t.InputSchemaID); err != nil {
		return err
	}
	if err := checkSchema(ctx, tx, op, scope, "output", t.OutputSchemaID); err != nil {
		return err
	}
	var other string
	err := tx.QueryRow(ctx, `SELECT id FROM tools WHERE COALESCE(workspace_id, '') = $1 AND name = $2 AND deleted_at IS NULL AND id <> $3`,
		scope, t.Name, t.ID).Scan(&other)
	if err == nil {
		return entFailf(op, store.ErrConflict, "an active tool of the workspace is already named %q (%s)", t.Name, other)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	return nil
}

// CreateTool stores a new, active tool, setting ID (when empty) and the times. See
// store.Entities for the rules it must follow.
func (s *Store) CreateTool(ctx context.Context, t *store.Tool) error {
	op := "create tool"
	if t == nil {
		return entFailf(op, store.ErrInvalid, "nil tool")
	}
	nt := t.Clone()
	if nt.ID == "" {
		nt.ID = store.NewID(store.PrefixTool)
	}
	op += " " + nt.Name
	if err := nt.Check(); err != nil {
		return entFail(op, err)
	}
	if nt.DeletedAt != nil {
		return entFailf(op, store.ErrInvalid, "a new tool is not deleted")
	}
	examples, err := encodeExamples(nt.Examples)
	if err != nil {
		return entFail(op, err)
	}
	err = s.inTx(ctx, op, func(tx pgx.Tx) error {
		if err := checkToolRefs(ctx, tx, op, nt); err != nil {
			return err
		}
		if nt.CreatedBy != "" {
			role, err := memberRole(ctx, tx, nt.WorkspaceID, nt.CreatedBy)
			if err != nil {
				return err
			}
			if role == "" {
				return entFailf(op, store.ErrInvalid, "creator %s is not a member of workspace %s", nt.CreatedBy, nt.WorkspaceID)
			}
		}
		if nt.RuntimeUserID != "" {
			if err := checkRuntimeUser(ctx, tx, op, nt.WorkspaceID, nt.CreatedBy, nt.RuntimeUserID, "a tool's runtime user"); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, `INSERT INTO tools (id, workspace_id, name, description, target, function_id, function_version_id,
	input_schema_id, output_schema_id, examples, requires_confirmation, enabled, system, created_by, runtime_user_id,
	created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::text::json, $11, $12, $13, $14, $15, now(), now())
RETURNING created_at`,
			nt.ID, nullable(nt.WorkspaceID), nt.Name, nullable(nt.Description), nt.Target, nullable(nt.FunctionID),
			nullable(nt.FunctionVersionID), nt.InputSchemaID, nt.OutputSchemaID, examples, nt.RequiresConfirmation,
			nt.Enabled, nt.System, nullable(nt.CreatedBy), nullable(nt.RuntimeUserID)).Scan(&nt.CreatedAt)
	})
	if err != nil {
		return err
	}
	nt.CreatedAt = nt.CreatedAt.UTC()
	nt.UpdatedAt = nt.CreatedAt
	*t = *nt
	return nil
}

// Tool returns a tool of the workspace (active or deleted) or a system tool, or
// store.ErrNotFound.
func (s *Store) Tool(ctx context.Context, workspaceID, id string) (*store.Tool, error) {
	t, err := scanTool(s.pool.QueryRow(ctx, `SELECT `+toolCols+` FROM tools WHERE id = $1 AND `+visible, id, workspaceID))
	if err != nil {
		return nil, entError("tool "+id, err)
	}
	return t, nil
}

// lockTool reads and locks, inside the write transaction, a tool the workspace may change: a
// system tool is store.ErrForbidden, a deleted one store.ErrNotFound.
func lockTool(ctx context.Context, tx pgx.Tx, op, workspaceID, id string) (*store.Tool, error) {
	t, err := scanTool(tx.QueryRow(ctx, `SELECT `+toolCols+` FROM tools WHERE id = $1 AND `+visible+` FOR NO KEY UPDATE`, id, workspaceID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, entFailf(op, store.ErrNotFound, "no tool %s in the workspace", id)
	}
	if err != nil {
		return nil, err
	}
	if t.System {
		return nil, entFailf(op, store.ErrForbidden, "%s is a system tool: system tools cannot be edited or deleted", id)
	}
	if t.DeletedAt != nil {
		return nil, entFailf(op, store.ErrNotFound, "tool %s is deleted", id)
	}
	return t, nil
}

// UpdateTool applies fn to an active tool of the workspace in one transaction and stores the
// result. See store.Entities for what may change and the rules that apply.
func (s *Store) UpdateTool(ctx context.Context, workspaceID, toolID, callerUserID string, fn func(*store.Tool) error) (*store.Tool, error) {
	op := "update tool " + toolID
	var out *store.Tool
	err := s.inTx(ctx, op, func(tx pgx.Tx) error {
		before, err := lockTool(ctx, tx, op, workspaceID, toolID)
		if err != nil {
			return err
		}
		t := before.Clone()
		if err := fn(t); err != nil {
			return err
		}
		if t.ID != before.ID || t.WorkspaceID != before.WorkspaceID || t.System != before.System || t.CreatedBy != before.CreatedBy ||
			t.DeletedAt != nil || t.RetentionTier != "" || !t.CreatedAt.Equal(before.CreatedAt) || !t.UpdatedAt.Equal(before.UpdatedAt) {
			return entFailf(op, store.ErrInvalid, "id, workspace, system, creator, deletion and times cannot be changed")
		}
		if err := t.Check(); err != nil {
			return entFail(op, err)
		}
		examples, err := encodeExamples(t.Examples)
		if err != nil {
			return entFail(op, err)
		}
		if err := checkToolRefs(ctx, tx, op, t); err != nil {
			return err
		}
		if t.RuntimeUserID != before.RuntimeUserID {
			if err := checkRuntimeUser(ctx, tx, op, workspaceID, callerUserID, t.RuntimeUserID, "a tool's runtime user"); err != nil {
				return err
			}
		}
		if err := tx.QueryRow(ctx, `UPDATE tools SET name = $2, description = $3, target = $4, function_id = $5,
	function_version_id = $6, input_schema_id = $7, output_schema_id = $8, examples = $9::text::json,
	requires_confirmation = $10, enabled = $11, runtime_user_id = $12, updated_at = GREATEST(updated_at, clock_timestamp())
WHERE id = $1 RETURNING updated_at`,
			toolID, t.Name, nullable(t.Description), t.Target, nullable(t.FunctionID), nullable(t.FunctionVersionID),
			t.InputSchemaID, t.OutputSchemaID, examples, t.RequiresConfirmation, t.Enabled, nullable(t.RuntimeUserID)).Scan(&t.UpdatedAt); err != nil {
			return err
		}
		t.UpdatedAt = t.UpdatedAt.UTC()
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
		return nil, entFailf(op, store.ErrInvalid, "unknown retention tier %q", tier)
	}
	var out *store.Tool
	err := s.inTx(ctx, op, func(tx pgx.Tx) error {
		t, err := lockTool(ctx, tx, op, workspaceID, toolID)
		if err != nil {
			return err
		}
		if tier == "" {
			if err := tx.QueryRow(ctx, `SELECT retention_tier FROM workspaces WHERE id = $1`, workspaceID).Scan(&tier); err != nil {
				return err
			}
		}
		var keep *int64 // seconds; nil: never purged
		if d, ok := tier.Keep(); ok {
			secs := int64(d / time.Second)
			keep = &secs
		}
		var at time.Time
		if err := tx.QueryRow(ctx, `UPDATE tools SET deleted_at = c.at, updated_at = c.at, retention_tier = $2,
	purge_at = c.at + $3::bigint * interval '1 second'
FROM (SELECT GREATEST(updated_at, clock_timestamp()) AS at FROM tools WHERE id = $1) c
WHERE id = $1 RETURNING deleted_at`, toolID, tier, keep).Scan(&at); err != nil {
			return err
		}
		at = at.UTC()
		t.DeletedAt, t.RetentionTier, t.UpdatedAt = &at, tier, at
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
		return nil, entFail(op, err)
	}
	after, hasCursor, err := f.DecodeCursor()
	if err != nil {
		return nil, entFail(op, err)
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
		p := arg(f.Name)
		where = append(where, `left(name, length(`+p+`::text)) = `+p)
	case f.Name != "":
		where = append(where, `name = `+arg(f.Name))
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
		where = append(where, `(created_at, id) > (`+arg(after.CreatedAt)+`, `+arg(after.ID)+`)`)
	}
	limit := arg(f.Limit + 1)
	rows, err := s.pool.Query(ctx, `SELECT `+toolCols+` FROM tools WHERE `+strings.Join(where, " AND ")+`
ORDER BY created_at, id LIMIT `+limit, args...)
	if err != nil {
		return nil, entError(op, err)
	}
	tools, err := collectRows(rows, op, scanTool)
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
		return nil, entFailf(op, store.ErrNotFound, "the tool is deleted")
	case t.Target != store.TargetServer:
		return nil, entFailf(op, store.ErrInvalid, "a client tool runs no function")
	case t.FunctionVersionID != "":
		return s.FunctionVersion(ctx, t.WorkspaceID, t.FunctionVersionID)
	}
	f, err := s.Function(ctx, t.WorkspaceID, t.FunctionID)
	if err != nil {
		return nil, err
	}
	if f.DefaultVersionID == "" {
		return nil, entFailf(op, store.ErrNotFound, "function %s has no default version", f.ID)
	}
	return s.FunctionVersion(ctx, t.WorkspaceID, f.DefaultVersionID)
}

// PurgeExpired deletes for good the soft-deleted tools, of every workspace, whose DeletedAt
// plus their tier's days is at or before now (tier none: never), and returns how many.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM tools WHERE purge_at <= $1`, now)
	if err != nil {
		return 0, entError("purge expired tools", err)
	}
	return int(tag.RowsAffected()), nil
}
