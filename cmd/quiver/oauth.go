package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/store/vars"
)

// grantsDirName is the directory, beside the secret key, holding the OAuth grants of remote
// MCP servers.
const grantsDirName = "oauth-grants"

// usesOAuth reports whether a remote is configured with OAuth.
func usesOAuth(remotes []mcp.Remote) bool {
	for _, r := range remotes {
		if r.OAuth != nil {
			return true
		}
	}
	return false
}

// oauthGrants is where the OAuth grants of remotes are kept: sealed files beside the key
// file, under the key secret variables use (created on first use).
func oauthGrants(keyPath string) (*mcp.GrantFiles, error) {
	keys, err := vars.LoadKeyring(keyPath)
	if err != nil {
		return nil, fmt.Errorf("loading the secret key the OAuth grants are sealed with: %w", err)
	}
	return &mcp.GrantFiles{Dir: filepath.Join(filepath.Dir(keyPath), grantsDirName), Keys: keys}, nil
}

// defaultBaseURL is the base of the OAuth redirect URL of remotes that give none: where quiver
// serve listens, so one registration serves both the server and the commands.
func defaultBaseURL() string {
	addr := os.Getenv(addrEnv)
	if addr == "" {
		addr = defaultAddr
	}
	return "http://" + addr
}

// terminalAuthorizer takes the user through OAuth from a command that runs no server: it
// prints the authorization URL and receives the redirect on the redirect URL's loopback
// address, listening only while someone is authorizing.
type terminalAuthorizer struct {
	out       io.Writer
	callbacks mcp.Callbacks

	mu        sync.Mutex
	listening map[string]func() // stop, by redirect URL
}

func newTerminalAuthorizer(out io.Writer) *terminalAuthorizer {
	t := &terminalAuthorizer{out: out, listening: map[string]func(){}}
	t.callbacks.Logger = slog.New(slog.DiscardHandler)
	t.callbacks.OnPending = func(remote, authURL string) {
		fmt.Fprintf(out, "quiver: the MCP server %s needs your authorization; open this URL in a browser:\n\n  %s\n\n", remote, authURL)
	}
	return t
}

// Authorize listens at the redirect URL the authorization URL names, then waits for the
// user to come back there.
func (t *terminalAuthorizer) Authorize(ctx context.Context, remote, authURL string) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return nil, fmt.Errorf("the authorization URL is malformed: %w", err)
	}
	redirect := u.Query().Get("redirect_uri")
	t.mu.Lock()
	if _, ok := t.listening[redirect]; !ok {
		_, stop, err := mcp.ListenForCallbacks(context.WithoutCancel(ctx), &t.callbacks, redirect)
		if err != nil {
			t.mu.Unlock()
			return nil, fmt.Errorf("%w (while quiver serve runs there, call the tool through it, or give the server's oauth a redirect_url this command can listen at)", err)
		}
		t.listening[redirect] = stop
	}
	t.mu.Unlock()
	return t.callbacks.Authorize(ctx, remote, authURL)
}

// Close stops listening.
func (t *terminalAuthorizer) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, stop := range t.listening {
		stop()
	}
	clear(t.listening)
}
