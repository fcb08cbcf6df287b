package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

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
		id = stamp.ID(ctx, store.PrefixUser)
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
// admin cannot be removed (store.ErrInvalid). The workspace's default runtime user and the
// runtime user of a tool can: removing a person is not held up by the tools that run as them,
// which refuse to run until an admin names another member (see store.Directory).
func (e *Entities) RemoveMember(ctx context.Context, workspaceID, userID string) error {
	op := fmt.Sprintf("remove user %s from workspace %s", userID, workspaceID)
	return e.write(ctx, func(ctx context.Context, tx Querier) error {
		if _, err := e.lockWorkspace(ctx, tx, op, workspaceID); err != nil {
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
		_, err = tx.ExecContext(ctx, `DELETE FROM memberships WHERE workspace_id = $1 AND user_id = $2`, workspaceID, userID)
		return e.d.Err(op, err)
	})
}
