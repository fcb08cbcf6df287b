package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// LeaseStore implements store.Leases (migration 0010) for both backends.
//
// An acquisition counts the live leases its caps count and inserts inside one transaction; the
// acquisitions of a kind take turns (Dialect.TakeTurns, on the kind alone when there is a cap
// in all, else on the kind and workspace), which is what makes a cap hold when nodes acquire at
// once. Every time is the write's (Dialect.Now: the database's clock on PostgreSQL).
type LeaseStore struct{ db }

var _ store.Leases = (*LeaseStore)(nil)

const leaseCols = `id, workspace_id, kind, owner, holder, data, created_at, expires_at`

func scanLease(row scanner) (*store.Lease, error) {
	var l store.Lease
	var data sql.NullString
	if err := row.Scan(&l.ID, &l.WorkspaceID, &l.Kind, &l.Owner, &l.Holder, &data, scanTime{&l.CreatedAt}, scanTime{&l.ExpiresAt}); err != nil {
		return nil, err
	}
	if data.Valid {
		l.Data = json.RawMessage(data.String)
	}
	return &l, nil
}

// AcquireLease stores l unless a cap of limits is reached; see store.Leases.
func (s *LeaseStore) AcquireLease(ctx context.Context, l *store.Lease, ttl time.Duration, limits store.LeaseLimits) error {
	op := "acquire lease"
	if err := store.CheckLease(l, ttl); err != nil {
		return s.d.fail(op, err)
	}
	id := l.ID
	if id == "" {
		id = stamp.ID(ctx, "lse")
	}
	var at time.Time
	err := s.write(ctx, func(ctx context.Context, tx Querier) error {
		turn := "lease:" + l.Kind
		if limits.Total < 0 {
			turn += ":" + l.WorkspaceID
		}
		if err := s.d.takeTurns(ctx, tx, turn); err != nil {
			return err
		}
		var err error
		if at, err = s.d.Now(ctx, tx); err != nil {
			return err
		}
		now := s.d.Time(at)
		if _, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE kind = $1 AND workspace_id = $3 AND NOT `+liveLease,
			l.Kind, now, l.WorkspaceID); err != nil {
			return err
		}
		if err := s.withinLimits(ctx, tx, l, limits, now); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO leases (`+leaseCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			id, l.WorkspaceID, l.Kind, l.Owner, l.Holder, nullString(string(l.Data)), now, s.d.Time(at.Add(ttl)))
		return err
	})
	if err != nil {
		return s.d.Err(op, err)
	}
	l.ID, l.CreatedAt, l.ExpiresAt = id, at, at.Add(ttl)
	return nil
}

// liveLease is the condition that a row of leases is live at $2: not expired, and without a
// holder or with a live one.
const liveLease = `(expires_at > $2 AND (holder = '' OR holder IN (SELECT h.id FROM leases h WHERE h.kind = '` + store.HolderKind + `' AND h.expires_at > $2)))`

// withinLimits fails with a *store.LeaseLimitError when l would take a count over its cap.
func (s *LeaseStore) withinLimits(ctx context.Context, tx Querier, l *store.Lease, limits store.LeaseLimits, now any) error {
	counts := []struct {
		cap   string
		limit int
		where string
		args  []any
	}{
		{"total", limits.Total, `kind = $1 AND ` + liveLease, []any{l.Kind, now}},
		{"workspace", limits.PerWorkspace, `kind = $1 AND ` + liveLease + ` AND workspace_id = $3`, []any{l.Kind, now, l.WorkspaceID}},
		{"owner", limits.PerOwner, `kind = $1 AND ` + liveLease + ` AND workspace_id = $3 AND owner = $4`, []any{l.Kind, now, l.WorkspaceID, l.Owner}},
	}
	for _, c := range counts {
		if c.limit < 0 {
			continue
		}
		var live int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM leases WHERE `+c.where, c.args...).Scan(&live); err != nil {
			return err
		}
		if live >= c.limit {
			return &store.LeaseLimitError{Cap: c.cap, Live: live, Limit: c.limit}
		}
	}
	return nil
}

// RenewLease makes the live lease last ttl from now; see store.Leases.
func (s *LeaseStore) RenewLease(ctx context.Context, workspaceID, id string, ttl time.Duration) (*store.Lease, error) {
	op := "renew lease " + id
	if err := store.CheckLeaseTTL(ttl); err != nil {
		return nil, s.d.fail(op, err)
	}
	var out *store.Lease
	err := s.write(ctx, func(ctx context.Context, tx Querier) error {
		at, err := s.d.Now(ctx, tx)
		if err != nil {
			return err
		}
		out, err = scanLease(tx.QueryRowContext(ctx, `UPDATE leases SET expires_at = $4
			WHERE workspace_id = $1 AND id = $2 AND expires_at > $3 RETURNING `+leaseCols,
			workspaceID, id, s.d.Time(at), s.d.Time(at.Add(ttl))))
		return err
	})
	if err != nil {
		return nil, s.d.Err(op, err)
	}
	return out, nil
}

// UpdateLease applies fn to the live lease and stores its Data; see store.Leases.
func (s *LeaseStore) UpdateLease(ctx context.Context, workspaceID, id string, fn func(*store.Lease) error) (*store.Lease, error) {
	op := "update lease " + id
	var out *store.Lease
	err := s.write(ctx, func(ctx context.Context, tx Querier) error {
		at, err := s.d.Now(ctx, tx)
		if err != nil {
			return err
		}
		l, err := scanLease(tx.QueryRowContext(ctx, `SELECT `+leaseCols+` FROM leases
			WHERE workspace_id = $1 AND id = $2 AND expires_at > $3`+s.d.lock("FOR UPDATE"), workspaceID, id, s.d.Time(at)))
		if err != nil {
			return err
		}
		before := *l
		if err := fn(l); err != nil {
			return err
		}
		l.ID, l.WorkspaceID, l.Kind, l.Owner, l.CreatedAt, l.ExpiresAt = before.ID, before.WorkspaceID, before.Kind, before.Owner, before.CreatedAt, before.ExpiresAt
		if err := store.CheckLease(l, time.Second); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE leases SET data = $2 WHERE id = $1`, id, nullString(string(l.Data))); err != nil {
			return err
		}
		out = l
		return nil
	})
	if err != nil {
		return nil, s.d.Err(op, err)
	}
	return out, nil
}

// ReleaseLease ends the live lease; see store.Leases.
func (s *LeaseStore) ReleaseLease(ctx context.Context, workspaceID, id string) error {
	op := "release lease " + id
	err := s.write(ctx, func(ctx context.Context, tx Querier) error {
		at, err := s.d.Now(ctx, tx)
		if err != nil {
			return err
		}
		// An expired lease goes too, but as not found: it had ended already.
		var expires time.Time
		err = tx.QueryRowContext(ctx, `DELETE FROM leases WHERE workspace_id = $1 AND id = $2 RETURNING expires_at`,
			workspaceID, id).Scan(scanTime{&expires})
		if err == nil && !expires.After(at) {
			return sql.ErrNoRows
		}
		return err
	})
	return s.d.Err(op, err)
}
