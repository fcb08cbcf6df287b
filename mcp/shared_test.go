package mcp_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	qmcp "github.com/quiverhq/quiver/mcp"
)

// sessionMap is a SessionStore in memory, which the handlers of a test share as the nodes of a
// fleet share their database; it refuses sessions beyond perOwner.
type sessionMap struct {
	mu       sync.Mutex
	open     map[string]*qmcp.SharedSession
	perOwner int
	resumed  int
}

func (m *sessionMap) OpenSession(_ context.Context, s *qmcp.SharedSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, o := range m.open {
		if o.Owner == s.Owner {
			n++
		}
	}
	if n >= m.perOwner {
		return &qmcp.SessionLimitError{Cap: "owner", Open: n}
	}
	m.open[s.ID] = s
	return nil
}

func (m *sessionMap) ResumeSession(_ context.Context, id string) (*qmcp.SharedSession, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resumed++
	if s, ok := m.open[id]; ok {
		return s, nil
	}
	return nil, qmcp.ErrNoSession
}

func (m *sessionMap) CloseSession(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.open[id]; !ok {
		return qmcp.ErrNoSession
	}
	delete(m.open, id)
	return nil
}

// sharedNodes serves two handlers of one server's tools over one session map, each on its own
// address, as two nodes; owner names the owner of each request by its X-Owner header.
func sharedNodes(t *testing.T, m *sessionMap, idle time.Duration) []string {
	owner := func(r *http.Request) string { return r.Header.Get("X-Owner") }
	var urls []string
	for range 2 {
		_, url := serveHTTP(t, &qmcp.HTTPOptions{Sessions: m, Owner: owner, SessionTimeout: idle})
		urls = append(urls, url)
	}
	return urls
}

