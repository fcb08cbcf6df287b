// Command table prints the figures of docs/PERFORMANCE.md from the output of bench/run: each
// figure beside the baseline it is compared with, both measured in the same rounds.
//
// It reads Go benchmark lines, each prefixed with the name of the test binary that printed it
// ("peers:BenchmarkQuiver-2  1000  1213 ns/op ..."), and "# round N" lines between rounds. For
// each figure it prints the median over the rounds and their range, the same for the
// baseline, and the median of the per-round ratios (figure / baseline), so that a machine
// whose speed drifts between rounds moves both sides of a ratio together.
//
//	bench/run            # builds, runs and pipes into: go run ./bench/table
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// figure names one value: a benchmark (binary:Name, without the -GOMAXPROCS suffix) and a
// unit it reported.
type figure struct{ bench, unit string }

// row is one line of the table: a figure and, unless base.bench is "", its baseline.
type row struct {
	label string
	fig   figure
	base  figure
	// ratio says what the ratio means, e.g. "x floor"; "" prints none.
	ratio string
}

type section struct {
	title string
	rows  []row
}

var sections = []section{
	{"In process: get_forecast through each library, against encoding/json (no validation) in the same binary", []row{
		{"Quiver (validates), ns/op", figure{"peers:BenchmarkQuiver", "ns/op"}, figure{"peers:BenchmarkBaseline", "ns/op"}, "x floor"},
		{"genkit DefineTool + RunRaw (validates), ns/op", figure{"genkit:BenchmarkGenkit", "ns/op"}, figure{"genkit:BenchmarkBaseline", "ns/op"}, "x floor"},
		{"mcp-go in-process client, validation on, ns/op", figure{"peers:BenchmarkMCPGo", "ns/op"}, figure{"peers:BenchmarkBaseline", "ns/op"}, "x floor"},
		{"MCP go-sdk in-memory CallTool (validates), ns/op", figure{"peers:BenchmarkMCPGoSDK", "ns/op"}, figure{"peers:BenchmarkBaseline", "ns/op"}, "x floor"},
		{"Eino InferTool (does not validate), ns/op", figure{"peers:BenchmarkEino", "ns/op"}, figure{"peers:BenchmarkBaseline", "ns/op"}, "x floor"},
		{"genkit against Quiver, ns/op", figure{"genkit:BenchmarkGenkit", "ns/op"}, figure{"peers:BenchmarkQuiver", "ns/op"}, "x Quiver"},
		{"mcp-go against Quiver, ns/op", figure{"peers:BenchmarkMCPGo", "ns/op"}, figure{"peers:BenchmarkQuiver", "ns/op"}, "x Quiver"},
		{"go-sdk against Quiver, ns/op", figure{"peers:BenchmarkMCPGoSDK", "ns/op"}, figure{"peers:BenchmarkQuiver", "ns/op"}, "x Quiver"},
		{"Quiver, allocations per op", figure{"peers:BenchmarkQuiver", "allocs/op"}, figure{"peers:BenchmarkBaseline", "allocs/op"}, "x floor"},
	}},
	{"MCP tools/call over loopback streamable HTTP (bench/peers BenchmarkHTTP), against the bare go-sdk server", []row{
		{"quiver serve's handler, 1 client, calls/s", figure{"peers:BenchmarkHTTP/quiver/seq", "calls/s"}, figure{"peers:BenchmarkHTTP/bare-go-sdk/seq", "calls/s"}, "x bare"},
		{"mcp-go, 1 client, calls/s", figure{"peers:BenchmarkHTTP/mcp-go/seq", "calls/s"}, figure{"peers:BenchmarkHTTP/bare-go-sdk/seq", "calls/s"}, "x bare"},
		{"quiver against mcp-go, 1 client, calls/s", figure{"peers:BenchmarkHTTP/quiver/seq", "calls/s"}, figure{"peers:BenchmarkHTTP/mcp-go/seq", "calls/s"}, "x mcp-go"},
		{"quiver, 1 client, p50 µs", figure{"peers:BenchmarkHTTP/quiver/seq", "p50-µs"}, figure{"peers:BenchmarkHTTP/bare-go-sdk/seq", "p50-µs"}, "x bare"},
		{"quiver, 1 client, p99 µs", figure{"peers:BenchmarkHTTP/quiver/seq", "p99-µs"}, figure{"peers:BenchmarkHTTP/bare-go-sdk/seq", "p99-µs"}, "x bare"},
		{"quiver serve's handler, 16 clients, calls/s", figure{"peers:BenchmarkHTTP/quiver/c16", "calls/s"}, figure{"peers:BenchmarkHTTP/bare-go-sdk/c16", "calls/s"}, "x bare"},
		{"mcp-go, 16 clients, calls/s", figure{"peers:BenchmarkHTTP/mcp-go/c16", "calls/s"}, figure{"peers:BenchmarkHTTP/bare-go-sdk/c16", "calls/s"}, "x bare"},
		{"quiver against mcp-go, 16 clients, calls/s", figure{"peers:BenchmarkHTTP/quiver/c16", "calls/s"}, figure{"peers:BenchmarkHTTP/mcp-go/c16", "calls/s"}, "x mcp-go"},
		{"quiver, 16 clients, p99 µs", figure{"peers:BenchmarkHTTP/quiver/c16", "p99-µs"}, figure{"peers:BenchmarkHTTP/bare-go-sdk/c16", "p99-µs"}, "x bare"},
		{"quiver, bytes allocated per call (client and server)", figure{"peers:BenchmarkHTTP/quiver/seq", "B/op"}, figure{"peers:BenchmarkHTTP/bare-go-sdk/seq", "B/op"}, "x bare"},
		{"mcp-go, bytes allocated per call (client and server)", figure{"peers:BenchmarkHTTP/mcp-go/seq", "B/op"}, figure{"peers:BenchmarkHTTP/bare-go-sdk/seq", "B/op"}, "x bare"},
	}},
	{"MCP tools/call of get_current_time, each server its own process on loopback (bench/peers/cmd/serverbench): quiver serve as run (API keys, every call recorded), against mcp-go (validation on) and the bare go-sdk server, 1,000 tools each; the go-sdk client at its default speaks 2026-07-28 without sessions with quiver and mcp-go, 2025-11-25 with the bare server", serveAgainstPeers("call", "calls")},
	{"The same calls with the client pinned to 2025-11-25 (sessions) at every server (serverbench -protocol 2025-11-25)", []row{
		{"quiver, 1 session, calls/s", sessions("quiver", "call-seq", "calls/s"), sessions("mcp-go", "call-seq", "calls/s"), "x mcp-go"},
		{"quiver, 16 sessions, calls/s", sessions("quiver", "call-c16", "calls/s"), sessions("mcp-go", "call-c16", "calls/s"), "x mcp-go"},
		{"quiver, 1 session, server bytes allocated per call", sessions("quiver", "call-seq", "server-B/op"), sessions("mcp-go", "call-seq", "server-B/op"), "x mcp-go"},
		{"quiver with sessions, 1 session, calls/s, against quiver without (2026-07-28)", sessions("quiver", "call-seq", "calls/s"), serve("quiver", "call-seq", "calls/s"), "x sessionless"},
		{"quiver with sessions, 16 sessions, calls/s, against quiver without", sessions("quiver", "call-c16", "calls/s"), serve("quiver", "call-c16", "calls/s"), "x sessionless"},
	}},
	{"MCP tools/list of the 1,001 tools (all pages; one op is the whole list), same servers", serveAgainstPeers("list", "lists")},
	{"quiver's /v1 API (POST /v1/tools/get_current_time/call, keep-alive HTTP), against its own MCP tools/call and mcp-go's", []row{
		{"API, 1 client, calls/s", serve("quiver", "api-seq", "calls/s"), serve("quiver", "call-seq", "calls/s"), "x MCP"},
		{"API, 1 client, calls/s, against mcp-go's MCP", serve("quiver", "api-seq", "calls/s"), serve("mcp-go", "call-seq", "calls/s"), "x mcp-go"},
		{"API, 16 clients, calls/s", serve("quiver", "api-c16", "calls/s"), serve("quiver", "call-c16", "calls/s"), "x MCP"},
		{"API, 16 clients, calls/s, against mcp-go's MCP", serve("quiver", "api-c16", "calls/s"), serve("mcp-go", "call-c16", "calls/s"), "x mcp-go"},
		{"API, 1 client, p50 µs", serve("quiver", "api-seq", "p50-µs"), serve("quiver", "call-seq", "p50-µs"), "x MCP"},
		{"API, 1 client, p50 µs, against mcp-go's MCP", serve("quiver", "api-seq", "p50-µs"), serve("mcp-go", "call-seq", "p50-µs"), "x mcp-go"},
		{"API, 16 clients, p99 µs", serve("quiver", "api-c16", "p99-µs"), serve("quiver", "call-c16", "p99-µs"), "x MCP"},
		{"API, 16 clients, p99 µs, against mcp-go's MCP", serve("quiver", "api-c16", "p99-µs"), serve("mcp-go", "call-c16", "p99-µs"), "x mcp-go"},
		{"API, 1 client, server bytes allocated per call", serve("quiver", "api-seq", "server-B/op"), serve("quiver", "call-seq", "server-B/op"), "x MCP"},
		{"API, 1 client, server bytes allocated per call, against mcp-go's MCP", serve("quiver", "api-seq", "server-B/op"), serve("mcp-go", "call-seq", "server-B/op"), "x mcp-go"},
	}},
	{"MCP sessions opened (initialize, notifications/initialized) and closed (DELETE), one after the other, same servers", []row{
		{"quiver, sessions/s", serve("quiver", "sessions", "calls/s"), serve("mcp-go", "sessions", "calls/s"), "x mcp-go"},
		{"quiver, sessions/s, against bare", serve("quiver", "sessions", "calls/s"), serve("bare-go-sdk", "sessions", "calls/s"), "x bare"},
		{"quiver, server bytes allocated per session", serve("quiver", "sessions", "server-B/op"), serve("mcp-go", "sessions", "server-B/op"), "x mcp-go"},
		{"quiver, server bytes allocated per session, against bare", serve("quiver", "sessions", "server-B/op"), serve("bare-go-sdk", "sessions", "server-B/op"), "x bare"},
	}},
	{"Memory of the server process (VmRSS; serverbench, same servers and rounds), 1,000 tools each", []row{
		{"quiver serve idle RSS, MB", serveRSS("quiver", "idle-MB"), serveRSS("bare-go-sdk", "idle-MB"), "x bare"},
		{"quiver serve idle RSS, against mcp-go, MB", serveRSS("quiver", "idle-MB"), serveRSS("mcp-go", "idle-MB"), "x mcp-go"},
		{"quiver serve RSS after the calls, MB", serveRSS("quiver", "after-calls-MB"), serveRSS("bare-go-sdk", "after-calls-MB"), "x bare"},
		{"quiver serve RSS after the calls, against mcp-go, MB", serveRSS("quiver", "after-calls-MB"), serveRSS("mcp-go", "after-calls-MB"), "x mcp-go"},
		{"quiver serve RSS after the lists, API calls and sessions, MB", serveRSS("quiver", "after-sessions-MB"), serveRSS("bare-go-sdk", "after-sessions-MB"), "x bare"},
		{"quiver serve RSS after the lists, API calls and sessions, against mcp-go, MB", serveRSS("quiver", "after-sessions-MB"), serveRSS("mcp-go", "after-sessions-MB"), "x mcp-go"},
		{"quiver serve idle, private part (RssAnon), MB", serveRSS("quiver", "idle-anon-MB"), serveRSS("bare-go-sdk", "idle-anon-MB"), "x bare"},
		{"quiver serve idle, the binary's mapped pages (RssFile), MB", serveRSS("quiver", "idle-file-MB"), serveRSS("bare-go-sdk", "idle-file-MB"), "x bare"},
	}},
	{"Store (store/sqlite), against raw SQLite single-row inserts, each its own transaction", []row{
		{"append a tool result, own transaction, results/s", figure{"sqlite:BenchmarkAppendResult", "results/s"}, figure{"sqlite:BenchmarkRawSQLiteInsert", "rows/s"}, "x raw"},
	}},
	{"Agent loop step, scripted model, everything persisted in SQLite (agent BenchmarkLoopStep)", []row{
		{"loop step p50 µs, against one append", figure{"agent:BenchmarkLoopStep", "p50-µs/step"}, figure{"sqlite:BenchmarkAppendResult", "µs/op"}, "x append"},
		{"loop step p50 µs, against the p50 of one raw SQLite insert (its own transaction)", figure{"agent:BenchmarkLoopStep", "p50-µs/step"}, figure{"sqlite:BenchmarkRawSQLiteInsert", "p50-µs"}, "x raw insert"},
		{"one append's p50 µs, against one raw insert's", figure{"sqlite:BenchmarkAppendResult", "p50-µs"}, figure{"sqlite:BenchmarkRawSQLiteInsert", "p50-µs"}, "x raw insert"},
		{"one raw insert into a table indexed as messages is, p50 µs, against one into a table without indexes", figure{"sqlite:BenchmarkRawSQLiteInsertIndexed", "p50-µs"}, figure{"sqlite:BenchmarkRawSQLiteInsert", "p50-µs"}, "x raw insert"},
		{"one append's p50 µs, against one raw insert into a table indexed as messages is", figure{"sqlite:BenchmarkAppendResult", "p50-µs"}, figure{"sqlite:BenchmarkRawSQLiteInsertIndexed", "p50-µs"}, "x indexed insert"},
		{"loop step p99 µs, against its p50", figure{"agent:BenchmarkLoopStep", "p99-µs/step"}, figure{"agent:BenchmarkLoopStep", "p50-µs/step"}, "x p50"},
	}},
	{"A run on PostgreSQL (platform BenchmarkRunWriteTxns, server BenchmarkAPIRunFirstEvent/postgres; needs QUIVER_TEST_POSTGRES): its write transactions against a bare River job's, its first event against a plain GET of the thread", []row{
		{"one-step run, write transactions from its start to River's completion", figure{"platform:BenchmarkRunWriteTxns/one-step", "write-txns/run"}, figure{"platform:BenchmarkRunWriteTxns/river-job", "write-txns/run"}, "x River job"},
		{"one-step run, of them only notifying (no wait for the disk)", figure{"platform:BenchmarkRunWriteTxns/one-step", "notify-txns/run"}, figure{"platform:BenchmarkRunWriteTxns/river-job", "notify-txns/run"}, ""},
		{"two-step run, write transactions", figure{"platform:BenchmarkRunWriteTxns/two-step", "write-txns/run"}, figure{"platform:BenchmarkRunWriteTxns/river-job", "write-txns/run"}, "x River job"},
		{"one-step run and its thread, the server's transaction ids", figure{"platform:BenchmarkRunWriteTxns/one-step", "server-xids/run"}, figure{"platform:BenchmarkRunWriteTxns/river-job", "server-xids/run"}, "x River job"},
		{"run started over /v1, first event p50 ms (back to back)", figure{"server:BenchmarkAPIRunFirstEvent/postgres/back-to-back", "first-p50-ms"}, figure{"server:BenchmarkAPIRunFirstEvent/postgres/back-to-back", "get-p50-ms"}, "x GET"},
		{"run started over /v1, first event p99 ms (back to back)", figure{"server:BenchmarkAPIRunFirstEvent/postgres/back-to-back", "first-p99-ms"}, figure{"server:BenchmarkAPIRunFirstEvent/postgres/back-to-back", "get-p99-ms"}, "x GET"},
	}},
	{"Sandbox: a fresh interpreter per run, against a fresh node process per run", []row{
		{"sandbox.Run, trivial script, p50 µs", figure{"sandbox:BenchmarkRun/sandbox/trivial", "p50-µs"}, figure{"sandbox:BenchmarkRun/node-process/trivial", "p50-µs"}, "x node"},
		{"run_code through the dispatcher, trivial, p50 µs", figure{"runcode:BenchmarkRunCode/trivial", "p50-µs"}, figure{"sandbox:BenchmarkRun/node-process/trivial", "p50-µs"}, "x node"},
		{"in a worker process (as quiver runs code), trivial, p50 µs", figure{"sandbox:BenchmarkRun/worker/trivial", "p50-µs"}, figure{"sandbox:BenchmarkRun/sandbox/trivial", "p50-µs"}, "x in process"},
		{"in a new worker process each run, trivial, p50 µs", figure{"sandbox:BenchmarkRun/worker-cold/trivial", "p50-µs"}, figure{"sandbox:BenchmarkRun/node-process/trivial", "p50-µs"}, "x node"},
	}},
}

