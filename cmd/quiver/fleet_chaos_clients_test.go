//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The clients of the fleet chaos test (fleet_chaos_test.go), all through the load balancer:
// API clients running agents (confirmations, a client tool, a sub-agent) and following each
// run's events, API clients calling a tool, and MCP clients of the official Go SDK calling a
// tool at two protocol versions. Every client retries what the chaos breaks, as a real client
// would, and records what it was answered, for the test to check against the database.

// chaosTurns are the turns of the fleet's model for a request to model whose thread began with
// the user's message user. They follow from the message alone, so that any node, asking again
// after a kill, gets the same turn, and every tally call a unique key:
//
//   - lead, "job K": a tally call and the helper sub-agent (blocking), then a tally call that
//     waits for a person's confirmation, then the client tool open_file, then its answer;
//   - helper, "help K": a tally call, then its answer.
func chaosTurns(model, user string) []chatTurn {
	arg := func(name, value string) string { return asJSON(map[string]string{name: value}) }
	switch k, _ := strings.CutPrefix(user, "job "); model {
	case "lead":
		return []chatTurn{
			{calls: [][2]string{{"tally", arg("key", k+".a")}, {"helper", arg("message", "help "+k+".h")}}},
			{calls: [][2]string{{"guarded_tally", arg("key", k+".g")}}},
			{calls: [][2]string{{"open_file", arg("path", k+".f")}}},
			{text: "Done " + k + "."},
		}
	case "helper":
		k, _ := strings.CutPrefix(user, "help ")
		return []chatTurn{{calls: [][2]string{{"tally", arg("key", k)}}}, {text: "helped " + k}}
	}
	return nil
}

