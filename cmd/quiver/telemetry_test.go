package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes what it gets with the protocol's own
// types and keeps the spans, and the service name they came with.
type otlpReceiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
}

func startOTLPReceiver(t testing.TB) (*otlpReceiver, string) {
	t.Helper()
	rec := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req collector.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || err != nil || proto.Unmarshal(body, &req) != nil {
			t.Errorf("the receiver got %s %s (%d bytes), not an OTLP trace export", r.Method, r.URL.Path, len(body))
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		rec.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					rec.services = append(rec.services, kv.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				rec.spans = append(rec.spans, ss.Spans...)
			}
		}
		rec.mu.Unlock()
		b, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

// all returns every span received.
func (rec *otlpReceiver) all() []*tracepb.Span {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.spans)
}

func (rec *otlpReceiver) byName() map[string]*tracepb.Span {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := map[string]*tracepb.Span{}
	for _, s := range rec.spans {
		out[s.Name] = s
	}
	return out
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, a run's spans reach an OTLP receiver: the run, its
// model requests and its call, in one trace, under the service name the environment gives.
func TestRunSendsTracesOverOTLP(t *testing.T) {
	rec, url := startOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	t.Setenv("OTEL_SERVICE_NAME", "quiver-under-test")
	dir := t.TempDir()
	script := filepath.Join(dir, "turns.yaml")
	if err := os.WriteFile(script, []byte("turns:\n  - calls: [{name: get_current_time, args: {timezone: UTC}}]\n  - text: It is now.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "", "run", "--model", "scripted:"+script, "--db", filepath.Join(dir, "q.db"), "what time is it?")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	spans := rec.byName()
	run, tool := spans["invoke_agent assistant"], spans["execute_tool get_current_time"]
	var chat *tracepb.Span
	for name, s := range spans {
		if strings.HasPrefix(name, "chat ") {
			chat = s
		}
	}
	if run == nil || tool == nil || chat == nil {
		t.Fatalf("spans received: %v; want invoke_agent, chat and execute_tool", keys(spans))
	}
	for _, s := range []*tracepb.Span{chat, tool} {
		if string(s.TraceId) != string(run.TraceId) || string(s.ParentSpanId) != string(run.SpanId) {
			t.Errorf("%s is not in the run's trace, under the run", s.Name)
		}
	}
	rec.mu.Lock()
	services := rec.services
	rec.mu.Unlock()
	if len(services) == 0 || services[0] != "quiver-under-test" {
		t.Errorf("service names %q, want quiver-under-test", services)
	}
}

// quiver serve continues a client's trace: a tools/call carrying traceparent in _meta makes an
// execute_tool span in that trace, under the client's span.
func TestServeContinuesTheClientsTrace(t *testing.T) {
	rec, url := startOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	endpoint, stop, _ := startServe(t)
	cs := connectServe(t, endpoint)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	params := &sdk.CallToolParams{Name: "get_current_time", Arguments: map[string]any{"timezone": "UTC"}}
	params.SetMeta(map[string]any{"traceparent": "00-" + traceID + "-" + parentID + "-01"})
	if res, err := cs.CallTool(context.Background(), params); err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	cs.Close()
	if code := stop(); code != exitOK {
		t.Fatalf("serve exited with %d", code)
	}
	s := rec.byName()["execute_tool get_current_time"]
	if s == nil {
		t.Fatalf("no execute_tool span received: %v", keys(rec.byName()))
	}
	if hex.EncodeToString(s.TraceId) != traceID || hex.EncodeToString(s.ParentSpanId) != parentID {
		t.Errorf("the call's span is in trace %x under %x, want %s under %s", s.TraceId, s.ParentSpanId, traceID, parentID)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// quiver serve --metrics-addr serves Prometheus metrics apart from /mcp: calls by tool, door,
// status and error, and the journal's pending records, read with Prometheus's own parser.
func TestServeMetrics(t *testing.T) {
	endpoint, stop, stderr := startServe(t, "--metrics-addr", "127.0.0.1:0")
	m := regexp.MustCompile(`metrics at (http://\S+/metrics)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("serve did not say where its metrics are:\n%s", stderr.String())
	}
	cs := connectServe(t, endpoint)
	for _, name := range []string{"get_current_time", "get_current_time", "no_such_tool", "another_made_up_name"} {
		if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not in the Prometheus text format: %v", err)
	}
	calls := families["quiver_tool_call_duration_seconds"]
	if calls == nil || calls.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("no histogram quiver_tool_call_duration_seconds among %v", keys(families))
	}
	counts := map[string]uint64{}
	for _, metric := range calls.Metric {
		labels := map[string]string{}
		for _, l := range metric.Label {
			labels[l.GetName()] = l.GetValue()
		}
		counts[labels["gen_ai_tool_name"]+"/"+labels["quiver_door"]+"/"+labels["quiver_call_status"]+"/"+labels["error_type"]] = metric.GetHistogram().GetSampleCount()
	}
	for key, want := range map[string]uint64{"get_current_time/mcp/success/": 2, "(unknown)/mcp/error/unknown_tool": 2} {
		if counts[key] != want {
			t.Errorf("calls %s: %d, want %d (all: %v)", key, counts[key], want, counts)
		}
	}
	if g := families["quiver_journal_pending"]; g == nil || len(g.Metric) != 1 {
		t.Errorf("no quiver_journal_pending gauge among %v", keys(families))
	}
	// The job queue's depth, by state: the purge job is scheduled from the start.
	jobs := families["quiver_jobs"]
	if jobs == nil || jobs.GetType() != dto.MetricType_GAUGE {
		t.Fatalf("no quiver_jobs gauge among %v", keys(families))
	}
	states := map[string]float64{}
	for _, metric := range jobs.Metric {
		for _, l := range metric.Label {
			if l.GetName() == "quiver_job_state" {
				states[l.GetValue()] = metric.GetGauge().GetValue()
			}
		}
	}
	for _, state := range []string{"available", "running", "retryable", "scheduled"} {
		if _, ok := states[state]; !ok {
			t.Errorf("quiver_jobs has no %s series: %v", state, states)
		}
	}
	stop()
}

// A model request carries the run's trace context to the provider: a fake OpenAI API (whose
// SDK does no tracing of its own) sees a traceparent naming the run's chat span.
func TestModelRequestsCarryTraceContext(t *testing.T) {
	rec, url := startOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	var mu sync.Mutex
	var parents []string
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		parents = append(parents, r.Header.Get("traceparent"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, chunk := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Done."},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
		} {
			io.WriteString(w, "data: "+chunk+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer provider.Close()
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("OPENAI_BASE_URL", provider.URL)
	code, _, stderr := runCLI(t, "", "run", "--model", "openai:gpt-test", "--db", filepath.Join(t.TempDir(), "q.db"), "hello")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	chat := rec.byName()["chat gpt-test"]
	mu.Lock()
	defer mu.Unlock()
	if chat == nil || len(parents) == 0 {
		t.Fatalf("spans %v, traceparents %q", keys(rec.byName()), parents)
	}
	if want := "00-" + hex.EncodeToString(chat.TraceId) + "-" + hex.EncodeToString(chat.SpanId) + "-01"; parents[0] != want {
		t.Errorf("the provider got traceparent %q, want %q (the chat span)", parents[0], want)
	}
}

// grpcReceiver is an OTLP/gRPC trace receiver: the collector's own service definition.
type grpcReceiver struct {
	collector.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (g *grpcReceiver) Export(_ context.Context, req *collector.ExportTraceServiceRequest) (*collector.ExportTraceServiceResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				g.names = append(g.names, s.Name)
			}
		}
	}
	return &collector.ExportTraceServiceResponse{}, nil
}

// OTEL_EXPORTER_OTLP_PROTOCOL=grpc sends the spans over gRPC.
func TestTracesOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &grpcReceiver{}
	gs := grpc.NewServer()
	collector.RegisterTraceServiceServer(gs, rec)
	go gs.Serve(ln)
	defer gs.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	code, _, stderr := runCLI(t, "", "call", "get_current_time", "--args", `{"timezone":"UTC"}`)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Contains(rec.names, "execute_tool get_current_time") {
		t.Errorf("the gRPC receiver got %q, want execute_tool get_current_time", rec.names)
	}
}

// An unknown protocol is a clear warning, and the command still runs.
func TestTracesUnknownProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	code, _, stderr := runCLI(t, "", "call", "get_current_time", "--args", `{"timezone":"UTC"}`)
	if code != exitOK || !strings.Contains(stderr, `OTEL_EXPORTER_OTLP_PROTOCOL "carrier-pigeon" is not supported: use http/protobuf (the default) or grpc`) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// The /v1 API continues its clients' traces: a call's execute_tool span nests under the
// request's server span, in the client's trace, and so does a run queued over the API, which a
// background job runs: its invoke_agent span joins the trace of the request that started it.
func TestServeTracesTheAPI(t *testing.T) {
	rec, url := startOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	dir := t.TempDir()
	script := filepath.Join(dir, "helper.script.yaml")
	if err := os.WriteFile(script, []byte("turns:\n  - calls: [{name: get_current_time, args: {timezone: UTC}}]\n  - text: It is time.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agents := filepath.Join(dir, "agents")
	if err := os.MkdirAll(agents, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agents, "helper.yaml"), []byte("name: helper\nmodel: scripted:"+script+"\ntools: [get_current_time]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	endpoint, stop, _ := startServe(t, "--agents", agents)
	base := strings.TrimSuffix(endpoint, "/mcp") + "/v1"
	send := func(method, path, traceparent, body string) map[string]any {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %v %v", method, path, resp.StatusCode, out, err)
		}
		return out
	}
	const callTrace, callParent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	const runTrace, runParent = "5cf92f3577b34da6a3ce929d0e0e4737", "11f067aa0ba902b8"
	send("POST", "/tools/get_current_time/call", "00-"+callTrace+"-"+callParent+"-01", `{"args":{"timezone":"UTC"}}`)
	th := send("POST", "/threads", "", `{"agent":"helper"}`)
	id, _ := th["id"].(string)
	send("POST", "/threads/"+id+"/runs", "00-"+runTrace+"-"+runParent+"-01", `{"agent":"helper","message":"What time is it?"}`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := send("GET", "/threads/"+id, "", "")
		if st, _ := got["state"].(map[string]any); got["status"] == "idle" && st != nil && st["status"] == "finished" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not finish: %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := stop(); code != exitOK {
		t.Fatalf("serve exited with %d", code)
	}
	spans := rec.all()
	find := func(name, traceID string) *tracepb.Span {
		for _, s := range spans {
			if s.Name == name && hex.EncodeToString(s.TraceId) == traceID {
				return s
			}
		}
		var names []string
		for _, s := range spans {
			names = append(names, s.Name+"@"+hex.EncodeToString(s.TraceId)[:6])
		}
		t.Fatalf("no span %q in trace %s; received %v", name, traceID, names)
		return nil
	}
	callSpan := find("POST /v1/tools/{name}/call", callTrace)
	if hex.EncodeToString(callSpan.ParentSpanId) != callParent {
		t.Errorf("the request's span is under %x, want the client's %s", callSpan.ParentSpanId, callParent)
	}
	if exec := find("execute_tool get_current_time", callTrace); !bytes.Equal(exec.ParentSpanId, callSpan.SpanId) {
		t.Errorf("the call's execute_tool span is under %x, want the request's %x", exec.ParentSpanId, callSpan.SpanId)
	}
	runSpan := find("POST /v1/threads/{id}/runs", runTrace)
	if hex.EncodeToString(runSpan.ParentSpanId) != runParent {
		t.Errorf("the run request's span is under %x, want the client's %s", runSpan.ParentSpanId, runParent)
	}
	agentSpan := find("invoke_agent helper", runTrace)
	if !bytes.Equal(agentSpan.ParentSpanId, runSpan.SpanId) {
		t.Errorf("the background run's invoke_agent span is under %x, want the request that queued it, %x", agentSpan.ParentSpanId, runSpan.SpanId)
	}
	find("execute_tool get_current_time", runTrace) // the run's own call, in the same trace
}
