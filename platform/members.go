package platform

import (
	"cmp"
	"context"
	"errors"
	"strings"

	"github.com/quiverhq/quiver/store"
)

// Workspaces, their members and who administers them.

// WorkspaceChange is a change to the actor's workspace: the fields given.
type WorkspaceChange struct {
	Name                 *string
	RetentionTier        *store.RetentionTier
	DefaultRuntimeUserID Optional[string]
}

// Member is a member of a workspace: the membership and who the user is.
type Member struct {
	*store.Membership
	User *store.User
}

// CreateWorkspace creates a workspace administered by the actor's user, with a first admin key
// for it (its record, and the key itself, to be shown once). Only the operator may: a tenant
// who could make workspaces could multiply every per-workspace cap (sessions, streams, keys).
func (p *Platform) CreateWorkspace(ctx context.Context, a Actor, name string, tier store.RetentionTier) (*store.Workspace, *store.APIKey, string, error) {
	if err := a.mayAdminister("use the workspace but not create others"); err != nil {
		return nil, nil, "", err
	}
	if !a.Operator {
		return nil, nil, "", &Error{Kind: Forbidden, Message: "workspaces are created by the admins of the server's own workspace " +
			"(the operator's: the key quiver serve printed at its first start, and the admin keys made in that workspace); ask the operator for one"}
	}
	if a.UserID == "" {
		return nil, nil, "", &Error{Kind: Forbidden, Message: "a new workspace is administered by the user of the key that creates it, and this server asks for no keys"}
	}
	w := &store.Workspace{Name: name, RetentionTier: cmp.Or(tier, store.DefaultRetentionTier)}
	if err := w.Check(); err != nil {
		return nil, nil, "", invalid("name", err.Error())
	}
	// Three writes, not one transaction: a failure after the first leaves a workspace without
	// members, which no key can reach; nothing else of it exists.
	if err := p.cfg.Store.CreateWorkspace(ctx, w); err != nil {
		return nil, nil, "", storeError(err, "a workspace", "")
	}
	if err := p.cfg.Store.AddMember(ctx, &store.Membership{WorkspaceID: w.ID, UserID: a.UserID, Role: store.MemberRoleAdmin}); err != nil {
		return nil, nil, "", storeError(err, "the admin of workspace "+w.ID, "")
	}
	k := &store.APIKey{WorkspaceID: w.ID, UserID: a.UserID, Name: "first admin key", Role: store.KeyRoleAdmin}
	secret, err := IssueAPIKey(ctx, p.cfg.Store, k)
	if err != nil {
		return nil, nil, "", storeError(err, "the first key of workspace "+w.ID, "")
	}
	return w, k, secret, nil
}

// ownWorkspace checks a workspace id: only the actor's own workspace is there for it (any
// other is not found, whether or not it exists).
func ownWorkspace(a Actor, id string) error {
	if err := checkID("id", store.PrefixWorkspace, id); err != nil {
		return err
	}
	if id != a.WorkspaceID {
		return &Error{Kind: NotFound, Message: "no workspace " + id + " for this key"}
	}
	return nil
}

// WorkspaceRecord returns the actor's workspace, id.
func (p *Platform) WorkspaceRecord(ctx context.Context, a Actor, id string) (*store.Workspace, error) {
	if err := ownWorkspace(a, id); err != nil {
		return nil, err
	}
	w, err := p.cfg.Store.Workspace(ctx, id)
	if err != nil {
		return nil, storeError(err, "workspace "+id, "")
	}
	return w, nil
}

// UpdateWorkspace renames the actor's workspace, changes its retention tier or its default
// runtime user (a member); admins only.
func (p *Platform) UpdateWorkspace(ctx context.Context, a Actor, id string, c WorkspaceChange) (*store.Workspace, error) {
	if err := a.mayAdminister("use the workspace but not administer it"); err != nil {
		return nil, err
	}
	if err := ownWorkspace(a, id); err != nil {
		return nil, err
	}
	if user := c.DefaultRuntimeUserID; user.Set && user.Value != "" {
		if err := checkID("default_runtime_user_id", store.PrefixUser, user.Value); err != nil {
			return nil, err
		}
		// The same words for a user of another workspace and one who does not exist.
		if _, err := p.cfg.Store.Member(ctx, id, user.Value); errors.Is(err, store.ErrNotFound) {
			return nil, invalid("default_runtime_user_id", "user "+user.Value+" is not a member of this workspace: the default runtime user must be one")
		} else if err != nil {
			return nil, storeError(err, "the members of workspace "+id, "")
		}
	}
	w, err := p.cfg.Store.UpdateWorkspace(ctx, id, a.UserID, func(w *store.Workspace) error {
		if c.Name != nil {
			w.Name = *c.Name
		}
		if c.RetentionTier != nil {
			w.RetentionTier = *c.RetentionTier
		}
		if c.DefaultRuntimeUserID.Set {
			w.DefaultRuntimeUserID = c.DefaultRuntimeUserID.Value
		}
		if c.Name != nil {
			if err := w.Check(); err != nil {
				return invalid("name", err.Error())
			}
		}
		return nil
	})
	if err != nil {
		if c.DefaultRuntimeUserID.Set && (errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrForbidden)) {
			return nil, storeError(err, "workspace "+id, "default_runtime_user_id")
		}
		return nil, storeError(err, "workspace "+id, "")
	}
	if c.DefaultRuntimeUserID.Set {
		p.ToolsChanged(ctx, id) // the tools that name no runtime user run as the new default
	}
	return w, nil
}

