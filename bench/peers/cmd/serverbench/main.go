//go:build linux && (amd64 || arm64)

// Command serverbench measures three MCP servers, each a separate process, driven by the same
// load generator (this command) over loopback streamable HTTP, so that what `quiver serve`
// costs is read beside what any Go MCP server costs:
//
//	go run ./cmd/serverbench                         # from bench/peers; builds ../../cmd/quiver
//	go run ./cmd/serverbench -quiver /tmp/quiver -rounds 1
//
// The servers:
//
//   - bare-go-sdk: this command re-executed with SERVERBENCH_ROLE=bare: mcp.NewServer and
//     mcp.NewStreamableHTTPHandler of github.com/modelcontextprotocol/go-sdk, default options.
//   - mcp-go: re-executed with SERVERBENCH_ROLE=mcp-go: github.com/mark3labs/mcp-go's
//     NewMCPServer (input validation on) and NewStreamableHTTPServer.
//   - quiver: `quiver serve --addr 127.0.0.1:0 --pprof-addr 127.0.0.1:0` as its users run it:
//     API keys on (every request sends the admin key its first start printed), the default
//     configuration (every call recorded in SQLite through the journal), its data in a
//     temporary directory (XDG_DATA_HOME; QUIVER_ADDR, QUIVER_CONFIG and QUIVER_POSTGRES
//     emptied).
//
// Every server serves get_current_time (quiver's built-in tools/clock, which the peers
// mirror: an optional timezone argument, validated, and a structured result) and -tools filler
// tools with the same names, descriptions and input schemas (about 450 bytes each), which
// tools/list carries and nothing calls. Quiver gets its filler tools as its users would: one
// JavaScript function (POST /v1/functions and a version) and -tools POST /v1/tools, on a first
// start that makes the data directory and prints the key; quiver is then stopped, and each
// round starts it on a copy of that directory. A tools/list checks that every server holds its
// tools before the calls.
//
// Each round starts a fresh process of each server, one after the other (bare-go-sdk, mcp-go,
// quiver), and measures it alone, in this order:
//
//   - idle RSS: once it answers HTTP and -settle has passed, VmRSS, RssAnon and RssFile of
//     /proc/PID/status;
//   - call-seq: -calls tools/call of get_current_time {"timezone":"UTC"} in one session, one
//     after the other, after 50 warm-up calls;
//   - call-c16: -calls calls in all from 16 sessions at once, each its own goroutine;
//   - RSS after the calls, after -settle;
//   - list-seq and list-c16: -lists tools/list each (one op lists every page), one session,
//     then 16 at once;
//   - api-seq and api-c16 (quiver only): -calls POST /v1/tools/get_current_time/call with
//     {"args":{"timezone":"UTC"}} each, from plain HTTP keep-alive connections;
//   - sessions: -sessions sessions opened (initialize, notifications/initialized) and closed
//     (DELETE), one after the other; then RSS after -settle.
//
// Every op must succeed (a call with a success result for UTC, a close answered 2xx), or the
// run stops with the last lines of the server's log. For each timed phase it prints ops per
// second (ops over the phase's wall time; "calls/s" whatever the op), the p50 and p99 of one
// op in µs, and the bytes the server allocated per op: the difference of its runtime TotalAlloc,
// read from GET /debug/pprof/heap?debug=1 right before and right after the phase, over the
// ops (so it counts whatever else the server did meanwhile, quiver's background jobs and the
// reading itself included). Output: Go benchmark lines, one per server per phase per round
// (BenchmarkServe/quiver/call-seq 5000 2345.6 calls/s 380.1 p50-µs 1200.5 p99-µs 150000
// server-B/op) and one of memory (BenchmarkServeRSS/quiver 1 40.1 idle-MB 48.0 after-calls-MB
// 50.2 after-sessions-MB 7.3 idle-anon-MB 33.0 idle-file-MB), with "# round N" before each
// round, for bench/table; progress goes to standard error.
//
// The client and the servers share the machine: a figure is the whole loop's, and the
// comparison is fair because every server gets the same client. Each binary is copied into a
// temporary directory and its page cache dropped before each start, so each server starts as
// after a cold boot whatever built it last (see dropCache). -cpuprofile-dir saves CPU profiles
// of each server's call-seq and call-c16 phases in round 1 (each phase lasts at least
// -profile-seconds then) and its allocations profile after them.
//
// Linux only. Every server listens on 127.0.0.1 only and is killed when serverbench exits or
// -timeout passes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

