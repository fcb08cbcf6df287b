package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/platform"
)

// connectWithKey opens an MCP session (2025-11-25, the newest protocol with sessions) that
// sends key on every request.
func connectWithKey(t testing.TB, endpoint, key string) (*sdk.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Transport: bearer{key: key, next: http.DefaultTransport}}
	return sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1},
			&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
}

type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.key != "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return b.next.RoundTrip(r)
}

// quiver serve asks every MCP client for an API key: the first start prints an admin key (the
// next start does not), quiver keys makes and revokes more on the same database, a viewer's key
// lists the tools but cannot call them, another key cannot use a session it did not open, and
// a revoked key stops working within a second.
func TestServeAPIKeys(t *testing.T) {
	db := filepath.Join(t.TempDir(), "q.db")
	endpoint, stop, stderr := startServeWith(t, "--db", db)
	admin := firstKeyRE.FindString(stderr.String())
	if admin == "" || !strings.Contains(stderr.String(), "shown this once") {
		t.Fatalf("the first start printed no key:\n%s", stderr.String())
	}
	if _, err := connectWithKey(t, endpoint, ""); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("a client without a key: %v, want Unauthorized", err)
	}
	if _, err := connectWithKey(t, endpoint, admin[:len(admin)-2]+"xx"); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("a client with a wrong key: %v, want Unauthorized", err)
	}
	cs, err := connectWithKey(t, endpoint, admin)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "get_current_time", Arguments: map[string]any{"timezone": "UTC"}})
	if err != nil || res.IsError {
		t.Fatalf("the admin's call: %v %+v", err, res)
	}
	cs.Close()

	// More keys, from the CLI, on the same database.
	code, viewer, errOut := runCLI(t, "", "keys", "create", "--db", db, "--name", "dashboard", "--role", "viewer")
	viewer = strings.TrimSpace(viewer)
	if code != exitOK || firstKeyRE.FindString(viewer) != viewer {
		t.Fatalf("keys create: exit %d, %q\n%s", code, viewer, errOut)
	}
	vs, err := connectWithKey(t, endpoint, viewer)
	if err != nil {
		t.Fatal(err)
	}
	defer vs.Close()
	if tools, err := vs.ListTools(context.Background(), nil); err != nil || len(tools.Tools) == 0 {
		t.Fatalf("the viewer lists the tools: %v", err)
	}
	res, err = vs.CallTool(context.Background(), &sdk.CallToolParams{Name: "get_current_time", Arguments: map[string]any{"timezone": "UTC"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "may list the tools but not call them") {
		t.Fatalf("the viewer's call: %v %+v", err, res)
	}
	// The admin's key cannot be used in the viewer's session, nor the viewer's in another's.
	sid := vs.ID()
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Authorization", "Bearer "+admin)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another key in the viewer's session: %v %v, want 403", resp, err)
	}

	code, list, _ := runCLI(t, "", "keys", "list", "--db", db)
	if code != exitOK || !strings.Contains(list, "first admin key") || !strings.Contains(list, "dashboard") || strings.Contains(list, viewer) {
		t.Fatalf("keys list: %d\n%s", code, list)
	}
	id := ""
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, "dashboard") {
			id = strings.Fields(line)[0]
		}
	}
	if code, _, errOut := runCLI(t, "", "keys", "revoke", "--db", db, id); code != exitOK {
		t.Fatalf("keys revoke %s: %d %s", id, code, errOut)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := vs.ListTools(context.Background(), nil); err != nil {
			break // refused: the key is revoked
		}
		if time.Now().After(deadline) {
			t.Fatal("the revoked key still works 5s after quiver keys revoke")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()

	// A second start prints no key: the workspace has keys.
	_, _, again := startServeWith(t, "--db", db)
	if firstKeyRE.MatchString(again.String()) {
		t.Errorf("the second start printed a key:\n%s", again.String())
	}
}

// quiver keys create makes keys through the platform, as POST /v1/keys does: past the cap of
// working keys a workspace may have, it is refused with the same words, and revoking one
// makes room.
func TestKeysCreateHoldsTheCap(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	db := filepath.Join(t.TempDir(), "q.db")
	for i := range platform.MaxKeysPerWorkspace {
		if code, _, stderr := runCLI(t, "", "keys", "create", "--name", fmt.Sprintf("k%d", i), "--db", db); code != exitOK {
			t.Fatalf("key %d: exit %d: %s", i, code, stderr)
		}
	}
	code, stdout, stderr := runCLI(t, "", "keys", "create", "--name", "one too many", "--db", db)
	if code != exitError || stdout != "" || !strings.Contains(stderr, "the workspace has 100 working API keys, the most it may: revoke one first") {
		t.Fatalf("a key past the cap: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	_, list, _ := runCLI(t, "", "keys", "list", "--json", "--db", db)
	var keys []struct{ ID string }
	if err := json.Unmarshal([]byte(list), &keys); err != nil || len(keys) != platform.MaxKeysPerWorkspace {
		t.Fatalf("keys list: %v, %d keys", err, len(keys))
	}
	if code, _, stderr := runCLI(t, "", "keys", "revoke", keys[0].ID, "--db", db); code != exitOK {
		t.Fatalf("revoke: %s", stderr)
	}
	if code, _, stderr := runCLI(t, "", "keys", "create", "--name", "in its place", "--db", db); code != exitOK {
		t.Fatalf("a key after one was revoked: exit %d: %s", code, stderr)
	}
}
