package store

import (
	"context"
	"fmt"
	"time"
)

// Usage is what a workspace's callers used: calls of tools (how many, how many failed or were
// refused, how long they took) and model requests (how many, their tokens and cost), counted
// in time buckets by who and what. The platform meters it in each process and adds what it
// counted every few seconds (see platform/usage); the store keeps the sums.
//
// Rows come at three spans (a minute, an hour, a day) and with the dimensions they keep
// (UsageRow.Dims): every dimension (the finest rows, which any grouping can be summed from),
// two (day rows only), one, or none (the workspace's totals). The coarse rows are what a query over a month reads:
// a few thousand rows rather than one per caller, tool and hour.
type Usage interface {
	// AddUsage adds rows to the sums, in one transaction: a row whose workspace, span, dims,
	// start and dimension values are stored already adds its counts to that row's.
	AddUsage(ctx context.Context, rows []*UsageRow) error
	// UsageSums sums the rows q selects, grouped by bucket and by the dimensions of q.GroupBy,
	// ordered by bucket start and then by calls and requests, most first.
	UsageSums(ctx context.Context, q *UsageQuery) ([]*UsageRow, error)
	// PurgeUsage deletes the rows of span 60 that start before minutes and the other rows
	// that start before others, and returns how many it deleted.
	PurgeUsage(ctx context.Context, minutes, others time.Time) (int64, error)
}

// UsageMinuteRetention is how long rows of a minute are kept: the retention purge deletes
// older ones, and queries for minutes reach this far back.
const UsageMinuteRetention = 48 * time.Hour

// UsageDurationBuckets is how many buckets a row's histogram of call durations has. Bucket i
// counts the calls that took at most UsageBucketBound(i); the last counts all slower ones.
const UsageDurationBuckets = 32

// UsageBucketBound is bucket i's upper bound: 0.5 ms times √2 to the i (0.5 ms, 0.71 ms, 1 ms,
// ... 23 s). Fixed bounds let every node's counts be added in SQL, as Prometheus adds its
// histograms; a percentile read from them is within a bucket's width (41%).
func UsageBucketBound(i int) time.Duration {
	const base = 500 * time.Microsecond
	d := base << (i / 2)
	if i%2 == 1 {
		d = d * 1414 / 1000
	}
	return d
}

// UsageBucket is the bucket a call that took d counts in.
func UsageBucket(d time.Duration) int {
	for i := range UsageDurationBuckets - 1 {
		if d <= UsageBucketBound(i) {
			return i
		}
	}
	return UsageDurationBuckets - 1
}

// The dimensions usage is counted by.
const (
	UsageKey   = "key"
	UsageUser  = "user"
	UsageAgent = "agent"
	UsageTool  = "tool"
	UsageModel = "model"
)

// UsageDimensions are the dimensions, in the order a row keeps them.
var UsageDimensions = []string{UsageKey, UsageUser, UsageAgent, UsageTool, UsageModel}

// UsageAllDims is UsageRow.Dims of the rows that keep every dimension.
const UsageAllDims = "all"

// UsageRow is the usage of one bucket by one combination of dimension values.
type UsageRow struct {
	WorkspaceID string
	// Span is the bucket's length in seconds: 60, 3600 or 86400 as stored; what a query asked
	// for in its answers (0 for one bucket over the whole range).
	Span int64
	// Dims says which dimensions the row keeps: UsageAllDims, one of UsageDimensions, two of
	// them joined by a comma in UsageDimensions' order ("key,tool"), or "" for the
	// workspace's totals. The values of the others are "".
	Dims string
	// Start is the bucket's start, a multiple of Span in Unix seconds (UTC).
	Start int64
	// The dimension values: the API key, the user, the agent whose run called (the innermost
	// of a chain), the tool, the model ("provider:model").
	Key, User, Agent, Tool, Model string
	UsageCounts
}

// Value returns the row's value of dimension dim.
func (r *UsageRow) Value(dim string) string {
	switch dim {
	case UsageKey:
		return r.Key
	case UsageUser:
		return r.User
	case UsageAgent:
		return r.Agent
	case UsageTool:
		return r.Tool
	case UsageModel:
		return r.Model
	}
	return ""
}

// SetValue sets the row's value of dimension dim.
func (r *UsageRow) SetValue(dim, v string) {
	switch dim {
	case UsageKey:
		r.Key = v
	case UsageUser:
		r.User = v
	case UsageAgent:
		r.Agent = v
	case UsageTool:
		r.Tool = v
	case UsageModel:
		r.Model = v
	}
}

// UsageCounts are the counts a row sums.
type UsageCounts struct {
	// Calls of tools; Errors of them ended with an error result other than a refusal;
	// Refusals were refused before they ran (a limit, an entitlement, a policy).
	Calls, Errors, Refusals int64
	// Durations is the histogram of the calls' durations (see UsageBucketBound).
	Durations [UsageDurationBuckets]int64
	// Requests to models, and their tokens.
	Requests, InputTokens, OutputTokens int64
	// CostMicros is the requests' cost in millionths of the unit of the workspace's price
	// table.
	CostMicros int64
}

// Add adds o's counts to c's.
func (c *UsageCounts) Add(o *UsageCounts) {
	c.Calls += o.Calls
	c.Errors += o.Errors
	c.Refusals += o.Refusals
	for i := range c.Durations {
		c.Durations[i] += o.Durations[i]
	}
	c.Requests += o.Requests
	c.InputTokens += o.InputTokens
	c.OutputTokens += o.OutputTokens
	c.CostMicros += o.CostMicros
}

// UsageQuery selects the rows of one span and dims and sums them.
type UsageQuery struct {
	WorkspaceID string
	// Span and Dims select the stored rows (see UsageRow).
	Span int64
	Dims string
	// From and To bound the rows' starts, in Unix seconds: From <= Start < To.
	From, To int64
	// Bucket is the length of the buckets the answer sums into, a multiple of Span; 0 sums
	// the whole range into one bucket, which starts at From.
	Bucket int64
	// GroupBy are the dimensions the answer keeps (each of UsageDimensions at most once);
	// the rows are summed over the others.
	GroupBy []string
	// Limit bounds the rows returned; 0 means MaxUsageRows. More rows than that is
	// ErrTooLarge.
	Limit int
}

// MaxUsageRows bounds the rows of one answer.
const MaxUsageRows = 100_000

// CheckUsageQuery reports, wrapping ErrInvalid, a query no store answers.
func CheckUsageQuery(q *UsageQuery) error {
	switch {
	case q.Span != 60 && q.Span != 3600 && q.Span != 86400:
		return fmt.Errorf("usage: span %d is not 60, 3600 or 86400: %w", q.Span, ErrInvalid)
	case q.Bucket < 0 || q.Bucket%q.Span != 0:
		return fmt.Errorf("usage: bucket %d is not a multiple of span %d: %w", q.Bucket, q.Span, ErrInvalid)
	case q.From > q.To:
		return fmt.Errorf("usage: from is after to: %w", ErrInvalid)
	}
	seen := map[string]bool{}
	for _, g := range q.GroupBy {
		known := false
		for _, d := range UsageDimensions {
			known = known || d == g
		}
		if !known || seen[g] {
			return fmt.Errorf("usage: cannot group by %q twice or at all (one of key, user, agent, tool, model): %w", g, ErrInvalid)
		}
		seen[g] = true
	}
	return nil
}
