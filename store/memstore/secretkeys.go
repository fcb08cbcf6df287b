package memstore

import (
	"context"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/store"
)

// SecretKeyID returns the recorded key id, "" when none is (see store.SecretKeys).
func (s *Store) SecretKeyID(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.secretKeyID, nil
}

// RecordSecretKeyID records id unless an id is recorded, and returns the recorded one (see
// store.SecretKeys).
func (s *Store) RecordSecretKeyID(_ context.Context, id string) (string, error) {
	if err := store.CheckSecretKeyID(id); err != nil {
		return "", threadOp("record the secret key id").fail(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.secretKeyID == "" {
		s.secretKeyID = id
	}
	return s.secretKeyID, nil
}

// LatestSecret returns the stored value of the secret set most recently, "" when there is
// none (see store.SecretKeys). Ties go as the SQL backends break them: by workspace, layer,
// owner and name.
func (s *Store) LatestSecret(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var latest *store.Variable
	for _, values := range s.th.vars {
		for _, v := range values {
			if v.Secret && (latest == nil || laterSecret(v, latest)) {
				latest = v
			}
		}
	}
	if latest == nil {
		return "", nil
	}
	return latest.Value, nil
}

// laterSecret reports whether a comes before b in LatestSecret's order.
func laterSecret(a, b *store.Variable) bool {
	if !a.UpdatedAt.Equal(b.UpdatedAt) {
		return a.UpdatedAt.After(b.UpdatedAt)
	}
	c := varOwner{a.WorkspaceID, a.Layer, a.OwnerID}.compare(varOwner{b.WorkspaceID, b.Layer, b.OwnerID})
	return c < 0 || c == 0 && a.Name < b.Name
}

// RekeySecrets re-encrypts every secret with fn and records id, in one step (see
// store.SecretKeys). fn runs while the store is locked: it must not use the store.
func (s *Store) RekeySecrets(_ context.Context, from []string, id string, fn func(v *store.Variable) (string, error)) error {
	op := threadOp("re-key secrets")
	if err := store.CheckSecretKeyID(id); err != nil {
		return op.fail(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.secretKeyID != "" && !slices.Contains(from, s.secretKeyID) {
		return op.failf(store.ErrConflict, "the secrets are recorded as sealed with key %s, not %s", s.secretKeyID, strings.Join(from, " or "))
	}
	if err := s.rewriteSecrets(fn); err != nil {
		return err
	}
	s.secretKeyID = id
	return nil
}
