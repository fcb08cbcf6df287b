package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// memRecorder keeps recorded results in memory (the server package tests the SQLite one).
type memRecorder struct {
	mu   sync.Mutex
	recs []rec
}

type rec struct {
	Scope  quiver.Scope
	Call   quiver.Call
	Result quiver.Result
}

func (m *memRecorder) RecordResult(ctx context.Context, c *quiver.Call, r *quiver.Result) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, rec{quiver.ScopeFrom(ctx), *c, *r})
	return nil
}

// waitFor returns the first record of the named tool, waiting for it: the
// dispatcher records a result after the handler returns, so a test that saw
// the handler end may look before the record lands.
func (m *memRecorder) waitFor(t *testing.T, name string) *rec {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, r := range m.all() {
			if r.Call.Name == name {
				return &r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no result of %s was recorded within 10s", name)
		}
		time.Sleep(time.Millisecond)
	}
}

func (m *memRecorder) all() []rec {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.recs)
}

type greetArgs struct {
	Name string `json:"name" description:"who to greet" minLength:"1"`
}

type sumArgs struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type sumOut struct {
	Sum float64 `json:"sum"`
}

// started is closed by the blocking tool when it runs; cancelled when it sees its context end.
type blockSignals struct {
	started   chan struct{}
	cancelled chan struct{}
}

func fixtureTools(t testing.TB, sig *blockSignals) *quiver.Registry {
	t.Helper()
	png := []byte{0x89, 'P', 'N', 'G'}
	tools := []*quiver.Tool{
		quiver.Func("greet", "Greets someone by name. Returns the greeting.", func(_ context.Context, a greetArgs) (string, error) {
			return "Hello, " + a.Name + "!", nil
		}, quiver.WithExamples(quiver.Example{Args: json.RawMessage(`{"name":"Ada"}`), Result: json.RawMessage(`"Hello, Ada!"`)})),
		quiver.Func("sum", "Adds two numbers. Returns their sum.", func(_ context.Context, a sumArgs) (sumOut, error) {
			return sumOut{a.A + a.B}, nil
		}),
		quiver.Func("fail", "Always fails.", func(context.Context, struct{}) (string, error) {
			return "", errors.New("the disk is full")
		}),
		quiver.Func("media", "Returns an image, audio and an embedded resource.", func(context.Context, struct{}) ([]quiver.Content, error) {
			return []quiver.Content{
				quiver.TextContent("here"),
				quiver.ImageContent(png, "image/png"),
				{Type: quiver.ContentAudio, Data: base64.StdEncoding.EncodeToString([]byte("RIFF")), MimeType: "audio/wav"},
				{Type: quiver.ContentResource, URI: "test://doc", MimeType: "text/plain", Text: "embedded"},
			}, nil
		}),
		quiver.Func("leak", "Returns its secret variable (which must be masked).", func(ctx context.Context, _ struct{}) (string, error) {
			v, _ := quiver.Var(ctx, "token")
			return "token is " + v, nil
		}, quiver.WithVariables(quiver.Variable{Name: "token", Type: quiver.VarSecret, Required: true})),
		quiver.Func("delete_all", "Deletes everything (denied by policy).", func(context.Context, struct{}) (string, error) {
			return "deleted", nil
		}),
		quiver.Func("dangerous", "Needs the user's confirmation.", func(context.Context, struct {
			Note string `json:"note,omitempty"`
		}) (string, error) {
			return "done it", nil
		}, quiver.WithConfirmation()),
		quiver.Func("steps", "Reports progress and logs in three steps.", func(ctx context.Context, _ struct{}) (string, error) {
			for i := range 3 {
				quiver.ReportProgress(ctx, float64(i+1), 3, fmt.Sprintf("step %d", i+1))
				quiver.Log(ctx, quiver.LogInfo, fmt.Sprintf("did step %d", i+1))
			}
			return "stepped", nil
		}),
		quiver.Func("block", "Blocks until cancelled.", func(ctx context.Context, _ struct{}) (string, error) {
			close(sig.started)
			<-ctx.Done()
			close(sig.cancelled)
			return "", ctx.Err()
		}),
	}
	reg := &quiver.Registry{}
	if err := reg.Register(tools...); err != nil {
		t.Fatal(err)
	}
	return reg
}

