package memstore

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// copyAPIKey returns a copy of k that shares nothing with it.
func copyAPIKey(k *store.APIKey) *store.APIKey {
	c := *k
	c.Hash = bytes.Clone(k.Hash)
	c.ExpiresAt, c.RevokedAt, c.LastUsedAt = copyTimePtr(k.ExpiresAt), copyTimePtr(k.RevokedAt), copyTimePtr(k.LastUsedAt)
	c.Toolsets = nil // not bound reads back as nil, as from the SQL backends
	if len(k.Toolsets) > 0 {
		c.Toolsets = slices.Clone(k.Toolsets)
	}
	return &c
}

// CreateAPIKey stores k, setting ID (when empty) and CreatedAt; see store.APIKeys.
func (s *Store) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	const op entityOp = "create API key"
	if err := store.CheckAPIKey(k); err != nil {
		return op.fail(err)
	}
	id := k.ID
	if id == "" {
		id = stamp.ID(ctx, store.PrefixAPIKey)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	role := d.role(k.WorkspaceID, k.UserID)
	if role == "" {
		return op.failf(store.ErrForbidden, "user %s is not a member of workspace %s", k.UserID, k.WorkspaceID)
	}
	if most := store.MemberKeyRole(role); !most.Allows(k.Role) {
		return op.failf(store.ErrForbidden, "user %s is a %s of workspace %s and cannot make a key of role %s (at most %s)",
			k.UserID, role, k.WorkspaceID, k.Role, most)
	}
	at := stamp.Now(ctx)
	if k.ExpiresAt != nil && !k.ExpiresAt.After(at) {
		return op.failf(store.ErrInvalid, "the key would expire at %s, which is not after now (%s)",
			k.ExpiresAt.UTC().Format(time.RFC3339), at.Format(time.RFC3339))
	}
	if other, ok := d.keyHashes[string(k.Hash)]; ok {
		return op.failf(store.ErrConflict, "key %s has the same hash", other)
	}
	if d.keys[id] != nil {
		return op.failf(store.ErrConflict, "the id %s is already taken", id)
	}
	nk := copyAPIKey(k)
	nk.ID, nk.CreatedAt, nk.RevokedAt, nk.LastUsedAt = id, at, nil, nil
	if nk.ExpiresAt != nil {
		*nk.ExpiresAt = nk.ExpiresAt.UTC() // as every time the store hands out
	}
	d.keys[id] = nk
	d.keyHashes[string(nk.Hash)] = id
	k.ID, k.CreatedAt = id, at
	return nil
}

// APIKeyByHash returns the key with this hash and its user's role now; see store.APIKeys.
func (s *Store) APIKeyByHash(ctx context.Context, hash []byte) (*store.APIKey, store.MemberRole, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.ent.keyHashes[string(hash)]
	if !ok {
		return nil, "", entityOp("API key by hash").fail(store.ErrNotFound)
	}
	k := s.ent.keys[id]
	return copyAPIKey(k), s.ent.role(k.WorkspaceID, k.UserID), nil
}

// APIKeys lists the workspace's keys, newest first.
func (s *Store) APIKeys(ctx context.Context, workspaceID string) ([]*store.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*store.APIKey
	for _, k := range s.ent.keys {
		if k.WorkspaceID == workspaceID {
			out = append(out, copyAPIKey(k))
		}
	}
	slices.SortFunc(out, func(a, b *store.APIKey) int { return creationOrder(b.CreatedAt, b.ID, a.CreatedAt, a.ID) })
	return out, nil
}

// RevokeAPIKey revokes the key; revoking it again keeps the first time. See store.APIKeys.
func (s *Store) RevokeAPIKey(ctx context.Context, workspaceID, id string) (*store.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.ent.keys[id]
	if k == nil || k.WorkspaceID != workspaceID {
		return nil, entityOp("revoke API key " + id).fail(store.ErrNotFound)
	}
	if k.RevokedAt == nil {
		at := stamp.Now(ctx)
		k.RevokedAt = &at
	}
	return copyAPIKey(k), nil
}

// TouchAPIKey records a use of the key at at; a LastUsedAt never moves back.
func (s *Store) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.ent.keys[id]
	if k == nil {
		return entityOp("touch API key " + id).fail(store.ErrNotFound)
	}
	if at = at.UTC(); k.LastUsedAt == nil || k.LastUsedAt.Before(at) {
		k.LastUsedAt = &at
	}
	return nil
}
