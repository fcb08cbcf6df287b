package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
)

// tenantWorld is two workspaces on one store, each with a member key, and a server serving
// both over real HTTP.
type tenantWorld struct {
	st         *memstore.Store
	url        string
	wsA, wsB   string
	keyA, keyB string
}

func newTenantWorld(t *testing.T) *tenantWorld {
	t.Helper()
	ctx := context.Background()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	w := &tenantWorld{st: st}
	w.wsA, w.keyA = newMember(t, st, "alpha")
	w.wsB, w.keyB = newMember(t, st, "beta")
	// Alpha has a JavaScript tool, beta a client tool, before the server starts.
	var sumIn schema.Schema
	mustDo(t, json.Unmarshal([]byte(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`), &sumIn))
	if _, _, err := jsfunc.Save(ctx, st, w.wsA, "", jsfunc.Definition{Name: "alpha_sum", Description: "Adds.",
		Code: `export default ({a, b}) => ({sum: a + b})`, InputSchema: &sumIn}); err != nil {
		t.Fatal(err)
	}
	in := &store.Schema{WorkspaceID: w.wsB, Content: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}
	out := &store.Schema{WorkspaceID: w.wsB, Content: json.RawMessage(`true`)}
	mustDo(t, st.CreateSchema(ctx, in))
	mustDo(t, st.CreateSchema(ctx, out))
	mustDo(t, st.CreateTool(ctx, &store.Tool{WorkspaceID: w.wsB, Name: "beta_open_file", Description: "Opens a file on the user's machine.",
		Target: store.TargetClient, InputSchemaID: in.ID, OutputSchemaID: out.ID, Enabled: true}))

	sctx, cancel := context.WithCancel(ctx)
	srv, err := server.New(sctx, server.Config{Platform: newPlatform(t, st, testRegistry(t)), Auth: &server.Authenticator{Keys: st},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	w.url = "http://" + ln.Addr().String()
	return w
}

// newMember makes a workspace called name with a user who administers it, and a member key of
// that user's; it returns the workspace's id and the key.
func newMember(t *testing.T, st store.Store, name string) (workspaceID, key string) {
	t.Helper()
	ctx := context.Background()
	es, ok := st.(interface {
		store.Entities
		store.APIKeys
	})
	if !ok {
		t.Fatalf("%T keeps no workspaces or keys", st)
	}
	ws := &store.Workspace{Name: name}
	u := &store.User{Email: name + "@example.test"}
	mustDo(t, es.CreateWorkspace(ctx, ws))
	mustDo(t, es.CreateUser(ctx, u))
	mustDo(t, es.AddMember(ctx, &store.Membership{WorkspaceID: ws.ID, UserID: u.ID, Role: store.MemberRoleAdmin}))
	secret, prefix, hash := platform.NewAPIKey()
	mustDo(t, es.CreateAPIKey(ctx, &store.APIKey{WorkspaceID: ws.ID, UserID: u.ID, Name: "k", Role: store.KeyRoleMember, Prefix: prefix, Hash: hash}))
	return ws.ID, secret
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// api sends a request with a key and decodes the JSON answer.
func (w *tenantWorld) api(t *testing.T, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, w.url+path, strings.NewReader(body))
	mustDo(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	mustDo(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s %s: not JSON: %s", method, path, b)
		}
	}
	return resp.StatusCode, out
}

func (w *tenantWorld) servedNames(t *testing.T, key string) []string {
	t.Helper()
	status, out := w.api(t, "GET", "/v1/tools/served", key, "")
	if status != 200 {
		t.Fatalf("GET /v1/tools/served: %d %v", status, out)
	}
	var names []string
	for _, tl := range out["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	return names
}

type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

func (w *tenantWorld) mcpNames(t *testing.T, key string) []string {
	t.Helper()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "tenant-test", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: w.url + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: bearerTransport{key}}}, nil)
	mustDo(t, err)
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	mustDo(t, err)
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// Each workspace is served its own stored tools beside the server's, over the API and MCP, and
// never the other's: a call to the other's tool is an unknown tool.
func TestWorkspacesAreServedTheirOwnTools(t *testing.T) {
	w := newTenantWorld(t)
	for _, door := range []struct {
		name  string
		names func(*testing.T, string) []string
	}{{"api", w.servedNames}, {"mcp", w.mcpNames}} {
		a, b := door.names(t, w.keyA), door.names(t, w.keyB)
		if !slices.Contains(a, "alpha_sum") || slices.Contains(a, "beta_open_file") || !slices.Contains(a, "echo") {
			t.Errorf("%s: alpha is served %v", door.name, a)
		}
		if !slices.Contains(b, "beta_open_file") || slices.Contains(b, "alpha_sum") || !slices.Contains(b, "echo") {
			t.Errorf("%s: beta is served %v", door.name, b)
		}
	}
	status, out := w.api(t, "POST", "/v1/tools/alpha_sum/call", w.keyA, `{"args":{"a":2,"b":3}}`)
	if res, _ := out["result"].(map[string]any); status != 200 || res["status"] != "success" || !strings.Contains(toJSON(res), `"sum":5`) {
		t.Fatalf("alpha calls its tool: %d %v", status, out)
	}
	status, out = w.api(t, "POST", "/v1/tools/alpha_sum/call", w.keyB, `{"args":{"a":2,"b":3}}`)
	if res, _ := out["result"].(map[string]any); status != 200 || res["status"] != "error" || strings.Contains(toJSON(res), `"sum"`) {
		t.Fatalf("beta calls alpha's tool: %d %v", status, out)
	}
}

// A tool another process adds to a workspace (here: straight into the store) is served
// within about a second, and one deleted is gone as soon.
func TestWorkspaceToolsFollowTheStore(t *testing.T) {
	w := newTenantWorld(t)
	ctx := context.Background()
	if names := w.servedNames(t, w.keyA); slices.Contains(names, "alpha_late") {
		t.Fatalf("served before it exists: %v", names)
	}
	tool, _, err := jsfunc.Save(ctx, w.st, w.wsA, "", jsfunc.Definition{Name: "alpha_late", Description: "Late.", Code: `export default () => "late"`})
	mustDo(t, err)
	waitServed := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for slices.Contains(w.servedNames(t, w.keyA), "alpha_late") != want {
			if time.Now().After(deadline) {
				t.Fatalf("alpha_late served: want %v after 5 s", want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitServed(true)
	if slices.Contains(w.servedNames(t, w.keyB), "alpha_late") {
		t.Fatal("beta is served alpha's new tool")
	}
	_, err = w.st.DeleteTool(ctx, w.wsA, tool.ID, store.RetentionShort)
	mustDo(t, err)
	waitServed(false)
}

// eventStreams makes a thread in each workspace and returns them with a function that opens
// an event stream of a thread with a key; the streams are closed when the test ends.
func (w *tenantWorld) eventStreams(t *testing.T) (threadA, threadB string, open func(key, threadID string) *http.Response) {
	t.Helper()
	_, out := w.api(t, "POST", "/v1/tools/echo/call", w.keyA, `{"args":{"text":"hi"}}`)
	threadA, _ = out["thread_id"].(string)
	_, out = w.api(t, "POST", "/v1/tools/echo/call", w.keyB, `{"args":{"text":"hi"}}`)
	threadB, _ = out["thread_id"].(string)
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	return threadA, threadB, func(key, threadID string) *http.Response {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", w.url+"/v1/threads/"+threadID+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		mustDo(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Event streams are capped per key: the 33rd stream of one key is refused with 429 while
// another key's is served, and closing one frees its place.
func TestEventStreamsAreCappedPerKey(t *testing.T) {
	w := newTenantWorld(t)
	threadA, threadB, open := w.eventStreams(t)
	var streams []*http.Response
	for i := range 32 {
		resp := open(w.keyA, threadA)
		if resp.StatusCode != 200 {
			t.Fatalf("stream %d: %d", i+1, resp.StatusCode)
		}
		streams = append(streams, resp)
	}
	over := open(w.keyA, threadA)
	body, _ := io.ReadAll(over.Body)
	if over.StatusCode != 429 || !strings.Contains(string(body), `"code":"too_many_streams"`) {
		t.Fatalf("the 33rd stream of one key: %d %s", over.StatusCode, body)
	}
	if resp := open(w.keyB, threadB); resp.StatusCode != 200 {
		t.Fatalf("another key's stream: %d", resp.StatusCode)
	}
	streams[0].Body.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp := open(w.keyA, threadA)
		if resp.StatusCode == 200 {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream's place is not given back: %d", resp.StatusCode)
		}
	}
}

// One workspace cannot take every event stream by making keys: its streams are capped at its
// share (250) whatever keys it holds, and another workspace's stream is still served. Before,
// an admin of A made 32 viewer keys, filled all 1,000 streams, and B's answered 503.
func TestEventStreamsAreCappedPerWorkspace(t *testing.T) {
	w := newTenantWorld(t)
	ctx := context.Background()
	threadA, threadB, open := w.eventStreams(t)
	existing, err := w.st.APIKeys(ctx, w.wsA)
	mustDo(t, err)
	keys := []string{w.keyA}
	for i := range 8 {
		secret, err := platform.IssueAPIKey(ctx, w.st, &store.APIKey{WorkspaceID: w.wsA, UserID: existing[0].UserID,
			Name: fmt.Sprintf("viewer %d", i), Role: store.KeyRoleViewer})
		mustDo(t, err)
		keys = append(keys, secret)
	}
	opened := 0
	var refused *http.Response
	for _, key := range keys {
		for range 32 {
			resp := open(key, threadA)
			if resp.StatusCode != 200 {
				refused = resp
				break
			}
			opened++
		}
		if refused != nil {
			break
		}
	}
	if refused == nil {
		t.Fatalf("workspace A opened %d streams with %d keys, and none was refused", opened, len(keys))
	}
	body, _ := io.ReadAll(refused.Body)
	if opened != 250 || refused.StatusCode != 429 || !strings.Contains(string(body), "workspace "+w.wsA) {
		t.Fatalf("after %d streams of workspace A: %d %s, want the 251st refused with 429 naming the workspace", opened, refused.StatusCode, body)
	}
	if resp := open(w.keyB, threadB); resp.StatusCode != 200 {
		t.Fatalf("workspace B's stream while A has its share: %d", resp.StatusCode)
	}
}
