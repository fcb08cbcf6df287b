package journal_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/journal"
	"github.com/quiverhq/quiver/store/sqlite"
)

// BenchmarkAppend appends one MCP call record (the call and its result) per op, as the server's
// recorder does, and ends once the writer has stored them all in SQLite, so that ns/op counts
// the writer's work too. p50-µs is the latency of Append alone: what a caller waits for.
// BenchmarkAppendDirect is the same record stored with sqlite.Store.Append, one transaction
// per record, for comparison.
//
//	go test -run '^$' -bench Append -benchtime 20000x ./store/journal/
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			st, th := benchStore(b)
			j, err := journal.Open(ctx, filepath.Join(b.TempDir(), "journal"), st, &journal.Options{Sync: sync, Logger: quiet()})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			benchRecords(b, func(msgs []*store.Message) error { return j.Append(ctx, ws, th, msgs...) },
				func() error { return j.Flush(ctx) })
		})
	}
}

func BenchmarkAppendDirect(b *testing.B) {
	st, th := benchStore(b)
	benchRecords(b, func(msgs []*store.Message) error { return st.Append(ctx, ws, th, msgs...) }, nil)
}

func benchStore(b *testing.B) (*sqlite.Store, string) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	th := &store.Thread{WorkspaceID: ws}
	if err := st.CreateThread(ctx, th); err != nil {
		b.Fatal(err)
	}
	return st, th.ID
}

func benchRecords(b *testing.B, add func([]*store.Message) error, finish func() error) {
	recs := make([][]*store.Message, b.N)
	for i := range recs {
		recs[i] = record(fmt.Sprintf("call_%07d", i))
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if err := add(recs[i]); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	if finish != nil {
		if err := finish(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}
