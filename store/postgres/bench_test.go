package postgres

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/storetest"
)

// benchStore opens a store in a fresh schema, skipping the benchmark without a DSN.
func benchStore(b *testing.B) *Store {
	b.Helper()
	// Benchmarks skip without a server even under CI: they are run by hand.
	if os.Getenv(pgtest.EnvDSN) == "" {
		b.Skip(pgtest.EnvDSN + " is not set")
	}
	return openTest(b)
}

// BenchmarkAppendResult appends one tool result per op, each in its own transaction, answering
// calls created beforehand.
func BenchmarkAppendResult(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b)
	const ws = "wsp_bench"
	th := &store.Thread{WorkspaceID: ws}
	if err := s.CreateThread(ctx, th); err != nil {
		b.Fatal(err)
	}
	callIDs := createCalls(b, s, ws, th.ID, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		m := &store.Message{Role: store.RoleTool, ToolCallID: callIDs[i], ToolName: "echo",
			Result: &store.ToolResult{Status: "success", Text: "done"}}
		if err := s.Append(ctx, ws, th.ID, m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "results/s")
}

// BenchmarkAppendResultParallel is BenchmarkAppendResult from GOMAXPROCS goroutines, each on
// a thread of its own: the throughput of several runs sharing the database.
func BenchmarkAppendResultParallel(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b)
	const ws = "wsp_bench"
	type work struct {
		thread string
		calls  []string
	}
	// RunParallel starts GOMAXPROCS goroutines; each takes a thread with b.N calls, more than
	// it will answer.
	workers := runtime.GOMAXPROCS(0)
	queue := make(chan work, workers)
	for range workers {
		th := &store.Thread{WorkspaceID: ws}
		if err := s.CreateThread(ctx, th); err != nil {
			b.Fatal(err)
		}
		queue <- work{th.ID, createCalls(b, s, ws, th.ID, b.N)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := <-queue
		for i := 0; pb.Next(); i++ {
			m := &store.Message{Role: store.RoleTool, ToolCallID: w.calls[i], ToolName: "echo",
				Result: &store.ToolResult{Status: "success", Text: "done"}}
			if err := s.Append(ctx, ws, w.thread, m); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "results/s")
}

// createCalls appends assistant messages asking for n calls to the thread, and returns their ids.
func createCalls(b *testing.B, s *Store, ws, threadID string, n int) []string {
	b.Helper()
	ids := make([]string, 0, n)
	for len(ids) < n {
		m := &store.Message{Role: store.RoleAssistant, Content: "calling"}
		for j := 0; j < 1000 && len(ids) < n; j++ {
			id := fmt.Sprintf("call_%d", len(ids))
			ids = append(ids, id)
			m.ToolCalls = append(m.ToolCalls, store.ToolCall{ID: id, Name: "echo", Args: []byte(`{"text":"hello"}`)})
		}
		if err := s.Append(context.Background(), ws, threadID, m); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

// BenchmarkLast100 reads the last 100 messages of a 1000-message thread (assistant messages
// with a call, each followed by its result), and reports the 50th and 99th percentile latency.
func BenchmarkLast100(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b)
	const ws = "wsp_bench"
	th := &store.Thread{WorkspaceID: ws}
	if err := s.CreateThread(ctx, th); err != nil {
		b.Fatal(err)
	}
	var batch []*store.Message
	for i := range 500 {
		id := fmt.Sprintf("call_%d", i)
		batch = append(batch,
			&store.Message{Role: store.RoleAssistant, Content: "Let me look that up.",
				ToolCalls: []store.ToolCall{{ID: id, Name: "get_forecast", Args: []byte(`{"city":"Paris","days":3}`)}}},
			&store.Message{Role: store.RoleTool, ToolCallID: id, ToolName: "get_forecast",
				Result: &store.ToolResult{Status: "success", Text: "Sunny, 24°C, light wind from the west.", Value: []byte(`{"temp":24,"sky":"sunny"}`)}})
	}
	if err := s.Append(ctx, ws, th.ID, batch...); err != nil {
		b.Fatal(err)
	}
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		msgs, err := s.Messages(ctx, ws, th.ID, store.Page{Limit: 100})
		durations = append(durations, time.Since(start))
		if err != nil || len(msgs) != 100 {
			b.Fatalf("got %d messages, %v", len(msgs), err)
		}
	}
	b.StopTimer()
	slices.Sort(durations)
	pct := func(p float64) float64 {
		return float64(durations[int(p*float64(len(durations)-1))].Microseconds())
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// BenchmarkShared measures the parts of the store whose SQL is store/sqlstore's (see
// storetest.Bench).
func BenchmarkShared(b *testing.B) { storetest.Bench(b, benchStore(b)) }
