package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// TestMain lets the test binary act as a remote MCP server over stdio, for the stdio import
// tests: a real child process speaking MCP on its standard input and output.
func TestMain(m *testing.M) {
	if os.Getenv("QUIVER_MCP_TEST_SERVER") == "stdio" {
		// As a program with tracing on: it continues the trace its callers send.
		otel.SetTextMapPropagator(propagation.TraceContext{})
		srv := qmcp.NewServer(&quiver.Dispatcher{Registry: remoteTools(nil)}, &qmcp.ServerOptions{Name: "child"})
		if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type slowSignals struct{ cancelled chan struct{} }

// remoteTools are the tools of the remote servers the import tests connect to.
func remoteTools(slow *slowSignals) *quiver.Registry {
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	reg.Register(
		quiver.Func("echo", "Echoes its text.", func(_ context.Context, a struct {
			Text string `json:"text" minLength:"1"`
		}) (string, error) {
			return "echo: " + a.Text, nil
		}),
		quiver.Func("get-sum", "Adds two numbers (a name with a dash).", func(_ context.Context, a sumArgs) (sumOut, error) {
			return sumOut{a.A + a.B}, nil
		}),
		quiver.Func("fail", "Fails.", func(context.Context, struct{}) (string, error) { return "", errors.New("remote failure") }),
		quiver.Func("crash", "Ends the server process.", func(context.Context, struct{}) (string, error) {
			os.Exit(3)
			return "", nil
		}),
		quiver.Func("progress", "Reports progress twice.", func(ctx context.Context, _ struct{}) (string, error) {
			quiver.ReportProgress(ctx, 1, 2, "half")
			quiver.ReportProgress(ctx, 2, 2, "all")
			return "done", nil
		}),
		quiver.Func("trace", "Returns the trace it runs in.", func(ctx context.Context, _ struct{}) (string, error) {
			return trace.SpanContextFromContext(ctx).TraceID().String(), nil
		}),
		quiver.Func("sleep", "Sleeps until cancelled.", func(ctx context.Context, _ struct{}) (string, error) {
			<-ctx.Done()
			if slow != nil {
				close(slow.cancelled)
			}
			return "", ctx.Err()
		}),
	)
	return reg
}

// remoteHTTP serves remote tools over streamable HTTP on addr ("127.0.0.1:0" for a fresh port).
func remoteHTTP(t *testing.T, addr string, slow *slowSignals) *httptest.Server {
	t.Helper()
	srv := qmcp.NewServer(&quiver.Dispatcher{Registry: remoteTools(slow)}, &qmcp.ServerOptions{Name: "remote"})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.HTTPHandler(nil))
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(func() { srv.Close(); ts.Close() })
	return ts
}

var fastRetry = &qmcp.ImportOptions{MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, KeepAlive: -1, ConnectTimeout: 5 * time.Second}

func importInto(t *testing.T, reg *quiver.Registry, remotes []qmcp.Remote, opts *qmcp.ImportOptions) *qmcp.Importer {
	t.Helper()
	im, err := qmcp.Import(context.Background(), reg, remotes, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	return im
}

func names(reg *quiver.Registry) []string {
	var out []string
	for _, t := range reg.Tools() {
		out = append(out, t.Name())
	}
	return out
}

func TestImport(t *testing.T) {
	remote := remoteHTTP(t, "127.0.0.1:0", nil)
	transports := []struct {
		name   string
		remote qmcp.Remote
	}{
		{"streamable HTTP", qmcp.Remote{Name: "web", URL: remote.URL}},
		{"stdio child process", qmcp.Remote{Name: "child", Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{"QUIVER_MCP_TEST_SERVER": "stdio"}}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
			local := quiver.Func("local_tool", "A local tool.", func(context.Context, struct{}) (string, error) { return "local", nil })
			reg.Register(local)
			changed := make(chan struct{}, 8)
			im := importInto(t, reg, []qmcp.Remote{tr.remote}, &qmcp.ImportOptions{OnChange: func() { changed <- struct{}{} }, KeepAlive: -1})
			p := tr.remote.Name + "."
			want := []string{"local_tool", p + "crash", p + "echo", p + "fail", p + "get-sum", p + "progress", p + "sleep", p + "trace"}
			slices.Sort(want)
			if got := names(reg); !slices.Equal(got, want) {
				t.Fatalf("tools = %v, want %v", got, want)
			}
			if len(changed) == 0 {
				t.Error("OnChange was not called after the import")
			}
			if st := im.Status(); len(st) != 1 || !st[0].Connected || st[0].Tools != 7 {
				t.Errorf("status = %+v", st)
			}
			rec := &memRecorder{}
			d := &quiver.Dispatcher{Registry: reg, Policy: quiver.Policy{Deny: []string{p + "crash"}}, Recorder: rec}
			cases := []struct {
				tool, args string
				code       quiver.Code
				want       string
			}{
				{"echo", `{"text":"hi"}`, "", "echo: hi"},
				{"get-sum", `{"a":2,"b":40}`, "", `{"sum":42}`},
				{"echo", `{"text":""}`, quiver.CodeInvalidArguments, "/text"}, // Quiver validates with the remote's schema
				{"echo", `{"text":5}`, quiver.CodeInvalidArguments, "/text"},
				{"fail", `{}`, quiver.CodeToolError, "remote failure"},
				{"crash", `{}`, quiver.CodePolicyDenied, "not available"}, // policy applies to imported tools
			}
			for _, c := range cases {
				r, err := d.Dispatch(context.Background(), quiver.Call{ID: "id-" + c.tool, Name: p + c.tool, Args: json.RawMessage(c.args)})
				if err != nil {
					t.Fatal(err)
				}
				if r.Code != c.code || !strings.Contains(r.ModelText(), c.want) {
					t.Errorf("%s %s: %s %q, want code %q and %q", c.tool, c.args, r.Code, r.ModelText(), c.code, c.want)
				}
			}
			if n := len(rec.all()); n != len(cases) {
				t.Errorf("recorded %d calls, want %d", n, len(cases))
			}
		})
	}
}

// A call of an imported tool carries the caller's trace context to the remote server (in
// _meta), and the remote's tool runs in the caller's trace: over HTTP and stdio alike.
func TestImportedCallsCarryTraceContext(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	defer otel.SetTextMapPropagator(prev)
	remote := remoteHTTP(t, "127.0.0.1:0", nil)
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))
	for _, r := range []qmcp.Remote{
		{Name: "web", URL: remote.URL},
		{Name: "child", Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{"QUIVER_MCP_TEST_SERVER": "stdio"}},
	} {
		reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
		importInto(t, reg, []qmcp.Remote{r}, fastRetry)
		res, err := (&quiver.Dispatcher{Registry: reg}).Dispatch(ctx, quiver.Call{Name: r.Name + ".trace"})
		if err != nil || res.IsError() {
			t.Fatalf("%s: %v %+v", r.Name, err, res)
		}
		if res.Text != traceID.String() {
			t.Errorf("%s: the remote tool ran in trace %q, want the caller's %s", r.Name, res.Text, traceID)
		}
	}
}

