package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/store/vars"
)

// BenchmarkHTTP measures tools/call of get_forecast over MCP streamable HTTP on loopback: a bare
// go-sdk server, an mcp-go server (input validation on) and `quiver serve`'s handler (the
// whole pipeline: policy, variables, validation, dispatch, masking, and each call recorded in
// SQLite through the journal, as quiver serve does by default), each with one client making
// calls in sequence ("seq") and with 16 clients at once ("c16", each its own session). Each
// op is one call; besides ns/op it reports calls/s and the p50 and p99 of one round trip.
//
// The servers run in the order above within one run; run the binary a few times in a row
// (bench/run does) rather than with -count, so that a machine's drift over minutes does not
// favour one. Allocations count client and server together: they share the process.
func BenchmarkHTTP(b *testing.B) {
	servers := []struct {
		name  string
		start func(testing.TB) (url string, finish func())
	}{
		{"bare-go-sdk", startBareGoSDK},
		{"mcp-go", startMCPGo},
		{"quiver", startQuiver},
	}
	for _, s := range servers {
		for _, clients := range []int{1, 16} {
			name := s.name + "/seq"
			if clients > 1 {
				name = fmt.Sprintf("%s/c%d", s.name, clients)
			}
			b.Run(name, func(b *testing.B) {
				url, finish := s.start(b)
				benchHTTPCalls(b, url, clients, finish)
			})
		}
	}
}

func startBareGoSDK(tb testing.TB) (string, func()) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: toolName, Description: toolDesc, InputSchema: mcpInputSchema(tb)},
		func(_ context.Context, _ *mcp.CallToolRequest, in MCPArgs) (*mcp.CallToolResult, Forecast, error) {
			return nil, forecastFor(in.City, in.Days), nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	tb.Cleanup(ts.Close)
	return ts.URL, nil
}

func startMCPGo(tb testing.TB) (string, func()) {
	ts := httptest.NewServer(mcpgoserver.NewStreamableHTTPServer(newMCPGoServer()))
	tb.Cleanup(ts.Close)
	return ts.URL + "/mcp", nil
}

// startQuiver builds the server the way quiver serve does on SQLite: the platform (the store,
// its variables resolver, the journal) and the HTTP server over it. The run ends once every record is in SQLite (finish), so that all of
// the journal writer's work is counted.
func startQuiver(tb testing.TB) (string, func()) {
	dir := tb.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "quiver.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	keys, err := vars.LoadKeyring(filepath.Join(dir, "secret.key"))
	if err != nil {
		tb.Fatal(err)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(quiver.Func(toolName, toolDesc, func(_ context.Context, in QuiverArgs) (Forecast, error) {
		return forecastFor(in.City, in.Days), nil
	})); err != nil {
		tb.Fatal(err)
	}
	p, err := platform.New(platform.Config{Store: st, Registry: reg, Resolver: vars.New(st, keys), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	if err := p.OpenJournal(context.Background(), filepath.Join(dir, "quiver.db.journal")); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	srv, err := server.New(context.Background(), server.Config{Platform: p, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	tb.Cleanup(ts.Close)
	return ts.URL + "/mcp", func() {
		if err := p.Flush(context.Background()); err != nil {
			tb.Fatal(err)
		}
	}
}

// benchHTTPCalls makes b.N calls over `clients` sessions at once and reports their rate and
// latency; finish, when not nil, runs at the end of the timed run.
func benchHTTPCalls(b *testing.B, url string, clients int, finish func()) {
	ctx := context.Background()
	sessions := make([]*mcp.ClientSession, clients)
	for i := range sessions {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		sessions[i] = cs
	}
	params := &mcp.CallToolParams{Name: toolName, Arguments: json.RawMessage(validArgs)}
	call := func(cs *mcp.ClientSession) error {
		res, err := cs.CallTool(ctx, params)
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %v", res.Content)
		}
		return err
	}
	for _, cs := range sessions { // warm up connections and caches
		for range 20 {
			if err := call(cs); err != nil {
				b.Fatal(err)
			}
		}
	}
	lats := make([][]time.Duration, clients)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	// Each client takes its share of b.N; b.N is known here because the loop below is the
	// benchmark's only one.
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, cs := range sessions {
		n := b.N / clients
		if i < b.N%clients {
			n++
		}
		wg.Go(func() {
			lat := make([]time.Duration, 0, n)
			for range n {
				t0 := time.Now()
				if err := call(cs); err != nil {
					errs <- err
					return
				}
				lat = append(lat, time.Since(t0))
			}
			lats[i] = lat
		})
	}
	wg.Wait()
	if finish != nil {
		finish()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}

// TestHTTPSameAnswer checks that every HTTP server answers get_forecast as expected, so that
// BenchmarkHTTP measures no error path.
func TestHTTPSameAnswer(t *testing.T) {
	for _, s := range []struct {
		name  string
		start func(testing.TB) (string, func())
	}{{"bare-go-sdk", startBareGoSDK}, {"mcp-go", startMCPGo}, {"quiver", startQuiver}} {
		t.Run(s.name, func(t *testing.T) {
			url, _ := s.start(t)
			ctx := context.Background()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
				Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolName, Arguments: json.RawMessage(validArgs)})
			if err != nil || res.IsError {
				t.Fatalf("call: %+v, %v", res, err)
			}
			text, ok := res.Content[0].(*mcp.TextContent)
			if !ok || !sameJSON(t, []byte(text.Text), wantOutput) {
				t.Errorf("content %#v, want text %s", res.Content[0], wantOutput)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: toolName, Arguments: json.RawMessage(invalidArgs)})
			if err == nil && !res.IsError {
				t.Errorf("days=30: accepted, returned %+v", res)
			}
		})
	}
}
