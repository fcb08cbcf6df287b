package mcp_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// serveHTTP serves a server over HTTP on 127.0.0.1 with opts; it returns the server and the
// endpoint.
func serveHTTP(t *testing.T, opts *qmcp.HTTPOptions) (*qmcp.Server, string) {
	t.Helper()
	d := &quiver.Dispatcher{Registry: fixtureTools(t, &blockSignals{make(chan struct{}), make(chan struct{})})}
	srv := qmcp.NewServer(d, nil)
	ts := httptest.NewServer(srv.HTTPHandler(opts))
	t.Cleanup(func() { srv.Close(); ts.Close() })
	return srv, ts.URL
}

type answer struct {
	status int
	header http.Header
	body   string
}

// post sends one raw JSON-RPC body and reads the whole answer.
func post(t testing.TB, c *http.Client, url string, header http.Header, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func deleteSession(t *testing.T, url, id string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: status %d", resp.StatusCode)
	}
}

func liveSessions(srv *qmcp.Server) int {
	n := 0
	for range srv.SDK().Sessions() {
		n++
	}
	return n
}

// An attacker who opens sessions and never closes them gets a clear refusal once the limits
// are reached, and places come back when sessions are closed or expire.
func TestSessionLimits(t *testing.T) {
	const (
		opInit = "init"   // initialize without a session id
		del    = "delete" // DELETE the oldest session still open
		expire = "expire" // wait until every session has expired, then initialize
	)
	type step struct {
		do, owner string
		want      int
	}
	byHeader := func(r *http.Request) string { return r.Header.Get("X-Owner") }
	tests := []struct {
		name  string
		opts  qmcp.HTTPOptions
		steps []step
		// wantBody is in the body of every refusal.
		wantBody string
	}{
		{"total cap", qmcp.HTTPOptions{MaxSessions: 3, MaxSessionsPerOwner: -1},
			[]step{{opInit, "", 200}, {opInit, "", 200}, {opInit, "", 200}, {opInit, "", 503}, {opInit, "", 503}},
			"the server has 3 open, its limit"},
		{"per owner: the client's IP address by default", qmcp.HTTPOptions{MaxSessions: 10, MaxSessionsPerOwner: 2},
			[]step{{opInit, "", 200}, {opInit, "", 200}, {opInit, "", 429}},
			"127.0.0.1 has 2 open, the limit per client"},
		{"per owner: keyed by Owner (an API key, say)", qmcp.HTTPOptions{MaxSessions: 10, MaxSessionsPerOwner: 2, Owner: byHeader},
			[]step{{opInit, "a", 200}, {opInit, "a", 200}, {opInit, "a", 429}, {opInit, "b", 200}, {opInit, "b", 200}, {opInit, "b", 429}},
			"has 2 open, the limit per client"},
		{"the total cap applies across owners", qmcp.HTTPOptions{MaxSessions: 3, MaxSessionsPerOwner: 2, Owner: byHeader},
			[]step{{opInit, "a", 200}, {opInit, "a", 200}, {opInit, "b", 200}, {opInit, "b", 503}, {opInit, "c", 503}},
			"the server has 3 open, its limit"},
		{"closing a session gives its place back", qmcp.HTTPOptions{MaxSessions: 2},
			[]step{{opInit, "", 200}, {opInit, "", 200}, {opInit, "", 503}, {del, "", 204}, {opInit, "", 200}, {opInit, "", 503}},
			"HTTP DELETE with their Mcp-Session-Id"},
		{"idle sessions expire and give their place back", qmcp.HTTPOptions{MaxSessions: 2, SessionTimeout: time.Second},
			[]step{{opInit, "", 200}, {opInit, "", 200}, {opInit, "", 503}, {expire, "", 200}, {opInit, "", 200}, {opInit, "", 503}},
			"a session closes after 1s without a request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, url := serveHTTP(t, &tt.opts)
			var open []string
			for i, s := range tt.steps {
				h := http.Header{"X-Owner": {s.owner}}
				var a answer
				switch s.do {
				case opInit:
					a = post(t, http.DefaultClient, url, h, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`, i+1))
				case del:
					deleteSession(t, url, open[0])
					open = open[1:]
					continue
				case expire:
					waitSessions(t, srv, 0, 10*time.Second)
					open = nil
					a = post(t, http.DefaultClient, url, h, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`, i+1))
				}
				if a.status != s.want {
					t.Fatalf("step %d (%s %s): status %d, want %d: %s", i+1, s.do, s.owner, a.status, s.want, a.body)
				}
				if a.status == 200 {
					open = append(open, a.header.Get("Mcp-Session-Id"))
					continue
				}
				wantPrefix := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":%d,"message":"too many MCP sessions: `, i+1, qmcp.CodeTooManySessions)
				if !strings.HasPrefix(a.body, wantPrefix) || !strings.Contains(a.body, tt.wantBody) {
					t.Errorf("step %d: refusal %q, want %s... containing %q", i+1, a.body, wantPrefix, tt.wantBody)
				}
				if ct := a.header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("step %d: Content-Type %q", i+1, ct)
				}
				if a.header.Get("Retry-After") == "" {
					t.Errorf("step %d: no Retry-After", i+1)
				}
			}
			if n := liveSessions(srv); n != len(open) {
				t.Errorf("%d sessions live, want %d", n, len(open))
			}
		})
	}
}

// The official client is refused a session over the limit, and the clients already connected
// are still served. A client of the sessionless protocol takes no place, and is served with
// every place taken, unless it listens for notifications: a listening stream stays open, and
// takes a place while it does.
func TestSessionLimitWithTheSDKClient(t *testing.T) {
	_, url := serveHTTP(t, &qmcp.HTTPOptions{MaxSessions: 1})
	ctx := context.Background()
	connectAt := func(version string, opts *sdk.ClientOptions) (*sdk.ClientSession, error) {
		c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1.0"}, opts)
		return c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	}
	connect := func() (*sdk.ClientSession, error) { return connectAt(protoSession, nil) }
	first, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if second, err := connect(); err == nil {
		second.Close()
		t.Fatal("a second session was opened over MaxSessions 1")
	} else if !strings.Contains(err.Error(), "Service Unavailable") {
		t.Errorf("refusal: %v, want Service Unavailable", err)
	}
	res, err := first.CallTool(ctx, &sdk.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "first"}})
	if err != nil || texts(res) != "Hello, first!" {
		t.Fatalf("the open session is not served: %v %v", err, res)
	}
	stateless, err := connectAt(protoSessionless, nil)
	if err != nil {
		t.Fatalf("a client of the sessionless protocol with every place taken: %v", err)
	}
	defer stateless.Close()
	if res, err := stateless.CallTool(ctx, &sdk.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "anyone"}}); err != nil || texts(res) != "Hello, anyone!" {
		t.Fatalf("a client of the sessionless protocol is not served: %v %v", err, res)
	}
	if status := listen(t, url, "subscriptions/listen"); status != http.StatusServiceUnavailable {
		t.Errorf("subscriptions/listen over MaxSessions 1: %d, want 503", status)
	}
	// A listen whose Mcp-Method header names another method is refused, not streamed uncounted.
	if status := listen(t, url, "tools/list"); status == http.StatusOK {
		t.Errorf("subscriptions/listen posted as tools/list over MaxSessions 1: %d, want it refused", status)
	}
	first.Close()
	waitFor(t, func() bool { return listen(t, url, "subscriptions/listen") == http.StatusOK }, "subscriptions/listen once the session's place was free")
	// A stream gives its place back when its client leaves.
	waitFor(t, func() bool { return listen(t, url, "subscriptions/listen") == http.StatusOK }, "subscriptions/listen once the last stream was closed")
}

// listen opens a subscriptions/listen stream of the sessionless protocol, its Mcp-Method
// header saying method, and closes it as soon as its status came; it returns the status.
func listen(t *testing.T, url, method string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// liveHeap is the heap in use by objects that garbage collection leaves.
func liveHeap() (objects, spans uint64) {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	debug.FreeOSMemory()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.HeapInuse
}

// A flood of initialize requests that never close their sessions holds no more than the cap,
// and once the sessions expire the memory they held is given back. The Go runtime keeps the
// descriptor of every goroutine it ever ran (reused, never freed), and each live session runs
// a few: the first flood leaves those behind, so the memory is measured from after one flood,
// and must come back to that after another.
func TestSessionFloodMemory(t *testing.T) {
	const (
		flood   = 3000
		maxLive = 1000
		workers = 16
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	// initAll sends n initialize requests from the workers and counts the answers by status.
	initAll := func(url string, n int64, during func()) (took time.Duration, byStatus map[int]int64) {
		var next atomic.Int64
		var mu sync.Mutex
		byStatus = map[int]int64{}
		var wg sync.WaitGroup
		start := time.Now()
		for range workers {
			wg.Go(func() {
				for next.Add(1) <= n && time.Since(start) < 2*time.Minute {
					a := post(t, client, url, nil, initBody)
					mu.Lock()
					byStatus[a.status]++
					mu.Unlock()
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for sampling := true; sampling; {
			during()
			select {
			case <-done:
				sampling = false
			case <-time.After(10 * time.Millisecond):
			}
		}
		return time.Since(start), byStatus
	}

	// Sessions must outlive the flood for it to reach the cap. How long opening them takes
	// depends on the machine and its load (the race detector, other packages' tests), so the
	// idle timeout is three times what opening the cap's worth of sessions takes here, now.
	cal, calURL := serveHTTP(t, &qmcp.HTTPOptions{MaxSessions: -1, MaxSessionsPerOwner: -1, SessionTimeout: time.Minute})
	took, _ := initAll(calURL, maxLive/10, func() {})
	cal.Close()
	idle := max(time.Second, 30*took)

	// openOne opens a session and closes it, which needs a place under the cap.
	openOne := func(url, what string) {
		a := post(t, client, url, nil, initBody)
		if a.status != 200 {
			t.Fatalf("%s: %d %s", what, a.status, a.body)
		}
		deleteSession(t, url, a.header.Get("Mcp-Session-Id"))
	}
	newServer := func() (*qmcp.Server, string) {
		srv, url := serveHTTP(t, &qmcp.HTTPOptions{MaxSessions: maxLive, MaxSessionsPerOwner: -1, SessionTimeout: idle})
		openOne(url, "warm-up") // what a first session allocates once: the tool list, pools
		waitSessions(t, srv, 0, time.Minute)
		client.CloseIdleConnections()
		return srv, url
	}
	srv, url := newServer()
	cold, _ := liveHeap()
	var before, peak, after uint64
	for round, try := 1, 1; round <= 2; {
		before, _ = liveHeap()
		peakSessions := 0
		took, byStatus := initAll(url, flood, func() { peakSessions = max(peakSessions, liveSessions(srv)) })
		if byStatus[200]+byStatus[503] != flood {
			t.Fatalf("round %d: answers by status %v after %s, want %d answered 200 or 503", round, byStatus, took, flood)
		}
		if peakSessions > maxLive {
			t.Errorf("round %d: %d sessions live during the flood, over the cap of %d", round, peakSessions, maxLive)
		}
		if byStatus[503] == 0 {
			// The machine slowed down after the calibration, so the flood outlasted the idle
			// timeout and sessions expired as fast as they opened. Such a round measures
			// nothing: it runs again on a server whose sessions live longer.
			if took < idle || try == 3 {
				t.Fatalf("round %d, try %d: no session refused in %s (sessions idle for %s expire): the flood did not reach the cap, so this measures nothing",
					round, try, took, idle)
			}
			t.Logf("round %d, try %d: the flood took %s, longer than the %s idle timeout, and never reached the cap; trying again with a longer timeout",
				round, try, took.Round(time.Millisecond), idle.Round(time.Millisecond))
			srv.Close()
			idle = 2 * max(idle, took)
			srv, url = newServer()
			try++
			continue
		}
		client.CloseIdleConnections()
		peak, _ = liveHeap()
		waitSessions(t, srv, 0, time.Minute+2*idle)
		after, _ = liveHeap()
		openOne(url, fmt.Sprintf("round %d: after expiry", round)) // places came back with the expired sessions
		waitSessions(t, srv, 0, time.Minute)
		t.Logf("round %d: %d initialize requests in %s (sessions idle for %s expire): %d sessions opened (at most %d at once), %d refused; "+
			"live heap %.2f MB before, %.2f MB after the flood, %.2f MB once sessions expired",
			round, flood, took.Round(time.Millisecond), idle.Round(time.Millisecond), byStatus[200], peakSessions, byStatus[503], mb(before), mb(peak), mb(after))
		round, try = round+1, 1
	}
	t.Logf("the first flood left %.2f MB (the runtime's goroutine descriptors) over the %.2f MB of a cold start", mb(before-min(before, cold)), mb(cold))
	if peak < before+maxLive*1024 {
		t.Errorf("the flood added %.2f MB: it did not hold its sessions, so this measures nothing", mb(peak-min(peak, before)))
	}
	if float64(after) > 1.2*float64(before) {
		t.Errorf("live heap %.2f MB once sessions expired, more than 20%% over the %.2f MB before the flood", mb(after), mb(before))
	}
}

func mb(n uint64) float64 { return float64(n) / (1 << 20) }

func waitSessions(t *testing.T, srv *qmcp.Server, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for liveSessions(srv) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions live after %s, want %d", liveSessions(srv), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A request other than initialize sent without a session gets HTTP 400 and JSON-RPC's
// invalid request, with its id, and opens no session.
func TestRequestWithoutSession(t *testing.T) {
	srv, url := serveHTTP(t, nil)
	tests := []struct {
		name   string
		body   string
		status int
		want   string
	}{
		{"tools/call", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"greet","arguments":{"name":"x"}}}`,
			400, `{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"no session: this request needs the Mcp-Session-Id header`},
		{"tools/list, string id", `{"jsonrpc":"2.0","id":"a","method":"tools/list"}`, 400, `"id":"a","error":{"code":-32600,"message":"no session`},
		{"ping", `{"jsonrpc":"2.0","id":6,"method":"ping"}`, 400, `"id":6,"error":{"code":-32600`},
		{"batch without initialize", `[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":7,"method":"tools/list"}]`,
			400, `"id":7,"error":{"code":-32600`},
		{"notification: accepted and dropped, as before", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, ""},
		{"malformed JSON is still a parse error", `{"jsonrpc":"2.0","id":1,"method":`, 400, `"error":{"code":-32700`},
		{"initialize", initBody, 200, `"protocolVersion"`},
	}
	opened := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := post(t, http.DefaultClient, url, nil, tt.body)
			if a.status != tt.status || !strings.Contains(a.body, tt.want) {
				t.Errorf("status %d %q, want %d containing %q", a.status, a.body, tt.status, tt.want)
			}
			if a.status == 200 {
				opened++
			}
			if a.status == 400 && a.header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q", a.header.Get("Content-Type"))
			}
		})
	}
	waitSessions(t, srv, opened, 5*time.Second)
}

