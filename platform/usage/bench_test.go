package usage_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quiverhq/quiver/platform/usage"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/sqlite"
)

// benchStore is a store with a workspace for the usage benchmarks.
type benchStore interface {
	store.Usage
	store.Entities
}

// monthOfCalls meters n calls spread evenly over the 30 days before end, through a Meter
// writing once a simulated day (a node writes every few seconds; a day at a time keeps the
// load to a few minutes, each write a commit), and then purges the minute
// rows past 48 hours as the retention purge does: what a month of a busy workspace leaves.
// Its callers: 50 keys (each its user's), 10 agents (half the calls at a door, with none), 40
// tools, and a model request for every tenth call, of one of 5 models.
func monthOfCalls(b *testing.B, s benchStore, ws string, n int, end time.Time) {
	b.Helper()
	ctx := context.Background()
	now := end.Add(-30 * 24 * time.Hour)
	step := 30 * 24 * time.Hour / time.Duration(n)
	m := &usage.Meter{Store: s, MaxRows: 10 * n, Now: func() time.Time { return now }}
	r := rand.New(rand.NewPCG(1, 2))
	lastFlush := now
	for i := range n {
		k := r.IntN(50)
		d := usage.Dims{Key: fmt.Sprintf("key_%02d", k), User: fmt.Sprintf("usr_%02d", k), Tool: fmt.Sprintf("tool_%02d", r.IntN(40))}
		if r.IntN(2) == 0 {
			d.Agent = fmt.Sprintf("agent_%d", r.IntN(10))
		}
		outcome := usage.OK
		if r.IntN(50) == 0 {
			outcome = usage.Error
		}
		m.Call(ws, d, outcome, time.Duration(r.ExpFloat64()*float64(20*time.Millisecond)))
		if i%10 == 0 {
			d.Tool, d.Model = "", fmt.Sprintf("openai:model-%d", r.IntN(5))
			m.Request(ws, d, int64(500+r.IntN(3000)), int64(50+r.IntN(500)), int64(r.IntN(20000)))
		}
		now = now.Add(step)
		if now.Sub(lastFlush) >= 24*time.Hour {
			if err := m.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			lastFlush = now
		}
	}
	if err := m.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := s.PurgeUsage(ctx, end.Add(-store.UsageMinuteRetention), end.Add(-400*24*time.Hour)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkUsageQuery answers GET /v1/usage's questions over 30 days of a million calls, on
// each backend: the console's charts (calls by hour, top tools and callers, tokens and cost by
// agent and model) and a question two dimensions deep. Set QUIVER_BENCH_USAGE_CALLS to meter
// fewer calls (the load takes a while on PostgreSQL).
func BenchmarkUsageQuery(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("QUIVER_BENCH_USAGE_CALLS"); v != "" {
		fmt.Sscan(v, &n)
	}
	end := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	backends := []struct {
		name string
		open func(b *testing.B) benchStore
	}{
		{"sqlite", func(b *testing.B) benchStore {
			s, err := sqlite.Open(filepath.Join(b.TempDir(), "q.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
		{"postgres", func(b *testing.B) benchStore {
			dsn := pgtest.DSN(b)
			s, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(pgtest.Schema(b, dsn)))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
	}
	queries := []struct {
		name string
		q    usage.Query
	}{
		{"calls_by_hour", usage.Query{From: end.Add(-30 * 24 * time.Hour), To: end, Bucket: usage.BucketHour}},
		{"by_day_and_tool", usage.Query{From: end.Add(-30 * 24 * time.Hour), To: end, Bucket: usage.BucketDay, GroupBy: []string{store.UsageTool}}},
		{"top_keys", usage.Query{From: end.Add(-30 * 24 * time.Hour), To: end, Bucket: usage.BucketAll, GroupBy: []string{store.UsageKey}}},
		{"tokens_by_model", usage.Query{From: end.Add(-30 * 24 * time.Hour), To: end, Bucket: usage.BucketDay, GroupBy: []string{store.UsageModel}}},
		{"last_hour_by_minute", usage.Query{From: end.Add(-time.Hour), To: end, Bucket: usage.BucketMinute}},
		{"top_callers_30d", usage.Query{From: end.Add(-30 * 24 * time.Hour), To: end, Bucket: usage.BucketAll, GroupBy: []string{store.UsageKey, store.UsageUser}}},
		{"top_callers_24h", usage.Query{From: end.Add(-24*time.Hour - 30*time.Minute), To: end.Add(-30 * time.Minute), Bucket: usage.BucketAll, GroupBy: []string{store.UsageKey, store.UsageUser}}},
		{"by_day_key_and_tool", usage.Query{From: end.Add(-30 * 24 * time.Hour), To: end, Bucket: usage.BucketDay, GroupBy: []string{store.UsageKey, store.UsageTool}}},
		{"last_day_key_tool_agent", usage.Query{From: end.Add(-24 * time.Hour), To: end, Bucket: usage.BucketAll, GroupBy: []string{store.UsageKey, store.UsageTool, store.UsageAgent}}},
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			ws := &store.Workspace{Name: "bench"}
			if err := s.CreateWorkspace(context.Background(), ws); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			monthOfCalls(b, s, ws.ID, n, end)
			b.Logf("metered %d calls over 30 days in %v", n, time.Since(start).Round(time.Millisecond))
			for _, qq := range queries {
				b.Run(qq.name, func(b *testing.B) {
					q := qq.q
					q.WorkspaceID = ws.ID
					var rows int
					for b.Loop() {
						a, err := usage.Read(context.Background(), s, q, end)
						if err != nil {
							b.Fatal(err)
						}
						rows = len(a.Rows)
					}
					b.ReportMetric(float64(rows), "rows")
				})
				// The baseline: the same sums read from the finest rows alone (every dimension,
				// by the hour; by the minute for minutes), what a store without the rollups
				// would read.
				b.Run(qq.name+"/finest_rows", func(b *testing.B) {
					sq := finest(ws.ID, qq.q)
					var rows int
					for b.Loop() {
						got, err := s.UsageSums(context.Background(), sq)
						if err != nil {
							b.Fatal(err)
						}
						rows = len(got)
					}
					b.ReportMetric(float64(rows), "rows")
				})
			}
		})
	}
}

// finest is q as a store query of the rows of every dimension by the hour (by the minute for
// minutes).
func finest(ws string, q usage.Query) *store.UsageQuery {
	span, bucket := int64(3600), map[string]int64{usage.BucketMinute: 60, usage.BucketHour: 3600, usage.BucketDay: 86400, usage.BucketAll: 0}[q.Bucket]
	if bucket == 60 {
		span = 60
	}
	from := q.From.Unix() / span * span
	to := (q.To.Unix() + span - 1) / span * span
	return &store.UsageQuery{WorkspaceID: ws, Span: span, Dims: store.UsageAllDims, From: from, To: to, Bucket: bucket, GroupBy: q.GroupBy}
}
