package store

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// PrefixAPIKey begins the id of an API key's record (not the key itself).
const PrefixAPIKey = "key"

// KeyRole is what an API key may do in its workspace: an admin administers it (members, keys,
// tools), a member calls tools and runs agents, a viewer only reads.
type KeyRole string

// Key roles, from the most to the least allowed.
const (
	KeyRoleAdmin  KeyRole = "admin"
	KeyRoleMember KeyRole = "member"
	KeyRoleViewer KeyRole = "viewer"
)

// Valid reports whether r is one of the key roles.
func (r KeyRole) Valid() bool { return r == KeyRoleAdmin || r == KeyRoleMember || r == KeyRoleViewer }

func (r KeyRole) rank() int {
	switch r {
	case KeyRoleAdmin:
		return 3
	case KeyRoleMember:
		return 2
	case KeyRoleViewer:
		return 1
	}
	return 0
}

// Allows reports whether a key of role r may do what role need may.
func (r KeyRole) Allows(need KeyRole) bool { return r.rank() >= need.rank() && need.rank() > 0 }

// MemberKeyRole is the most a member of role m may give a key: an admin any role, a member
// member or viewer.
func MemberKeyRole(m MemberRole) KeyRole {
	if m == MemberRoleAdmin {
		return KeyRoleAdmin
	}
	if m == MemberRoleMember {
		return KeyRoleMember
	}
	return ""
}

// Effective is what a key of role r may do while its user has role m in the workspace: the
// lesser of the two, "" when the user is no longer a member.
func (r KeyRole) Effective(m MemberRole) KeyRole {
	most := MemberKeyRole(m)
	if most == "" || !r.Valid() {
		return ""
	}
	if r.rank() > most.rank() {
		return most
	}
	return r
}

// APIKeyHashSize is the size of an API key's hash (SHA-256), the only form of the key that is
// stored.
const APIKeyHashSize = 32

// APIKey is the record of an API key. The key itself is shown once, when it is made, and never
// stored: the store keeps its hash, to find the record by, and its first characters, to
// recognise it in a list.
type APIKey struct {
	ID          string    `json:"id"` // key_...
	WorkspaceID string    `json:"workspace_id"`
	UserID      string    `json:"user_id"`
	Name        string    `json:"name"`
	Role        KeyRole   `json:"role"`
	Prefix      string    `json:"prefix"`
	Hash        []byte    `json:"-"`
	CreatedAt   time.Time `json:"created_at"`
	// ExpiresAt, when set, is when the key stops working.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// RevokedAt is set once the key is revoked; it never works again.
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// LastUsedAt is the last time the key was seen (recorded at most about once a minute).
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	// Toolsets are the toolsets the key is bound to: a key bound to toolsets may only see and
	// call their tools. Empty: not bound. At most MaxKeyToolsets, each a toolset name (see
	// CheckAPIKey).
	Toolsets []string `json:"toolsets,omitempty"`
}

// MaxKeyToolsets bounds the toolsets one key is bound to, and MaxToolsetName a toolset's
// name: a key's binding is read on every call it makes.
const (
	MaxKeyToolsets = 32
	MaxToolsetName = 64
)

// CheckAPIKey reports, wrapping ErrInvalid, a new key that breaks a rule by itself (the rules
// that involve other records, such as its user's role, are the store's to check).
func CheckAPIKey(k *APIKey) error {
	var problem string
	switch {
	case k == nil:
		problem = "nil key"
	case !k.Role.Valid():
		problem = fmt.Sprintf("role %q: want admin, member or viewer", k.Role)
	case k.Name == "" || utf8.RuneCountInString(k.Name) > 100:
		problem = fmt.Sprintf("name %q: want 1 to 100 characters", k.Name)
	case len(k.Hash) != APIKeyHashSize:
		problem = fmt.Sprintf("the hash is %d bytes, want %d (SHA-256 of the key)", len(k.Hash), APIKeyHashSize)
	case len(k.Prefix) < 4 || len(k.Prefix) > 32:
		problem = fmt.Sprintf("prefix %q: want 4 to 32 characters of the key", k.Prefix)
	case k.WorkspaceID == "" || k.UserID == "":
		problem = "a key needs a workspace and a user"
	default:
		problem = toolsetsProblem(k.Toolsets)
	}
	if problem != "" {
		return fmt.Errorf("%s: %w", problem, ErrInvalid)
	}
	return nil
}

// toolsetsProblem says what is wrong with a key's toolsets; "" when nothing is.
func toolsetsProblem(toolsets []string) string {
	if len(toolsets) > MaxKeyToolsets {
		return fmt.Sprintf("%d toolsets: a key is bound to at most %d", len(toolsets), MaxKeyToolsets)
	}
	for i, name := range toolsets {
		if !validToolsetName(name) {
			return fmt.Sprintf("toolset %q (number %d of the key's): want 1 to %d characters of a-z, A-Z, 0-9, _ and -",
				name, i+1, MaxToolsetName)
		}
	}
	return ""
}

// validToolsetName reports whether name is 1 to MaxToolsetName characters of [a-zA-Z0-9_-].
func validToolsetName(name string) bool {
	if name == "" || len(name) > MaxToolsetName {
		return false
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// Usable reports whether the key works at now: not revoked, not expired.
func (k *APIKey) Usable(now time.Time) bool {
	return k.RevokedAt == nil && (k.ExpiresAt == nil || now.Before(*k.ExpiresAt))
}

// APIKeys stores API keys: created for a member of a workspace with a role no higher than the
// member's, found by hash, listed, revoked.
type APIKeys interface {
	// CreateAPIKey stores k, setting ID (when empty) and CreatedAt. Its user must be a member
	// of its workspace whose role allows k's (an admin any role, a member member or viewer):
	// ErrForbidden otherwise. Name is 1 to 100 characters, Hash APIKeyHashSize bytes and
	// unique (ErrConflict), Prefix 4 to 32 characters, Toolsets as CheckAPIKey says; an
	// ExpiresAt must be after now.
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// APIKeyByHash returns the key whose hash this is, revoked and expired ones included, and
	// the role its user has now in its workspace ("" when no longer a member): what the key
	// may do is KeyRole.Effective of the two. ErrNotFound when no key has this hash.
	APIKeyByHash(ctx context.Context, hash []byte) (*APIKey, MemberRole, error)
	// APIKeys lists the workspace's keys, newest first.
	APIKeys(ctx context.Context, workspaceID string) ([]*APIKey, error)
	// RevokeAPIKey revokes the key for good; revoking it again keeps the first time.
	// ErrNotFound when the workspace has no such key.
	RevokeAPIKey(ctx context.Context, workspaceID, id string) (*APIKey, error)
	// TouchAPIKey records that the key was used at at; a LastUsedAt never moves back.
	TouchAPIKey(ctx context.Context, id string, at time.Time) error
}
