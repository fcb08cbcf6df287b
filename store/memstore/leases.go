package memstore

import (
	"bytes"
	"context"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// leaseData holds the leases by id; they are few and short-lived, so caps count them by a scan.
type leaseData struct {
	byID map[string]*store.Lease
}

func copyLease(l *store.Lease) *store.Lease {
	c := *l
	c.Data = bytes.Clone(l.Data)
	return &c
}

// live returns the lease of the workspace with this id unless it expired by now.
func (d *leaseData) live(workspaceID, id string, now time.Time) *store.Lease {
	l := d.byID[id]
	if l == nil || l.WorkspaceID != workspaceID || !l.ExpiresAt.After(now) {
		return nil
	}
	return l
}

// counts reports whether l counts against caps at now: not expired, and its holder's lease
// (if it names one) not either.
func (d *leaseData) counts(l *store.Lease, now time.Time) bool {
	if !l.ExpiresAt.After(now) {
		return false
	}
	if l.Holder == "" {
		return true
	}
	h := d.byID[l.Holder]
	return h != nil && h.Kind == store.HolderKind && h.ExpiresAt.After(now)
}

// AcquireLease stores l unless a cap of limits is reached; see store.Leases.
func (s *Store) AcquireLease(ctx context.Context, l *store.Lease, ttl time.Duration, limits store.LeaseLimits) error {
	const op entityOp = "acquire lease"
	if err := store.CheckLease(l, ttl); err != nil {
		return op.fail(err)
	}
	id := l.ID
	if id == "" {
		id = stamp.ID(ctx, "lse")
	}
	now := stamp.Now(ctx).UTC().Round(0)
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.leases
	if d.byID == nil {
		d.byID = map[string]*store.Lease{}
	}
	total, inWorkspace, ofOwner := d.liveLike(l, now)
	for _, c := range []struct {
		cap         string
		live, limit int
	}{{"total", total, limits.Total}, {"workspace", inWorkspace, limits.PerWorkspace}, {"owner", ofOwner, limits.PerOwner}} {
		if c.limit >= 0 && c.live >= c.limit {
			return op.fail(&store.LeaseLimitError{Cap: c.cap, Live: c.live, Limit: c.limit})
		}
	}
	if _, taken := d.byID[id]; taken {
		return op.failf(store.ErrConflict, "the id is already taken")
	}
	l.ID, l.CreatedAt, l.ExpiresAt = id, now, now.Add(ttl)
	d.byID[id] = copyLease(l)
	return nil
}

// liveLike counts the live leases of l's kind: in all, in l's workspace, and of l's owner
// there. The dead ones of l's workspace are let go on the way.
func (d *leaseData) liveLike(l *store.Lease, now time.Time) (total, inWorkspace, ofOwner int) {
	for lid, o := range d.byID {
		if o.Kind != l.Kind {
			continue
		}
		if !d.counts(o, now) {
			if o.WorkspaceID == l.WorkspaceID {
				delete(d.byID, lid)
			}
			continue
		}
		total++
		if o.WorkspaceID == l.WorkspaceID {
			inWorkspace++
			if o.Owner == l.Owner {
				ofOwner++
			}
		}
	}
	return total, inWorkspace, ofOwner
}

// RenewLease makes the live lease last ttl from now; see store.Leases.
func (s *Store) RenewLease(ctx context.Context, workspaceID, id string, ttl time.Duration) (*store.Lease, error) {
	op := entityOp("renew lease " + id)
	if err := store.CheckLeaseTTL(ttl); err != nil {
		return nil, op.fail(err)
	}
	now := stamp.Now(ctx).UTC().Round(0)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.leases.live(workspaceID, id, now)
	if l == nil {
		return nil, op.fail(store.ErrNotFound)
	}
	l.ExpiresAt = now.Add(ttl)
	return copyLease(l), nil
}

// UpdateLease applies fn to the live lease and stores its Data; see store.Leases.
func (s *Store) UpdateLease(ctx context.Context, workspaceID, id string, fn func(*store.Lease) error) (*store.Lease, error) {
	op := entityOp("update lease " + id)
	now := stamp.Now(ctx).UTC().Round(0)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.leases.live(workspaceID, id, now)
	if l == nil {
		return nil, op.fail(store.ErrNotFound)
	}
	c := copyLease(l)
	if err := fn(c); err != nil {
		return nil, err
	}
	kept := copyLease(l)
	kept.Data = bytes.Clone(c.Data)
	if err := store.CheckLease(kept, time.Second); err != nil {
		return nil, op.fail(err)
	}
	s.leases.byID[id] = kept
	return copyLease(kept), nil
}

// ReleaseLease ends the live lease; see store.Leases.
func (s *Store) ReleaseLease(ctx context.Context, workspaceID, id string) error {
	op := entityOp("release lease " + id)
	now := stamp.Now(ctx).UTC().Round(0)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.leases.live(workspaceID, id, now)
	if l == nil {
		return op.fail(store.ErrNotFound)
	}
	delete(s.leases.byID, id)
	return nil
}