type fixture struct {
	srv      *qmcp.Server
	url      string
	rec      *memRecorder
	sig      *blockSignals
	sessions chan qmcp.SessionInfo
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{rec: &memRecorder{}, sig: &blockSignals{make(chan struct{}), make(chan struct{})}, sessions: make(chan qmcp.SessionInfo, 16)}
	d := &quiver.Dispatcher{
		Registry: fixtureTools(t, f.sig),
		Policy:   quiver.Policy{Deny: []string{"delete_*"}},
		Resolver: quiver.Layered{Thread: quiver.Vars{"token": "s3cr3t-value"}},
		Confirm:  qmcp.Confirm(nil),
		Recorder: f.rec,
		Grace:    time.Second,
	}
	n := 0
	f.srv = qmcp.NewServer(d, &qmcp.ServerOptions{Session: func(_ context.Context, s qmcp.SessionInfo) (quiver.Scope, error) {
		n++
		f.sessions <- s
		if s.ThreadID != "" {
			return quiver.Scope{WorkspaceID: "wsp_test", ThreadID: s.ThreadID}, nil
		}
		return quiver.Scope{WorkspaceID: "wsp_test", ThreadID: fmt.Sprintf("thr_%d", n)}, nil
	}})
	ts := httptest.NewServer(f.srv.HTTPHandler(&qmcp.HTTPOptions{MaxRequestBytes: 64 << 10}))
	t.Cleanup(func() { f.srv.Close(); ts.Close() })
	f.url = ts.URL
	return f
}

// connect connects a client at the SDK's default protocol: the sessionless one (2026-07-28).
func (f *fixture) connect(t *testing.T, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	return f.connectAt(t, "", opts)
}

// The protocol versions a test runs at: the newest with sessions, and the sessionless one.
const (
	protoSession     = "2025-11-25"
	protoSessionless = "2026-07-28"
)

var protocols = []string{protoSession, protoSessionless}

// connectAt connects a client at protocol version ("": the SDK's default).
func (f *fixture) connectAt(t *testing.T, version string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1.0"}, opts)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: f.url, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestToolsList(t *testing.T) {
	f := newFixture(t)
	cs := f.connect(t, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		byName[tl.Name] = tl
	}
	want := []string{"block", "dangerous", "fail", "greet", "leak", "media", "steps", "sum"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v (delete_all denied by policy)", names, want)
	}
	cases := []struct {
		tool, field, want string
	}{
		{"greet", "input", `"required":["name"]`},
		{"sum", "output", `"sum":{"type":"number"}`},
		{"fail", "input", `"type":"object"`},
	}
	for _, c := range cases {
		var v any = byName[c.tool].InputSchema
		if c.field == "output" {
			v = byName[c.tool].OutputSchema
		}
		b, _ := json.Marshal(v)
		if !strings.Contains(string(b), c.want) {
			t.Errorf("%s %s schema = %s, want it to contain %s", c.tool, c.field, b, c.want)
		}
	}
	if a := byName["dangerous"].Annotations; a == nil || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("a tool that needs confirmation should be marked destructive, got %+v", a)
	}
	// A tool's examples reach MCP clients in its _meta; a tool without any has none.
	if b, _ := json.Marshal(byName["greet"].Meta[qmcp.ExamplesMetaKey]); string(b) != `[{"args":{"name":"Ada"},"result":"Hello, Ada!"}]` {
		t.Errorf("greet's examples in _meta: %s", b)
	}
	if m := byName["sum"].Meta; m != nil {
		t.Errorf("a tool without examples has _meta %v", m)
	}
}

