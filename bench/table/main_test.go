package main

import (
	"strings"
	"testing"
)

// The table takes each figure's median over the rounds, and the median of the per-round ratios
// to its baseline, not the ratio of the medians.
func TestReport(t *testing.T) {
	in := `# round 1
peers:BenchmarkQuiver-2   	 1000	      1000 ns/op	     728 B/op	      11 allocs/op
peers:BenchmarkBaseline-2 	 1000	       500 ns/op	     344 B/op	       8 allocs/op
unrelated output
# round 2
peers:BenchmarkQuiver-2   	 1000	      3000 ns/op	     728 B/op	      11 allocs/op
peers:BenchmarkBaseline-2 	 1000	      1000 ns/op	     344 B/op	       8 allocs/op
# round 3
peers:BenchmarkQuiver-2   	 1000	      1200 ns/op	     728 B/op	      11 allocs/op
peers:BenchmarkBaseline-2 	 1000	       600 ns/op	     344 B/op	       8 allocs/op
peers:BenchmarkHTTP/quiver/seq-2   2000   375218 ns/op   2665 calls/s   274.0 p50-µs
serve:BenchmarkServe/quiver/call-seq 5000 2000.0 calls/s 400.0 p50-µs 1200.0 p99-µs 150000 server-B/op
serve:BenchmarkServe/mcp-go/call-seq 5000 4000.0 calls/s 200.0 p50-µs 900.0 p99-µs 40000 server-B/op
serve25:BenchmarkServe/quiver/call-seq 5000 3000.0 calls/s 300.0 p50-µs 1000.0 p99-µs 20000 server-B/op
serve25:BenchmarkServe/mcp-go/call-seq 5000 6000.0 calls/s 150.0 p50-µs 800.0 p99-µs 14000 server-B/op
serve:BenchmarkServeRSS/quiver 1 40.0 idle-MB 48.0 after-calls-MB 50.2 after-sessions-MB 7.3 idle-anon-MB 32.7 idle-file-MB
serve:BenchmarkServeRSS/bare-go-sdk 1 16.0 idle-MB 19.0 after-calls-MB 19.5 after-sessions-MB 4.5 idle-anon-MB 11.5 idle-file-MB
`
	rounds, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rounds) != 3 {
		t.Fatalf("%d rounds, want 3", len(rounds))
	}
	var out strings.Builder
	report(&out, rounds)
	for _, want := range []string{
		"| Quiver (validates), ns/op | 1,200 (1,000-3,000) | 600 (500-1,000) | 2.00 x floor (2.00-3.00) |",
		"| Quiver, allocations per op | 11.0 (11.0-11.0) | 8.00 (8.00-8.00) | 1.38 x floor (1.38-1.38) |",
		"| quiver serve's handler, 1 client, calls/s | 2,665 (2,665-2,665) |  |  |",
		"| quiver, 1 session, calls/s | 3,000 (3,000-3,000) | 6,000 (6,000-6,000) | 0.50 x mcp-go (0.50-0.50) |",
		"| quiver with sessions, 1 session, calls/s, against quiver without (2026-07-28) | 3,000 (3,000-3,000) | 2,000 (2,000-2,000) | 1.50 x sessionless (1.50-1.50) |",
		"| genkit DefineTool + RunRaw (validates), ns/op | not measured | | |",
		"| quiver, 1 session, calls/s | 2,000 (2,000-2,000) | 4,000 (4,000-4,000) | 0.50 x mcp-go (0.50-0.50) |",
		"| quiver, 1 session, server bytes allocated per op | 150,000 (150,000-150,000) | 40,000 (40,000-40,000) | 3.75 x mcp-go (3.75-3.75) |",
		"| quiver serve idle RSS, MB | 40.0 (40.0-40.0) | 16.0 (16.0-16.0) | 2.50 x bare (2.50-2.50) |",
		"| quiver, 1 session, calls/s, against bare | 2,000 (2,000-2,000) |  |  |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table has no line %q:\n%s", want, out.String())
		}
	}
	if _, err := parse(strings.NewReader("peers:BenchmarkX-2 10 abc ns/op\n")); err == nil {
		t.Error("a value that is not a number was accepted")
	}
}
