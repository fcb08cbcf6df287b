package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/quiverhq/quiver/store"
)

var (
	_ store.LimitWindows = (*Store)(nil)
	_ store.LimitHolds   = (*Store)(nil)
	_ store.LimitPurger  = (*Store)(nil)
	_ store.LimitCounts  = (*Store)(nil)
)

// LimitCounts returns the counts of the workspace's counters now (see store.LimitCounts): the
// slots still in their window, by the database's clock and each key's period (as
// PurgeLimits reads them), and the live holdings.
func (s *Store) LimitCounts(ctx context.Context, workspaceID string) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, `WITH now AS (SELECT (extract(epoch FROM clock_timestamp()) * 1e9)::bigint AS ns)
		(SELECT w.key, sum(w.n)::bigint FROM limit_windows w, now WHERE w.workspace_id = $1 AND (
			(split_part(split_part(w.key, '/', 2), '.', 1) = 's' AND w.slot > now.ns / 100000000 - 11) OR
			(split_part(split_part(w.key, '/', 2), '.', 1) = 'm' AND w.slot > now.ns / 1000000000 - 61) OR
			(split_part(split_part(w.key, '/', 2), '.', 1) = 'h' AND w.slot > now.ns / 60000000000 - 61) OR
			(split_part(split_part(w.key, '/', 2), '.', 1) = 'd' AND w.slot > now.ns / 900000000000 - 97) OR
			(split_part(split_part(w.key, '/', 2), '.', 1) = 'mo' AND w.slot > now.ns / 86400000000000 - 31))
		GROUP BY w.key)
		UNION ALL
		(SELECT key, sum(held)::bigint FROM limit_holds WHERE workspace_id = $1 AND expires_at > clock_timestamp() GROUP BY key)
		LIMIT $2`, workspaceID, store.MaxLimitCounters)
	if err != nil {
		return nil, fmt.Errorf("postgres: limit counts: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var key string
		var n int64
		if err := rows.Scan(&key, &n); err != nil {
			return nil, fmt.Errorf("postgres: limit counts: %w", err)
		}
		out[key] += int(n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: limit counts: %w", err)
	}
	return out, nil
}

// TakeLimitWindow counts calls in a counter of a rate limit the nodes share (see
// store.LimitWindows): one statement, quiver_take_lease (migration 0023).
func (s *Store) TakeLimitWindow(ctx context.Context, t store.LimitTake) (store.LimitTaken, error) {
	if t.Span < 1 || t.Span > store.MaxLimitSpan || t.Slots < 1 || t.Slots > t.Span || t.Max < 0 || t.Want < 0 {
		return store.LimitTaken{}, fmt.Errorf("postgres: take limit window %s: span %d, slots %d, max %d, want %d: %w", t.Key, t.Span, t.Slots, t.Max, t.Want, store.ErrInvalid)
	}
	var out []int64
	if err := s.pool.QueryRow(ctx, `SELECT quiver_take_lease($1, $2, $3, $4, $5, $6, $7)`, t.WorkspaceID, t.Key, t.Slot, t.Span, t.Slots, t.Max, t.Want).Scan(&out); err != nil {
		return store.LimitTaken{}, fmt.Errorf("postgres: take limit window %s: %w", t.Key, err)
	}
	if len(out) != t.Span+2 {
		return store.LimitTaken{}, fmt.Errorf("postgres: take limit window %s: %d counts, want %d", t.Key, len(out)-2, t.Span)
	}
	counts := make([]int, t.Span)
	for i, n := range out[2:] {
		counts[i] = int(n)
	}
	return store.LimitTaken{Taken: int(out[0]), Until: out[1], Counts: counts}, nil
}

// HoldLimit sets a node's holding of a counter of concurrent calls (see store.LimitHolds): one
// statement, quiver_hold_limit (migration 0019).
func (s *Store) HoldLimit(ctx context.Context, workspaceID, key, node string, want, max int, ttl time.Duration) (int, error) {
	if want < 0 || max < 0 || ttl <= 0 || node == "" {
		return 0, fmt.Errorf("postgres: hold limit %s: want %d, max %d, ttl %s, node %q: %w", key, want, max, ttl, node, store.ErrInvalid)
	}
	var held int64
	if err := s.pool.QueryRow(ctx, `SELECT quiver_hold_limit($1, $2, $3, $4, $5, $6)`, workspaceID, key, node, want, max, ttl.Milliseconds()).Scan(&held); err != nil {
		return 0, fmt.Errorf("postgres: hold limit %s: %w", key, err)
	}
	return int(held), nil
}

// PurgeLimits drops the slots that have left their window for good, by the database's clock,
// and the holdings that lapsed (see store.LimitPurger). A counter's key says its period
// (NAME/s, /m, /h, /d, /mo, before any dot: see platform/limits), and so its slots' length and window; a slot
// counted by a node whose clock runs ahead is newer than the cut, and stays.
func (s *Store) PurgeLimits(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `WITH now AS (SELECT (extract(epoch FROM clock_timestamp()) * 1e9)::bigint AS ns)
		DELETE FROM limit_windows w USING now WHERE
			(split_part(split_part(w.key, '/', 2), '.', 1) = 's' AND w.slot <= now.ns / 100000000 - 11) OR
			(split_part(split_part(w.key, '/', 2), '.', 1) = 'm' AND w.slot <= now.ns / 1000000000 - 61) OR
			(split_part(split_part(w.key, '/', 2), '.', 1) = 'h' AND w.slot <= now.ns / 60000000000 - 61) OR
			(split_part(split_part(w.key, '/', 2), '.', 1) = 'd' AND w.slot <= now.ns / 900000000000 - 97) OR
			(split_part(split_part(w.key, '/', 2), '.', 1) = 'mo' AND w.slot <= now.ns / 86400000000000 - 31)`)
	if err != nil {
		return 0, fmt.Errorf("postgres: purge limit windows: %w", err)
	}
	held, err := s.pool.Exec(ctx, `DELETE FROM limit_holds WHERE expires_at <= clock_timestamp()`)
	if err != nil {
		return 0, fmt.Errorf("postgres: purge limit holdings: %w", err)
	}
	return tag.RowsAffected() + held.RowsAffected(), nil
}
