package usage_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver/platform/usage"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

var ctx = context.Background()

// open returns a SQLite store with a workspace, and the workspace's id.
func open(t *testing.T) (*sqlite.Store, string) {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ws := &store.Workspace{Name: "u"}
	if err := s.CreateWorkspace(ctx, ws); err != nil {
		t.Fatal(err)
	}
	return s, ws.ID
}

// clock is a settable clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestMeterCountsWhatQueriesRead(t *testing.T) {
	s, ws := open(t)
	c := &clock{time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)}
	m := &usage.Meter{Store: s, Now: c.now}
	for i := range 30 { // 30 calls over 3 hours of day one, of two tools by two keys
		tool, key := []string{"search", "refund"}[i%2], []string{"key_a", "key_b"}[i%3%2]
		outcome := usage.OK
		if i%5 == 0 {
			outcome = usage.Error
		}
		if i%10 == 1 {
			outcome = usage.Refused
		}
		m.Call(ws, usage.Dims{Key: key, User: "usr_1", Tool: tool}, outcome, time.Duration(i+1)*time.Millisecond)
		c.t = c.t.Add(6 * time.Minute)
	}
	c.t = c.t.Add(-time.Hour)
	m.Request(ws, usage.Dims{Key: "key_a", Agent: "helper", Model: "openai:gpt"}, 1200, 300, 4_500_000)
	c.t = c.t.Add(25 * time.Hour) // a call the next day
	m.Call(ws, usage.Dims{Key: "key_a", Tool: "search"}, usage.OK, time.Millisecond)
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	day1 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		q     usage.Query
		rows  int
		check func(t *testing.T, a *usage.Answer)
	}{
		{"hours", usage.Query{From: day1.Add(10 * time.Hour), To: day1.Add(13 * time.Hour)}, 3, func(t *testing.T, a *usage.Answer) {
			if a.Totals.Calls != 30 || a.Totals.Errors != 6 || a.Totals.Refusals != 3 || a.Totals.Requests != 1 || a.Totals.InputTokens != 1200 {
				t.Errorf("totals %+v", a.Totals)
			}
			if a.Rows[0].Calls != 10 || !a.Rows[0].Start.Equal(day1.Add(10*time.Hour)) {
				t.Errorf("first hour %+v", a.Rows[0])
			}
			if p := a.Totals.P50; p < 10*time.Millisecond || p > 22*time.Millisecond {
				t.Errorf("p50 of 1..30 ms: %v", p)
			}
		}},
		{"by tool over two days", usage.Query{From: day1, To: day1.Add(48 * time.Hour), Bucket: usage.BucketAll, GroupBy: []string{store.UsageTool}}, 3, func(t *testing.T, a *usage.Answer) {
			if a.Rows[0].Tool != "search" || a.Rows[0].Calls != 16 || a.Rows[1].Tool != "refund" || a.Rows[1].Calls != 15 {
				t.Errorf("rows %+v", a.Rows)
			}
			if a.Rows[2].Tool != "" || a.Rows[2].Requests != 1 || a.Rows[2].Cost != 4.5 {
				t.Errorf("the model's row %+v", a.Rows[2])
			}
		}},
		{"by day and key and tool", usage.Query{From: day1, To: day1.Add(48 * time.Hour), Bucket: usage.BucketDay, GroupBy: []string{store.UsageKey, store.UsageTool}}, 6, func(t *testing.T, a *usage.Answer) {
			last := a.Rows[len(a.Rows)-1]
			if !last.Start.Equal(day1.Add(24*time.Hour)) || last.Key != "key_a" || last.Tool != "search" || last.Calls != 1 {
				t.Errorf("day two %+v", last)
			}
		}},
		{"by agent, range moved out to the hour", usage.Query{From: day1.Add(10*time.Hour + 5*time.Minute), To: day1.Add(15*time.Hour + time.Second), Bucket: usage.BucketAll, GroupBy: []string{store.UsageAgent}}, 2, func(t *testing.T, a *usage.Answer) {
			if !a.From.Equal(day1.Add(10*time.Hour)) || !a.To.Equal(day1.Add(16*time.Hour)) {
				t.Errorf("range %v to %v", a.From, a.To)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.q.WorkspaceID = ws
			a, err := usage.Read(ctx, s, tt.q, c.t)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Rows) != tt.rows {
				t.Fatalf("%d rows, want %d: %+v", len(a.Rows), tt.rows, a.Rows)
			}
			tt.check(t, a)
		})
	}
}