// DNS rebinding: a request whose Host is neither local, nor the address it arrived on, nor an
// allowed host is refused, on loopback connections and others alike.
func TestHostCheck(t *testing.T) {
	_, url := serveHTTP(t, &qmcp.HTTPOptions{AllowedHosts: []string{"quiver.example.com"}})
	port := url[strings.LastIndex(url, ":")+1:]
	d := &quiver.Dispatcher{Registry: fixtureTools(t, &blockSignals{make(chan struct{}), make(chan struct{})})}
	srv := qmcp.NewServer(d, nil)
	t.Cleanup(srv.Close)
	handler := srv.HTTPHandler(&qmcp.HTTPOptions{AllowedHosts: []string{"quiver.example.com"}})
	public := &net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 7411}
	tests := []struct {
		name   string
		local  net.Addr // the address the connection arrived on; nil: the server on 127.0.0.1
		host   string
		status int
	}{
		{"loopback: 127.0.0.1", nil, "127.0.0.1:" + port, 200},
		{"loopback: localhost", nil, "localhost:" + port, 200},
		{"loopback: [::1]", nil, "[::1]:" + port, 200},
		{"loopback: foreign name", nil, "evil.example", 403},
		{"loopback: the public host (a reverse proxy)", nil, "quiver.example.com", 200},
		{"public address: itself", public, "192.0.2.10:7411", 200},
		{"public address: the public host, any case and port", public, "Quiver.Example.COM:443", 200},
		{"public address: localhost", public, "localhost:7411", 200},
		{"public address: foreign name (DNS rebinding)", public, "evil.example:7411", 403},
		{"public address: a subdomain of the public host", public, "x.quiver.example.com", 403},
		{"public address: another address", public, "198.51.100.7:7411", 403},
		{"public address: no Host", public, "", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var status int
			var body string
			if tt.local == nil {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initBody))
				req.Host = tt.host
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				status, body = resp.StatusCode, string(b)
			} else {
				req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(initBody))
				req.Host = tt.host
				req.RemoteAddr = "203.0.113.9:50000"
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, tt.local))
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, req)
				status, body = rec.Code, rec.Body.String()
			}
			if status != tt.status {
				t.Fatalf("Host %q: status %d, want %d: %s", tt.host, status, tt.status, body)
			}
			if status == 403 && !strings.Contains(body, "invalid Host header") {
				t.Errorf("refusal %q does not say why", body)
			}
		})
	}
}

