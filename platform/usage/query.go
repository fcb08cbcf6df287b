package usage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver/store"
)

// Buckets a Query may sum into.
const (
	BucketMinute = "minute"
	BucketHour   = "hour"
	BucketDay    = "day"
	BucketAll    = "all" // one bucket over the whole range
)

// MinuteRetention is how long minute rows are kept: buckets of a minute reach this far back.
// Hour and day rows are kept for the platform's usage retention.
const MinuteRetention = store.UsageMinuteRetention

// MaxRange bounds a query's range.
const MaxRange = 400 * 24 * time.Hour

// Query asks for a workspace's usage from From to To, summed into buckets and grouped by
// dimensions.
type Query struct {
	WorkspaceID string
	// From and To bound the range; each is moved out to its bucket's edge (see Plan).
	From, To time.Time
	// Bucket is BucketMinute, BucketHour, BucketDay or BucketAll; "" means BucketHour.
	Bucket string
	// GroupBy are dimensions (store.UsageKey, ...) the rows keep; none sums every caller and
	// tool together.
	GroupBy []string
}

// Row is the usage of one bucket by one combination of the grouped dimensions.
type Row struct {
	Start time.Time
	// The values of the grouped dimensions; the others are "".
	Key, User, Agent, Tool, Model string
	Totals
}

// Totals are usage's figures.
type Totals struct {
	Calls, Errors, Refusals int64
	// P50 and P95 are the calls' median and 95th percentile durations, read from the
	// histogram's buckets (within 41%); 0 without calls.
	P50, P95                            time.Duration
	Requests, InputTokens, OutputTokens int64
	// Cost is in the unit of the workspace's price table.
	Cost float64
}

// Answer is a Query's answer: the range as summed (moved out to the buckets' edges), the rows
// (by bucket, busiest first within one) and their totals.
type Answer struct {
	From, To time.Time
	Bucket   string
	GroupBy  []string
	Rows     []Row
	Totals   Totals
}

// QueryError is a query no store answers: Field says which parameter, Message why.
type QueryError struct {
	Field, Message string
}

func (e *QueryError) Error() string { return e.Field + ": " + e.Message }

// plan is how a query is answered: from which rows, and the range moved out to its buckets.
func plan(q *Query, now time.Time) (*store.UsageQuery, error) {
	bucket, ok := map[string]int64{"": 3600, BucketMinute: 60, BucketHour: 3600, BucketDay: 86400, BucketAll: 0}[q.Bucket]
	if !ok {
		return nil, &QueryError{"bucket", fmt.Sprintf("%q is not minute, hour, day or all", q.Bucket)}
	}
	if err := checkGroups(q.GroupBy); err != nil {
		return nil, err
	}
	if !q.From.Before(q.To) {
		return nil, &QueryError{"from", "must be before to"}
	}
	if q.To.Sub(q.From) > MaxRange {
		return nil, &QueryError{"to", fmt.Sprintf("the range is at most %d days", int(MaxRange.Hours()/24))}
	}
	unit := bucket
	if unit == 0 {
		unit = 3600
	}
	from, to := floor(q.From.Unix(), unit), ceil(q.To.Unix(), unit)
	span := unit
	if bucket == 0 && from%86400 == 0 && to%86400 == 0 {
		span = 86400 // a range of whole days: the day rows
	}
	sq := &store.UsageQuery{WorkspaceID: q.WorkspaceID, Span: span, From: from, To: to, Bucket: bucket, GroupBy: q.GroupBy}
	switch {
	case span == 86400 && len(q.GroupBy) == 2:
		sq.Dims = pair(q.GroupBy)
	case span == 60 || len(q.GroupBy) > 1:
		sq.Dims = store.UsageAllDims
	case len(q.GroupBy) == 1:
		sq.Dims = q.GroupBy[0]
	}
	if span == 60 && now.Sub(time.Unix(from, 0)) > MinuteRetention {
		return nil, &QueryError{"from", fmt.Sprintf("buckets of a minute reach back %d hours; ask for hours or days further back", int(MinuteRetention.Hours()))}
	}
	return sq, nil
}

