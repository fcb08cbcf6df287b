package a2a_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/a2a"
)

// weather is an agent served by the SDK's own server: it asks which city, then answers.
type weather struct{}

func (weather) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	said := ""
	for _, p := range rc.Message.Parts {
		if t, ok := p.(a2asdk.TextPart); ok {
			said += t.Text
		}
	}
	if said == "hello" { // a plain message, no task
		return q.Write(ctx, a2asdk.NewMessage(a2asdk.MessageRoleAgent, a2asdk.TextPart{Text: "Hello to you."}))
	}
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2asdk.NewStatusUpdateEvent(rc, a2asdk.TaskStateSubmitted, nil)); err != nil {
			return err
		}
		ev := a2asdk.NewStatusUpdateEvent(rc, a2asdk.TaskStateInputRequired, a2asdk.NewMessageForTask(a2asdk.MessageRoleAgent, rc, a2asdk.TextPart{Text: "Which city?"}))
		ev.Final = true
		return q.Write(ctx, ev)
	}
	ev := a2asdk.NewStatusUpdateEvent(rc, a2asdk.TaskStateCompleted, a2asdk.NewMessageForTask(a2asdk.MessageRoleAgent, rc, a2asdk.TextPart{Text: "Sunny in " + said + "."}))
	ev.Final = true
	return q.Write(ctx, ev)
}

func (weather) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error { return nil }

