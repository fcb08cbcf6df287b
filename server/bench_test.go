package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store/sqlite"
)

type benchEchoArgs struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

// BenchmarkMCPToolsCall measures tools/call round trips over loopback streamable HTTP for a
// trivial tool, through a bare go-sdk server and through Quiver's whole pipeline (policy,
// validation, dispatcher, recording each call in SQLite), in one run. Run it a few times in a
// row rather than with -count (which runs each server N times in a row, so that a machine's
// drift over minutes favours one):
//
//	go test -c -o /tmp/server.test ./server/
//	for i in 1 2 3 4 5 6; do /tmp/server.test -test.run '^$' -test.bench MCPToolsCall -test.benchtime 5000x; done
//
// Besides ns/op and allocs/op (client and server together: they share the process) it reports
// calls/s and the p50 and p99 latency of one round trip. Quiver runs twice: with the journal
// (quiver serve's default on SQLite) and storing each record before answering.
func BenchmarkMCPToolsCall(b *testing.B) {
	b.Run("bare-go-sdk", func(b *testing.B) {
		srv := sdk.NewServer(&sdk.Implementation{Name: "bare", Version: "1"}, nil)
		sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echoes its text."},
			func(_ context.Context, _ *sdk.CallToolRequest, a benchEchoArgs) (*sdk.CallToolResult, any, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: a.Text}}}, nil, nil
			})
		ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
		defer ts.Close()
		benchCalls(b, ts.URL, nil)
	})
	// quiver serve's default with SQLite: each call's record written to the journal before the
	// answer, stored in SQLite in batches by the journal's writer.
	b.Run("quiver-journal", func(b *testing.B) { benchQuiver(b, true) })
	// Each call's record stored in SQLite, in its own transaction, before the answer.
	b.Run("quiver-direct", func(b *testing.B) { benchQuiver(b, false) })
}

func benchQuiver(b *testing.B, journaled bool) {
	dir := b.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	reg := &quiver.Registry{}
	reg.Register(quiver.Func("echo", "Echoes its text.", func(_ context.Context, a echoArgs) (string, error) { return a.Text, nil }))
	cfg := server.Config{Store: st, Registry: reg, Logger: slog.New(slog.DiscardHandler)}
	if journaled {
		cfg.JournalDir = filepath.Join(dir, "journal")
	}
	srv, err := server.New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	// The run ends once every record is in the store, so that all of the journal writer's work
	// is counted.
	benchCalls(b, ts.URL+"/mcp", func() {
		if err := srv.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
	})
}

// benchCalls makes b.N calls in sequence and reports their rate and latency; finish, when not
// nil, runs at the end of the timed run.
func benchCalls(b *testing.B, url string, finish func()) {
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}
	for range 50 { // warm up connections and caches
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, params)
		lat = append(lat, time.Since(t0))
		if err != nil || res.IsError {
			b.Fatalf("call: %v %v", err, res)
		}
	}
	if finish != nil {
		finish()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