func TestImportedProgressReachesTheCaller(t *testing.T) {
	remote := remoteHTTP(t, "127.0.0.1:0", nil)
	reg := &quiver.Registry{}
	importInto(t, reg, []qmcp.Remote{{Name: "r", URL: remote.URL}}, fastRetry)
	rep := &progressRecorder{got: make(chan string, 4)}
	ctx := quiver.WithReporter(context.Background(), rep)
	r, err := (&quiver.Dispatcher{Registry: reg}).Dispatch(ctx, quiver.Call{Name: "r.progress"})
	if err != nil || r.IsError() {
		t.Fatalf("%v %v", err, r)
	}
	var got []string
	for range 2 {
		select {
		case s := <-rep.got:
			got = append(got, s)
		case <-time.After(10 * time.Second):
			t.Fatalf("progress missing, got %v", got)
		}
	}
	if want := []string{"1/2 half", "2/2 all"}; !slices.Equal(got, want) {
		t.Errorf("progress = %v, want %v", got, want)
	}
}

type progressRecorder struct{ got chan string }

func (p *progressRecorder) Progress(_ context.Context, done, total float64, msg string) {
	p.got <- fmt.Sprintf("%g/%g %s", done, total, msg)
}
func (p *progressRecorder) Log(context.Context, quiver.LogLevel, string) {}

