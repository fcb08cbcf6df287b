package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/oauthtest"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/sqlite"
)

// serveWithOAuth runs a server whose one remote needs OAuth, on a port known before New so
// the redirect URL can default to the server's own /oauth/callback.
func serveWithOAuth(t *testing.T, db, remoteURL string, grants *mcp.GrantFiles) (base string, stop func()) {
	t.Helper()
	st, err := sqlite.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	p := newPlatform(t, st, &quiver.Registry{Logger: slog.New(slog.DiscardHandler)})
	serveConfiguration(t, p, "mcp:\n  servers:\n    - {name: prot, url: '"+remoteURL+"', oauth: {}}\n")
	srv, err := server.New(ctx, server.Config{Platform: p, Logger: slog.New(slog.DiscardHandler), PublicURL: base, OAuthGrants: grants})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			st.Close()
		}
	}
	t.Cleanup(stop)
	return base, stop
}

func health(t *testing.T, base string) mcp.RemoteStatus {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h server.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || len(h.MCPServers) != 1 {
		t.Fatalf("healthz: %+v %v", h, err)
	}
	return h.MCPServers[0]
}

func waitHealth(t *testing.T, base string, ok func(mcp.RemoteStatus) bool) mcp.RemoteStatus {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := health(t, base)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the remote's status never got there: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The whole flow through quiver serve: /healthz shows the URL to open, the user comes back
// to the server's /oauth/callback, the remote's tools are served over /mcp, the grant is
// sealed on disk, and a restarted server uses it without asking again.
func TestServeAuthorizesARemoteThroughItsCallback(t *testing.T) {
	as := oauthtest.NewAuthServer(t)
	prot := oauthtest.NewProtectedServer(t, as)
	dir := t.TempDir()
	grants := &mcp.GrantFiles{Dir: filepath.Join(dir, "oauth-grants"), Keys: newKeyring(t)}
	db := filepath.Join(dir, "quiver.db")

	base, stop := serveWithOAuth(t, db, prot.URL, grants)
	st := waitHealth(t, base, func(s mcp.RemoteStatus) bool { return s.AuthorizationURL != "" })
	if st.Connected || !strings.Contains(st.LastError, "authorize") {
		t.Errorf("status while waiting = %+v", st)
	}
	u, err := url.Parse(st.AuthorizationURL)
	if err != nil || u.Query().Get("redirect_uri") != base+mcp.OAuthCallbackPath {
		t.Fatalf("authorization URL %q: want the redirect %s", st.AuthorizationURL, base+mcp.OAuthCallbackPath)
	}
	// The user opens it; the authorization server sends the browser to the server's callback.
	resp, err := http.Get(st.AuthorizationURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Quiver is authorized") {
		t.Errorf("callback page: %d %s", resp.StatusCode, page)
	}
	waitHealth(t, base, func(s mcp.RemoteStatus) bool { return s.Connected && s.AuthorizationURL == "" && s.LastError == "" })

	callWhoami := func() {
		t.Helper()
		cs := connect(t, base, "oauth-test")
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "prot.whoami", Arguments: map[string]any{}})
		if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*sdk.TextContent).Text != "you are alice" {
			t.Fatalf("prot.whoami over /mcp: %v %+v", err, res)
		}
		cs.Close()
	}
	callWhoami()
	if _, err := os.Stat(filepath.Join(grants.Dir, "prot.grant")); err != nil {
		t.Fatalf("no grant on disk: %v", err)
	}

	// A restart reads the grant: no new authorization.
	stop()
	base, _ = serveWithOAuth(t, db, prot.URL, grants)
	waitHealth(t, base, func(s mcp.RemoteStatus) bool { return s.Connected })
	callWhoami()
	if h := as.Hits(); h.Authorizes != 1 || h.Registers != 1 {
		t.Errorf("authorization server hits %+v: the restarted server should have used the saved grant", h)
	}

	// A stale or forged callback is refused, and the server goes on.
	resp, err = http.Get(base + mcp.OAuthCallbackPath + "?code=x&state=forged")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("forged callback: %d, want 400", resp.StatusCode)
	}
	callWhoami()
}

// A remote MCP server that uses OAuth, on a server with a random port, no public URL and no
// redirect_url of its own, is left unconnected, and the log says what to set.
func TestServeNeedsAPlaceToComeBackTo(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := newPlatform(t, st, &quiver.Registry{})
	serveConfiguration(t, p, "mcp:\n  servers:\n    - {name: prot, url: 'http://127.0.0.1:9/mcp', oauth: {}}\n")
	var log bytes.Buffer
	srv, err := server.New(context.Background(), server.Config{Platform: p, Addr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.Contains(log.String(), "give its redirect_url, or the server a fixed port or a public URL") || !strings.Contains(log.String(), "mcp_server=prot") {
		t.Errorf("a random port and no redirect URL: the log says\n%s\nwant what to set", log.String())
	}
}

func newKeyring(t *testing.T) *secret.Keyring {
	t.Helper()
	k, _, err := secret.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return secret.NewKeyring(k)
}
