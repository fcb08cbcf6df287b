package sqlite_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/store/storetest"
)

const benchWS = "wsp_bench"

// benchThread creates a thread holding n assistant messages of one call each (call_0...),
// appended in batches, and returns it.
func benchThread(b testing.TB, s *sqlite.Store, n int) *store.Thread {
	b.Helper()
	th := &store.Thread{WorkspaceID: benchWS, AgentID: "agt_bench", UserID: "usr_bench"}
	if err := s.CreateThread(ctx, th); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; {
		var batch []*store.Message
		for ; i < n && len(batch) < 1000; i++ {
			batch = append(batch, benchCall(i))
		}
		if err := s.Append(ctx, benchWS, th.ID, batch...); err != nil {
			b.Fatal(err)
		}
	}
	return th
}

func benchCall(i int) *store.Message {
	id := fmt.Sprintf("call_%d", i)
	return &store.Message{Role: store.RoleAssistant, Content: "Let me look that up.",
		ToolCalls: []store.ToolCall{{ID: id, Name: "get_forecast", Args: json.RawMessage(`{"city":"Paris","days":3}`)}}}
}

func benchResult(i int) *store.Message {
	return &store.Message{Role: store.RoleTool, ToolCallID: fmt.Sprintf("call_%d", i), ToolName: "get_forecast",
		Result: &store.ToolResult{Status: "success", Text: "Paris: 18°C, light rain on Tuesday, then sunny spells; wind 12 km/h from the south-west.",
			Value: json.RawMessage(`{"city":"Paris","days":[{"t":18,"sky":"rain"},{"t":21,"sky":"sun"},{"t":22,"sky":"sun"}]}`)}}
}

// benchAppendResult appends one tool result per op, each in its own transaction, to calls
// asked for beforehand (outside the timer).
func benchAppendResult(b *testing.B, sync string) {
	s, _ := openTemp(b, sqlite.Options{Synchronous: sync})
	th := benchThread(b, s, b.N)
	results := make([]*store.Message, b.N)
	for i := range results {
		results[i] = benchResult(i)
	}
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := s.Append(ctx, benchWS, th.ID, results[i]); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "results/s")
	reportP50(b, lat)
}

// reportP50 reports the median of one op's latencies, the figure a loop step (which appends
// several rows) is compared with (agent BenchmarkLoopStep).
func reportP50(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	}
}

// BenchmarkAppendResult appends tool results one per transaction, in WAL mode with
// synchronous=NORMAL (the default).
func BenchmarkAppendResult(b *testing.B) { benchAppendResult(b, "NORMAL") }

// BenchmarkAppendResultFull is BenchmarkAppendResult with synchronous=FULL: an fsync per commit.
func BenchmarkAppendResultFull(b *testing.B) { benchAppendResult(b, "FULL") }

