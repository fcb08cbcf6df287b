package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
)

// BenchmarkFleetCalls measures calls over the API (POST /v1/tools/echo/call, each goroutine on
// a thread of its own) against 1, 2 and 3 nodes on one PostgreSQL schema, the calls spread
// round-robin over the nodes from benchParallelism x GOMAXPROCS goroutines, as a load balancer
// without stickiness would. Each op is one call. It reports calls/s and what each call costs
// the database: writes/call (write transactions, from the growth of the transaction ids) and
// the connections the nodes hold at the end (conns). Nodes, clients and PostgreSQL share the
// machine's cores: what scales and what does not is the point, not the absolute figures.
//
// With limits=true the workspace has limits that every call counts against and none reaches
// (each key 600,000 calls a minute, the workspace 10,000 a second): what counting costs, in
// writes and calls/s, beside limits=false.
func BenchmarkFleetCalls(b *testing.B) {
	dsn := pgtest.DSN(b)
	for _, limited := range []bool{false, true} {
		for _, n := range []int{1, 2, 3} {
			b.Run(fmt.Sprintf("limits=%v/nodes=%d", limited, n), func(b *testing.B) { benchFleetCalls(b, dsn, n, limited) })
		}
	}
}

// limitsNoneReach are limits every call counts against and none reaches.
const limitsNoneReach = `{"limits":[{"name":"each-key","per":["key"],"calls":{"per_minute":600000}},{"name":"workspace","calls":{"per_second":10000}}]}`

func benchFleetCalls(b *testing.B, dsn string, n int, limited bool) {
	nodes, nextXact := fleet(b, dsn, n, false)
	ctx := context.Background()
	if limited {
		lim := &store.WorkspaceLimits{WorkspaceID: nodes[0].ws, Document: json.RawMessage(limitsNoneReach)}
		if err := nodes[0].st.(store.Backend).PutWorkspaceLimits(ctx, lim, 0); err != nil {
			b.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond) // every node follows within a recheck
	}
	call := func(bs *benchServer, thread string) (string, error) {
		in := `{"args":{"text":"hi"}}`
		if thread != "" {
			in = `{"args":{"text":"hi"},"thread_id":"` + thread + `"}`
		}
		status, out, err := bs.do(ctx, "POST", "/v1/tools/echo/call", in)
		var res struct {
			ThreadID string `json:"thread_id"`
			Result   struct{ Status string }
		}
		if err != nil || status != http.StatusOK || json.Unmarshal(out, &res) != nil || res.Result.Status != "success" {
			return "", fmt.Errorf("API call: %d %s (%v)", status, out, err)
		}
		return res.ThreadID, nil
	}
	var next atomic.Int64
	before := nextXact()
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		thread := ""
		for pb.Next() {
			bs := nodes[next.Add(1)%int64(n)]
			t, err := call(bs, thread)
			if err != nil {
				b.Error(err)
				return
			}
			thread = t
		}
	})
	b.StopTimer()
	// Every database of the server shares the counter: run this benchmark alone.
	b.ReportMetric(float64(nextXact()-before)/float64(b.N), "writes/call")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	b.ReportMetric(float64(connections(b, dsn)-1), "conns") // but fleet's own, reading transaction ids
}

// BenchmarkFleetRuns measures runs of a one-step scripted agent started over the API against 1,
// 2 and 3 nodes on one PostgreSQL schema (each node running runs, River's default of 4 at a
// time), from benchParallelism x GOMAXPROCS goroutines spread round-robin over the nodes, each
// waiting for its run's end (the thread idle again, polled every 5 ms). Each op is one run,
// from its thread's creation to its end. It reports runs/s and writes/run.
func BenchmarkFleetRuns(b *testing.B) {
	dsn := pgtest.DSN(b)
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			nodes, nextXact := fleet(b, dsn, n, true)
			ctx := context.Background()
			var next atomic.Int64
			before := nextXact()
			b.SetParallelism(benchParallelism)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := runToEnd(ctx, nodes[next.Add(1)%int64(n)]); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(nextXact()-before)/float64(b.N), "writes/run")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
		})
	}
}

// fleet starts n nodes on a new schema of dsn's database, all taking the first node's key, and
// returns them with a reading of the next transaction id: its growth, without taking one, is
// the write transactions (each a commit the disk waits for) made meanwhile.
func fleet(b *testing.B, dsn string, n int, runs bool) ([]*benchServer, func() int64) {
	b.Helper()
	schema := pgtest.Schema(b, dsn)
	nodes := make([]*benchServer, n)
	for i := range nodes {
		nodes[i] = postgresNode(b, dsn, schema, runs)
		nodes[i].key = nodes[0].key
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	return nodes, func() int64 {
		var x int64
		if err := conn.QueryRow(context.Background(), `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&x); err != nil {
			b.Fatal(err)
		}
		return x
	}
}

// connections counts the connections to dsn's database but the one counting.
func connections(b *testing.B, dsn string) int {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// runToEnd makes a thread on bs, starts the bench agent's run on it and waits for the thread to
// be idle with the run finished.
func runToEnd(ctx context.Context, bs *benchServer) error {
	status, out, err := bs.do(ctx, "POST", "/v1/threads", `{"agent":"`+benchAgent+`"}`)
	var th struct{ ID string }
	if err != nil || status != http.StatusCreated || json.Unmarshal(out, &th) != nil {
		return fmt.Errorf("a thread: %d %s %v", status, out, err)
	}
	if status, out, err := bs.do(ctx, "POST", "/v1/threads/"+th.ID+"/runs", `{"agent":"`+benchAgent+`","message":"Hi"}`); err != nil || status != http.StatusAccepted {
		return fmt.Errorf("starting the run: %d %s %v", status, out, err)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		status, out, err := bs.do(ctx, "GET", "/v1/threads/"+th.ID, "")
		var v struct {
			Status string
			State  struct{ Status string }
		}
		if err != nil || status != http.StatusOK || json.Unmarshal(out, &v) != nil {
			return fmt.Errorf("reading the thread: %d %s %v", status, out, err)
		}
		if v.Status == "idle" && v.State.Status == "finished" {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("thread %s: the run did not end within a minute", th.ID)
}