// serve is a figure of serverbench (bench/run prefixes its lines with serve:): one phase of
// one server, as "serve:BenchmarkServe/quiver/call-seq".
func serve(server, phase, unit string) figure {
	return figure{"serve:BenchmarkServe/" + server + "/" + phase, unit}
}

// sessions is a figure of serverbench's run with the client pinned to 2025-11-25 (bench/run
// prefixes its lines with serve25:).
func sessions(server, phase, unit string) figure {
	return figure{"serve25:BenchmarkServe/" + server + "/" + phase, unit}
}

// serveRSS is a memory figure of serverbench: "serve:BenchmarkServeRSS/quiver".
func serveRSS(server, unit string) figure { return figure{"serve:BenchmarkServeRSS/" + server, unit} }

// serveAgainstPeers is the rows of serverbench's phases KIND-seq and KIND-c16 (call, list):
// quiver's rate, p50, p99 and server bytes per op against mcp-go's and the bare go-sdk
// server's. ops names the ops (calls, lists).
func serveAgainstPeers(kind, ops string) []row {
	var rows []row
	for _, ph := range []struct{ name, clients string }{{kind + "-seq", "1 session"}, {kind + "-c16", "16 sessions"}} {
		for _, u := range []struct{ unit, what string }{
			{"calls/s", ops + "/s"}, {"p50-µs", "p50 µs"}, {"p99-µs", "p99 µs"}, {"server-B/op", "server bytes allocated per op"},
		} {
			rows = append(rows,
				row{fmt.Sprintf("quiver, %s, %s", ph.clients, u.what), serve("quiver", ph.name, u.unit), serve("mcp-go", ph.name, u.unit), "x mcp-go"},
				row{fmt.Sprintf("quiver, %s, %s, against bare", ph.clients, u.what), serve("quiver", ph.name, u.unit), serve("bare-go-sdk", ph.name, u.unit), "x bare"})
		}
	}
	return rows
}