// serveWeather serves the agent on loopback, asking every request for the header X-Key.
func serveWeather(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Key") != "k-0123456789" {
			http.Error(w, "a key, please", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	card := &a2asdk.AgentCard{Name: "Weather", Description: "Tells the weather.", URL: srv.URL + "/invoke", Version: "1",
		PreferredTransport: a2asdk.TransportProtocolJSONRPC, DefaultInputModes: []string{"text"}, DefaultOutputModes: []string{"text"},
		Skills: []a2asdk.AgentSkill{{ID: "forecast", Name: "Forecast", Description: "The weather of a city."}}}
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(weather{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	return srv.URL
}

type answer struct {
	Answer    string `json:"answer"`
	State     string `json:"state"`
	ContextID string `json:"context_id"`
	TaskID    string `json:"task_id"`
}

func call(t *testing.T, d *quiver.Dispatcher, name string, args map[string]any) (answer, *quiver.Result) {
	t.Helper()
	res, err := d.Call(context.Background(), name, args)
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	if !res.IsError() {
		if err := json.Unmarshal(res.Value, &a); err != nil {
			t.Fatalf("%s: %v", res.Value, err)
		}
	}
	return a, res
}

// TestRemoteAgent: an agent of the SDK's server, imported as a tool and called through the
// dispatcher: a message answered at once, and a task that asks for more and is answered.
func TestRemoteAgent(t *testing.T) {
	base := serveWeather(t)
	ctx := context.Background()
	tool, err := a2a.Tool(ctx, a2a.Remote{Name: "weather", URL: base, Headers: map[string]string{"X-Key": "k-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	spec := tool.Spec()
	if !strings.Contains(spec.Description, "Tells the weather.") || !strings.Contains(spec.Description, "Forecast: The weather of a city.") ||
		spec.Annotations.Title != "Weather" || !spec.Imported {
		t.Errorf("spec: %+v", spec)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: reg}
	if a, res := call(t, d, "weather", map[string]any{"message": "hello"}); res.IsError() || a.Answer != "Hello to you." || a.State != "completed" {
		t.Fatalf("a message: %+v %+v", a, res)
	}
	first, res := call(t, d, "weather", map[string]any{"message": "What's the weather?"})
	if res.IsError() || first.State != "input-required" || first.Answer != "Which city?" || first.TaskID == "" || first.ContextID == "" {
		t.Fatalf("the task's first answer: %+v %+v", first, res)
	}
	second, res := call(t, d, "weather", map[string]any{"message": "Oslo", "task_id": first.TaskID, "context_id": first.ContextID})
	if res.IsError() || second.State != "completed" || second.Answer != "Sunny in Oslo." || second.TaskID != first.TaskID {
		t.Fatalf("the task answered: %+v %+v", second, res)
	}
	if _, res := call(t, d, "weather", map[string]any{}); res.Code != quiver.CodeInvalidArguments {
		t.Errorf("no message: %+v", res)
	}
	// The card's URL given directly reads the same card.
	if _, err := a2a.Tool(ctx, a2a.Remote{Name: "weather2", URL: base + a2asrv.WellKnownAgentCardPath, Headers: map[string]string{"X-Key": "k-0123456789"}}); err != nil {
		t.Errorf("the card's own URL: %v", err)
	}
}

func TestRemoteAgentRefused(t *testing.T) {
	base := serveWeather(t)
	ctx := context.Background()
	tests := []struct {
		name string
		r    a2a.Remote
		want string
	}{
		{"no key", a2a.Remote{Name: "w", URL: base}, "reading the agent card"},
		{"a bad name", a2a.Remote{Name: "a b", URL: base}, "use 1 to 64"},
		{"not http", a2a.Remote{Name: "w", URL: "file:///etc/passwd"}, "not an http or https URL"},
		{"nothing there", a2a.Remote{Name: "w", URL: "http://127.0.0.1:1"}, "reading the agent card"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := a2a.Tool(ctx, tc.r); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestSDKExampleServer: the SDK's own example server (examples/helloworld/server/jsonrpc),
// built from the module as published, imported and called.
func TestSDKExampleServer(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "helloworld")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/a2aproject/a2a-go/examples/helloworld/server/jsonrpc").CombinedOutput(); err != nil {
		t.Fatalf("building the SDK's example server: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// The example listens on every interface of the port it is given (its code, not ours).
	cmd := exec.Command(bin, "-port", fmt.Sprint(port))
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
		}
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	var tool *quiver.Tool
	deadline := time.Now().Add(30 * time.Second)
	for {
		tool, err = a2a.Tool(context.Background(), a2a.Remote{Name: "hello", URL: base})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	a, res := call(t, &quiver.Dispatcher{Registry: reg}, "hello", map[string]any{"message": "hi"})
	if res.IsError() || a.Answer != "Hello, world!" {
		t.Fatalf("%+v %+v", a, res)
	}
}

// TestRemoteAgentOrigins: a card whose endpoint is on another origin is refused (the headers
// go to the configured origin only); an agent down at first is a tool that reads its card
// again at each call, and works once the agent is up.
func TestRemoteAgentOrigins(t *testing.T) {
	ctx := context.Background()
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the other origin was called, with X-Key %q", r.Header.Get("X-Key"))
	}))
	defer elsewhere.Close()
	cards := httptest.NewServer(a2asrv.NewStaticAgentCardHandler(&a2asdk.AgentCard{Name: "Moved", URL: elsewhere.URL + "/invoke", Version: "1",
		PreferredTransport: a2asdk.TransportProtocolJSONRPC, DefaultInputModes: []string{"text"}, DefaultOutputModes: []string{"text"}}))
	defer cards.Close()
	if _, err := a2a.Tool(ctx, a2a.Remote{Name: "moved", URL: cards.URL + a2asrv.WellKnownAgentCardPath, Headers: map[string]string{"X-Key": "secret-1"}}); err == nil ||
		!strings.Contains(err.Error(), "on another origin") {
		t.Fatalf("a card pointing elsewhere: %v", err)
	}

	// Down at first: the network refuses, until the agent is up.
	base := serveWeather(t)
	var up atomic.Bool
	r := a2a.Remote{Name: "later", URL: base, Headers: map[string]string{"X-Key": "k-0123456789"},
		Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if !up.Load() {
				return nil, errors.New("connection refused")
			}
			return http.DefaultTransport.RoundTrip(req)
		})}
	_, cause := a2a.Tool(ctx, r)
	if cause == nil {
		t.Fatal("an agent that is down answered")
	}
	tool, err := a2a.Lazy(r, cause)
	if err != nil {
		t.Fatal(err)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: reg}
	if _, res := call(t, d, "later", map[string]any{"message": "hello"}); !res.IsError() || !strings.Contains(res.Error, "connection refused") {
		t.Fatalf("while down: %+v", res)
	}
	up.Store(true)
	if a, res := call(t, d, "later", map[string]any{"message": "hello"}); res.IsError() || a.Answer != "Hello to you." {
		t.Fatalf("once up: %+v %+v", a, res)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