func TestSlowRemoteTimesOut(t *testing.T) {
	slow := &slowSignals{cancelled: make(chan struct{})}
	remote := remoteHTTP(t, "127.0.0.1:0", slow)
	reg := &quiver.Registry{}
	importInto(t, reg, []qmcp.Remote{{Name: "r", URL: remote.URL, Timeout: 300 * time.Millisecond}}, fastRetry)
	d := &quiver.Dispatcher{Registry: reg, Grace: 5 * time.Second}
	r, err := d.Dispatch(context.Background(), quiver.Call{Name: "r.sleep"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Code != quiver.CodeTimeout {
		t.Errorf("a call past the remote's timeout gave %s %q, want a timeout error result", r.Code, r.Error)
	}
	<-slow.cancelled // the remote was told to cancel
	r, err = d.Dispatch(context.Background(), quiver.Call{Name: "r.echo", Args: json.RawMessage(`{"text":"after"}`)})
	if err != nil || r.Text != "echo: after" {
		t.Errorf("the connection should survive a timeout: %v %+v", err, r)
	}
}

func TestRemoteDownThenUp(t *testing.T) {
	// Reserve a port, leave it closed: the remote is down when Quiver starts.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	reg := &quiver.Registry{}
	im := importInto(t, reg, []qmcp.Remote{{Name: "r", URL: "http://" + addr + "/"}}, fastRetry)
	if st := im.Status()[0]; st.Connected || st.LastError == "" {
		t.Fatalf("status of a down remote = %+v", st)
	}
	if got := names(reg); len(got) != 0 {
		t.Fatalf("tools of a remote never reached = %v", got)
	}
	// A call to one of its tools, which Quiver has never seen, says the remote is down and
	// why, through a workspace's registry over the shared one too; a name under no remote's
	// prefix is still unknown.
	d := &quiver.Dispatcher{Registry: reg}
	layered := &quiver.Dispatcher{Registry: &quiver.Registry{Base: reg}}
	call := quiver.Call{Name: "r.echo", Args: json.RawMessage(`{"text":"up"}`)}
	for _, d := range []*quiver.Dispatcher{d, layered} {
		r, _ := d.Dispatch(context.Background(), call)
		for _, want := range []string{`"r.echo"`, `MCP server "r", which is not connected`, "connection refused", "(last tried 20"} {
			if r.Code != quiver.CodeToolError || !strings.Contains(r.Error, want) {
				t.Errorf("a call to a remote never reached gave %s %q, want a tool_error saying %q", r.Code, r.Error, want)
			}
		}
		if r, _ := d.Dispatch(context.Background(), quiver.Call{Name: "elsewhere.echo"}); r.Code != quiver.CodeUnknownTool {
			t.Errorf("a tool under no remote gave %s %q, want unknown_tool", r.Code, r.Error)
		}
	}
	if st := im.Status()[0]; st.LastAttempt.IsZero() {
		t.Errorf("status of a down remote has no last attempt: %+v", st)
	}
	remote := remoteHTTP(t, addr, nil)
	waitConnected(t, im)
	if st := im.Status()[0]; !st.LastAttempt.IsZero() || st.LastError != "" {
		t.Errorf("status of a connected remote = %+v, want no last failure", st)
	}
	if r, _ := d.Dispatch(context.Background(), call); r.Text != "echo: up" {
		t.Fatalf("after the remote came up: %+v", r)
	}
	// The remote goes away: calls fail with an error result that says so, quickly.
	remote.CloseClientConnections()
	remote.Close()
	r, _ := d.Dispatch(context.Background(), call)
	if !r.IsError() || !strings.Contains(r.Error, `MCP server "r"`) {
		t.Fatalf("a call to a down remote gave %+v, want an error result naming it", r)
	}
	// It comes back on the same address: Quiver reconnects and the tools work again.
	remoteHTTP(t, addr, nil)
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, _ := d.Dispatch(context.Background(), call)
		if r.Text == "echo: up" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reconnection: last result %+v, status %+v", r, im.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStdioRemoteRestartsAfterACrash(t *testing.T) {
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	im := importInto(t, reg, []qmcp.Remote{{Name: "child", Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{"QUIVER_MCP_TEST_SERVER": "stdio"}}}, fastRetry)
	d := &quiver.Dispatcher{Registry: reg}
	r, _ := d.Dispatch(context.Background(), quiver.Call{Name: "child.crash"})
	if !r.IsError() {
		t.Fatalf("a call whose server died gave %+v, want an error result", r)
	}
	// The next call waits for the server to be started again and runs there: a call made while
	// a remote reconnects is not refused (a run resumed as Quiver restarts makes such calls).
	r, _ = d.Dispatch(context.Background(), quiver.Call{Name: "child.echo", Args: json.RawMessage(`{"text":"again"}`)})
	if r.Text != "echo: again" {
		t.Fatalf("a call made while the child was restarted: %+v, status %+v", r, im.Status())
	}
}

func waitConnected(t *testing.T, im *qmcp.Importer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !im.Status()[0].Connected {
		if time.Now().After(deadline) {
			t.Fatalf("not connected: %+v", im.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestImportConfigurationErrors(t *testing.T) {
	cases := []struct {
		name    string
		remotes []qmcp.Remote
		want    string
	}{
		{"no transport", []qmcp.Remote{{Name: "x"}}, "needs a command"},
		{"both transports", []qmcp.Remote{{Name: "x", Command: "a", URL: "http://b"}}, "give one"},
		{"bad prefix", []qmcp.Remote{{Name: "a b", Command: "a"}}, "a-z"},
		{"empty prefix", []qmcp.Remote{{Command: "a"}}, "a-z"},
		{"duplicate", []qmcp.Remote{{Name: "x", Command: "a"}, {Name: "x", Command: "b"}}, "unique"},
		{"bad scheme", []qmcp.Remote{{Name: "x", URL: "ws://b"}}, "http://"},
	}
	for _, c := range cases {
		_, err := qmcp.Import(context.Background(), &quiver.Registry{}, c.remotes, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

func TestImportedNamesAreSafe(t *testing.T) {
	// A remote whose tool names MCP clients and providers would reject.
	raw := sdk.NewServer(&sdk.Implementation{Name: "odd", Version: "1"}, nil)
	for _, n := range []string{"has space", "slash/name", "ünï", strings.Repeat("x", 130)} {
		raw.AddTool(&sdk.Tool{Name: n, InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok " + n}}}, nil
		})
	}
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return raw }, nil))
	t.Cleanup(ts.Close) // after the importer's cleanup: its event stream must end first
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	importInto(t, reg, []qmcp.Remote{{Name: "odd", URL: ts.URL}}, fastRetry)
	got := names(reg)
	if len(got) != 4 {
		t.Fatalf("imported %v, want 4 tools", got)
	}
	d := &quiver.Dispatcher{Registry: reg}
	for _, n := range got {
		if len(n) > 128 || strings.ContainsAny(n, " /ü") || !strings.HasPrefix(n, "odd.") {
			t.Errorf("unsafe imported name %q", n)
		}
		r, _ := d.Dispatch(context.Background(), quiver.Call{Name: n})
		if !strings.HasPrefix(r.Text, "ok ") {
			t.Errorf("calling %s: %+v (the remote must get its own name)", n, r)
		}
	}
}

// A remote that accepts connections and never answers is reported as not answering in time,
// not as cancelled.
func TestSilentRemoteReportsTheTimeout(t *testing.T) {
	stop := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() { close(stop); silent.Close() })
	opts := *fastRetry
	opts.ConnectTimeout = 200 * time.Millisecond
	im := importInto(t, &quiver.Registry{}, []qmcp.Remote{{Name: "silent", URL: silent.URL}}, &opts)
	st := im.Status()[0]
	if st.Connected || !strings.Contains(st.LastError, "no answer within 200ms") {
		t.Errorf("status = %+v, want a LastError saying it did not answer within 200ms", st)
	}
}
