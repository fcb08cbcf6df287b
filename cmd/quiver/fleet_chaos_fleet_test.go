//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The fleet of the chaos test (fleet_chaos_test.go): quiver serve nodes, each this test binary
// started again (TestFleetChaosNode) on a port of its own that it keeps across restarts, and
// HAProxy in front of them, round-robin without stickiness, taking a node out while its
// /readyz fails. The nodes report every execution of the tally tools on standard output
// (crashtest.Report), which the fleet reads as they come.

// Environment variables by which the test gives a node what it serves. TestMain replaces
// XDG_DATA_HOME and unsets QUIVER_SECRET_KEY in every test process, so the node's own travel
// under names of their own.
const (
	chaosEnvDSN    = "QUIVER_CHAOS_NODE_DSN"
	chaosEnvAgents = "QUIVER_CHAOS_NODE_AGENTS"
	chaosEnvAddr   = "QUIVER_CHAOS_NODE_ADDR"
	chaosEnvLife   = "QUIVER_CHAOS_NODE_LIFE"
	chaosEnvData   = "QUIVER_CHAOS_NODE_DATA"
	chaosEnvSecret = "QUIVER_CHAOS_NODE_SECRET"
	chaosEnvDrain  = "QUIVER_CHAOS_NODE_DRAIN"
)

// chaosExecution is one execution of a tally tool, as a node reported it.
type chaosExecution struct {
	life, workspace, thread, call string
}

// chaosFleet is the nodes, the load balancer and what the nodes reported.
type chaosFleet struct {
	t         testing.TB
	env       []string // what every node is started with
	nodes     []*chaosNode
	lb        string // the load balancer's base URL
	admin     string // the operator's key, printed by the first node's first life
	drainWait time.Duration

	mu     sync.Mutex
	ran    map[string][]chaosExecution // by the tally's key, in the order reported
	errors []string                    // what went wrong in the nodes: error lines, exits nobody asked for
	logged []string                    // the warnings and errors the lives that ended logged
}

// chaosNode is one node: its port and data directory, which it keeps, and its current life.
type chaosNode struct {
	// port is the node's across its lives. Go listens with SO_REUSEADDR, so a new life binds
	// it again at once, whatever the killed one left in TIME_WAIT.
	index, port int
	dir         string // XDG_DATA_HOME, deleted before every life: a node is disposable
	lives       int

	mu       sync.Mutex
	life     string // "n1.3": node 1's fourth life
	cmd      *exec.Cmd
	stderr   *syncBuffer
	exited   chan struct{}
	expected bool // the test is ending this life
}

// newChaosFleet prepares n nodes serving agents on dsn; start starts them.
func newChaosFleet(t testing.TB, n int, dsn, agents string, env []string) *chaosFleet {
	root := t.TempDir()
	f := &chaosFleet{t: t, ran: map[string][]chaosExecution{}, drainWait: time.Second,
		env: append([]string{chaosEnvDSN + "=" + dsn, chaosEnvAgents + "=" + agents, chaosEnvSecret + "=" + strings.Repeat("ab", 32),
			configEnv + "=", addrEnv + "=", publicURLEnv + "="}, env...)}
	for i := range n {
		f.nodes = append(f.nodes, &chaosNode{index: i, port: freePort(t), dir: filepath.Join(root, "node"+strconv.Itoa(i))})
	}
	t.Cleanup(func() {
		for _, node := range f.nodes {
			f.kill(node)
		}
	})
	return f
}

// start starts every node, one after the other: the first life of the first node makes the
// operator's key, which the others must find made.
func (f *chaosFleet) start() {
	f.t.Helper()
	for _, n := range f.nodes {
		f.startNode(n)
		if f.admin == "" {
			if f.admin = firstKeyRE.FindString(n.stderr.String()); f.admin == "" {
				f.t.Fatalf("node %d printed no key on the fleet's first start:\n%s", n.index, n.stderr.String())
			}
		}
	}
}

