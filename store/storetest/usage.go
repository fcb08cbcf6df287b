package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

// UsageStore is what the usage conformance tests need: usage, and workspaces to count it in.
type UsageStore interface {
	store.Entities
	store.Usage
}

// RunUsage runs the conformance tests of store.Usage against stores returned by open.
func RunUsage(t *testing.T, open func(t *testing.T) UsageStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s UsageStore)
	}{
		{"Sums", testUsageSums},
		{"Buckets", testUsageBuckets},
		{"Isolation", testUsageIsolation},
		{"Refused", testUsageRefused},
		{"Purge", testUsagePurge},
		{"Concurrent", testUsageConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

// usageRow is a minute row of every dimension: calls calls of tool by key, each in duration
// bucket d, and errs of them errors.
func usageRow(ws string, start int64, key, tool string, calls, errs int64, d int) *store.UsageRow {
	r := &store.UsageRow{WorkspaceID: ws, Span: 60, Dims: store.UsageAllDims, Start: start, Key: key, Tool: tool}
	r.Calls, r.Errors = calls, errs
	r.Durations[d] = calls
	return r
}

func sums(t *testing.T, s store.Usage, q store.UsageQuery) []*store.UsageRow {
	t.Helper()
	rows, err := s.UsageSums(ctx, &q)
	if err != nil {
		t.Fatalf("UsageSums(%+v): %v", q, err)
	}
	return rows
}

// testUsageSums: adding to a stored row adds its counts; sums group by the dimensions asked
// for, busiest first within a bucket.
func testUsageSums(t *testing.T, s UsageStore) {
	ws := newFixture(t, s, "u").ws.ID
	const t0 = 1_800_000_000 - 1_800_000_000%3600
	mustOK(t, "AddUsage", s.AddUsage(ctx, []*store.UsageRow{
		usageRow(ws, t0, "key_a", "search", 3, 1, 4),
		usageRow(ws, t0, "key_b", "search", 2, 0, 5),
		usageRow(ws, t0+60, "key_a", "refund", 1, 1, 20),
		usageRow(ws, t0, "key_a", "search", 4, 0, 4), // the same key as the first: added to it
	}))
	model := &store.UsageRow{WorkspaceID: ws, Span: 60, Dims: store.UsageAllDims, Start: t0, Key: "key_a", Model: "openai:gpt"}
	model.Requests, model.InputTokens, model.OutputTokens, model.CostMicros = 2, 1000, 300, 4500
	mustOK(t, "AddUsage", s.AddUsage(ctx, []*store.UsageRow{model, usageRow(ws, t0, "key_b", "search", 1, 1, 5)}))

	byTool := sums(t, s, store.UsageQuery{WorkspaceID: ws, Span: 60, Dims: store.UsageAllDims, From: t0, To: t0 + 3600, GroupBy: []string{store.UsageTool}})
	if len(byTool) != 3 {
		t.Fatalf("by tool: %d rows, want 3 (search, refund, the model's)", len(byTool))
	}
	search := byTool[0]
	if search.Tool != "search" || search.Calls != 10 || search.Errors != 2 || search.Durations[4] != 7 || search.Durations[5] != 3 || search.Start != t0 {
		t.Errorf("search: %+v", search)
	}
	if search.Key != "" {
		t.Errorf("a row grouped by tool keeps the key %q", search.Key)
	}
	byKey := sums(t, s, store.UsageQuery{WorkspaceID: ws, Span: 60, Dims: store.UsageAllDims, From: t0, To: t0 + 3600, GroupBy: []string{store.UsageKey}})
	got := map[string]store.UsageCounts{}
	for _, r := range byKey {
		got[r.Key] = r.UsageCounts
	}
	if a := got["key_a"]; a.Calls != 8 || a.Requests != 2 || a.InputTokens != 1000 || a.OutputTokens != 300 || a.CostMicros != 4500 {
		t.Errorf("key_a: %+v", a)
	}
	if b := got["key_b"]; b.Calls != 3 || b.Errors != 1 {
		t.Errorf("key_b: %+v", b)
	}
}

// testUsageBuckets: rows sum into the buckets asked for, aligned to their length; From is
// in the range and To is not; a bucket of 0 is the whole range; an answer over its limit is
// ErrTooLarge.
func testUsageBuckets(t *testing.T, s UsageStore) {
	ws := newFixture(t, s, "u").ws.ID
	const t0 = 1_800_000_000 - 1_800_000_000%86400
	var rows []*store.UsageRow
	for m := range int64(180) { // three hours of one call a minute
		rows = append(rows, usageRow(ws, t0+m*60, "key_a", "search", 1, 0, 0))
	}
	mustOK(t, "AddUsage", s.AddUsage(ctx, rows))
	q := store.UsageQuery{WorkspaceID: ws, Span: 60, Dims: store.UsageAllDims, From: t0, To: t0 + 3*3600, Bucket: 3600}
	hours := sums(t, s, q)
	if len(hours) != 3 || hours[0].Start != t0 || hours[1].Start != t0+3600 || hours[2].Calls != 60 {
		t.Fatalf("hours: %d rows, first %+v", len(hours), hours[0])
	}
	q.From, q.To = t0+60, t0+120 // the second minute alone
	if got := sums(t, s, q); len(got) != 1 || got[0].Calls != 1 || got[0].Start != t0 {
		t.Errorf("one minute in an hour's bucket: %+v", got)
	}
	q.From, q.To, q.Bucket = t0+30*60, t0+90*60, 0
	if got := sums(t, s, q); len(got) != 1 || got[0].Calls != 60 || got[0].Start != t0+30*60 {
		t.Errorf("the whole range in one bucket: %+v", got)
	}
	q.From, q.To, q.Bucket, q.Limit = t0, t0+3*3600, 60, 100
	if _, err := s.UsageSums(ctx, &q); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("180 rows with a limit of 100: %v, want ErrTooLarge", err)
	}
}

// testUsageIsolation: a workspace never sums another's rows.
func testUsageIsolation(t *testing.T, s UsageStore) {
	a, b := newFixture(t, s, "a").ws.ID, newFixture(t, s, "b").ws.ID
	mustOK(t, "AddUsage", s.AddUsage(ctx, []*store.UsageRow{usageRow(a, 600, "key_a", "search", 5, 0, 0)}))
	if got := sums(t, s, store.UsageQuery{WorkspaceID: b, Span: 60, Dims: store.UsageAllDims, From: 0, To: 3600}); len(got) != 0 {
		t.Errorf("workspace b sees %+v", got)
	}
}

// testUsageRefused: rows and queries no store keeps or answers are ErrInvalid, and nothing is
// added.
func testUsageRefused(t *testing.T, s UsageStore) {
	ws := newFixture(t, s, "u").ws.ID
	for name, r := range map[string]*store.UsageRow{
		"no workspace":   usageRow("", 60, "k", "t", 1, 0, 0),
		"span 30":        {WorkspaceID: ws, Span: 30, Start: 60},
		"start unlinked": usageRow(ws, 61, "k", "t", 1, 0, 0),
	} {
		err := s.AddUsage(ctx, []*store.UsageRow{usageRow(ws, 0, "k", "t", 1, 0, 0), r})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if got := sums(t, s, store.UsageQuery{WorkspaceID: ws, Span: 60, Dims: store.UsageAllDims, From: 0, To: 3600}); len(got) != 0 {
		t.Errorf("a refused batch added %+v", got)
	}
	for name, q := range map[string]store.UsageQuery{
		"span":        {WorkspaceID: ws, Span: 120, To: 1},
		"bucket":      {WorkspaceID: ws, Span: 3600, Bucket: 60, To: 1},
		"range":       {WorkspaceID: ws, Span: 60, From: 2, To: 1},
		"unknown dim": {WorkspaceID: ws, Span: 60, To: 1, GroupBy: []string{"cost"}},
		"twice":       {WorkspaceID: ws, Span: 60, To: 1, GroupBy: []string{"tool", "tool"}},
	} {
		if _, err := s.UsageSums(ctx, &q); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// testUsagePurge: minute rows go at their own cutoff, the others at theirs.
func testUsagePurge(t *testing.T, s UsageStore) {
	ws := newFixture(t, s, "u").ws.ID
	hour := usageRow(ws, 3600, "k", "t", 1, 0, 0)
	hour.Span = 3600
	mustOK(t, "AddUsage", s.AddUsage(ctx, []*store.UsageRow{usageRow(ws, 60, "k", "t", 1, 0, 0), usageRow(ws, 7200, "k", "t", 1, 0, 0), hour}))
	n, err := s.PurgeUsage(ctx, time.Unix(120, 0), time.Unix(3600, 0))
	mustOK(t, "PurgeUsage", err)
	if n != 1 {
		t.Errorf("purged %d rows, want the first minute's alone", n)
	}
	n, err = s.PurgeUsage(ctx, time.Unix(120, 0), time.Unix(7200, 0))
	mustOK(t, "PurgeUsage", err)
	if n != 1 {
		t.Errorf("purged %d rows, want the hour's", n)
	}
	if got := sums(t, s, store.UsageQuery{WorkspaceID: ws, Span: 60, Dims: store.UsageAllDims, From: 0, To: 86400}); len(got) != 1 || got[0].Calls != 1 {
		t.Errorf("left: %+v", got)
	}
}

// testUsageConcurrent: writers adding to the same rows at once (several nodes flushing) lose
// nothing, and none waits for another forever.
func testUsageConcurrent(t *testing.T, s UsageStore) {
	ws := newFixture(t, s, "u").ws.ID
	const writers, adds = 6, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*adds)
	for w := range writers {
		wg.Go(func() {
			for i := range adds {
				rows := []*store.UsageRow{usageRow(ws, 0, "key_a", "search", 1, 0, 0), usageRow(ws, 60, "key_b", "refund", 1, 0, 1)}
				if (w+i)%2 == 1 {
					rows[0], rows[1] = rows[1], rows[0] // another order: the store sorts them
				}
				errs <- s.AddUsage(ctx, rows)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		mustOK(t, "AddUsage", err)
	}
	got := sums(t, s, store.UsageQuery{WorkspaceID: ws, Span: 60, Dims: store.UsageAllDims, From: 0, To: 3600})
	if len(got) != 1 || got[0].Calls != 2*writers*adds || got[0].Durations[0] != writers*adds {
		t.Errorf("after %d concurrent adds: %+v", writers*adds, got)
	}
}