// BenchmarkAppendResultParallel appends results from several goroutines at once, each to its
// own thread: the writes queue for the one writer connection.
func BenchmarkAppendResultParallel(b *testing.B) {
	s, _ := openTemp(b)
	const goroutines = 8
	per := b.N/goroutines + 1
	var threads []*store.Thread
	for range goroutines {
		threads = append(threads, benchThread(b, s, per))
	}
	b.ReportAllocs()
	b.ResetTimer()
	done := make(chan error, goroutines)
	for g, th := range threads {
		go func() {
			n := b.N / goroutines
			if g < b.N%goroutines {
				n++
			}
			for i := range n {
				if err := s.Append(ctx, benchWS, th.ID, benchResult(i)); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range goroutines {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "results/s")
}

// BenchmarkRawSQLiteInsert is the baseline: single-row INSERT transactions on a plain
// modernc.org/sqlite database with the store's settings (WAL, synchronous=NORMAL, foreign keys,
// BEGIN IMMEDIATE, one connection, a prepared statement), rows the size of a stored result.
func BenchmarkRawSQLiteInsert(b *testing.B) {
	benchRawInsert(b, []string{`CREATE TABLE rows (id INTEGER PRIMARY KEY, thread_id TEXT NOT NULL, body TEXT NOT NULL)`},
		`INSERT INTO rows (thread_id, body) VALUES (?, ?)`, func(_ int, _, body string) []any { return []any{"thr_bench", body} })
}

// BenchmarkRawSQLiteInsertIndexed is BenchmarkRawSQLiteInsert into a table keyed and indexed as
// the messages table is (a text id, unique; a unique thread and seq; a unique result per call),
// the rows given ids as the store gives them: the least one append can cost while the database
// keeps those guarantees, each index a page more to write to the log at every commit.
func BenchmarkRawSQLiteInsertIndexed(b *testing.B) {
	benchRawInsert(b, []string{
		`CREATE TABLE rows (id TEXT NOT NULL PRIMARY KEY, thread_id TEXT NOT NULL, seq INTEGER NOT NULL, call_id TEXT, body TEXT NOT NULL,
			UNIQUE (thread_id, seq))`,
		`CREATE UNIQUE INDEX rows_one_result ON rows (thread_id, call_id) WHERE call_id IS NOT NULL`,
	}, `INSERT INTO rows (id, thread_id, seq, call_id, body) VALUES (?, ?, ?, ?, ?)`, func(i int, id, body string) []any {
		return []any{id, "thr_bench", i + 1, "call_" + strconv.Itoa(i), body}
	})
}

// rawBody is the body of a raw insert's row, the size of a stored result.
var rawBody = strings.Repeat("x", 250)

// benchRawInsert inserts one row per transaction with insert, its parameters args(the row's
// index, a new message id, the body), on a database created by schema.
func benchRawInsert(b *testing.B, schema []string, insert string, args func(i int, id, body string) []any) {
	path := filepath.Join(b.TempDir(), "raw.db")
	db, err := sql.Open("sqlite", "file:"+path+"?"+url.Values{
		"_pragma": {"busy_timeout(5000)", "foreign_keys(1)", "journal_mode(WAL)", "synchronous(NORMAL)"},
		"_txlock": {"immediate"},
	}.Encode())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, stmt := range schema {
		if _, err := db.Exec(stmt); err != nil {
			b.Fatal(err)
		}
	}
	ins, err := db.Prepare(insert)
	if err != nil {
		b.Fatal(err)
	}
	defer ins.Close()
	rows := make([][]any, b.N)
	for i := range rows {
		rows[i] = args(i, store.NewID(store.PrefixMessage), rawBody)
	}
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Stmt(ins).Exec(rows[i]...); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	reportP50(b, lat)
}

// BenchmarkLast100 reads the last 100 messages of a thread of 1000 (500 calls and their
// results) and reports the median and 99th percentile latencies.
func BenchmarkLast100(b *testing.B) {
	s, _ := openTemp(b)
	th := &store.Thread{WorkspaceID: benchWS}
	if err := s.CreateThread(ctx, th); err != nil {
		b.Fatal(err)
	}
	var batch []*store.Message
	for i := range 500 {
		batch = append(batch, benchCall(i), benchResult(i))
	}
	if err := s.Append(ctx, benchWS, th.ID, batch...); err != nil {
		b.Fatal(err)
	}
	took := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		msgs, err := s.Messages(ctx, benchWS, th.ID, store.Page{Limit: 100})
		took = append(took, time.Since(t0))
		if err != nil || len(msgs) != 100 {
			b.Fatalf("%d messages, %v", len(msgs), err)
		}
	}
	b.StopTimer()
	slices.Sort(took)
	pct := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))]) / 1e3 }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// BenchmarkShared measures the parts of the store whose SQL is store/sqlstore's (see
// storetest.Bench).
func BenchmarkShared(b *testing.B) {
	s, _ := openTemp(b)
	storetest.Bench(b, s)
}

// BenchmarkAppendCallRecord appends what records a call served at a door (the MCP server's and
// the API's, through the journal): the assistant message asking for the call and the tool
// message with its result, both in one transaction, one record per transaction as the journal
// stores them under one client.
func BenchmarkAppendCallRecord(b *testing.B) {
	s, _ := openTemp(b)
	th := &store.Thread{WorkspaceID: benchWS, AgentID: "agt_bench", UserID: "usr_bench"}
	if err := s.CreateThread(ctx, th); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	lat := make([]time.Duration, 0, b.N)
	i := 0
	for b.Loop() {
		start := time.Now()
		if err := s.Append(ctx, benchWS, th.ID, benchCall(i), benchResult(i)); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		i++
	}
	b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "records/s")
	reportP50(b, lat)
}