// Every kind of call and result, at both protocols. A session's calls are recorded on its
// thread, the session hook asked once; a call of the sessionless protocol is a session of its
// own, on a thread of its own.
func TestToolsCall(t *testing.T) {
	for _, version := range protocols {
		t.Run(version, func(t *testing.T) { testToolsCall(t, version) })
	}
}

func testToolsCall(t *testing.T, version string) {
	f := newFixture(t)
	cs := f.connectAt(t, version, nil)
	cases := []struct {
		name       string
		tool       string
		args       any
		isError    bool
		text       []string // substrings of the joined text content
		structured string
		kinds      []string
	}{
		{"text result", "greet", map[string]any{"name": "Ada"}, false, []string{"Hello, Ada!"}, "", []string{"text"}},
		{"structured result", "sum", map[string]any{"a": 2, "b": 3.5}, false, []string{`{"sum":5.5}`}, `{"sum":5.5}`, []string{"text"}},
		{"invalid arguments name the field", "greet", map[string]any{"name": ""}, true, []string{"/name"}, "", []string{"text"}},
		{"missing argument", "greet", map[string]any{}, true, []string{"name"}, "", []string{"text"}},
		{"handler error", "fail", nil, true, []string{"the disk is full"}, "", []string{"text"}},
		{"unknown tool lists the available ones", "nope", nil, true, []string{"unknown tool", "Available tools: block, dangerous"}, "", []string{"text"}},
		{"policy denial", "delete_all", nil, true, []string{"not available"}, "", []string{"text"}},
		{"secrets are masked", "leak", nil, false, []string{"token is [REDACTED]"}, "", []string{"text"}},
		{"media content", "media", nil, false, []string{"here"}, "", []string{"text", "image", "audio", "resource"}},
		{"confirmation without elicitation is refused with the reason", "dangerous", nil, true, []string{"does not support elicitation"}, "", []string{"text"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != c.isError {
				t.Errorf("isError = %v, want %v (%s)", res.IsError, c.isError, texts(res))
			}
			for _, want := range c.text {
				if !strings.Contains(texts(res), want) {
					t.Errorf("text %q does not contain %q", texts(res), want)
				}
			}
			if strings.Contains(texts(res), "s3cr3t-value") {
				t.Errorf("the secret leaked: %s", texts(res))
			}
			if c.structured != "" {
				b, _ := json.Marshal(res.StructuredContent)
				if string(b) != c.structured {
					t.Errorf("structuredContent = %s, want %s", b, c.structured)
				}
			}
			if got := kinds(res); !slices.Equal(got, c.kinds) {
				t.Errorf("content kinds = %v, want %v", got, c.kinds)
			}
		})
	}
	recs := f.rec.all()
	if len(recs) != len(cases) {
		t.Fatalf("recorded %d calls, want %d", len(recs), len(cases))
	}
	ids, threads := map[string]bool{}, map[string]bool{}
	for i, r := range recs {
		if r.Scope.WorkspaceID != "wsp_test" || (version == protoSession && r.Scope.ThreadID != "thr_1") {
			t.Errorf("call %d recorded with scope %+v, want the session's", i, r.Scope)
		}
		threads[r.Scope.ThreadID] = true
		if r.Call.ID == "" || ids[r.Call.ID] {
			t.Errorf("call %d has id %q: want a unique id", i, r.Call.ID)
		}
		ids[r.Call.ID] = true
		if r.Call.Name != cases[i].tool {
			t.Errorf("call %d recorded as %s, want %s", i, r.Call.Name, cases[i].tool)
		}
	}
	asked := 1 // the session hook runs once per session
	if version == protoSessionless {
		asked = len(cases) // each request is a session of its own
		if len(threads) != len(cases) {
			t.Errorf("%d calls of the sessionless protocol were recorded on %d threads, want one each", len(cases), len(threads))
		}
	}
	if len(f.sessions) != asked {
		t.Fatalf("the session hook ran %d times, want %d", len(f.sessions), asked)
	}
	for range asked {
		if s := <-f.sessions; s.ClientName != "test-client" || (s.ID == "") != (version == protoSessionless) {
			t.Errorf("session info = %+v", s)
		}
	}
}

