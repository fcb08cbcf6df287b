package memstore

import (
	"context"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// fleetData is the fleet's configuration: its versions, oldest first, and the documents they
// refer to by digest.
type fleetData struct {
	versions []*store.FleetConfig // without their documents
	refs     [][]string           // refs[i]: the digests versions[i] refers to
	docs     map[string][]byte
}

var _ store.FleetConfigs = (*Store)(nil)

// FleetConfigVersion returns the latest version and its digest; 0 and "" when none is stored.
func (s *Store) FleetConfigVersion(context.Context) (int64, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.fleet.versions); n > 0 {
		return s.fleet.versions[n-1].Version, s.fleet.versions[n-1].Digest, nil
	}
	return 0, "", nil
}

// FleetConfig returns a version (0: the latest) with its documents.
func (s *Store) FleetConfig(_ context.Context, version int64) (*store.FleetConfig, error) {
	const op threadOp = "read the fleet configuration"
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(len(s.fleet.versions))
	if version == 0 {
		version = n
	}
	if version < 1 || version > n {
		return nil, op.failf(store.ErrNotFound, "no such version")
	}
	c := *s.fleet.versions[version-1]
	c.Content = append([]byte(nil), c.Content...)
	c.Documents = map[string][]byte{}
	for _, d := range s.fleet.refs[version-1] {
		c.Documents[d] = append([]byte(nil), s.fleet.docs[d]...)
	}
	return &c, nil
}

// FleetConfigHistory lists up to limit versions, newest first, without content or documents.
func (s *Store) FleetConfigHistory(_ context.Context, limit int) ([]*store.FleetConfig, error) {
	const op threadOp = "list the fleet configuration's versions"
	if err := store.CheckHistoryLimit(limit); err != nil {
		return nil, op.fail(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*store.FleetConfig
	for i := len(s.fleet.versions) - 1; i >= 0 && len(out) < limit; i-- {
		c := *s.fleet.versions[i]
		c.Content = nil
		out = append(out, &c)
	}
	return out, nil
}

// PutFleetConfig stores c as the next version unless the latest is the same (see
// store.FleetConfigs).
func (s *Store) PutFleetConfig(ctx context.Context, c *store.FleetConfig, after int64) (bool, error) {
	const op threadOp = "store a fleet configuration"
	if err := store.CheckFleetConfig(c); err != nil {
		return false, op.fail(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &s.fleet
	var latest *store.FleetConfig
	if n := len(f.versions); n > 0 {
		latest = f.versions[n-1]
	}
	switch {
	case latest != nil && latest.Digest == c.Digest:
		c.Version, c.AppliedBy, c.CreatedAt = latest.Version, latest.AppliedBy, latest.CreatedAt
		return false, nil
	case after >= 0 && int64(len(f.versions)) != after:
		return false, op.failf(store.ErrConflict, "the latest version is %d, not %d: another writer stored one meanwhile", len(f.versions), after)
	}
	if f.docs == nil {
		f.docs = map[string][]byte{}
	}
	refs := make([]string, 0, len(c.Documents))
	for d, doc := range c.Documents {
		if _, ok := f.docs[d]; !ok {
			f.docs[d] = append([]byte(nil), doc...)
		}
		refs = append(refs, d)
	}
	stored := &store.FleetConfig{Version: int64(len(f.versions)) + 1, Digest: c.Digest, Content: append([]byte(nil), c.Content...),
		AppliedBy: c.AppliedBy, CreatedAt: stamp.Now(ctx)}
	f.versions = append(f.versions, stored)
	f.refs = append(f.refs, refs)
	c.Version, c.CreatedAt = stored.Version, stored.CreatedAt
	return true, nil
}