// A request without a session that opens none (server/discover, which the SDK's own client sends
// before initialize) takes no place among the sessions: with the one place taken it is still
// answered, and its own place used to be given back only after its answer reached the client,
// whose initialize, sent at once, then found it taken (503, one run in six under the race
// detector).
func TestRequestsThatOpenNoSessionTakeNoPlace(t *testing.T) {
	_, url := serveHTTP(t, &qmcp.HTTPOptions{MaxSessions: 1})
	if a := post(t, http.DefaultClient, url, nil, initBody); a.status != http.StatusOK {
		t.Fatalf("initialize: %d %s", a.status, a.body)
	}
	a := post(t, http.DefaultClient, url, http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"server/discover"}},
		`{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	if a.status != http.StatusOK || !strings.Contains(a.body, `"id":7`) {
		t.Fatalf("server/discover with every place taken: %d %s", a.status, a.body)
	}
	// The sessionless protocol is served over HTTP: the answer names it among the versions.
	if !strings.Contains(a.body, `"supportedVersions":["2026-07-28"`) {
		t.Errorf("server/discover over HTTP: %s, want 2026-07-28 first among the supported versions", a.body)
	}
	if a := post(t, http.DefaultClient, url, nil, initBody); a.status != http.StatusServiceUnavailable {
		t.Errorf("a second initialize over MaxSessions 1: %d, want 503", a.status)
	}
}

// Handlers that share a pool (a server's workspaces) are capped together: each at its own
// share, all of them at the pool's total, and a session closed in one frees a place for all.
// Before, each workspace had its own cap and one admin's six workspaces held 6,249 sessions.
func TestSessionPoolCapsHandlersTogether(t *testing.T) {
	pool := qmcp.NewSessionPool(3, nil)
	_, urlA := serveHTTP(t, &qmcp.HTTPOptions{MaxSessions: 2, MaxSessionsPerOwner: -1, Pool: pool})
	_, urlB := serveHTTP(t, &qmcp.HTTPOptions{MaxSessions: 2, MaxSessionsPerOwner: -1, Pool: pool})
	var opened []string
	steps := []struct {
		url  string
		want int
		says string
	}{
		{urlA, 200, ""}, {urlA, 200, ""},
		{urlA, 503, "this workspace has 2 open, its limit"},
		{urlB, 200, ""},
		{urlB, 503, "the server has 3 open, its limit"},
	}
	for i, s := range steps {
		a := post(t, http.DefaultClient, s.url, nil, initBody)
		if a.status != s.want || !strings.Contains(a.body, s.says) {
			t.Fatalf("step %d: %d %s, want %d saying %q", i, a.status, a.body, s.want, s.says)
		}
		if a.status == 200 {
			opened = append(opened, a.header.Get("Mcp-Session-Id"))
		}
	}
	if n := pool.Open(); n != 3 {
		t.Errorf("the pool counts %d sessions, want 3", n)
	}
	deleteSession(t, urlA, opened[0])
	for deadline := time.Now().Add(10 * time.Second); pool.Open() != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a closed session's place is not given back: the pool counts %d", pool.Open())
		}
	}
	if a := post(t, http.DefaultClient, urlB, nil, initBody); a.status != 200 {
		t.Errorf("B after A closed one: %d %s, want 200", a.status, a.body)
	}
}

// waitFor waits until ok holds, for up to ten seconds, and fails the test naming what.
func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
