package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
)

// Two nodes of a fleet on one PostgreSQL schema behind a round-robin balancer without
// stickiness: the official go-sdk client opens one MCP session and every request of it, on
// whichever node, continues that session. Calls are recorded in the session's one thread; a
// confirmation asked by one node through elicitation is answered whichever node the client's
// answer reaches; a closed session is closed on every node.
func TestFleetMCPSessionsContinueOnEveryNode(t *testing.T) {
	a, b := twoNodes(t)
	lb, served := roundRobin(t, a.base, b.base)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var asked atomic.Int32
	client := confirmingClient(&asked)
	httpClient := &http.Client{Transport: bearer{key: a.key, base: http.DefaultTransport}}
	session, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: lb + "/mcp", HTTPClient: httpClient},
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting through the balancer: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			session.Close() // its event stream would hold the balancer's Close
		}
	}()
	const calls, guarded = 8, 4
	callEchoes(ctx, t, session, calls, guarded, &asked)
	if served[0].Load() < 4 || served[1].Load() < 4 {
		t.Fatalf("the nodes served %d and %d requests: the balancer did not share them", served[0].Load(), served[1].Load())
	}

	threads, _, err := a.st.Threads(ctx, a.ws, store.ThreadFilter{Tag: "mcp"})
	if err != nil || len(threads) != 1 {
		t.Fatalf("threads of MCP sessions: %d, %v; want the session's one", len(threads), err)
	}
	msgs, err := a.st.Messages(ctx, a.ws, threads[0].ID, store.Page{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	results := 0
	for _, m := range msgs {
		if m.Role == store.RoleTool {
			results++
		}
	}
	if results != calls+guarded {
		t.Fatalf("the session's thread holds %d results, want %d (every call, on either node, recorded there once)", results, calls+guarded)
	}

	sessionID := session.ID()
	closed = true
	if err := session.Close(); err != nil {
		t.Fatalf("closing the session: %v", err)
	}
	// The other node hears of it through the relay (or, at the latest, at its next look at
	// the store, a few seconds on).
	for _, node := range []*benchServer{a, b} {
		deadline := time.Now().Add(10 * time.Second)
		for status := postSession(t, node, sessionID); status != http.StatusNotFound; status = postSession(t, node, sessionID) {
			if time.Now().After(deadline) {
				t.Fatalf("a request of the closed session on %s: %d, want 404", node.base, status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// The same fleet and balancer, with the official client at the sessionless protocol
// (2026-07-28): every request is served by whichever node it reaches. A confirmation is a
// multi round-trip request, whose answer the balancer brings to the other node than the one
// that asked; it is taken there, and the call recorded on the thread the asking was. The calls
// of a caller and client are recorded on one thread a day, unless a call names another.
func TestFleetMCPWithoutSessions(t *testing.T) {
	a, b := twoNodes(t)
	lb, served := roundRobin(t, a.base, b.base)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var asked atomic.Int32
	client := confirmingClient(&asked)
	httpClient := &http.Client{Transport: bearer{key: a.key, base: http.DefaultTransport}}
	session, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: lb + "/mcp", HTTPClient: httpClient}, nil)
	if err != nil {
		t.Fatalf("connecting through the balancer: %v", err)
	}
	defer session.Close()
	if v := session.InitializeResult().ProtocolVersion; v != "2026-07-28" || session.ID() != "" {
		t.Fatalf("the client speaks %s with session %q, want 2026-07-28 without a session", v, session.ID())
	}
	const calls, guarded = 6, 4
	callEchoes(ctx, t, session, calls, guarded, &asked)
	if served[0].Load() < calls/2 || served[1].Load() < calls/2 {
		t.Fatalf("the nodes served %d and %d requests: the balancer did not share them", served[0].Load(), served[1].Load())
	}
	// The calls of one caller and client are recorded on one thread (of the day), whichever
	// node served them; a confirmed call twice, waiting and then as decided.
	threads, _, err := a.st.Threads(ctx, a.ws, store.ThreadFilter{Tag: "mcp-sessionless"})
	if err != nil || len(threads) != 1 {
		t.Fatalf("threads of sessionless MCP calls: %d, %v; want the caller's one", len(threads), err)
	}
	want := strings.Repeat("ok,", calls) + strings.TrimSuffix(strings.Repeat("confirmation_required,ok,", guarded), ",")
	if got := strings.Join(toolResults(t, a, threads[0].ID), ","); got != want {
		t.Errorf("the caller's thread holds %s, want %s", got, want)
	}
	// Another client of the same key has a thread of its own.
	other, err := sdk.NewClient(&sdk.Implementation{Name: "fleet-test-2", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: lb + "/mcp", HTTPClient: httpClient}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if res, err := other.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "other"}}); err != nil || res.IsError {
		t.Fatalf("another client's call: %+v, %v", res, err)
	}
	if threads, _, err = a.st.Threads(ctx, a.ws, store.ThreadFilter{Tag: "mcp-sessionless"}); err != nil || len(threads) != 2 {
		t.Fatalf("threads of sessionless MCP calls after another client's: %d, %v; want 2", len(threads), err)
	}
	// A call that names a thread of the workspace is recorded there.
	named := threads[0].ID
	before := toolResults(t, a, named)
	params := &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "here"}, Meta: sdk.Meta{"io.quiver/threadId": named}}
	if res, err := session.CallTool(ctx, params); err != nil || res.IsError {
		t.Fatalf("a call naming a thread: %+v, %v", res, err)
	}
	if got := toolResults(t, a, named); len(got) != len(before)+1 {
		t.Errorf("the named thread holds %v, want the call recorded there too", got)
	}
	// One that names no thread of the workspace is refused, saying so, and runs nothing.
	params.Meta = sdk.Meta{"io.quiver/threadId": "thr_elsewhere"}
	if res, err := session.CallTool(ctx, params); err == nil || !strings.Contains(err.Error(), `the thread "thr_elsewhere", which the request names`) {
		t.Errorf("a call naming a thread of no workspace's: %+v, %v; want an invalid-params error", res, err)
	}
	// A confirmation approves one run, fleet-wide: asked on one node, answered on the other,
	// the same answer sent again to either is a question again.
	asking := sessionlessCall(t, a, `"arguments":{"text":"once"}`)
	answer := `"arguments":{"text":"once"},"inputResponses":{"quiver.confirm":{"action":"accept"}},"requestState":` + string(asking["requestState"])
	for i, c := range []struct {
		node       *benchServer
		resultType string
	}{{b, "complete"}, {a, "input_required"}, {b, "input_required"}} {
		if got := sessionlessCall(t, c.node, answer)["resultType"]; string(got) != `"`+c.resultType+`"` {
			t.Errorf("the answer sent the %d. time: resultType %s, want %q", i+1, got, c.resultType)
		}
	}
}