func TestQueriesRefused(t *testing.T) {
	s, ws := open(t)
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name, field string
		q           usage.Query
	}{
		{"bucket", "bucket", usage.Query{Bucket: "week", From: now.Add(-time.Hour), To: now}},
		{"group", "group_by", usage.Query{GroupBy: []string{"cost"}, From: now.Add(-time.Hour), To: now}},
		{"twice", "group_by", usage.Query{GroupBy: []string{"tool", "tool"}, From: now.Add(-time.Hour), To: now}},
		{"backwards", "from", usage.Query{From: now, To: now.Add(-time.Hour)}},
		{"too long", "to", usage.Query{From: now.Add(-usage.MaxRange - time.Hour), To: now}},
		{"minutes too far back", "from", usage.Query{Bucket: usage.BucketMinute, From: now.Add(-72 * time.Hour), To: now}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.q.WorkspaceID = ws
			_, err := usage.Read(ctx, s, tt.q, now)
			var qe *usage.QueryError
			if !errors.As(err, &qe) || qe.Field != tt.field {
				t.Fatalf("%v, want a QueryError on %s", err, tt.field)
			}
		})
	}
}

// TestMeterBoundsItsRows: past MaxRows distinct combinations between writes, new ones are
// counted as Other, so a caller inventing tool names cannot grow the meter without bound.
func TestMeterBoundsItsRows(t *testing.T) {
	s, ws := open(t)
	now := time.Date(2026, 11, 2, 10, 0, 30, 0, time.UTC)
	m := &usage.Meter{Store: s, MaxRows: 10, Now: func() time.Time { return now }}
	for i := range 100 {
		m.Call(ws, usage.Dims{Tool: string(rune('a'+i%26)) + string(rune('a'+i/26))}, usage.OK, time.Millisecond)
	}
	if err := m.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := usage.Read(ctx, s, usage.Query{WorkspaceID: ws, From: now.Add(-time.Hour), To: now, Bucket: usage.BucketAll, GroupBy: []string{store.UsageTool}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Rows) != 11 || a.Rows[0].Tool != usage.Other || a.Rows[0].Calls != 90 || a.Totals.Calls != 100 {
		t.Fatalf("%d rows, first %+v, totals %+v", len(a.Rows), a.Rows[0], a.Totals)
	}
}

// failing is a store whose writes fail until it is told otherwise.
type failing struct {
	store.Usage
	fail bool
}

func (f *failing) AddUsage(ctx context.Context, rows []*store.UsageRow) error {
	if f.fail {
		return errors.New("the database is down")
	}
	return f.Usage.AddUsage(ctx, rows)
}

// TestMeterKeepsWhatItCannotWrite: counts a failed write did not store are written by the next.
func TestMeterKeepsWhatItCannotWrite(t *testing.T) {
	s, ws := open(t)
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	f := &failing{Usage: s, fail: true}
	m := &usage.Meter{Store: f, Now: func() time.Time { return now }}
	m.Call(ws, usage.Dims{Tool: "search"}, usage.OK, time.Millisecond)
	if err := m.Flush(ctx); err == nil {
		t.Fatal("a failed write reported no error")
	}
	m.Call(ws, usage.Dims{Tool: "search"}, usage.OK, time.Millisecond)
	f.fail = false
	if err := m.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := usage.Read(ctx, s, usage.Query{WorkspaceID: ws, From: now, To: now.Add(time.Hour)}, now)
	if err != nil || a.Totals.Calls != 2 {
		t.Fatalf("%+v %v, want both calls", a, err)
	}
}

func TestPercentile(t *testing.T) {
	var h [store.UsageDurationBuckets]int64
	if p := usage.Percentile(&h, 0.5); p != 0 {
		t.Errorf("empty: %v", p)
	}
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 100 * time.Millisecond, time.Minute} {
		h = [store.UsageDurationBuckets]int64{}
		for range 100 {
			h[store.UsageBucket(d)]++
		}
		p := usage.Percentile(&h, 0.95)
		if d <= store.UsageBucketBound(store.UsageDurationBuckets-2) && (float64(p) < float64(d)/1.5 || float64(p) > float64(d)*1.5) {
			t.Errorf("p95 of calls of %v: %v", d, p)
		}
		if d == time.Minute && p != store.UsageBucketBound(store.UsageDurationBuckets-2) {
			t.Errorf("calls over the last bound read as %v", p)
		}
	}
}

// tooLarge is a store whose every answer is over its bound.
type tooLarge struct{ store.Usage }

func (tooLarge) UsageSums(context.Context, *store.UsageQuery) ([]*store.UsageRow, error) {
	return nil, fmt.Errorf("usage sums: more than %d rows: %w", store.MaxUsageRows, store.ErrTooLarge)
}

// TestAnswerTooLarge: an answer over the store's bound is the caller's to narrow, said as such.
func TestAnswerTooLarge(t *testing.T) {
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	_, err := usage.Read(ctx, tooLarge{}, usage.Query{WorkspaceID: "wsp_1", From: now.Add(-time.Hour), To: now}, now)
	var qe *usage.QueryError
	if !errors.As(err, &qe) || qe.Field != "bucket" || !strings.Contains(qe.Message, "100000 rows") {
		t.Fatalf("%v, want a QueryError on bucket", err)
	}
}
