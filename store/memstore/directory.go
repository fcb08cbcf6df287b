package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// CreateWorkspace stores a new workspace, setting ID (when empty), RetentionTier (when empty)
// and the times. DefaultRuntimeUserID must be empty: a new workspace has no members yet.
func (s *Store) CreateWorkspace(ctx context.Context, w *store.Workspace) error {
	const op entityOp = "create workspace"
	if w == nil {
		return op.failf(store.ErrInvalid, "nil workspace")
	}
	nw := *w
	if nw.ID == "" {
		nw.ID = stamp.ID(ctx, store.PrefixWorkspace)
	}
	if nw.RetentionTier == "" {
		nw.RetentionTier = store.DefaultRetentionTier
	}
	if err := nw.Check(); err != nil {
		return op.fail(err)
	}
	if nw.DefaultRuntimeUserID != "" {
		return op.failf(store.ErrInvalid, "a new workspace has no members to run tools as: add members, then set the default runtime user")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	if d.workspaces[nw.ID] != nil {
		return op.failf(store.ErrConflict, "the id %s is already taken", nw.ID)
	}
	nw.CreatedAt = stamp.Now(ctx)
	nw.UpdatedAt = nw.CreatedAt
	stored := nw
	d.workspaces[nw.ID] = &stored
	d.scopes[nw.ID] = &scope{}
	*w = nw
	return nil
}

// Workspace returns the workspace, or store.ErrNotFound.
func (s *Store) Workspace(ctx context.Context, id string) (*store.Workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.ent.workspaces[id]
	if w == nil {
		return nil, entityOp("workspace " + id).fail(store.ErrNotFound)
	}
	out := *w
	return &out, nil
}

// UpdateWorkspace applies fn to a copy of the workspace and stores its Name,
// DefaultRuntimeUserID and RetentionTier (anything else changing is store.ErrInvalid).
// Changing the default runtime user needs callerUserID to be an admin of the workspace
// (store.ErrForbidden) and the new user to be a member (store.ErrInvalid). fn runs while the
// Store is locked: it must not call the Store.
func (s *Store) UpdateWorkspace(ctx context.Context, id, callerUserID string, fn func(*store.Workspace) error) (*store.Workspace, error) {
	op := entityOp("update workspace " + id)
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	cur := d.workspaces[id]
	if cur == nil {
		return nil, op.failf(store.ErrNotFound, "no workspace %s", id)
	}
	w := *cur
	if err := fn(&w); err != nil {
		return nil, err
	}
	if w.ID != cur.ID || !w.CreatedAt.Equal(cur.CreatedAt) || !w.UpdatedAt.Equal(cur.UpdatedAt) {
		return nil, op.failf(store.ErrInvalid, "only the name, default runtime user and retention tier may change")
	}
	if err := w.Check(); err != nil {
		return nil, op.fail(err)
	}
	if w.DefaultRuntimeUserID != cur.DefaultRuntimeUserID {
		if err := d.checkRuntimeUser(op, id, callerUserID, w.DefaultRuntimeUserID, "the workspace's default runtime user"); err != nil {
			return nil, err
		}
	}
	if w.DefaultRuntimeUserID != cur.DefaultRuntimeUserID {
		d.scopes[id].rev++ // who the tools run as changed (ToolsStamp)
	}
	cur.Name, cur.DefaultRuntimeUserID, cur.RetentionTier = w.Name, w.DefaultRuntimeUserID, w.RetentionTier
	cur.UpdatedAt = notEarlier(stamp.Now(ctx), cur.UpdatedAt)
	out := *cur
	return &out, nil
}

// CreateUser stores a new user, setting ID (when empty) and CreatedAt, and Email trimmed. An
// email already used, ignoring case, is store.ErrConflict.
func (s *Store) CreateUser(ctx context.Context, u *store.User) error {
	const op entityOp = "create user"
	if u == nil {
		return op.failf(store.ErrInvalid, "nil user")
	}
	key, err := store.NormalizeEmail(u.Email)
	if err != nil {
		return op.fail(err)
	}
	id := u.ID
	if id == "" {
		id = stamp.ID(ctx, store.PrefixUser)
	}
	email := strings.TrimSpace(u.Email)
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	if other, ok := d.emails[key]; ok {
		return op.failf(store.ErrConflict, "email %s is already used by user %s", email, other)
	}
	if d.users[id] != nil {
		return op.failf(store.ErrConflict, "the id %s is already taken", id)
	}
	at := stamp.Now(ctx)
	d.users[id] = &store.User{ID: id, Email: email, Name: u.Name, CreatedAt: at}
	d.emails[key] = id
	u.ID, u.Email, u.CreatedAt = id, email, at
	return nil
}

// User returns the user, or store.ErrNotFound.
func (s *Store) User(ctx context.Context, id string) (*store.User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.ent.users[id]
	if u == nil {
		return nil, entityOp("user " + id).fail(store.ErrNotFound)
	}
	out := *u
	return &out, nil
}

// UserByEmail returns the user with that email, ignoring case, or store.ErrNotFound.
func (s *Store) UserByEmail(ctx context.Context, email string) (*store.User, error) {
	const op entityOp = "user by email"
	key, err := store.NormalizeEmail(email)
	if err != nil {
		return nil, op.fail(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.ent.emails[key]
	if !ok {
		return nil, op.fail(store.ErrNotFound)
	}
	out := *s.ent.users[id]
	return &out, nil
}

// AddMember makes a user a member of a workspace, setting CreatedAt: store.ErrNotFound when
// either is missing, store.ErrConflict when the user is already a member.
func (s *Store) AddMember(ctx context.Context, m *store.Membership) error {
	if m == nil {
		return entityOp("add member").failf(store.ErrInvalid, "nil membership")
	}
	op := entityOp(fmt.Sprintf("add user %s to workspace %s", m.UserID, m.WorkspaceID))
	if !m.Role.Valid() {
		return op.failf(store.ErrInvalid, "role %q is neither admin nor member", m.Role)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	switch {
	case d.workspaces[m.WorkspaceID] == nil:
		return op.failf(store.ErrNotFound, "no workspace %s", m.WorkspaceID)
	case d.users[m.UserID] == nil:
		return op.failf(store.ErrNotFound, "no such user")
	}
	if role := d.role(m.WorkspaceID, m.UserID); role != "" {
		return op.failf(store.ErrConflict, "already a member (%s)", role)
	}
	at := stamp.Now(ctx)
	if d.members[m.WorkspaceID] == nil {
		d.members[m.WorkspaceID] = map[string]*store.Membership{}
	}
	d.members[m.WorkspaceID][m.UserID] = &store.Membership{WorkspaceID: m.WorkspaceID, UserID: m.UserID, Role: m.Role, CreatedAt: at}
	d.scopes[m.WorkspaceID].rev++ // who the tools may run as changed (ToolsStamp)
	m.CreatedAt = at
	return nil
}

// Member returns the user's membership of the workspace, or store.ErrNotFound.
func (s *Store) Member(ctx context.Context, workspaceID, userID string) (*store.Membership, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.ent.members[workspaceID][userID]
	if m == nil {
		return nil, entityOp(fmt.Sprintf("membership of user %s in workspace %s", userID, workspaceID)).fail(store.ErrNotFound)
	}
	out := *m
	return &out, nil
}

// Members lists the members of the workspace, oldest first (then by user id, as the SQL
// backends order them).
func (s *Store) Members(ctx context.Context, workspaceID string) ([]*store.Membership, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*store.Membership
	for _, m := range s.ent.members[workspaceID] {
		c := *m
		out = append(out, &c)
	}
	slices.SortFunc(out, func(a, b *store.Membership) int {
		return creationOrder(a.CreatedAt, a.UserID, b.CreatedAt, b.UserID)
	})
	return out, nil
}

// member returns the user's membership of the workspace to change it: store.ErrNotFound when
// either the workspace or the membership is missing.
func (d *entityData) member(op entityOp, workspaceID, userID string) (*store.Membership, error) {
	if d.workspaces[workspaceID] == nil {
		return nil, op.failf(store.ErrNotFound, "no workspace %s", workspaceID)
	}
	m := d.members[workspaceID][userID]
	if m == nil {
		return nil, op.failf(store.ErrNotFound, "not a member")
	}
	return m, nil
}

// lastAdmin reports whether m is the only admin of its workspace.
func (d *entityData) lastAdmin(m *store.Membership) bool {
	if m.Role != store.MemberRoleAdmin {
		return false
	}
	for id, other := range d.members[m.WorkspaceID] {
		if id != m.UserID && other.Role == store.MemberRoleAdmin {
			return false
		}
	}
	return true
}

// SetMemberRole changes a member's role (store.ErrNotFound for a user who is not a member).
// Demoting the last admin is store.ErrInvalid.
func (s *Store) SetMemberRole(ctx context.Context, workspaceID, userID string, role store.MemberRole) error {
	op := entityOp(fmt.Sprintf("set the role of user %s in workspace %s", userID, workspaceID))
	if !role.Valid() {
		return op.failf(store.ErrInvalid, "role %q is neither admin nor member", role)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.ent.member(op, workspaceID, userID)
	if err != nil {
		return err
	}
	if role != store.MemberRoleAdmin && s.ent.lastAdmin(m) {
		return op.failf(store.ErrInvalid, "the workspace's last admin cannot be demoted: make another member admin first")
	}
	m.Role = role
	return nil
}

// RemoveMember ends a membership (store.ErrNotFound for a user who is not a member). The last
// admin cannot be removed (store.ErrInvalid). The workspace's default runtime user and the
// runtime user of a tool can: removing a person is not held up by the tools that run as them,
// which refuse to run until an admin names another member (see store.Directory).
func (s *Store) RemoveMember(ctx context.Context, workspaceID, userID string) error {
	op := entityOp(fmt.Sprintf("remove user %s from workspace %s", userID, workspaceID))
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	m, err := d.member(op, workspaceID, userID)
	if err != nil {
		return err
	}
	if d.lastAdmin(m) {
		return op.failf(store.ErrInvalid, "the workspace's last admin cannot be removed")
	}
	delete(d.members[workspaceID], userID)
	d.scopes[workspaceID].rev++ // who the tools may run as changed (ToolsStamp)
	return nil
}