// pair is the Dims of the day rows of two dimensions: their names in store.UsageDimensions'
// order, joined by a comma.
func pair(groups []string) string {
	a, b := groups[0], groups[1]
	if slices.Index(store.UsageDimensions, a) > slices.Index(store.UsageDimensions, b) {
		a, b = b, a
	}
	return a + "," + b
}

func checkGroups(groups []string) error {
	for i, g := range groups {
		if !slices.Contains(store.UsageDimensions, g) {
			return &QueryError{"group_by", fmt.Sprintf("%q is not one of %s", g, strings.Join(store.UsageDimensions, ", "))}
		}
		if slices.Contains(groups[:i], g) {
			return &QueryError{"group_by", fmt.Sprintf("%q is named twice", g)}
		}
	}
	return nil
}

func floor(t, unit int64) int64 { return t - ((t%unit)+unit)%unit }

func ceil(t, unit int64) int64 {
	if f := floor(t, unit); f != t {
		return f + unit
	}
	return t
}

// Read answers q from st; now is the clock's time (how far back minutes reach). A query whose
// answer has more rows than the store gives at once (store.MaxUsageRows) is a QueryError on
// bucket.
func Read(ctx context.Context, st store.Usage, q Query, now time.Time) (*Answer, error) {
	sq, err := plan(&q, now)
	if err != nil {
		return nil, err
	}
	rows, err := st.UsageSums(ctx, sq)
	if errors.Is(err, store.ErrTooLarge) {
		return nil, &QueryError{"bucket", fmt.Sprintf("the answer would have more than %d rows: ask for larger buckets, a shorter range or fewer groups", store.MaxUsageRows)}
	}
	if err != nil {
		return nil, err
	}
	bucket := q.Bucket
	if bucket == "" {
		bucket = BucketHour
	}
	a := &Answer{From: time.Unix(sq.From, 0).UTC(), To: time.Unix(sq.To, 0).UTC(), Bucket: bucket, GroupBy: q.GroupBy,
		Rows: make([]Row, len(rows))}
	var all store.UsageCounts
	for i, r := range rows {
		a.Rows[i] = Row{Start: time.Unix(r.Start, 0).UTC(), Key: r.Key, User: r.User, Agent: r.Agent, Tool: r.Tool, Model: r.Model,
			Totals: totals(&r.UsageCounts)}
		all.Add(&r.UsageCounts)
	}
	a.Totals = totals(&all)
	return a, nil
}

func totals(c *store.UsageCounts) Totals {
	return Totals{Calls: c.Calls, Errors: c.Errors, Refusals: c.Refusals, P50: Percentile(&c.Durations, 0.5), P95: Percentile(&c.Durations, 0.95),
		Requests: c.Requests, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, Cost: float64(c.CostMicros) / 1e6}
}

// Percentile reads the q-th quantile (0 < q <= 1) from a histogram of durations: the bucket
// it falls in, interpolated linearly within its bounds. Calls slower than the last bound are
// read as that bound.
func Percentile(h *[store.UsageDurationBuckets]int64, q float64) time.Duration {
	var n int64
	for _, c := range h {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	var seen int64
	for i, c := range h {
		if c == 0 || float64(seen+c) < rank {
			seen += c
			continue
		}
		if i == len(h)-1 {
			return store.UsageBucketBound(i - 1)
		}
		var lo time.Duration
		if i > 0 {
			lo = store.UsageBucketBound(i - 1)
		}
		hi := store.UsageBucketBound(i)
		return lo + time.Duration(float64(hi-lo)*(rank-float64(seen))/float64(c))
	}
	return store.UsageBucketBound(len(h) - 2)
}
