package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver/store"
)

// UsageStore implements store.Usage (migration 0020) for both backends.
type UsageStore struct{ db }

var _ store.Usage = (*UsageStore)(nil)

// usageKeyCols are the columns that identify a row; usageCountCols those AddUsage adds to.
const usageKeyCols = `workspace_id, span, dims, start, key_id, user_id, agent, tool, model`

var usageCountCols = func() []string {
	cols := []string{"calls", "errors", "refusals", "requests", "input_tokens", "output_tokens", "cost_micros"}
	for i := range store.UsageDurationBuckets {
		cols = append(cols, fmt.Sprintf("d%d", i))
	}
	return cols
}()

// usageInsert is the statement that adds n rows: an upsert whose update adds each count.
func usageInsert(n int) string {
	per := 9 + len(usageCountCols)
	var b strings.Builder
	b.WriteString(`INSERT INTO usage_counts (` + usageKeyCols + `, ` + strings.Join(usageCountCols, ", ") + `) VALUES `)
	for r := range n {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range per {
			if c > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "$%d", r*per+c+1)
		}
		b.WriteByte(')')
	}
	b.WriteString(` ON CONFLICT (` + usageKeyCols + `) DO UPDATE SET `)
	for i, c := range usageCountCols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = usage_counts.%s + excluded.%s", c, c, c)
	}
	return b.String()
}

// AddUsage adds rows to the sums; see store.Usage. Rows with the same key are added together
// first (PostgreSQL refuses an upsert that meets one row twice), and the rows are written in
// key order, so that two nodes adding at once lock rows in the same order. Each statement of
// a size is prepared once a transaction.
func (s *UsageStore) AddUsage(ctx context.Context, rows []*store.UsageRow) error {
	const op = "add usage"
	rows, err := mergeUsage(rows)
	if err != nil {
		return s.d.fail(op, err)
	}
	if len(rows) == 0 {
		return nil
	}
	err = s.write(ctx, func(ctx context.Context, tx Querier) error {
		stmts := map[int]*sql.Stmt{}
		defer func() {
			for _, st := range stmts {
				st.Close()
			}
		}()
		for chunk := range slices.Chunk(rows, max(1, s.d.RowsPerInsert)) {
			st := stmts[len(chunk)]
			if st == nil {
				p, ok := tx.(interface {
					PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
				})
				if !ok {
					return fmt.Errorf("the write transaction (%T) cannot prepare statements", tx)
				}
				if st, err = p.PrepareContext(ctx, usageInsert(len(chunk))); err != nil {
					return err
				}
				stmts[len(chunk)] = st
			}
			if _, err := st.ExecContext(ctx, usageArgs(chunk)...); err != nil {
				return err
			}
		}
		return nil
	})
	return s.d.Err(op, err)
}

// usageArgs are the parameters of usageInsert(len(rows)).
func usageArgs(rows []*store.UsageRow) []any {
	args := make([]any, 0, len(rows)*(9+len(usageCountCols)))
	for _, r := range rows {
		args = append(args, r.WorkspaceID, r.Span, r.Dims, r.Start, r.Key, r.User, r.Agent, r.Tool, r.Model,
			r.Calls, r.Errors, r.Refusals, r.Requests, r.InputTokens, r.OutputTokens, r.CostMicros)
		for _, d := range r.Durations {
			args = append(args, d)
		}
	}
	return args
}

// mergeUsage checks rows, adds those of the same key together and sorts them by key.
func mergeUsage(rows []*store.UsageRow) ([]*store.UsageRow, error) {
	byKey := make(map[store.UsageRow]*store.UsageRow, len(rows))
	out := make([]*store.UsageRow, 0, len(rows))
	for _, r := range rows {
		if r.WorkspaceID == "" || (r.Span != 60 && r.Span != 3600 && r.Span != 86400) || r.Start%r.Span != 0 {
			return nil, fmt.Errorf("a usage row needs a workspace, a span of 60, 3600 or 86400 and a start that is a multiple of it: %w", store.ErrInvalid)
		}
		k := store.UsageRow{WorkspaceID: r.WorkspaceID, Span: r.Span, Dims: r.Dims, Start: r.Start,
			Key: r.Key, User: r.User, Agent: r.Agent, Tool: r.Tool, Model: r.Model}
		if m, ok := byKey[k]; ok {
			m.Add(&r.UsageCounts)
			continue
		}
		c := *r
		byKey[k] = &c
		out = append(out, &c)
	}
	slices.SortFunc(out, func(a, b *store.UsageRow) int {
		return cmp.Or(cmp.Compare(a.WorkspaceID, b.WorkspaceID), cmp.Compare(a.Span, b.Span), cmp.Compare(a.Dims, b.Dims),
			cmp.Compare(a.Start, b.Start), cmp.Compare(a.Key, b.Key), cmp.Compare(a.User, b.User), cmp.Compare(a.Agent, b.Agent),
			cmp.Compare(a.Tool, b.Tool), cmp.Compare(a.Model, b.Model))
	})
	return out, nil
}