// benchLine is "name iterations value unit value unit ...".
var benchLine = regexp.MustCompile(`^(\w+):(Benchmark\S*?)(-\d+)?\s+\d+\s+(.*)$`)

func main() {
	rounds, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "table:", err)
		os.Exit(1)
	}
	report(os.Stdout, rounds)
}

// values holds, for each round, the value of each figure.
type values []map[figure]float64

func parse(r io.Reader) (values, error) {
	var rounds values
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "# round") || rounds == nil {
			rounds = append(rounds, map[figure]float64{})
			if strings.HasPrefix(line, "# round") {
				continue
			}
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := m[1] + ":" + m[2]
		fields := strings.Fields(m[4])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%q: value %q is not a number", line, fields[i])
			}
			cur := rounds[len(rounds)-1]
			cur[figure{name, fields[i+1]}] = v
			if fields[i+1] == "ns/op" { // for figures compared in microseconds
				cur[figure{name, "µs/op"}] = v / 1000
			}
		}
	}
	return rounds, sc.Err()
}

// stats is the median and range of a figure over the rounds that measured it.
func stats(rounds values, f figure) (med, lo, hi float64, n int) {
	var xs []float64
	for _, r := range rounds {
		if v, ok := r[f]; ok {
			xs = append(xs, v)
		}
	}
	return summary(xs)
}