// sessionlessCall calls guarded_echo on node in the sessionless protocol, with params (the
// arguments and what answers a question), and returns the result.
func sessionlessCall(t *testing.T, node *benchServer, params string) map[string]json.RawMessage {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta + `,"name":"guarded_echo",` + params + `}}`
	req, _ := http.NewRequest(http.MethodPost, node.base+"/mcp", strings.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + node.key, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "guarded_echo"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(out), "\n") {
		var msg struct{ Result map[string]json.RawMessage }
		if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &msg) == nil && msg.Result != nil {
			return msg.Result
		}
	}
	t.Fatalf("tools/call on %s: %d %s, want a result", node.base, resp.StatusCode, out)
	return nil
}

// confirmingClient is the official client whose user allows guarded_echo, and nothing else,
// each time asked (counted in asked).
func confirmingClient(asked *atomic.Int32) *sdk.Client {
	return sdk.NewClient(&sdk.Implementation{Name: "fleet-test", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			asked.Add(1)
			if !strings.Contains(req.Params.Message, "guarded_echo") {
				return &sdk.ElicitResult{Action: "decline"}, nil
			}
			return &sdk.ElicitResult{Action: "accept"}, nil
		},
	})
}

// callEchoes makes calls calls of echo, then guarded ones of guarded_echo, each confirmed by
// the client's user, and checks each answer and that the user was asked once per guarded call.
func callEchoes(ctx context.Context, t *testing.T, session *sdk.ClientSession, calls, guarded int, asked *atomic.Int32) {
	t.Helper()
	for i := range calls + guarded {
		name, text := "echo", fmt.Sprint("call ", i)
		if i >= calls {
			name, text = "guarded_echo", fmt.Sprint("guarded ", i-calls)
		}
		res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError || res.Content[0].(*sdk.TextContent).Text != text {
			t.Fatalf("%s %q: %+v, %v", name, text, res, err)
		}
	}
	if n := asked.Load(); n != int32(guarded) {
		t.Fatalf("the user was asked %d times, want %d", n, guarded)
	}
}