// Members lists the workspace's members, oldest first.
func (p *Platform) Members(ctx context.Context, a Actor) ([]Member, error) {
	ms, err := p.cfg.Store.Members(ctx, a.WorkspaceID)
	if err != nil {
		return nil, storeError(err, "the members", "")
	}
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		u, err := p.cfg.Store.User(ctx, m.UserID)
		if err != nil {
			return nil, storeError(err, "user "+m.UserID, "")
		}
		out = append(out, Member{m, u})
	}
	return out, nil
}

// AddMember adds a member by email, making the user when the email is new; admins only.
func (p *Platform) AddMember(ctx context.Context, a Actor, email, name string, role store.MemberRole) (*Member, error) {
	if err := a.mayAdminister("use the workspace but not administer its members"); err != nil {
		return nil, err
	}
	normal, err := store.NormalizeEmail(email)
	if err != nil {
		return nil, invalid("email", "not an email address: want local@domain")
	}
	u, err := p.cfg.Store.UserByEmail(ctx, normal)
	if errors.Is(err, store.ErrNotFound) {
		u = &store.User{Email: strings.TrimSpace(email), Name: name}
		if err = p.cfg.Store.CreateUser(ctx, u); errors.Is(err, store.ErrConflict) {
			u, err = p.cfg.Store.UserByEmail(ctx, normal) // made meanwhile by another request
		}
	}
	if err != nil {
		return nil, storeError(err, "the user "+normal, "email")
	}
	m := &store.Membership{WorkspaceID: a.WorkspaceID, UserID: u.ID, Role: cmp.Or(role, store.MemberRoleMember)}
	if err := p.cfg.Store.AddMember(ctx, m); err != nil {
		return nil, storeError(err, "the membership of "+normal, "email")
	}
	p.ToolsChanged(ctx, a.WorkspaceID) // a tool that runs as a former member may run again
	return &Member{m, u}, nil
}

// SetMemberRole changes a member's role; the workspace keeps at least one admin. Admins only.
func (p *Platform) SetMemberRole(ctx context.Context, a Actor, userID string, role store.MemberRole) (*Member, error) {
	if err := a.mayAdminister("use the workspace but not administer its members"); err != nil {
		return nil, err
	}
	if err := checkID("user_id", store.PrefixUser, userID); err != nil {
		return nil, err
	}
	if err := p.cfg.Store.SetMemberRole(ctx, a.WorkspaceID, userID, role); err != nil {
		return nil, storeError(err, "member "+userID, "role")
	}
	m, err := p.cfg.Store.Member(ctx, a.WorkspaceID, userID)
	if err != nil {
		return nil, storeError(err, "member "+userID, "")
	}
	u, err := p.cfg.Store.User(ctx, userID)
	if err != nil {
		return nil, storeError(err, "user "+userID, "")
	}
	return &Member{m, u}, nil
}

// RemoveMember removes a member, but not the last admin; admins only. A user tools run as
// (the default runtime user, a tool's runtime user) is removed all the same: from then on
// those tools refuse to run, naming the user, until an admin names another member.
func (p *Platform) RemoveMember(ctx context.Context, a Actor, userID string) error {
	if err := a.mayAdminister("use the workspace but not administer its members"); err != nil {
		return err
	}
	if err := checkID("user_id", store.PrefixUser, userID); err != nil {
		return err
	}
	if err := p.cfg.Store.RemoveMember(ctx, a.WorkspaceID, userID); err != nil {
		return storeError(err, "member "+userID, "")
	}
	p.ToolsChanged(ctx, a.WorkspaceID) // no tool runs as them any more
	if _, ok := p.cfg.Store.(store.Connections); ok {
		// Their connections go, revoked at the providers: no tool acts as them any more.
		if _, err := p.dropConnections(ctx, a.WorkspaceID, userID, ""); err != nil {
			p.logger.WarnContext(ctx, "platform: a removed member's connections could not be deleted", "user", userID, "err", err)
		}
	}
	return nil
}
