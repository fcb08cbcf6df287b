package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkServeReady: how long quiver serve --config takes to serve a configuration whose
// OpenAPI document is GitHub Enterprise Server 3.17's description (11 MB, 964 tools, from the
// pinned @octokit/openapi under QUIVER_TEST_NPM), the built binary started as an operator
// starts it: first on an empty database (the files become the fleet's first version, checked,
// stored, then served) and again on the same database (the stored version served). It reports
// the wall time until "serving MCP at", the CPU the process used until then (user and system,
// from /proc) and its peak RSS then (VmHWM). Linux only.
//
//	QUIVER_TEST_NPM=$PWD/.cache/npm go test -run '^$' -bench BenchmarkServeReady -benchtime 3x ./cmd/quiver/
func BenchmarkServeReady(b *testing.B) {
	npm := os.Getenv("QUIVER_TEST_NPM")
	if npm == "" {
		b.Skip("set QUIVER_TEST_NPM to the pinned npm packages (bash .ci/run does) to read GitHub Enterprise Server's description")
	}
	doc := filepath.Join(npm, "node_modules", "@octokit", "openapi", "generated", "ghes-3.17.json")
	if _, err := os.Stat(doc); err != nil {
		b.Fatalf("%v: is .ci/run's MCP_NPM_PACKAGES installed?", err)
	}
	bin := quiverBinary(b)
	config := filepath.Join(b.TempDir(), "quiver.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, "openapi:\n  - {name: ghes, document: %q, servers: [\"https://ghes.example/api/v3\"]}\n", doc), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, restart := range []bool{false, true} {
		name := map[bool]string{false: "first-start", true: "restart"}[restart]
		b.Run(name, func(b *testing.B) {
			var wall, cpu time.Duration
			var rss int64
			for b.Loop() {
				b.StopTimer()
				data := b.TempDir()
				if restart {
					startedServe(b, bin, config, data) // the first start stores the fleet's version
				}
				b.StartTimer()
				r := startedServe(b, bin, config, data)
				wall, cpu, rss = wall+r.wall, cpu+r.cpu, max(rss, r.rss)
			}
			n := float64(b.N)
			b.ReportMetric(wall.Seconds()/n, "ready-s")
			b.ReportMetric(cpu.Seconds()/n, "cpu-s")
			b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MB")
		})
	}
}

// readiness is what a start of quiver serve cost until it served.
type readiness struct {
	wall, cpu time.Duration
	rss       int64 // bytes
}

// startedServe starts bin serve with the configuration and data directory, waits until it
// serves, measures it, and stops it.
func startedServe(b *testing.B, bin, config, data string) readiness {
	b.Helper()
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--config", config)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+data, configEnv+"=", addrEnv+"=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stderr)
	var said strings.Builder
	for lines.Scan() {
		said.WriteString(lines.Text() + "\n")
		if strings.Contains(lines.Text(), "serving MCP at") {
			r := readiness{wall: time.Since(start)}
			r.cpu, r.rss = processCost(b, cmd.Process.Pid)
			go func() { // keep draining, so the server never blocks on its log
				for lines.Scan() {
				}
			}()
			return r
		}
	}
	b.Fatalf("quiver serve ended before serving:\n%s", said.String())
	return readiness{}
}

// processCost reads a process's CPU time (user and system) and peak RSS from /proc.
func processCost(b *testing.B, pid int) (time.Duration, int64) {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's name (in parentheses, which may hold spaces): utime and
	// stime are the 12th and 13th, in clock ticks of 1/100 s.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	var rss int64
	for _, line := range strings.Split(string(status), "\n") {
		if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			v, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
			rss = v << 10
		}
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, rss
}