// usageColumn is the column of dimension dim.
func usageColumn(dim string) string {
	switch dim {
	case store.UsageKey:
		return "key_id"
	case store.UsageUser:
		return "user_id"
	}
	return dim // agent, tool and model are their own columns; CheckUsageQuery allowed only these
}

// UsageSums sums the rows q selects; see store.Usage. The sums are the database's (one
// GROUP BY over the primary key's range), so that a month of hourly rows is read in one pass
// without sending them.
func (s *UsageStore) UsageSums(ctx context.Context, q *store.UsageQuery) ([]*store.UsageRow, error) {
	const op = "usage sums"
	if err := store.CheckUsageQuery(q); err != nil {
		return nil, s.d.fail(op, err)
	}
	limit := q.Limit
	if limit <= 0 || limit > store.MaxUsageRows {
		limit = store.MaxUsageRows
	}
	args := []any{q.WorkspaceID, q.Span, q.Dims, q.From, q.To, q.From}
	bucket := "CAST($6 AS BIGINT)" // one bucket, starting at From
	if q.Bucket > 0 {
		args[5] = q.Bucket
		bucket = "start - start % CAST($6 AS BIGINT)"
	}
	cols := make([]string, len(q.GroupBy))
	for i, g := range q.GroupBy {
		cols[i] = usageColumn(g)
	}
	sums := make([]string, len(usageCountCols))
	for i, c := range usageCountCols {
		sums[i] = "SUM(" + c + ")"
	}
	query := `SELECT ` + strings.Join(slices.Concat([]string{bucket + ` AS b`}, cols, sums), ", ") +
		` FROM usage_counts WHERE workspace_id = $1 AND span = $2 AND dims = $3 AND start >= $4 AND start < $5` +
		` GROUP BY ` + strings.Join(slices.Concat([]string{"b"}, cols), ", ") +
		` ORDER BY ` + strings.Join(slices.Concat([]string{"b", "SUM(calls) + SUM(requests) DESC"}, cols), ", ") +
		fmt.Sprintf(` LIMIT %d`, limit+1)
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.d.Err(op, err)
	}
	defer rows.Close()
	var out []*store.UsageRow
	for rows.Next() {
		if len(out) == limit {
			return nil, s.d.failf(op, store.ErrTooLarge, "more than %d rows: ask for larger buckets, a shorter range or fewer groups", limit)
		}
		r := &store.UsageRow{WorkspaceID: q.WorkspaceID, Span: q.Bucket, Dims: q.Dims}
		dest := []any{&r.Start}
		vals := make([]string, len(q.GroupBy))
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		dest = append(dest, &r.Calls, &r.Errors, &r.Refusals, &r.Requests, &r.InputTokens, &r.OutputTokens, &r.CostMicros)
		for i := range r.Durations {
			dest = append(dest, &r.Durations[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, s.d.Err(op, err)
		}
		for i, g := range q.GroupBy {
			r.SetValue(g, vals[i])
		}
		out = append(out, r)
	}
	return out, s.d.Err(op, rows.Err())
}

// PurgeUsage deletes the rows past their retention; see store.Usage.
func (s *UsageStore) PurgeUsage(ctx context.Context, minutes, others time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx Querier) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM usage_counts WHERE (span = 60 AND start < $1) OR (span <> 60 AND start < $2)`,
			minutes.Unix(), others.Unix())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, s.d.Err("purge usage", err)
}