func summary(xs []float64) (med, lo, hi float64, n int) {
	if len(xs) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(xs)
	med = xs[len(xs)/2]
	if len(xs)%2 == 0 {
		med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	return med, xs[0], xs[len(xs)-1], len(xs)
}

func report(w io.Writer, rounds values) {
	fmt.Fprintf(w, "%d rounds; each cell is the median over the rounds and, in brackets, their range.\n", len(rounds))
	for _, s := range sections {
		fmt.Fprintf(w, "\n### %s\n\n| | figure | baseline | ratio |\n|---|---:|---:|---:|\n", s.title)
		for _, r := range s.rows {
			med, lo, hi, n := stats(rounds, r.fig)
			if n == 0 {
				fmt.Fprintf(w, "| %s | not measured | | |\n", r.label)
				continue
			}
			bmed, blo, bhi, bn := stats(rounds, r.base)
			var ratios []float64
			for _, rd := range rounds {
				v, ok1 := rd[r.fig]
				b, ok2 := rd[r.base]
				if ok1 && ok2 && b != 0 {
					ratios = append(ratios, v/b)
				}
			}
			cells := []string{r.label, fmt.Sprintf("%s (%s-%s)", num(med), num(lo), num(hi)), "", ""}
			if bn > 0 {
				cells[2] = fmt.Sprintf("%s (%s-%s)", num(bmed), num(blo), num(bhi))
			}
			if rmed, rlo, rhi, rn := summary(ratios); rn > 0 {
				cells[3] = fmt.Sprintf("%s %s (%s-%s)", num(rmed), r.ratio, num(rlo), num(rhi))
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
	}
}

// num prints a figure with three significant digits, thousands separated.
func num(v float64) string {
	switch {
	case v >= 1000:
		s := strconv.FormatFloat(v, 'f', 0, 64)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 0.1 || v == 0:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64) // a small ratio keeps its digits: 0.00825

}
