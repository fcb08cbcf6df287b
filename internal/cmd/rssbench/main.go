//go:build linux && (amd64 || arm64)

// Command rssbench measures how much memory (resident set size) `quiver serve` holds when idle
// and after a run of calls, beside a bare MCP server built on the same SDK
// (github.com/modelcontextprotocol/go-sdk) with one equivalent tool, so the figure says what
// Quiver adds on top of what any Go MCP server costs:
//
//	go run ./internal/cmd/rssbench                           # builds ./cmd/quiver, 3 rounds
//	go run ./internal/cmd/rssbench -quiver old=/tmp/quiver-old -quiver new=/tmp/quiver-new
//
// Each server is a separate process, started the same way: `quiver serve --addr 127.0.0.1:0`
// with its data in a fresh temporary directory (XDG_DATA_HOME), or this command re-executed as
// the bare server (RSSBENCH_BARE=1), which also listens on a random port of 127.0.0.1 only.
// Once a server answers HTTP, rssbench waits -settle, reads VmRSS from /proc/PID/status (idle),
// makes -calls tools/call calls of get_current_time in one MCP session over streamable HTTP
// with the SDK's client, waits -settle again and reads VmRSS (after calls). The servers run
// one after the other, in the order given then the bare one, for -rounds rounds, so a change
// in the machine's load affects them alike; the table gives every round and the median.
// VmRSS counts the binary's pages the process has touched (RssFile) as well as its heap and
// stacks (RssAnon); -split prints both parts.
//
// Every binary is copied into a temporary directory and its page cache dropped before each
// start (see dropCache), so each server starts as after a cold boot whatever built it last.
//
// Linux only (it reads /proc and drops the page cache with fadvise). Every child is killed
// when rssbench exits or -timeout passes.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bareEnv, set to 1, makes this command the bare server rssbench measures Quiver against.
const bareEnv = "RSSBENCH_BARE"

// toolName is the tool called on both servers: quiver serve offers it by default
// (tools/clock) and it does next to nothing, so the calls measure the serving path.
const toolName = "get_current_time"