func texts(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func kinds(res *sdk.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			out = append(out, "text")
		case *sdk.ImageContent:
			out = append(out, "image")
		case *sdk.AudioContent:
			out = append(out, "audio")
		case *sdk.EmbeddedResource:
			out = append(out, "resource")
		case *sdk.ResourceLink:
			out = append(out, "link")
		default:
			out = append(out, fmt.Sprintf("%T", c))
		}
	}
	return out
}

// A tool's progress reaches the client at both protocols, on the request's stream; its logs
// reach clients of a session, which set their level (2026-07-28 deprecates logging).
func TestProgressAndLogging(t *testing.T) {
	for _, version := range protocols {
		t.Run(version, func(t *testing.T) { testProgressAndLogging(t, version) })
	}
}

func testProgressAndLogging(t *testing.T, version string) {
	f := newFixture(t)
	var mu sync.Mutex
	var progress, logs []string
	got := make(chan struct{}, 16)
	cs := f.connectAt(t, version, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, fmt.Sprintf("%v %g/%g %s", r.Params.ProgressToken, r.Params.Progress, r.Params.Total, r.Params.Message))
			mu.Unlock()
			got <- struct{}{}
		},
		//lint:ignore SA1019 the server logs to clients of the versions before 2026-07-28
		LoggingMessageHandler: func(_ context.Context, r *sdk.LoggingMessageRequest) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf("%s %s %v", r.Params.Level, r.Params.Logger, r.Params.Data))
			mu.Unlock()
			got <- struct{}{}
		},
	})
	ctx := context.Background()
	wantProgress := []string{"tok-1 1/3 step 1", "tok-1 2/3 step 2", "tok-1 3/3 step 3"}
	wantLogs := []string{"info steps did step 1", "info steps did step 2", "info steps did step 3"}
	if version == protoSessionless {
		wantLogs = nil
	} else {
		//lint:ignore SA1019 as above
		if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
	}
	params := &sdk.CallToolParams{Name: "steps"}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %s", err, texts(res))
	}
	for range len(wantProgress) + len(wantLogs) {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("notifications missing: progress %v logs %v", progress, logs)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(progress, wantProgress) {
		t.Errorf("progress = %q, want %q", progress, wantProgress)
	}
	if !slices.Equal(logs, wantLogs) {
		t.Errorf("logs = %q, want %q", logs, wantLogs)
	}
}

func TestClientCancellationCancelsTheTool(t *testing.T) {
	f := newFixture(t)
	cs := f.connect(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "block"})
		errc <- err
	}()
	<-f.sig.started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client call error = %v, want context.Canceled", err)
	}
	<-f.sig.cancelled // the tool saw its context end
	// The server keeps serving the session.
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "again"}})
	if err != nil || res.IsError {
		t.Fatalf("call after cancellation: %v", err)
	}
	if cancelled := f.rec.waitFor(t, "block"); cancelled.Result.Code != quiver.CodeCancelled {
		t.Errorf("the cancelled call was recorded as %+v, want code cancelled", cancelled)
	}
}

// A call that needs confirmation is put to the client's user: in the middle of the call for a
// client of a session, through a multi round-trip request for one of the sessionless protocol
// (the SDK's client answers the input request and calls again). The sessionless call is
// recorded twice on one thread: waiting for the confirmation, then as decided.
func TestConfirmationThroughElicitation(t *testing.T) {
	cases := []struct {
		action  string
		isError bool
		text    string
		code    quiver.Code
	}{
		{"accept", false, "done it", ""},
		{"decline", true, "the user denied the call to dangerous: the user declined it in the MCP client", quiver.CodeDenied},
		{"cancel", true, "cancelled the confirmation", quiver.CodeDenied},
	}
	for _, version := range protocols {
		for _, c := range cases {
			t.Run(version+"/"+c.action, func(t *testing.T) {
				f := newFixture(t)
				var asked []string
				cs := f.connectAt(t, version, &sdk.ClientOptions{ElicitationHandler: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
					asked = append(asked, r.Params.Message)
					return &sdk.ElicitResult{Action: c.action}, nil
				}})
				res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "dangerous"})
				if err != nil {
					t.Fatal(err)
				}
				if res.IsError != c.isError || !strings.Contains(texts(res), c.text) {
					t.Errorf("result = isError %v %q, want isError %v containing %q", res.IsError, texts(res), c.isError, c.text)
				}
				if len(asked) != 1 || !strings.Contains(asked[0], "dangerous") {
					t.Errorf("the user was asked %q; want once, the tool named", asked)
				}
				checkConfirmationRecords(t, f.rec.all(), version, c.code)
			})
		}
	}
}

