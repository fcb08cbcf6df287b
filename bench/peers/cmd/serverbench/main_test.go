//go:build linux && (amd64 || arm64)

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain makes the test binary a peer server when the benchmark re-executes it, as the
// command's main does.
func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		if err := serveRole(role); err != nil {
			fmt.Fprintf(os.Stderr, "serverbench %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRun runs the whole benchmark small, against the two peers and a quiver built from this
// tree, and checks that it prints every line with positive figures. It asserts no timing.
func TestRun(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: the test builds ./cmd/quiver with it")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := moduleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(t.Context(), d.Add(-20*time.Second))
	}
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "quiver")
	build := exec.CommandContext(ctx, goBin, "build", "-o", bin, "./cmd/quiver")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building quiver: %v\n%s", err, out)
	}

	cfg := config{quiver: bin, rounds: 1, calls: 40, lists: 5, tools: 20, sessions: 20, settle: 10 * time.Millisecond,
		profileDir: filepath.Join(dir, "profiles"), profileSeconds: 1}
	var out, progress bytes.Buffer
	if err := run(ctx, cfg, &out, &progress); err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	t.Logf("output:\n%s", out.String())
	if kids := children(t); len(kids) > 0 {
		t.Errorf("servers still running after the run: %v", kids)
	}

	lines := map[string][]string{} // benchmark name -> its fields after the name
	for line := range strings.Lines(out.String()) {
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], "Benchmark") {
			lines[f[0]] = f[1:]
		}
	}
	if !strings.HasPrefix(out.String(), "# round 1\n") {
		t.Errorf("the output does not start with # round 1")
	}
	phases := map[string]int{"call-seq": 40, "call-c16": 40, "list-seq": 5, "list-c16": 5, "sessions": 20}
	for _, label := range []string{"bare-go-sdk", "mcp-go", "quiver"} {
		want := phases
		if label == "quiver" {
			want = map[string]int{"api-seq": 40, "api-c16": 40}
			for k, v := range phases {
				want[k] = v
			}
		}
		for ph, ops := range want {
			name := "BenchmarkServe/" + label + "/" + ph
			f := checkLine(t, name, lines[name], "calls/s", "p50-µs", "p99-µs", "server-B/op")
			// The call phases go on while their CPU profiles are taken.
			if n, _ := strconv.Atoi(f); n != ops && !((ph == "call-c16" || ph == "call-seq") && n > ops) {
				t.Errorf("%s: %s ops, want %d", name, f, ops)
			}
		}
		name := "BenchmarkServeRSS/" + label
		checkLine(t, name, lines[name], "idle-MB", "after-calls-MB", "after-sessions-MB", "idle-anon-MB", "idle-file-MB")
		for _, file := range []string{label + "-call-seq.pprof", label + "-call-c16.pprof", label + "-allocs.pprof"} {
			if st, err := os.Stat(filepath.Join(cfg.profileDir, file)); err != nil || st.Size() == 0 {
				t.Errorf("profile %s: %v, %v", file, st, err)
			}
		}
	}
	if want := 3*(5+1) + 2; len(lines) != want {
		t.Errorf("%d benchmark lines, want %d", len(lines), want)
	}
}

// checkLine checks that fields (a benchmark line after its name) are a positive count of
// iterations and a positive value of each unit, in order, and returns the count.
func checkLine(t *testing.T, name string, fields []string, units ...string) string {
	t.Helper()
	if len(fields) != 1+2*len(units) {
		t.Errorf("%s: fields %q, want a count and %v", name, fields, units)
		return ""
	}
	if n, err := strconv.Atoi(fields[0]); err != nil || n <= 0 {
		t.Errorf("%s: count %q", name, fields[0])
	}
	for i, u := range units {
		v, err := strconv.ParseFloat(fields[1+2*i], 64)
		if err != nil || v <= 0 || fields[2+2*i] != u {
			t.Errorf("%s: %q %q, want a positive figure in %s", name, fields[1+2*i], fields[2+2*i], u)
		}
	}
	return fields[0]
}

// children lists the processes this one has started that still run (or are not reaped).
func children(t *testing.T) []string {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread has exited
		}
		kids = append(kids, strings.Fields(string(b))...)
	}
	return kids
}

func TestParse(t *testing.T) {
	m, err := parseStatus("Name:\tquiver\nVmRSS:\t   40960 kB\nRssAnon:\t   10240 kB\nRssFile:\t   30720 kB\nRssShmem:\t0 kB\n")
	if err != nil || m != (mem{rss: 40960, anon: 10240, file: 30720}) {
		t.Errorf("parseStatus: %+v, %v", m, err)
	}
	if _, err := parseStatus("VmRSS:\t1 kB\n"); err == nil {
		t.Error("parseStatus accepted a status without RssAnon and RssFile")
	}
	n, err := parseTotalAlloc("heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 10\n# TotalAlloc = 123456\n# Sys = 99\n")
	if err != nil || n != 123456 {
		t.Errorf("parseTotalAlloc: %d, %v", n, err)
	}
	if m := keyPattern.FindStringSubmatch("    qvk_gXUcOmBN-SNh_KQ  "); m == nil || m[1] != "qvk_gXUcOmBN-SNh_KQ" {
		t.Errorf("keyPattern: %q", m)
	}
	if keyPattern.MatchString(`  MCP and API clients send it as "Authorization: Bearer qvk_..."`) {
		t.Error("keyPattern matched the banner's explanation")
	}
}