// startChaosModel starts the fleet's model provider, an OpenAI-compatible server speaking the
// chat completions wire format as chatServer does, and returns its base URL.
func startChaosModel(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(body, &req)
		var user string
		for _, m := range req.Messages {
			if m.Role == "user" {
				user = messageText(m.Content)
				break
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		(&chatServer{turns: chaosTurns(req.Model, user)}).serve(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// messageText is a chat message's text: a string, or the text of its parts.
func messageText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// chaosAPI is a client of the /v1 API through the load balancer with one workspace's key.
type chaosAPI struct {
	base, key string
	client    *http.Client
}

func newChaosAPI(lb, key string) *chaosAPI {
	return &chaosAPI{base: lb + "/v1", key: key, client: &http.Client{Timeout: 15 * time.Second}}
}

// do sends one request; err is a failure to get an answer at all.
func (c *chaosAPI) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// retry sends a request until it is answered with anything but a 5xx or 429 (which the chaos
// causes: a node killed mid-request, the database restarting), or ctx ends. It returns the
// last status and body.
func (c *chaosAPI) retry(ctx context.Context, method, path, body string) (int, []byte, error) {
	for {
		status, b, err := c.do(ctx, method, path, body)
		switch {
		case err == nil && status < 500 && status != http.StatusTooManyRequests:
			return status, b, nil
		case ctx.Err() != nil:
			return status, b, fmt.Errorf("%s %s: gave up: %d %s %v", method, path, status, b, ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// chaosThreadView is what a run's client reads of its thread.
type chaosThreadView struct {
	Status string `json:"status"`
	State  struct {
		Status  string `json:"status"`
		Pending *struct {
			Reason string `json:"reason"`
			Call   struct {
				ID   string          `json:"id"`
				Name string          `json:"name"`
				Args json.RawMessage `json:"args"`
			} `json:"call"`
		} `json:"pending"`
	} `json:"state"`
}

// chaosRun is a run an API client started and drove: its thread, key and event stream.
type chaosRun struct {
	key, thread string
	stream      *chaosStream
	finished    bool
	err         string   // why the client gave up on it
	answers     []string // the client's answers to the calls the run waited on, with the statuses they got
}

// runAgent runs the lead agent on a thread of its own with the message "job key": it starts
// the run, approves the confirmation, answers the client tool and waits until the run has
// finished, while following the thread's events. It gives up after limit.
func (c *chaosAPI) runAgent(ctx context.Context, key string, limit time.Duration) *chaosRun {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	run := &chaosRun{key: key}
	status, b, err := c.retry(ctx, "POST", "/threads", `{"agent":"lead"}`)
	var th struct{ ID string }
	if err != nil || status != http.StatusCreated || json.Unmarshal(b, &th) != nil {
		run.err = fmt.Sprintf("creating the thread: %d %s %v", status, b, err)
		return run
	}
	run.thread = th.ID
	run.stream = followChaosThread(c, th.ID)
	if err := c.startRun(ctx, th.ID, "job "+key); err != nil {
		run.err = err.Error()
		return run
	}
	// A thread still paused on a call a while after its answer was accepted lost the answer's
	// run (its node died between recording the answer and queueing the run): the same answer
	// again resumes it, as docs/DEPLOY.md tells clients.
	const resendAfter = 2 * time.Second
	answered := map[string]time.Time{}
	for {
		var view chaosThreadView
		status, b, err := c.retry(ctx, "GET", "/threads/"+th.ID, "")
		if err != nil {
			run.err = err.Error()
			return run
		}
		if status != http.StatusOK || json.Unmarshal(b, &view) != nil {
			run.err = fmt.Sprintf("GET the thread: %d %s", status, b)
			return run
		}
		if view.Status == "idle" && view.State.Status == "finished" {
			run.finished = true
			// Event streams are capped per key across the fleet (32): a finished run's stream
			// closes once it has seen the thread's messages, as a console's would.
			run.stream.catchUp(c)
			return run
		}
		// Waiting on the call, or idle with the call answered but no run to resume it.
		if p := view.State.Pending; (view.Status == "waiting" || view.Status == "idle") && view.State.Status == "paused" && p != nil &&
			time.Since(answered[p.Call.ID]) > resendAfter {
			statuses, err := c.answer(ctx, th.ID, p.Reason, p.Call.ID, p.Call.Args)
			run.answers = append(run.answers, fmt.Sprintf("%s %s: %s", p.Reason, p.Call.ID, statuses))
			if err != nil {
				run.err = err.Error()
				return run
			}
			answered[p.Call.ID] = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startRun starts the run once. When the answer is lost, the run may have started: a retry
// answered 409 says it has (a run queued or running, or the thread paused on it), as does a
// thread that has the message.
func (c *chaosAPI) startRun(ctx context.Context, thread, message string) error {
	body := asJSON(map[string]string{"agent": "lead", "message": message})
	for {
		status, b, err := c.do(ctx, "POST", "/threads/"+thread+"/runs", body)
		switch {
		case err == nil && status == http.StatusAccepted:
			return nil
		case err == nil && status == http.StatusConflict:
			return nil
		case err == nil && status < 500 && status != http.StatusTooManyRequests:
			return fmt.Errorf("starting the run on %s: %d %s", thread, status, b)
		case ctx.Err() != nil:
			return fmt.Errorf("starting the run on %s: gave up: %d %s %v", thread, status, b, err)
		}
		if _, page, err := c.retry(ctx, "GET", "/threads/"+thread+"/messages", ""); err == nil && strings.Contains(string(page), message) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// answer approves a confirmation or gives a client tool's result, sending it again while the
// chaos keeps it from being answered; 409 means it was already given (an earlier answer lost
// on its way back). It returns the statuses of the attempts ("502 409"; 0 for no answer).
func (c *chaosAPI) answer(ctx context.Context, thread, reason, callID string, args json.RawMessage) (string, error) {
	var path, body string
	switch reason {
	case "confirmation":
		path, body = "/decisions", asJSON(map[string]string{"agent": "lead", "call_id": callID, "action": "approve"})
	case "client_tool":
		var in struct{ Path string }
		_ = json.Unmarshal(args, &in)
		path, body = "/results", asJSON(map[string]string{"agent": "lead", "call_id": callID, "status": "success", "text": "opened " + in.Path})
	default:
		return "", fmt.Errorf("thread %s waits on %s for %s, which no client answers", thread, callID, reason)
	}
	var statuses []string
	for {
		status, b, err := c.do(ctx, "POST", "/threads/"+thread+path, body)
		statuses = append(statuses, fmt.Sprint(status))
		switch {
		case err == nil && (status == http.StatusAccepted || status == http.StatusConflict):
			return strings.Join(statuses, " "), nil
		case err == nil && status < 500 && status != http.StatusTooManyRequests, ctx.Err() != nil:
			return strings.Join(statuses, " "), fmt.Errorf("POST %s on %s: %d %s %v", path, thread, status, b, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// callTally calls the tally tool over the API with key, once: a failed call is not sent again
// (the next one has a key of its own). It returns the result's text when answered.
func (c *chaosAPI) callTally(ctx context.Context, key string) (string, bool) {
	status, b, err := c.do(ctx, "POST", "/tools/tally/call", asJSON(map[string]any{"args": map[string]string{"key": key}}))
	if err != nil || status != http.StatusOK {
		return "", false
	}
	var out struct {
		Result struct {
			Status string `json:"status"`
			Text   string `json:"result"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &out) != nil || out.Result.Status != "success" {
		return string(b), false
	}
	return out.Result.Text, true
}

// chaosStream follows a thread's events, reconnecting with Last-Event-ID whenever the stream
// breaks (a node killed or drained, the database restarting), and records the messages it saw.
type chaosStream struct {
	thread string
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	seen       []chaosSeen // the message events, in the order they came
	reconnects int
}

// chaosSeen is a message event: its id (the message's seq) and the message's id.
type chaosSeen struct {
	seq int64
	id  string
}

// followChaosThread starts following thread's events until stop.
func followChaosThread(c *chaosAPI, thread string) *chaosStream {
	ctx, cancel := context.WithCancel(context.Background())
	s := &chaosStream{thread: thread, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			if s.read(ctx, c) {
				s.mu.Lock()
				s.reconnects++
				s.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return s
}

// read reads one connection of the stream, from after the last message seen; it says whether
// the stream was open before it broke.
func (s *chaosStream) read(ctx context.Context, c *chaosAPI) bool {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/threads/"+s.thread+"/events", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if last := s.lastSeq(); last > 0 {
		req.Header.Set("Last-Event-ID", fmt.Sprint(last))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var event, data string
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == "":
			if event == "message" {
				var m struct {
					ID  string `json:"id"`
					Seq int64  `json:"seq"`
				}
				_ = json.Unmarshal([]byte(data), &m)
				s.mu.Lock()
				s.seen = append(s.seen, chaosSeen{seq: m.Seq, id: m.ID})
				s.mu.Unlock()
			}
			event, data = "", ""
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	return true
}

// lastSeq is the seq of the last message seen, 0 before any.
func (s *chaosStream) lastSeq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		return 0
	}
	return s.seen[len(s.seen)-1].seq
}

// catchUp waits, a few seconds at most, until the stream has seen the thread's last message,
// then ends it; what it saw stays for stop.
func (s *chaosStream) catchUp(c *chaosAPI) {
	msgs, err := c.messages(s.thread)
	if err == nil && len(msgs) > 0 {
		last := msgs[len(msgs)-1].Seq
		for deadline := time.Now().Add(10 * time.Second); s.lastSeq() < last && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
	}
	s.cancel()
	<-s.done
}

// stop ends the stream and returns what it saw.
func (s *chaosStream) stop() ([]chaosSeen, int) {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen, s.reconnects
}

// chaosMCP is an MCP client of the official Go SDK calling the tally tool through the load
// balancer, at a protocol version ("" for the SDK's default).
type chaosMCP struct {
	name, version string
	want          string // the protocol version the client must end up speaking
	lb, key       string

	answered map[string]string // the text of every answered call, by key
	failed   int               // calls without an answer
	connects int               // sessions opened (one, unless the session was lost)
	protocol string            // the protocol version negotiated last
	errs     []string          // the first errors, for the report
	// spread is the most nodes that answered the calls of one session: more than one shows a
	// session that continued on another node.
	spread int
}

// run calls tally until ctx ends, each call with a key of its own. A call that fails is not
// sent again; three failures in a row, and the client opens a new session, as a client whose
// session is gone must.
func (m *chaosMCP) run(ctx context.Context, workspace string) {
	m.answered = map[string]string{}
	var cs *sdk.ClientSession
	defer func() {
		if cs != nil {
			cs.Close()
		}
	}()
	nodes := map[string]bool{}
	for n, inARow := 0, 0; ctx.Err() == nil; n++ {
		if cs == nil {
			var err error
			if cs, err = m.connect(ctx); err != nil {
				m.note("connect: %v", err)
				time.Sleep(200 * time.Millisecond)
				continue
			}
			m.connects++
			if res := cs.InitializeResult(); res != nil {
				m.protocol = res.ProtocolVersion
			}
			nodes = map[string]bool{}
		}
		key := fmt.Sprintf("%s.%s.%d", workspace, m.name, n)
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := cs.CallTool(callCtx, &sdk.CallToolParams{Name: "tally", Arguments: map[string]string{"key": key}})
		cancel()
		if err == nil && res.IsError {
			err = fmt.Errorf("an error result: %s", contentText(res))
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.failed++
			m.note("call %s: %v", key, err)
			if inARow++; inARow == 3 {
				cs.Close()
				cs, inARow = nil, 0
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		inARow = 0
		text := contentText(res)
		m.answered[key] = text
		if _, life, ok := strings.Cut(text, " by "); ok {
			node, _, _ := strings.Cut(life, ".")
			nodes[node] = true
			m.spread = max(m.spread, len(nodes))
		}
		time.Sleep(60 * time.Millisecond)
	}
}

// connect opens a session (or, sessionless, discovers the server) through the load balancer.
func (m *chaosMCP) connect(ctx context.Context) (*sdk.ClientSession, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	transport := &sdk.StreamableClientTransport{Endpoint: m.lb + "/mcp", HTTPClient: &http.Client{Transport: bearer{key: m.key, next: http.DefaultTransport}}}
	var opts *sdk.ClientSessionOptions
	if m.version != "" {
		opts = &sdk.ClientSessionOptions{ProtocolVersion: m.version}
	}
	return sdk.NewClient(&sdk.Implementation{Name: "quiver-chaos-" + m.name, Version: "1"}, nil).Connect(ctx, transport, opts)
}

// note keeps the first errors of the client, for the report.
func (m *chaosMCP) note(format string, args ...any) {
	if len(m.errs) < 5 {
		m.errs = append(m.errs, fmt.Sprintf(format, args...))
	}
}

// contentText is a tool result's text.
func contentText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
