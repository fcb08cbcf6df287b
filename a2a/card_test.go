package a2a_test

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/a2a"
	"github.com/quiverhq/quiver/a2a/a2av1"
)

// v1Agent is an agent of A2A 1.0 (Quiver's binding's server): "hello" is answered with a
// message, "slow" with a working task that GetTask then reads completed, "break" with a
// failed task, anything else with a completed task.
type v1Agent struct{ gets atomic.Int32 }

func (a *v1Agent) SendMessage(_ context.Context, req *a2av1.SendMessageRequest) (*a2av1.SendMessageResponse, error) {
	task := func(state a2av1.TaskState, text string) *a2av1.SendMessageResponse {
		return &a2av1.SendMessageResponse{Task: &a2av1.Task{ID: "t1", ContextID: "c1", Status: a2av1.TaskStatus{State: state,
			Message: &a2av1.Message{MessageID: "m", Role: a2av1.RoleAgent, Parts: []a2av1.Part{a2av1.TextPart(text)}}}}}
	}
	switch req.Message.Text() {
	case "hello":
		return &a2av1.SendMessageResponse{Message: &a2av1.Message{MessageID: "m", ContextID: "c0", Role: a2av1.RoleAgent, Parts: []a2av1.Part{a2av1.TextPart("Hello in 1.0.")}}}, nil
	case "slow":
		return task(a2av1.TaskStateWorking, "working on it"), nil
	case "break":
		return task(a2av1.TaskStateFailed, "It broke."), nil
	}
	return task(a2av1.TaskStateCompleted, "Done: "+req.Message.Text()), nil
}

func (a *v1Agent) GetTask(context.Context, *a2av1.GetTaskRequest) (*a2av1.Task, error) {
	state := a2av1.TaskStateWorking
	if a.gets.Add(1) >= 2 {
		state = a2av1.TaskStateCompleted
	}
	return &a2av1.Task{ID: "t1", ContextID: "c1", Status: a2av1.TaskStatus{State: state},
		Artifacts: []a2av1.Artifact{{ArtifactID: "a", Parts: []a2av1.Part{a2av1.TextPart("Slow and done.")}}}}, nil
}

func (a *v1Agent) CancelTask(context.Context, *a2av1.CancelTaskRequest) (*a2av1.Task, error) {
	return nil, a2av1.Errorf(a2av1.CodeTaskNotCancelable, "no")
}

func (a *v1Agent) SendStreamingMessage(context.Context, *a2av1.SendMessageRequest) iter.Seq2[*a2av1.StreamResponse, error] {
	return func(func(*a2av1.StreamResponse, error) bool) {}
}

func (a *v1Agent) SubscribeToTask(context.Context, *a2av1.SubscribeToTaskRequest) iter.Seq2[*a2av1.StreamResponse, error] {
	return func(func(*a2av1.StreamResponse, error) bool) {}
}

// cardServer serves a card (its text, with $URL the server's own URL) and an endpoint at
// /rpc answering A2A 1.0 with v1Agent and 0.3 with the SDK's server of weather; it notes the
// version header and method of each request.
func cardServer(t *testing.T, card string) (string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	legacy := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(weather{}))
	agent := &v1Agent{}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(strings.ReplaceAll(card, "$URL", srv.URL)))
			return
		}
		var body json.RawMessage
		json.NewDecoder(r.Body).Decode(&body)
		req, err := a2av1.ParseRequest(body)
		if err != nil {
			a2av1.WriteError(w, nil, err)
			return
		}
		mu.Lock()
		seen = append(seen, strings.TrimSpace(r.Header.Get(a2av1.VersionHeader)+" "+req.Method))
		mu.Unlock()
		if a2av1.IsMethod(req.Method) {
			a2av1.Serve(w, r, req, agent)
			return
		}
		r.Body = http.NoBody
		r2 := r.Clone(r.Context())
		r2.Body = readCloser(body)
		legacy.ServeHTTP(w, r2)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string{}, seen...) }
}

type bodyReader struct{ *strings.Reader }

func (bodyReader) Close() error { return nil }

func readCloser(b []byte) bodyReader { return bodyReader{strings.NewReader(string(b))} }

