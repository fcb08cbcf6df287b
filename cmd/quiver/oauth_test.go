package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/oauthtest"
)

// browsingWriter collects what a command writes and, like a user reading the terminal, opens
// each authorization URL it prints.
type browsingWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	opened  map[string]bool
	visited sync.WaitGroup
}

var authURLRE = regexp.MustCompile(`http://127\.0\.0\.1:\d+/authorize\?\S+`)

func (w *browsingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for _, u := range authURLRE.FindAllString(w.buf.String(), -1) {
		if !w.opened[u] {
			w.opened[u] = true
			w.visited.Go(func() {
				if resp, err := http.Get(u); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	}
	return len(p), nil
}

func (w *browsingWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// freeLoopbackPort returns a port free a moment ago: the redirect URL must name a port before
// the command that listens there starts.
func freeLoopbackPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// quiver call on a remote that needs OAuth prints the URL to open, receives the user back on
// the redirect URL's loopback port, makes the call, and seals the grant beside the database;
// the next call uses it without asking.
func TestCallAuthorizesFromTheTerminal(t *testing.T) {
	as := oauthtest.NewAuthServer(t)
	prot := oauthtest.NewProtectedServer(t, as)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "quiver.yaml")
	redirect := "http://127.0.0.1:" + freeLoopbackPort(t) + "/oauth/callback"
	doc := "mcp:\n  servers:\n    - name: prot\n      url: " + prot.URL + "\n      oauth: {redirect_url: \"" + redirect + "\"}\n"
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(configEnv, cfg)
	db := filepath.Join(dir, "quiver.db")

	call := func() (int, string, *browsingWriter) {
		var stdout bytes.Buffer
		stderr := &browsingWriter{opened: map[string]bool{}}
		a := &app{registry: &quiver.Registry{}, stdin: strings.NewReader(""), stdout: &stdout, stderr: stderr}
		code := a.run(context.Background(), []string{"call", "prot.whoami", "--db", db})
		stderr.visited.Wait()
		return code, stdout.String(), stderr
	}
	code, out, stderr := call()
	if code != exitOK || !strings.Contains(out, "you are alice") {
		t.Fatalf("first call: exit %d\nstdout %s\nstderr %s", code, out, stderr.String())
	}
	if !strings.Contains(stderr.String(), "needs your authorization; open this URL") {
		t.Errorf("the command did not ask the user: %s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, grantsDirName, "prot.grant")); err != nil {
		t.Errorf("no grant beside the database: %v", err)
	}
	code, out, stderr = call()
	if code != exitOK || !strings.Contains(out, "you are alice") || strings.Contains(stderr.String(), "open this URL") {
		t.Fatalf("second call: exit %d\nstdout %s\nstderr %s", code, out, stderr.String())
	}
	if h := as.Hits(); h.Authorizes != 1 {
		t.Errorf("authorizations = %d, want 1: the second call should use the saved grant", h.Authorizes)
	}
}