// checkConfirmationRecords checks what a confirmed call left on its thread.
func checkConfirmationRecords(t *testing.T, recs []rec, version string, code quiver.Code) {
	t.Helper()
	want := []quiver.Code{code}
	if version == protoSessionless {
		want = []quiver.Code{quiver.CodeConfirmationRequired, code}
	}
	var got []quiver.Code
	for _, r := range recs {
		got = append(got, r.Result.Code)
		if r.Scope.ThreadID != recs[0].Scope.ThreadID {
			t.Errorf("the call was recorded on threads %s and %s, want one", recs[0].Scope.ThreadID, r.Scope.ThreadID)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("recorded %q, want %q", got, want)
	}
}

// A client of the sessionless protocol answers a confirmation in a request of its own, with
// the request state it was given. An answer without that state, or with the state of another
// question (other arguments), is not taken: the user is asked (again) instead.
func TestConfirmationAnswersAreBoundToTheirQuestion(t *testing.T) {
	f := newFixture(t)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`
	call := func(args, answer string) map[string]json.RawMessage {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta + `,"name":"dangerous","arguments":` + args + answer + `}}`
		status, out := rpc(t, f.url, http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"dangerous"}}, body)
		if status != http.StatusOK {
			t.Fatalf("tools/call: %d %s", status, out)
		}
		return resultOf(t, out)
	}
	accept := func(state json.RawMessage) string {
		return `,"inputResponses":{"quiver.confirm":{"action":"accept"}},"requestState":` + string(state)
	}
	first := call(`{}`, "")
	if string(first["resultType"]) != `"input_required"` || first["inputRequests"] == nil || first["requestState"] == nil {
		t.Fatalf("the first call: %v, want an input request with a request state", first)
	}
	cases := []struct {
		name, args, answer, resultType string
	}{
		{"no request state", `{}`, `,"inputResponses":{"quiver.confirm":{"action":"accept"}}`, "input_required"},
		{"a forged request state", `{}`, accept(json.RawMessage(`"qv1.forged"`)), "input_required"},
		{"the state of other arguments", `{"note":"other"}`, accept(first["requestState"]), "input_required"},
		{"the state of this question", `{}`, accept(first["requestState"]), "complete"},
		// One confirmation, one run: the same answer sent again is a question again.
		{"the same answer again", `{}`, accept(first["requestState"]), "input_required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := call(c.args, c.answer)
			if string(res["resultType"]) != `"`+c.resultType+`"` {
				t.Errorf("resultType %s, want %q: %v", res["resultType"], c.resultType, res)
			}
		})
	}
	ran := 0
	for _, r := range f.rec.all() {
		if r.Call.Name == "dangerous" && !r.Result.IsError() {
			ran++
		}
	}
	if ran != 1 {
		t.Errorf("the confirmed tool ran %d times, want once", ran)
	}
}

// resultOf reads the result of a JSON-RPC answer, sent as JSON or as server-sent events.
func resultOf(t *testing.T, body string) map[string]json.RawMessage {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimPrefix(line, "data: ")
		var msg struct {
			Result map[string]json.RawMessage `json:"result"`
			Error  json.RawMessage            `json:"error"`
		}
		if json.Unmarshal([]byte(line), &msg) == nil && (msg.Result != nil || msg.Error != nil) {
			if msg.Error != nil {
				t.Fatalf("an error: %s", msg.Error)
			}
			return msg.Result
		}
	}
	t.Fatalf("no answer in %q", body)
	return nil
}

func TestStdioTransport(t *testing.T) {
	// The same server over a stream transport (what stdio is), in memory.
	rec := &memRecorder{}
	d := &quiver.Dispatcher{Registry: fixtureTools(t, &blockSignals{}), Recorder: rec}
	srv := qmcp.NewServer(d, nil)
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "stdio"}})
	if err != nil || texts(res) != "Hello, stdio!" {
		t.Fatalf("call: %v %v", err, res)
	}
	cs.Close()
	cancel()
	<-done
	if n := len(rec.all()); n != 1 {
		t.Errorf("recorded %d calls, want 1", n)
	}
}

// rpc posts one raw request to the server and returns the status and body.
func rpc(t *testing.T, url string, header http.Header, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header[k] = v
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil || strings.Contains(b.String(), `"id":`) {
			break
		}
	}
	return resp.StatusCode, b.String()
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestBadInput(t *testing.T) {
	f := newFixture(t)
	cs := f.connectAt(t, protoSession, nil) // a well-behaved client, served throughout
	sessionID := cs.ID()
	withSession := http.Header{"Mcp-Session-Id": {sessionID}, "Mcp-Protocol-Version": {"2025-06-18"}}
	cases := []struct {
		name   string
		header http.Header
		body   string
		status int
		want   string
	}{
		{"malformed JSON", nil, `{"jsonrpc":"2.0","id":1,"method":`, http.StatusBadRequest, `{"jsonrpc":"2.0","error":{"code":-32700,"message":"malformed payload`},
		{"unknown method", withSession, `{"jsonrpc":"2.0","id":7,"method":"no/such/method"}`, http.StatusBadRequest, `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"JSON RPC not handled: \"no/such/method\" unsupported"}}`},
		{"unknown method, string id after params", withSession, `{"jsonrpc":"2.0","method":"no/such/method","params":{},"id":"abc"}`, http.StatusBadRequest, `"id":"abc","error":{"code":-32601`},
		{"request without id", withSession, `{"jsonrpc":"2.0","method":"tools/list","params":{}}`, http.StatusBadRequest, `{"jsonrpc":"2.0","error":{"code":-32600`},
		{"unknown session", http.Header{"Mcp-Session-Id": {"forged"}}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, http.StatusNotFound, ""},
		{"oversized request", nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 70<<10) + `"}}`, http.StatusRequestEntityTooLarge, ""},
		{"foreign Host (DNS rebinding)", http.Header{"Host": {"evil.example:80"}}, initBody, http.StatusForbidden, "invalid Host"},
		{"foreign Origin", http.Header{"Origin": {"https://evil.example"}}, initBody, http.StatusForbidden, "origin"},
		{"local Origin", http.Header{"Origin": {"http://localhost:3000"}}, initBody, http.StatusOK, `"protocolVersion"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := rpc(t, f.url, c.header, c.body)
			if status != c.status {
				t.Errorf("status = %d, want %d (%s)", status, c.status, body)
			}
			if c.want != "" && !strings.Contains(body, c.want) {
				t.Errorf("body %q does not contain %q", body, c.want)
			}
		})
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "still here"}})
	if err != nil || texts(res) != "Hello, still here!" {
		t.Fatalf("the server stopped serving others: %v %v", err, res)
	}
}

func TestToolsChangedNotifiesClients(t *testing.T) {
	f := newFixture(t)
	changed := make(chan struct{}, 4)
	cs := f.connect(t, &sdk.ClientOptions{ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} }})
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	f.srv.ToolsChanged()
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed notification")
	}
}

// Requests read before the client's input ended are answered before the session ends: with
// the SDK alone, `echo '{...initialize...}' | quiver mcp stdio` printed nothing.
func TestStdioAnswersWhatWasReadBeforeTheEnd(t *testing.T) {
	d := &quiver.Dispatcher{Registry: fixtureTools(t, &blockSignals{})}
	srv := qmcp.NewServer(d, nil)
	in := strings.NewReader(initBody + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"steps","arguments":{}}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"greet","arguments":{"name":"pipe"}}}` + "\n")
	var out bytes.Buffer
	if err := srv.Run(context.Background(), &sdk.IOTransport{Reader: io.NopCloser(in), Writer: nopCloser{&out}}); err != nil &&
		!errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	answers := map[string]string{}
	for line := range strings.Lines(out.String()) {
		var m struct {
			ID     json.RawMessage
			Result json.RawMessage
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.ID != nil {
			answers[string(m.ID)] = string(m.Result)
		}
	}
	for id, want := range map[string]string{"1": `"protocolVersion"`, "2": "stepped", "3": "Hello, pipe!"} {
		if !strings.Contains(answers[id], want) {
			t.Errorf("request %s: answer %q, want one containing %s; all output:\n%s", id, answers[id], want, out.String())
		}
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func TestStdioBadInput(t *testing.T) {
	d := &quiver.Dispatcher{Registry: fixtureTools(t, &blockSignals{})}
	srv := qmcp.NewServer(d, nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, &sdk.IOTransport{Reader: inR, Writer: outW}) }()
	lines := bufio.NewScanner(outR)
	send := func(line string) string {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			t.Fatalf("no answer to %s: %v", line, lines.Err())
		}
		return lines.Text()
	}
	cases := []struct{ name, send, want string }{
		{"initialize", initBody, `"protocolVersion"`},
		{"unknown method", `{"jsonrpc":"2.0","id":2,"method":"no/such/method"}`, `"code":-32601`},
		{"a call still works", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"greet","arguments":{"name":"pipe"}}}`, `Hello, pipe!`},
	}
	for _, c := range cases {
		if got := send(c.send); !strings.Contains(got, c.want) {
			t.Errorf("%s: answer %s does not contain %s", c.name, got, c.want)
		}
		if c.name == "initialize" {
			io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
		}
	}
	// Malformed JSON ends the session cleanly: the server returns, it does not crash or hang.
	io.WriteString(inW, "{not json\n")
	<-done
	cancel()
	inW.Close()
	outR.Close()
}

// failingLedger cannot record an answer.
type failingLedger struct{}

func (failingLedger) Take(context.Context, string, time.Time) (bool, error) {
	return false, errors.New("the ledger is down")
}

// A confirmation whose answer cannot be recorded as taken is not run: the call fails, saying
// why, rather than risk running twice on one answer.
func TestUnrecordedAnswersRunNothing(t *testing.T) {
	rec := &memRecorder{}
	d := &quiver.Dispatcher{Registry: fixtureTools(t, &blockSignals{}), Confirm: qmcp.Confirm(nil), Recorder: rec}
	srv := qmcp.NewServer(d, &qmcp.ServerOptions{Answers: failingLedger{}})
	ts := httptest.NewServer(srv.HTTPHandler(nil))
	t.Cleanup(func() { srv.Close(); ts.Close() })
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`
	header := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"dangerous"}}
	_, out := rpc(t, ts.URL, header, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+meta+`,"name":"dangerous","arguments":{}}}`)
	asked := resultOf(t, out)
	_, out = rpc(t, ts.URL, header, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{`+meta+`,"name":"dangerous","arguments":{},`+
		`"inputResponses":{"quiver.confirm":{"action":"accept"}},"requestState":`+string(asked["requestState"])+`}}`)
	res := resultOf(t, out)
	if string(res["isError"]) != "true" || !strings.Contains(string(res["content"]), "the ledger is down") {
		t.Errorf("the answer with the ledger down: %s, want an error result saying why", out)
	}
	for _, r := range rec.all() {
		if r.Call.Name == "dangerous" && !r.Result.IsError() {
			t.Errorf("the tool ran: %+v", r.Result)
		}
	}
}
