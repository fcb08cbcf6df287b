//go:build linux && (amd64 || arm64)

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The load generator: MCP sessions of the official go-sdk client over streamable HTTP, and plain
// HTTP requests to quiver's /v1 API, each op timed on its own.

// phase is the figures of one timed phase.
type phase struct {
	name    string
	ops     int
	elapsed time.Duration
	lats    []time.Duration // every op's, sorted
	alloc   uint64          // bytes the server allocated during the phase (TotalAlloc after - before)
}

func (ph phase) perSecond() float64 { return float64(ph.ops) / ph.elapsed.Seconds() }

// percentile is the q-th (0 to 1) fraction of the ops' durations, in µs.
func (ph phase) percentile(q float64) float64 {
	i := min(int(float64(len(ph.lats))*q), len(ph.lats)-1)
	return float64(ph.lats[i]) / float64(time.Microsecond)
}

func (ph phase) allocPerOp() float64 { return float64(ph.alloc) / float64(ph.ops) }

// timed runs ops, a phase's timed run, between two readings of the server's TotalAlloc.
func timed(ctx context.Context, pprofBase, name string, ops func() ([]time.Duration, time.Duration, error)) (phase, error) {
	before, err := totalAlloc(ctx, pprofBase)
	if err != nil {
		return phase{}, fmt.Errorf("%s: reading the server's TotalAlloc: %w", name, err)
	}
	lats, elapsed, err := ops()
	if err != nil {
		return phase{}, fmt.Errorf("%s: %w", name, err)
	}
	after, err := totalAlloc(ctx, pprofBase)
	if err != nil {
		return phase{}, fmt.Errorf("%s: reading the server's TotalAlloc: %w", name, err)
	}
	if len(lats) == 0 {
		return phase{}, fmt.Errorf("%s: no ops", name)
	}
	slices.Sort(lats)
	return phase{name: name, ops: len(lats), elapsed: elapsed, lats: lats, alloc: after - before}, nil
}

// runOps makes n ops spread evenly over `workers` goroutines, op(ctx, w) on worker w, and
// returns every op's duration and the wall time of them all. When more is not nil the workers
// go on after their share until it is closed. The first error stops every worker.
func runOps(ctx context.Context, workers, n int, more <-chan struct{}, op func(ctx context.Context, w int) error) ([]time.Duration, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	keepGoing := func() bool {
		if more == nil {
			return false
		}
		select {
		case <-more:
			return false
		default:
			return true
		}
	}
	lats := make([][]time.Duration, workers)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	start := time.Now()
	for w := range workers {
		share := n / workers
		if w < n%workers {
			share++
		}
		wg.Go(func() {
			lat := make([]time.Duration, 0, share)
			for i := 0; (i < share || keepGoing()) && ctx.Err() == nil; i++ {
				t0 := time.Now()
				if err := op(ctx, w); err != nil {
					once.Do(func() {
						first = fmt.Errorf("op %d of worker %d: %w", i+1, w+1, err)
						cancel()
					})
					return
				}
				lat = append(lat, time.Since(t0))
			}
			lats[w] = lat
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first != nil {
		return nil, 0, first
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	return slices.Concat(lats...), elapsed, nil
}

// clients is the HTTP side of the load generator: one pool of keep-alive connections, the
// server's API key on every request.
type clients struct {
	auth     *authTransport
	http     *http.Client
	mcp      *mcp.Client
	protocol string // the MCP version asked for; "": the SDK's default
}

func newClients(key, protocol string) *clients {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConns, base.MaxIdleConnsPerHost = 256, 64 // 16 sessions at once keep their connections
	auth := &authTransport{base: base, key: key}
	return &clients{auth: auth, http: &http.Client{Transport: auth}, protocol: protocol,
		mcp: mcp.NewClient(&mcp.Implementation{Name: "serverbench", Version: "1"}, nil)}
}

func (c *clients) close() { c.auth.base.CloseIdleConnections() }

// connect opens an MCP session (initialize, then notifications/initialized), or, at
// 2026-07-28, discovers the server.
func (c *clients) connect(ctx context.Context, url string) (*mcp.ClientSession, error) {
	cs, err := c.mcp.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: c.http,
		DisableStandaloneSSE: true, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: c.protocol})
	if err != nil {
		return nil, fmt.Errorf("opening a session: %w", err)
	}
	return cs, nil
}

// closeAll closes the sessions (DELETE) and reports the first refused close.
func (c *clients) closeAll(sessions []*mcp.ClientSession) error {
	for _, cs := range sessions {
		cs.Close()
	}
	return c.auth.failure()
}

var clockArgsJSON = json.RawMessage(`{"timezone":"UTC"}`)

// callClock calls get_current_time for UTC and checks that the result is a success with the
// structured answer.
func callClock(ctx context.Context, cs *mcp.ClientSession) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolName, Arguments: clockArgsJSON})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("%s answered an error result: %s", toolName, contentText(res.Content))
	}
	if m, ok := res.StructuredContent.(map[string]any); !ok || m["timezone"] != "UTC" || m["time"] == nil {
		return fmt.Errorf("%s answered no structured result for UTC: %v (%s)", toolName, res.StructuredContent, contentText(res.Content))
	}
	return nil
}

func contentText(content []mcp.Content) string {
	var b strings.Builder
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// listAll lists every tool, page after page; one op.
func listAll(ctx context.Context, cs *mcp.ClientSession) (names []string, err error) {
	params := &mcp.ListToolsParams{}
	for range 10000 {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, err
		}
		for _, t := range res.Tools {
			names = append(names, t.Name)
		}
		if res.NextCursor == "" {
			return names, nil
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	return nil, fmt.Errorf("tools/list: more than 10000 pages")
}

var apiBody = []byte(`{"args":{"timezone":"UTC"}}`)

// apiCall calls get_current_time through quiver's API (POST /v1/tools/get_current_time/call)
// and checks that the answer is 200 with a success result.
func (c *clients) apiCall(ctx context.Context, url string) error {
	b, err := c.postJSON(ctx, url, apiBody, http.StatusOK)
	if err != nil {
		return err
	}
	var out struct {
		Result struct {
			Status string          `json:"status"`
			Value  json.RawMessage `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("POST %s: %w: %.500s", url, err, b)
	}
	if out.Result.Status != "success" || len(out.Result.Value) == 0 {
		return fmt.Errorf("POST %s: not a success with a value: %.500s", url, b)
	}
	return nil
}

// postJSON POSTs body (JSON) to url and returns the answer's body when its status is one of
// ok, else an error with the start of the answer.
func (c *clients) postJSON(ctx context.Context, url string, body []byte, ok ...int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(ok, resp.StatusCode) {
		return nil, fmt.Errorf("POST %s: %s: %.1000s", url, resp.Status, answer)
	}
	return answer, nil
}

// authTransport sends the API key on every request, and checks the answers to DELETE (the
// go-sdk client ignores them when it closes a session).
type authTransport struct {
	base *http.Transport
	key  string

	mu  sync.Mutex
	err error
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.key != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+t.key)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodDelete {
		return resp, err
	}
	// Read the whole answer, so the connection goes back to the pool.
	b, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if rerr == nil && resp.StatusCode/100 != 2 {
		rerr = fmt.Errorf("%s", resp.Status)
	}
	if rerr != nil {
		t.mu.Lock()
		if t.err == nil {
			t.err = fmt.Errorf("closing a session (DELETE %s): %v: %.300s", req.URL, rerr, b)
		}
		t.mu.Unlock()
	}
	return resp, nil
}

// failure is the first refused DELETE.
func (t *authTransport) failure() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}
