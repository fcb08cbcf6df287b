package interop

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

// Clients of MCP 2026-07-28, the protocol without sessions, through two nodes of a fleet on one
// PostgreSQL database behind HAProxy, which sends every request to the next node in turn:
// mcp-go (v1.2.1) and the TypeScript SDK's v2 client, each at its default, connect without
// falling back to a session, and every request is answered by whichever node it reaches. The
// TypeScript client also confirms a call: the node it reaches asks through a multi round-trip
// request, and the other node takes the answer.
func TestSessionlessClientsThroughAFleet(t *testing.T) {
	dsn := fleetDatabase(t)
	haproxy := haproxyBinary(t)
	env := []string{"QUIVER_SECRET_KEY=" + strings.Repeat("5e", 32), "QUIVER_POSTGRES="}
	dir := t.TempDir()
	tool := filepath.Join(dir, "guarded_note.yaml")
	if err := os.WriteFile(tool, []byte("name: guarded_note\ndescription: Notes a text once a person allows it.\nrequires_confirmation: true\n"+
		"code: |\n  export default ({ text }) => \"noted \" + text\n"+
		"input_schema: {type: object, properties: {text: {type: string}}, required: [text]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	add := exec.Command(quiverBinary(t), "tools", "add", tool, "--postgres", dsn)
	add.Env = append(os.Environ(), append(env, "XDG_DATA_HOME="+t.TempDir(), "QUIVER_CONFIG=")...)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("tools add: %v\n%s", err, out)
	}
	a, key := serveEnv(t, env, true, "--postgres", dsn)
	b, _ := serveEnv(t, env, false, "--postgres", dsn)
	lb, served := balance(t, haproxy, a, b)
	lb += "/mcp"

	t.Run("mcp-go", func(t *testing.T) {
		c, err := client.NewStreamableHttpClient(lb, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))
		if err != nil {
			t.Fatal(err)
		}
		if got := exercise(t, c); got != "2026-07-28" {
			t.Errorf("mcp-go negotiated %s through the fleet, want 2026-07-28", got)
		}
	})
	t.Run("typescript", func(t *testing.T) {
		npmDir(t)
		runJSEnv(t, []string{"QUIVER_EXPECT_PROTOCOL=2026-07-28", "QUIVER_CONFIRM_TOOL=guarded_note"}, "client.mjs", "http", lb, key, "auto")
	})
	counts := served()
	t.Logf("requests per node: %v", counts)
	if len(counts) != 2 || counts[0] < 5 || counts[1] < 5 {
		t.Errorf("the nodes served %v requests: the balancer did not share them", counts)
	}
}

// fleetDatabase is a PostgreSQL connection string to a schema of its own on the database of
// QUIVER_TEST_POSTGRES (.ci/run sets it), dropped when the test ends. Without it the test skips,
// unless CI is set, where it fails.
func fleetDatabase(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("QUIVER_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("QUIVER_TEST_POSTGRES is not set: .ci/run sets it")
		}
		t.Skip("QUIVER_TEST_POSTGRES is not set: bash .ci/run starts PostgreSQL and sets it")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	schema := "interop_" + strings.ToLower(rand.Text()[:10])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(context.Background())
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// haproxyBinary is HAProxy (on PATH, or where Debian installs it). Without it the test skips,
// unless CI is set (.ci/run installs it), where it fails.
func haproxyBinary(t *testing.T) string {
	t.Helper()
	if bin, err := exec.LookPath("haproxy"); err == nil {
		return bin
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return "/usr/sbin/haproxy"
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("HAProxy is not installed: .ci/run installs it (apt-get install haproxy)")
	}
	t.Skip("HAProxy is not installed: apt-get install haproxy, or run bash .ci/run")
	return ""
}

// balance starts HAProxy in front of the nodes' MCP endpoints and returns its base URL, and a
// function that counts the requests each node was sent (HAProxy's statistics). Round robin
// sends every request to the next node, whatever the request before it was.
func balance(t *testing.T, bin string, endpoints ...string) (string, func() []int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var servers strings.Builder
	for i, e := range endpoints {
		u, err := url.Parse(e)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&servers, "  server node%d %s\n", i, u.Host)
	}
	stats := filepath.Join(t.TempDir(), "stats.sock")
	cfg := fmt.Sprintf("global\n  stats socket %s\ndefaults\n  mode http\n  timeout connect 1s\n  timeout client 60s\n  timeout server 60s\n"+
		"frontend quiver\n  bind 127.0.0.1:%d\n  default_backend nodes\nbackend nodes\n  balance roundrobin\n%s", stats, port, servers.String())
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-f", path, "-db")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting HAProxy: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, func() []int { return servedBy(t, stats, len(endpoints)) }
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy did not reach a node within 10 s:\n%s", out.String())
		}
	}
}

// servedBy reads from HAProxy's statistics socket how many requests each of n nodes was sent.
func servedBy(t *testing.T, socket string, n int) []int {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatalf("HAProxy's statistics: %v", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("show stat\n")); err != nil {
		t.Fatal(err)
	}
	counts := make([]int, n)
	lines := bufio.NewScanner(conn)
	stot := -1
	for lines.Scan() {
		fields := strings.Split(lines.Text(), ",")
		if strings.HasPrefix(lines.Text(), "# ") {
			stot = slices.Index(fields, "stot")
			continue
		}
		var i int
		if stot < 0 || len(fields) <= stot || fields[0] != "nodes" {
			continue
		}
		if _, err := fmt.Sscanf(fields[1], "node%d", &i); err == nil && i < n {
			_, _ = fmt.Sscan(fields[stot], &counts[i])
		}
	}
	return counts
}

// serveEnv starts quiver serve as serve does, with env added, and returns its MCP endpoint and,
// when withKey, the admin key its first start printed (a node that joins a fleet prints none).
func serveEnv(t *testing.T, env []string, withKey bool, extra ...string) (endpoint, key string) {
	t.Helper()
	cmd := exec.Command(quiverBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0"}, extra...)...)
	cmd.Env = append(os.Environ(), append(env, "XDG_DATA_HOME="+t.TempDir(), "QUIVER_ADDR=", "QUIVER_CONFIG=")...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	urlRE, keyRE := regexp.MustCompile(`serving MCP at (http://\S+/mcp)`), regexp.MustCompile(`qvk_[A-Za-z0-9_-]{43}`)
	found := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			// The banner names the endpoint, then shows the first start's key.
			if k := keyRE.FindString(lines.Text()); k != "" {
				key = k
			}
			if m := urlRE.FindStringSubmatch(lines.Text()); m != nil {
				endpoint = m[1]
			}
			if endpoint != "" && (key != "" || !withKey) {
				close(found)
				break
			}
		}
		for lines.Scan() { // keep draining, so the server never blocks on its log
		}
	}()
	select {
	case <-found:
	case <-time.After(2 * time.Minute):
		t.Fatalf("quiver serve did not say where it serves (and show a key: %v) within 2 minutes", withKey)
	}
	return endpoint, key
}