// A session opened on one node goes on on the other; a node's copy that goes unused for the
// idle timeout is closed, and made again when the session is used there again; another owner
// gets 403; the store's refusal is a 429 with the JSON-RPC error; a closed session is 404.
func TestSharedSessions(t *testing.T) {
	m := &sessionMap{open: map[string]*qmcp.SharedSession{}, perOwner: 1}
	nodes := sharedNodes(t, m, 300*time.Millisecond)
	alice := http.Header{"X-Owner": {"alice"}, "Mcp-Protocol-Version": {"2025-11-25"}}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	a := post(t, http.DefaultClient, nodes[0], alice, init)
	id := a.header.Get("Mcp-Session-Id")
	if a.status != http.StatusOK || !strings.HasPrefix(id, "mcps_") {
		t.Fatalf("initialize: %d %q, session %q", a.status, a.body, id)
	}
	withSession := func(h http.Header) http.Header {
		h = h.Clone()
		h.Set("Mcp-Session-Id", id)
		return h
	}
	post(t, http.DefaultClient, nodes[0], withSession(alice), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for i, node := range []string{nodes[1], nodes[0], nodes[1]} {
		got := post(t, http.DefaultClient, node, withSession(alice), list)
		if sid := got.header.Get("Mcp-Session-Id"); got.status != http.StatusOK || !strings.Contains(got.body, `"greet"`) || (sid != "" && sid != id) {
			t.Fatalf("tools/list %d: %d %q, session header %q; want the tools under session %s", i, got.status, got.body, sid, id)
		}
	}

	m.mu.Lock()
	before := m.resumed
	m.mu.Unlock()
	time.Sleep(600 * time.Millisecond) // both nodes' copies go unused for twice the idle timeout
	if got := post(t, http.DefaultClient, nodes[1], withSession(alice), list); got.status != http.StatusOK {
		t.Fatalf("tools/list after the copies went idle: %d %q", got.status, got.body)
	}
	m.mu.Lock()
	after := m.resumed
	m.mu.Unlock()
	if after == before {
		t.Fatal("the node did not look the session up again after its copy went idle")
	}

	bob := http.Header{"X-Owner": {"bob"}, "Mcp-Protocol-Version": {"2025-11-25"}}
	if got := post(t, http.DefaultClient, nodes[1], withSession(bob), list); got.status != http.StatusForbidden || !strings.Contains(got.body, "another owner") {
		t.Fatalf("alice's session with bob's requests: %d %q, want 403", got.status, got.body)
	}
	if got := post(t, http.DefaultClient, nodes[1], alice, init); got.status != http.StatusTooManyRequests ||
		!strings.Contains(got.body, "-32030") || !strings.Contains(got.body, "alice has 1 open, the limit per client") || got.header.Get("Retry-After") == "" {
		t.Fatalf("a second session for alice: %d %q, want 429 with the store's words and Retry-After", got.status, got.body)
	}

	long := http.Header{"X-Owner": {"alice"}, "Mcp-Session-Id": {"mcps_" + strings.Repeat("x", 300)}, "Mcp-Protocol-Version": {"2025-11-25"}}
	m.mu.Lock()
	resumedBefore := m.resumed
	m.mu.Unlock()
	if got := post(t, http.DefaultClient, nodes[0], long, list); got.status != http.StatusNotFound || !strings.Contains(got.body, "at most 200 bytes") {
		t.Fatalf("a session id of 305 bytes: %d %q, want 404 saying the limit", got.status, got.body)
	}
	m.mu.Lock()
	if m.resumed != resumedBefore {
		t.Error("a session id over the limit was looked up in the store")
	}
	m.mu.Unlock()

	huge := `{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"x":"` +
		strings.Repeat("a", 40<<10) + `"},"clientInfo":{"name":"t","version":"1"}}}`
	if got := post(t, http.DefaultClient, nodes[0], http.Header{"X-Owner": {"carol"}}, huge); got.status != http.StatusBadRequest || !strings.Contains(got.body, "over the 32768") {
		t.Fatalf("an initialize of 40 KB: %d %q, want 400 saying the limit", got.status, got.body)
	}

	req, _ := http.NewRequest(http.MethodDelete, nodes[1], nil)
	req.Header = withSession(alice)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	for _, node := range nodes {
		// Without a relay, the other node's copy goes at its next look at the store.
		deadline := time.Now().Add(10 * time.Second)
		for got := post(t, http.DefaultClient, node, withSession(alice), list); got.status != http.StatusNotFound; got = post(t, http.DefaultClient, node, withSession(alice), list) {
			if time.Now().After(deadline) {
				t.Fatalf("the closed session on %s: %d %q, want 404", node, got.status, got.body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// The official client works through shared sessions as through the SDK's own, and holds the
// shared id.
func TestSharedSessionsWithTheSDKClient(t *testing.T) {
	m := &sessionMap{open: map[string]*qmcp.SharedSession{}, perOwner: 5}
	nodes := sharedNodes(t, m, time.Minute)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "shared", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: nodes[0]}, &sdk.ClientSessionOptions{ProtocolVersion: protoSession})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada"}})
	if err != nil || res.IsError || texts(res) != "Hello, Ada!" {
		t.Fatalf("greet: %+v, %v", res, err)
	}
	if !strings.HasPrefix(cs.ID(), "mcps_") {
		t.Fatalf("the client's session id is %q, want the shared one", cs.ID())
	}
}

// memRelay hands what one handler publishes to the others' subscribers, and counts it.
type memRelay struct {
	mu        sync.Mutex
	subs      []func(string, []byte)
	published int
}

func (m *memRelay) Publish(_ context.Context, id string, body []byte) error {
	m.mu.Lock()
	m.published++
	subs := slices.Clone(m.subs)
	m.mu.Unlock()
	for _, fn := range subs {
		fn(id, body)
	}
	return nil
}

func (m *memRelay) Subscribe(fn func(string, []byte)) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subs = append(m.subs, fn)
	return func() {}
}

// Only a session's owner may send answers into it: answers can approve calls, and they are
// relayed to every node. Another owner's, and an unknown session's, are refused and not
// relayed; the owner's are.
func TestSharedSessionAnswersComeFromTheOwnerOnly(t *testing.T) {
	m := &sessionMap{open: map[string]*qmcp.SharedSession{}, perOwner: 5}
	relay := &memRelay{}
	owner := func(r *http.Request) string { return r.Header.Get("X-Owner") }
	_, node := serveHTTP(t, &qmcp.HTTPOptions{Sessions: m, Relay: relay, Owner: owner})
	m.open["mcps_alice"] = &qmcp.SharedSession{ID: "mcps_alice", Owner: "alice",
		Initialize: []byte(`{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}`)}
	answer := `{"jsonrpc":"2.0","id":1,"result":{"action":"accept"}}`
	for _, c := range []struct {
		who, session string
		status       int
	}{
		{"bob", "mcps_alice", http.StatusForbidden},
		{"bob", "mcps_nobody", http.StatusNotFound},
		{"alice", "mcps_alice", http.StatusAccepted},
	} {
		h := http.Header{"X-Owner": {c.who}, "Mcp-Session-Id": {c.session}, "Mcp-Protocol-Version": {"2025-11-25"}}
		if got := post(t, http.DefaultClient, node, h, answer); got.status != c.status {
			t.Errorf("%s answering in %s: %d %q, want %d", c.who, c.session, got.status, got.body, c.status)
		}
	}
	if relay.published != 1 {
		t.Fatalf("%d answers relayed, want the owner's one", relay.published)
	}
}