// startNode starts a new life of n on its port, with an empty data directory, and waits until
// it serves.
func (f *chaosFleet) startNode(n *chaosNode) {
	t := f.t
	t.Helper()
	if err := os.RemoveAll(n.dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(n.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	life := fmt.Sprintf("n%d.%d", n.index, n.lives)
	n.lives++
	cmd := exec.Command(os.Args[0], "-test.run=^TestFleetChaosNode$", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(append(os.Environ(), f.env...), chaosEnvAddr+"="+n.addr(), chaosEnvLife+"="+life, chaosEnvData+"="+n.dir,
		fmt.Sprintf("%s=%s", chaosEnvDrain, f.drainWait))
	// A test process that dies (its timeout) takes its nodes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	n.mu.Lock()
	n.life, n.cmd, n.stderr, n.exited, n.expected = life, cmd, stderr, exited, false
	n.mu.Unlock()
	go f.follow(n, life, cmd, out, exited)
	for deadline := time.Now().Add(30 * time.Second); !servingRE.MatchString(stderr.String()); time.Sleep(10 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("node %s exited before serving:\n%s", life, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s did not serve within 30 s:\n%s", life, stderr.String())
		}
	}
}

// follow reads what a life reports until it exits, then records an exit the test did not ask
// for.
func (f *chaosFleet) follow(n *chaosNode, life string, cmd *exec.Cmd, out io.Reader, exited chan struct{}) {
	defer close(exited)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f.collect(life, sc.Text())
	}
	err := cmd.Wait()
	n.mu.Lock()
	expected := n.expected
	n.mu.Unlock()
	if !expected {
		f.fail("node %s exited by itself (%v):\n%s", life, err, cmd.Stderr.(*syncBuffer).String())
	}
	f.keepLogged(life, cmd.Stderr.(*syncBuffer).String())
}

// keepLogged keeps the warnings and errors a life logged, for the report: the chaos causes
// some (a request cut by the database's restart), and they say where to look when a check
// fails.
func (f *chaosFleet) keepLogged(life, stderr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			f.logged = append(f.logged, life+": "+line)
		}
	}
}

// collect records a line a node printed: "ran KEY WORKSPACE THREAD CALL" for an execution of a
// tally tool, "error ..." when the node's test failed. Other lines (the test framework's) are
// not the fleet's business.
func (f *chaosFleet) collect(life, line string) {
	switch fields := strings.Fields(line); {
	case len(fields) == 5 && fields[0] == "ran":
		f.mu.Lock()
		f.ran[fields[1]] = append(f.ran[fields[1]], chaosExecution{life: life, workspace: fields[2], thread: fields[3], call: fields[4]})
		f.mu.Unlock()
	case strings.HasPrefix(line, "error "):
		f.fail("node %s: %s", life, line)
	}
}

// fail records what went wrong in a node, to fail the test with at its end.
func (f *chaosFleet) fail(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

// executions returns a copy of the executions reported so far.
func (f *chaosFleet) executions() map[string][]chaosExecution {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]chaosExecution, len(f.ran))
	for k, v := range f.ran {
		out[k] = append([]chaosExecution(nil), v...)
	}
	return out
}

// kill ends n's life with SIGKILL, if it runs, and waits for it to be gone.
func (f *chaosFleet) kill(n *chaosNode) {
	f.signal(n, syscall.SIGKILL)
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	if exited != nil {
		<-exited
	}
}

// drain sends n SIGTERM and returns how long it took to exit, failing the test if it did not
// within bound or exited with an error.
func (f *chaosFleet) drain(n *chaosNode, bound time.Duration) time.Duration {
	f.t.Helper()
	began := time.Now()
	f.signal(n, syscall.SIGTERM)
	n.mu.Lock()
	exited, cmd, life := n.exited, n.cmd, n.life
	n.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(bound):
		f.t.Errorf("node %s did not exit within %v of SIGTERM:\n%s", life, bound, n.stderr.String())
		f.kill(n)
		return time.Since(began)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		f.t.Errorf("node %s exited with %d after SIGTERM, want 0:\n%s", life, code, n.stderr.String())
	}
	return time.Since(began)
}

// signal sends sig to n's current life, if it still runs, as an exit the test asked for.
func (f *chaosFleet) signal(n *chaosNode, sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	select {
	case <-n.exited:
		return
	default:
	}
	n.expected = true
	_ = n.cmd.Process.Signal(sig)
}

// stopAll kills every node, so that what they logged is kept.
func (f *chaosFleet) stopAll() {
	for _, n := range f.nodes {
		f.kill(n)
	}
}

// loggedSummary counts the warnings and errors the lives logged, by message (time and
// attributes that vary left out), for the report.
func (f *chaosFleet) loggedSummary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	counts := map[string]int{}
	for _, line := range f.logged {
		msg := line
		if i := strings.Index(line, " msg="); i >= 0 {
			msg = line[i+1:]
		}
		if len(msg) > 160 {
			msg = msg[:160]
		}
		counts[msg]++
	}
	var out []string
	for msg, n := range counts {
		out = append(out, fmt.Sprintf("%4d× %s", n, msg))
	}
	slices.Sort(out)
	return fmt.Sprintf("%d warnings and errors logged:\n%s", len(f.logged), strings.Join(out, "\n"))
}