type config struct {
	quiver                                string
	rounds, calls, lists, tools, sessions int
	settle                                time.Duration
	profileDir                            string
	profileSeconds                        int
	// protocol pins the MCP version the client asks for ("": the SDK's default, 2026-07-28
	// where a server answers server/discover).
	protocol string
}

func main() {
	if role := os.Getenv(roleEnv); role != "" {
		if err := serveRole(role); err != nil {
			fmt.Fprintf(os.Stderr, "serverbench %s: %v\n", role, err)
			os.Exit(1)
		}
		return
	}
	var cfg config
	flag.StringVar(&cfg.quiver, "quiver", "", "`PATH` of the quiver binary (default: build ./cmd/quiver of the module above)")
	flag.IntVar(&cfg.rounds, "rounds", 3, "rounds; each starts and measures every server once")
	flag.IntVar(&cfg.calls, "calls", 5000, "ops of each call and api phase")
	flag.IntVar(&cfg.lists, "lists", 300, "tools/list ops of each list phase")
	flag.IntVar(&cfg.tools, "tools", 1000, "filler tools each server serves beside get_current_time")
	flag.IntVar(&cfg.sessions, "sessions", 1000, "sessions opened and closed in the sessions phase")
	flag.DurationVar(&cfg.settle, "settle", 2*time.Second, "wait before each RSS reading")
	flag.StringVar(&cfg.profileDir, "cpuprofile-dir", "", "save each server's CPU profiles of round 1's call-seq and call-c16 phases, and its allocations after them, in `DIR`")
	flag.IntVar(&cfg.profileSeconds, "profile-seconds", 5, "length of the CPU profiles")
	flag.StringVar(&cfg.protocol, "protocol", "", "the MCP `VERSION` the client asks for (default: the SDK's, 2026-07-28 without sessions where a server speaks it)")
	timeout := flag.Duration("timeout", 30*time.Minute, "give up (and kill the servers) after this long")
	flag.Parse()
	if err := cfg.check(); err != nil {
		fmt.Fprintln(os.Stderr, "serverbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "serverbench:", err)
		os.Exit(1)
	}
}

func (c config) check() error {
	if c.rounds < 1 || c.calls < 1 || c.lists < 1 || c.sessions < 1 || c.tools < 0 || c.profileSeconds < 1 {
		return errors.New("-rounds, -calls, -lists, -sessions and -profile-seconds must be at least 1, -tools not negative")
	}
	return nil
}

// run measures every server for cfg.rounds rounds, printing the benchmark lines to out as each
// server is done.
func run(ctx context.Context, cfg config, out, progress io.Writer) error {
	tmp, err := os.MkdirTemp("", "serverbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	targets, err := prepareTargets(ctx, &cfg, tmp, progress)
	if err != nil {
		return err
	}
	seed := filepath.Join(tmp, "quiver-seed")
	if err := os.Mkdir(seed, 0o700); err != nil {
		return err
	}
	key, err := seedQuiver(ctx, targets[2], seed, cfg.tools, progress)
	if err != nil {
		return err
	}
	rs := &rounds{ctx: ctx, cfg: cfg, tmp: tmp, seed: seed, key: key, out: out, progress: progress}
	for r := 1; r <= cfg.rounds; r++ {
		fmt.Fprintf(out, "# round %d\n", r)
		for _, t := range targets {
			if err := rs.measure(r, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// prepareTargets builds quiver unless cfg names its binary, makes the profiles' directory, and
// returns the servers to measure, each a copy of its binary in tmp.
func prepareTargets(ctx context.Context, cfg *config, tmp string, progress io.Writer) ([]target, error) {
	if cfg.quiver == "" {
		cfg.quiver = filepath.Join(tmp, "quiver-built")
		if err := buildQuiver(ctx, cfg.quiver, progress); err != nil {
			return nil, err
		}
	}
	if cfg.profileDir != "" {
		if err := os.MkdirAll(cfg.profileDir, 0o755); err != nil {
			return nil, err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	targets := []target{
		{label: "bare-go-sdk", bin: self, role: roleBare},
		{label: "mcp-go", bin: self, role: roleMCPGo},
		{label: "quiver", bin: cfg.quiver},
	}
	for i := range targets {
		dst := filepath.Join(tmp, "bin-"+targets[i].label)
		if err := copyFile(dst, targets[i].bin, 0o755); err != nil {
			return nil, fmt.Errorf("copying %s: %w", targets[i].bin, err)
		}
		targets[i].bin = dst
	}
	return targets, nil
}

// rounds are the rounds of a run: each server measured on a directory of its own, quiver's
// a copy of the seeded one (key is its admin key).
type rounds struct {
	ctx            context.Context
	cfg            config
	tmp, seed, key string
	out, progress  io.Writer
}

// measure measures t in round r, and prints its lines.
func (rs *rounds) measure(r int, t target) error {
	dir := filepath.Join(rs.tmp, fmt.Sprintf("round%d-%s", r, t.label))
	var err error
	if t.isQuiver() {
		err = copyTree(dir, rs.seed)
	} else {
		err = os.Mkdir(dir, 0o700)
	}
	if err != nil {
		return err
	}
	profileDir := ""
	if r == 1 {
		profileDir = rs.cfg.profileDir
	}
	res, err := measureFresh(rs.ctx, t, dir, rs.key, rs.cfg, profileDir, func(ph phase) {
		fmt.Fprintf(rs.progress, "serverbench: round %d, %s, %s: %d ops, %.0f/s, p50 %.0f µs, p99 %.0f µs, %.0f server B/op\n",
			r, t.label, ph.name, ph.ops, ph.perSecond(), ph.percentile(0.5), ph.percentile(0.99), ph.allocPerOp())
	})
	if err != nil {
		return fmt.Errorf("round %d, %s: %w", r, t.label, err)
	}
	printResult(rs.out, t.label, res)
	fmt.Fprintf(rs.progress, "serverbench: round %d, %s: MCP %s; RSS idle %s MB, after calls %s MB, after sessions %s MB\n",
		r, t.label, res.protocol, mb(res.idle.rss), mb(res.afterCalls.rss), mb(res.afterSessions.rss))
	os.RemoveAll(dir)
	return nil
}

// measureFresh starts t on dir, measures it and stops it.
func measureFresh(ctx context.Context, t target, dir, key string, cfg config, profileDir string, report func(phase)) (result, error) {
	p, err := start(ctx, t, dir, cfg.tools, false)
	if err != nil {
		return result{}, err
	}
	defer p.stop()
	if t.isQuiver() {
		p.key = key
	}
	res, err := measure(ctx, t, p, cfg, profileDir, report)
	if err != nil {
		return result{}, fmt.Errorf("%w\n%s's last lines:%s", err, t.label, p.tail)
	}
	return res, nil
}

// printResult prints a server's benchmark lines of one round.
func printResult(w io.Writer, label string, r result) {
	for _, ph := range r.phases {
		fmt.Fprintf(w, "BenchmarkServe/%s/%s %d %.1f calls/s %.1f p50-µs %.1f p99-µs %.0f server-B/op\n",
			label, ph.name, ph.ops, ph.perSecond(), ph.percentile(0.5), ph.percentile(0.99), ph.allocPerOp())
	}
	fmt.Fprintf(w, "BenchmarkServeRSS/%s 1 %s idle-MB %s after-calls-MB %s after-sessions-MB %s idle-anon-MB %s idle-file-MB\n",
		label, mb(r.idle.rss), mb(r.afterCalls.rss), mb(r.afterSessions.rss), mb(r.idle.anon), mb(r.idle.file))
}

func mb(kb int64) string { return strconv.FormatFloat(float64(kb)/1024, 'f', 1, 64) }