// toolResults are the codes of the tool results a thread holds ("ok" for a success).
func toolResults(t *testing.T, node *benchServer, threadID string) []string {
	t.Helper()
	msgs, err := node.st.Messages(context.Background(), node.ws, threadID, store.Page{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, m := range msgs {
		if m.Role != store.RoleTool {
			continue
		}
		code := "ok"
		if m.Result != nil && m.Result.Code != "" {
			code = m.Result.Code
		}
		codes = append(codes, code)
	}
	return codes
}

// postSession posts a tools/list of session id to node and returns the status.
func postSession(t *testing.T, node *benchServer, id string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, node.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+node.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// roundRobin serves a balancer in front of the nodes that sends each request to the next node
// in turn, and counts the requests each node served.
func roundRobin(t *testing.T, bases ...string) (string, []*atomic.Int64) {
	var next atomic.Int64
	served := make([]*atomic.Int64, len(bases))
	proxies := make([]*httputil.ReverseProxy, len(bases))
	for i, base := range bases {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		served[i] = &atomic.Int64{}
		proxies[i] = httputil.NewSingleHostReverseProxy(u)
		proxies[i].FlushInterval = -1 // event streams pass as they come
	}
	lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(next.Add(1)) % len(bases)
		served[i].Add(1)
		// The node answers an MCP POST with its event stream as soon as it has read the
		// request, while the proxy may still be at the end of the body it forwards: without
		// full duplex, this server closes the body once the answer starts, the proxy's
		// transport fails reading it and drops the connection, and the client sees its call
		// end without an answer. Real balancers forward the body whole; so does this one.
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			t.Errorf("the balancer: %v", err)
		}
		proxies[i].ServeHTTP(w, r)
	}))
	t.Cleanup(lb.Close)
	return lb.URL, served
}

// The cap on one key's event streams holds across the fleet: streams opened alternately on two
// nodes stop at the cap, whichever node the next one asks, and a closed stream's place is free
// again on the other node.
func TestFleetEventStreamCapsHoldAcrossNodes(t *testing.T) {
	a, b := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	status, out, err := a.do(ctx, "POST", "/v1/threads", `{}`)
	var th struct{ ID string }
	if err != nil || status != http.StatusCreated || json.Unmarshal(out, &th) != nil {
		t.Fatalf("a thread: %d %s %v", status, out, err)
	}
	open := func(node *benchServer) (*http.Response, context.CancelFunc) {
		sctx, scancel := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(sctx, http.MethodGet, node.base+"/v1/threads/"+th.ID+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+node.key)
		resp, err := node.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, func() { scancel(); resp.Body.Close() }
	}
	var closers []context.CancelFunc
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	nodes := []*benchServer{a, b}
	for i := range 32 {
		resp, closeIt := open(nodes[i%2])
		closers = append(closers, closeIt)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %d, want 200 within the key's cap of 32", i, resp.StatusCode)
		}
	}
	for _, node := range nodes {
		resp, closeIt := open(node)
		closeIt()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("stream 33 on %s: %d, want 429 (the key's cap, held across the nodes)", node.base, resp.StatusCode)
		}
	}
	closers[0]() // a stream of node A ends: its place is free on B
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, closeIt := open(b)
		closers = append(closers, closeIt)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a stream closed on A, B still answers %d", resp.StatusCode)
		}
		closeIt()
		time.Sleep(20 * time.Millisecond)
	}
}

// twoNodes serves two nodes of a fleet, with their background runs, on one fresh PostgreSQL
// schema, with one key (skipped without PostgreSQL, failed under CI).
func twoNodes(t *testing.T) (a, b *benchServer) {
	if os.Getenv(pgtest.EnvDSN) == "" && os.Getenv("CI") != "true" {
		t.Skipf("PostgreSQL not tested: %s is not set", pgtest.EnvDSN)
	}
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	a = postgresNode(t, dsn, schema, true)
	// The nodes share the database, and so the API keys, and the secret key, as a fleet's do.
	b = postgresNode(t, dsn, schema, true, func(c *platform.Config) { c.Resolver.Keys = a.keys })
	b.key, b.keys = a.key, a.keys
	return a, b
}