// logs is every current life's standard error, for a failure's message.
func (f *chaosFleet) logs() string {
	var b strings.Builder
	for _, n := range f.nodes {
		n.mu.Lock()
		if n.stderr != nil {
			fmt.Fprintf(&b, "=== node %s\n%s\n", n.life, lastLines(n.stderr.String(), 40))
		}
		n.mu.Unlock()
	}
	return b.String()
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (n *chaosNode) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// haproxyFallback is where Debian installs HAProxy, looked at when PATH has none.
var haproxyFallback = "/usr/sbin/haproxy"

// haproxyBinary finds HAProxy, the load balancer the fleet chaos test puts in front of the
// nodes (on PATH, or Debian's /usr/sbin/haproxy, which a user's PATH may lack). Without it the
// test is skipped, saying how to run it, unless the environment variable CI is set (.ci/run
// sets it, and installs HAProxy): there the test fails, so that CI never passes without it.
func haproxyBinary(t *testing.T) string {
	t.Helper()
	if bin, err := exec.LookPath("haproxy"); err == nil {
		return bin
	}
	if _, err := os.Stat(haproxyFallback); err == nil {
		return haproxyFallback
	}
	const howTo = "the fleet chaos test needs HAProxy, the load balancer in front of the nodes, and there is none " +
		"on PATH or at /usr/sbin/haproxy: install it (apt-get install haproxy; .ci/run does) to run it"
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set but " + howTo)
	}
	t.Skip(howTo)
	return ""
}

// TestFleetChaosSkipsWithoutHAProxy: with no HAProxy, the fleet chaos test is skipped,
// saying how to run it, outside CI (go test ./... on a contributor's machine with PostgreSQL
// passes), and fails when CI is set. It runs this test binary again on haproxyProbe, with no
// HAProxy to find.
func TestFleetChaosSkipsWithoutHAProxy(t *testing.T) {
	for _, c := range []struct {
		ci, want string
		fail     bool
	}{
		{"", "--- SKIP: TestHAProxyProbe", false},
		{"true", "--- FAIL: TestHAProxyProbe", true},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestHAProxyProbe$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "PATH="+t.TempDir(), "CI="+c.ci, "QUIVER_HAPROXY_PROBE="+filepath.Join(t.TempDir(), "haproxy"))
		out, err := cmd.CombinedOutput()
		if (err != nil) != c.fail || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "install it (apt-get install haproxy") {
			t.Errorf("CI=%q: %v, want %q saying how to install HAProxy:\n%s", c.ci, err, c.want, out)
		}
	}
}

// TestHAProxyProbe looks for HAProxy as the fleet chaos test does, with the fallback path
// TestFleetChaosSkipsWithoutHAProxy gives; it does nothing otherwise.
func TestHAProxyProbe(t *testing.T) {
	fallback := os.Getenv("QUIVER_HAPROXY_PROBE")
	if fallback == "" {
		return
	}
	haproxyFallback = fallback
	t.Logf("found %s", haproxyBinary(t))
}

// startHAProxy starts HAProxy (bin) in front of the nodes and returns its base URL. Round-robin
// balances every request on its own (no stickiness, no preference for the last server). A
// connection refused by a dead node is tried on another; a request a node received is never
// sent again. Health checks on /readyz every 200 ms take a draining or dead node out.
func (f *chaosFleet) startHAProxy(bin string) {
	t := f.t
	t.Helper()
	port := freePort(t)
	var servers strings.Builder
	for _, n := range f.nodes {
		fmt.Fprintf(&servers, "  server node%d %s\n", n.index, n.addr())
	}
	cfg := fmt.Sprintf(`global
  maxconn 4096
defaults
  mode http
  timeout connect 500ms
  timeout client 60s
  timeout server 60s
  timeout http-request 10s
  retries 3
  option redispatch 1
frontend quiver
  bind 127.0.0.1:%d
  default_backend nodes
backend nodes
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  default-server check inter 200ms fall 1 rise 1
%s`, port, servers.String())
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-f", path, "-db")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting HAProxy: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	f.lb = fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(f.lb + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy did not pass /readyz to a node within 10 s:\n%s", stderr.String())
		}
	}
}