// urlPattern finds the MCP endpoint in a server's log (as .ci/run does for quiver serve).
var urlPattern = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/mcp`)

// target is a server to measure: a quiver binary, or this command as the bare server.
type target struct {
	label string
	bin   string
	bare  bool
}

// sample is the memory of one server in one round, in kB.
type sample struct {
	idle, after mem
}

// mem is what /proc/PID/status says of a process's resident memory, in kB.
type mem struct {
	rss, anon, file int64
}

type quiverFlags []target

func (q *quiverFlags) String() string { return fmt.Sprint(*q) }

func (q *quiverFlags) Set(v string) error {
	label, path, ok := strings.Cut(v, "=")
	if !ok {
		label, path = "quiver", v
	}
	if path == "" {
		return errors.New("empty binary path")
	}
	*q = append(*q, target{label: label, bin: path})
	return nil
}

func main() {
	if os.Getenv(bareEnv) == "1" {
		if err := serveBare(); err != nil {
			fmt.Fprintln(os.Stderr, "rssbench bare server:", err)
			os.Exit(1)
		}
		return
	}
	var quivers quiverFlags
	flag.Var(&quivers, "quiver", "`[LABEL=]PATH` of a quiver binary to measure; repeat to compare builds (default: build ./cmd/quiver)")
	rounds := flag.Int("rounds", 3, "rounds; each runs every server once")
	calls := flag.Int("calls", 4000, "tools/call calls per server per round")
	settle := flag.Duration("settle", 2*time.Second, "wait before each reading, so start-up and the calls' garbage settle")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up (and kill the servers) after this long")
	split := flag.Bool("split", false, "also print RssAnon (heap, stacks) and RssFile (the binary's touched pages)")
	benchFormat := flag.Bool("bench-format", false, "print each server's figures of each round as Go benchmark lines (BenchmarkRSS/LABEL), for bench/run")
	flag.Parse()
	if *rounds < 1 || *calls < 0 {
		fmt.Fprintln(os.Stderr, "rssbench: -rounds must be at least 1 and -calls not negative")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, quivers, *rounds, *calls, *settle, *split, *benchFormat); err != nil {
		fmt.Fprintln(os.Stderr, "rssbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, quivers []target, rounds, calls int, settle time.Duration, split, benchFormat bool) error {
	tmp, err := os.MkdirTemp("", "rssbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if len(quivers) == 0 {
		bin := filepath.Join(tmp, "quiver")
		fmt.Fprintln(os.Stderr, "rssbench: building ./cmd/quiver")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/quiver")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building quiver (run rssbench from the module root, or pass -quiver): %w", err)
		}
		quivers = []target{{label: "quiver", bin: bin}}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	targets := append(slices.Clone(quivers), target{label: "bare go-sdk", bin: self})
	for i := range targets {
		dst := filepath.Join(tmp, fmt.Sprintf("bin%d", i))
		if err := copyExecutable(dst, targets[i].bin); err != nil {
			return fmt.Errorf("copying %s: %w", targets[i].bin, err)
		}
		targets[i].bin = dst
	}
	targets[len(targets)-1].bare = true
	results := make([][]sample, len(targets)) // [target][round]
	for r := range rounds {
		for i, t := range targets {
			s, err := measure(ctx, t, filepath.Join(tmp, fmt.Sprintf("r%d-%d", r, i)), calls, settle)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, t.label, err)
			}
			results[i] = append(results[i], s)
			fmt.Fprintf(os.Stderr, "rssbench: round %d, %s: idle %s, after %d calls %s\n", r+1, t.label, mb(s.idle.rss), calls, mb(s.after.rss))
		}
	}
	if benchFormat {
		printBenchLines(os.Stdout, targets, results)
		return nil
	}
	printTable(os.Stdout, targets, results, calls, split)
	return nil
}

// printBenchLines prints one Go benchmark line per server and round, so that bench/table can
// read these figures beside the benchmarks': "BenchmarkRSS/quiver 1 38.1 idle-MB 47.2 after-MB
// 7.1 idle-anon-MB 31.0 idle-file-MB".
func printBenchLines(w io.Writer, targets []target, results [][]sample) {
	for r := range len(results[0]) {
		for i, t := range targets {
			s := results[i][r]
			fmt.Fprintf(w, "BenchmarkRSS/%s 1 %s idle-MB %s after-MB %s idle-anon-MB %s idle-file-MB\n",
				strings.ReplaceAll(t.label, " ", "-"), mb(s.idle.rss), mb(s.after.rss), mb(s.idle.anon), mb(s.idle.file))
		}
	}
}

// measure starts one server in dir, reads its RSS idle and after the calls, and stops it.
func measure(ctx context.Context, t target, dir string, calls int, settle time.Duration) (sample, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return sample{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := dropCache(t.bin); err != nil {
		return sample{}, fmt.Errorf("dropping the page cache of %s: %w", t.bin, err)
	}
	cmd := serverCommand(ctx, t, dir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return sample{}, err
	}
	if err := cmd.Start(); err != nil {
		return sample{}, err
	}
	var tail lastLines
	found, exited := followLog(cmd, stderr, &tail)
	defer func() {
		cancel()
		<-exited
	}()
	var url string
	select {
	case url = <-found:
	case <-exited:
		return sample{}, fmt.Errorf("server exited before serving: %s", tail.String())
	case <-time.After(30 * time.Second):
		return sample{}, fmt.Errorf("no URL in the server's log after 30s: %s", tail.String())
	case <-ctx.Done():
		return sample{}, ctx.Err()
	}
	if err := waitAnswers(ctx, url); err != nil {
		return sample{}, err
	}
	return sampleMem(ctx, cmd.Process.Pid, url, calls, settle, &tail)
}

// serverCommand is the command that starts target t with its data in dir; cancelling ctx
// stops it with SIGTERM.
func serverCommand(ctx context.Context, t target, dir string) *exec.Cmd {
	var cmd *exec.Cmd
	if t.bare {
		cmd = exec.CommandContext(ctx, t.bin)
		cmd.Env = append(os.Environ(), bareEnv+"=1")
	} else {
		// Without API keys, as the bare servers it is compared with: the figure is the server's own.
		cmd = exec.CommandContext(ctx, t.bin, "serve", "--addr", "127.0.0.1:0", "--insecure-local")
		// A fresh data directory (and no inherited address or configuration) so every run
		// starts from the same empty state.
		cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "QUIVER_ADDR=", "QUIVER_CONFIG=", "QUIVER_POSTGRES=")
	}
	cmd.Dir = dir
	// Killed with rssbench even if it dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// followLog reads the started server's log into tail until it ends: found gets the first URL
// the log names, and exited closes once the server has exited.
func followLog(cmd *exec.Cmd, stderr io.Reader, tail *lastLines) (found <-chan string, exited <-chan struct{}) {
	urls := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		// Drains the log to the end, so the server never blocks on a full pipe.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			tail.add(sc.Text())
			if u := urlPattern.FindString(sc.Text()); u != "" {
				select {
				case urls <- u:
				default:
				}
			}
		}
		cmd.Wait()
		close(done)
	}()
	return urls, done
}

// sampleMem reads the server's memory once it has settled, then again after the calls.
func sampleMem(ctx context.Context, pid int, url string, calls int, settle time.Duration, tail *lastLines) (sample, error) {
	var s sample
	var err error
	if err := sleep(ctx, settle); err != nil {
		return sample{}, err
	}
	if s.idle, err = readMem(pid); err != nil {
		return sample{}, err
	}
	if err := callMany(ctx, url, calls); err != nil {
		return sample{}, fmt.Errorf("%w (server log: %s)", err, tail.String())
	}
	if err := sleep(ctx, settle); err != nil {
		return sample{}, err
	}
	if s.after, err = readMem(pid); err != nil {
		return sample{}, err
	}
	return s, nil
}

// waitAnswers returns once the server answers an HTTP request (any status) at url.
func waitAnswers(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			http.DefaultClient.CloseIdleConnections()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server at %s does not answer: %w", url, err)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// callMany calls the tool n times, one after the other, in one MCP session.
func callMany(ctx context.Context, url string, n int) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "rssbench", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{}, DisableStandaloneSSE: true}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", url, err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: toolName, Arguments: map[string]any{"timezone": "UTC"}}
	for i := range n {
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			return fmt.Errorf("call %d: %w", i+1, err)
		}
		if res.IsError {
			return fmt.Errorf("call %d: error result: %v", i+1, res.Content)
		}
	}
	return nil
}

// readMem reads the resident set of pid from /proc.
func readMem(pid int) (mem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return mem{}, err
	}
	return parseStatus(string(b))
}

// parseStatus picks VmRSS, RssAnon and RssFile (kB) out of a /proc/PID/status text.
func parseStatus(status string) (mem, error) {
	var m mem
	fields := map[string]*int64{"VmRSS:": &m.rss, "RssAnon:": &m.anon, "RssFile:": &m.file}
	seen := 0
	for line := range strings.Lines(status) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if p, ok := fields[f[0]]; ok {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return mem{}, fmt.Errorf("/proc status: %s: %w", f[0], err)
			}
			*p = v
			seen++
		}
	}
	if seen != len(fields) {
		return mem{}, errors.New("/proc status lacks VmRSS, RssAnon or RssFile")
	}
	return m, nil
}

func printTable(w io.Writer, targets []target, results [][]sample, calls int, split bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "round\t")
	for _, t := range targets {
		fmt.Fprintf(tw, "%s idle\t%s after %d calls\t", t.label, t.label, calls)
	}
	fmt.Fprintln(tw)
	cell := func(m mem) string {
		if split {
			return fmt.Sprintf("%s (%s+%s)", mb(m.rss), mb(m.anon), mb(m.file))
		}
		return mb(m.rss)
	}
	rounds := len(results[0])
	for r := range rounds {
		fmt.Fprintf(tw, "%d\t", r+1)
		for i := range targets {
			fmt.Fprintf(tw, "%s\t%s\t", cell(results[i][r].idle), cell(results[i][r].after))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "median\t")
	for i := range targets {
		fmt.Fprintf(tw, "%s\t%s\t", cell(median(results[i], func(s sample) mem { return s.idle })),
			cell(median(results[i], func(s sample) mem { return s.after })))
	}
	fmt.Fprintln(tw)
	tw.Flush()
	if split {
		fmt.Fprintln(w, "cells: VmRSS (RssAnon+RssFile), MB")
	} else {
		fmt.Fprintln(w, "VmRSS, MB")
	}
}

// median is the median of each field on its own (the upper one of an even count).
func median(samples []sample, pick func(sample) mem) mem {
	field := func(get func(mem) int64) int64 {
		v := make([]int64, len(samples))
		for i, s := range samples {
			v[i] = get(pick(s))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return mem{
		rss:  field(func(m mem) int64 { return m.rss }),
		anon: field(func(m mem) int64 { return m.anon }),
		file: field(func(m mem) int64 { return m.file }),
	}
}

func mb(kb int64) string { return fmt.Sprintf("%.1f", float64(kb)/1024) }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lastLines keeps the last few lines of a server's log for error messages.
type lastLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *lastLines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
	if len(l.lines) > 10 {
		l.lines = l.lines[1:]
	}
}

func (l *lastLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return "(empty log)"
	}
	return strings.Join(l.lines, " | ")
}