// An imported agent's card of either version is read, and the agent called in the newest
// version both sides speak; a card Quiver cannot use is refused saying what it lacks.
func TestRemoteAgentCards(t *testing.T) {
	iface := func(binding, version string) string {
		return `{"url":"$URL/rpc","protocolBinding":"` + binding + `","protocolVersion":"` + version + `"}`
	}
	tests := []struct {
		name, card string
		want       string // the request sent, or the refusal
	}{
		{"1.0", `{"name":"a","supportedInterfaces":[` + iface("JSONRPC", "1.0") + `]}`, "1.0 SendMessage"},
		{"0.3 fields", `{"name":"a","url":"$URL/rpc","preferredTransport":"JSONRPC","protocolVersion":"0.3.0"}`, "message/send"},
		{"0.3 fields, no transport named", `{"name":"a","url":"$URL/rpc"}`, "message/send"},
		{"both, 0.3 first", `{"name":"a","url":"$URL/rpc","protocolVersion":"0.3.0","supportedInterfaces":[` + iface("JSONRPC", "0.3") + `,` + iface("jsonrpc", "1.0") + `]}`, "1.0 SendMessage"},
		{"1.0's list with 0.3 only", `{"name":"a","supportedInterfaces":[` + iface("GRPC", "1.0") + `,` + iface("JSONRPC", "0.3") + `]}`, "message/send"},
		{"gRPC and REST only", `{"name":"a","supportedInterfaces":[` + iface("GRPC", "1.0") + `,` + iface("HTTP+JSON", "1.0") + `]}`,
			"its card offers no JSON-RPC interface of A2A 0.3 or 1.0, the ones Quiver speaks: it offers GRPC 1.0, HTTP+JSON 1.0"},
		{"a version to come", `{"name":"a","supportedInterfaces":[` + iface("JSONRPC", "2.0") + `]}`, "it offers JSONRPC 2.0"},
		{"no interface", `{"name":"a"}`, "offers no interface at all"},
		{"an empty URL", `{"name":"a","supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0","url":""}]}`,
			`its JSON-RPC interface of A2A 1.0 has the URL "", not an http or https URL`},
		{"another origin", `{"name":"a","supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0","url":"http://elsewhere.example/rpc"}]}`, "another origin"},
		{"a tenant", `{"name":"a","supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0","url":"$URL/rpc","tenant":"t"}]}`, "names a tenant"},
		{"not a card", `[1, 2]`, "is not an agent card"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, seen := cardServer(t, tt.card)
			tool, err := a2a.Tool(context.Background(), a2a.Remote{Name: "agent", URL: base})
			if strings.Contains(tt.want, "Send") || strings.Contains(tt.want, "/") {
				if err != nil {
					t.Fatal(err)
				}
				d := &quiver.Dispatcher{Registry: &quiver.Registry{}}
				if err := d.Registry.Register(tool); err != nil {
					t.Fatal(err)
				}
				if a, res := call(t, d, "agent", map[string]any{"message": "hello"}); res.IsError() || !strings.HasPrefix(a.Answer, "Hello") {
					t.Errorf("the call: %+v %+v", a, res)
				}
				if got := seen(); len(got) != 1 || got[0] != tt.want {
					t.Errorf("sent %q, want %q", got, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// An agent of A2A 1.0 called as a tool: a message, a task answered before it settled (read
// with GetTask until it does), a failed task, a follow-up's ids sent.
func TestRemoteAgentV1(t *testing.T) {
	base, seen := cardServer(t, `{"name":"a","description":"An agent of 1.0.","supportedInterfaces":[{"url":"$URL/rpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`)
	tool, err := a2a.Tool(context.Background(), a2a.Remote{Name: "agent", URL: base + "/"})
	if err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: &quiver.Registry{}}
	if err := d.Registry.Register(tool); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args      map[string]any
		answer    string
		state     string
		errSubstr string
	}{
		{map[string]any{"message": "hello"}, "Hello in 1.0.", "completed", ""},
		{map[string]any{"message": "do it", "context_id": "c1"}, "Done: do it", "completed", ""},
		{map[string]any{"message": "slow"}, "Slow and done.", "completed", ""},
		{map[string]any{"message": "break"}, "", "", "task t1 failed: It broke."},
	}
	for _, tt := range tests {
		a, res := call(t, d, "agent", tt.args)
		switch {
		case tt.errSubstr != "":
			if !res.IsError() || !strings.Contains(res.Error, tt.errSubstr) {
				t.Errorf("%v: %+v", tt.args, res)
			}
		case res.IsError() || a.Answer != tt.answer || a.State != tt.state:
			t.Errorf("%v: %+v %+v", tt.args, a, res)
		}
	}
	if got := strings.Join(seen(), ","); got != "1.0 SendMessage,1.0 SendMessage,1.0 SendMessage,1.0 GetTask,1.0 GetTask,1.0 SendMessage" {
		t.Errorf("requests: %s", got)
	}
}
