package a2av1

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The wire format is 1.0's ProtoJSON: camelCase fields, enums by name, a part's kind given by
// its one field. The JSON here is what @a2a-js/sdk 1.3.0's toJSON writes for the same values.
func TestWireFormat(t *testing.T) {
	text := "It is sunny."
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"task", &Task{ID: "t1", ContextID: "c1", Status: TaskStatus{State: TaskStateCompleted,
			Message: &Message{MessageID: "m1", Role: RoleAgent, Parts: []Part{TextPart(text)}}},
			Artifacts: []Artifact{{ArtifactID: "a1", Name: "answer", Parts: []Part{TextPart(text)}}}},
			`{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"m1","role":"ROLE_AGENT","parts":[{"text":"It is sunny."}]}},"artifacts":[{"artifactId":"a1","name":"answer","parts":[{"text":"It is sunny."}]}]}`},
		{"send response", &SendMessageResponse{Task: &Task{ID: "t", ContextID: "c", Status: TaskStatus{State: TaskStateInputRequired}}},
			`{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_INPUT_REQUIRED"}}}`},
		{"status update", &StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{TaskID: "t", ContextID: "c", Status: TaskStatus{State: TaskStateWorking}}},
			`{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`},
		{"data part", Part{Data: json.RawMessage(`{"a":1}`), MediaType: "application/json"}, `{"data":{"a":1},"mediaType":"application/json"}`},
		{"interface", AgentInterface{URL: "http://h/a2a/x", ProtocolBinding: BindingJSONRPC, ProtocolVersion: Version},
			`{"url":"http://h/a2a/x","protocolBinding":"JSONRPC","protocolVersion":"1.0"}`},
		{"security", SecurityRequirement{Schemes: map[string]StringList{"key": {List: []string{}}}}, `{"schemes":{"key":{"list":[]}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.v)
			if err != nil || string(b) != tt.want {
				t.Errorf("got  %s %v\nwant %s", b, err, tt.want)
			}
		})
	}
}

// A request as the JS SDK's client sends it reads whole.
func TestReadSendMessageRequest(t *testing.T) {
	in := `{"message":{"messageId":"m","contextId":"c","taskId":"t","role":"ROLE_USER","parts":[{"text":"hi"},{"url":"http://x/f.png","mediaType":"image/png"}]},"configuration":{"acceptedOutputModes":["text"],"returnImmediately":true}}`
	var req SendMessageRequest
	if err := json.Unmarshal([]byte(in), &req); err != nil {
		t.Fatal(err)
	}
	if req.Message.Role != RoleUser || req.Message.TaskID != "t" || !req.Configuration.ReturnImmediately ||
		req.Message.Text() != "hi\n[a file at http://x/f.png]" {
		t.Errorf("%+v", req)
	}
}

func TestVersions(t *testing.T) {
	for in, want := range map[string]string{"1.0": "1", "1": "1", "1.2.3": "1", "0.3": "0.3", "0.3.0": "0.3", "0.2.5": "0.2", "": "", "x": "", "0": "", "1.x": ""} {
		if got := Major(in); got != want {
			t.Errorf("Major(%q) = %q, want %q", in, got, want)
		}
	}
	for s, want := range map[TaskState]string{TaskStateInputRequired: "input-required", TaskStateCompleted: "completed", TaskStateAuthRequired: "auth-required"} {
		if s.Legacy() != want {
			t.Errorf("%s.Legacy() = %q", s, s.Legacy())
		}
	}
	if !TaskStateRejected.Terminal() || TaskStateInputRequired.Terminal() || !TaskStateInputRequired.Interrupted() {
		t.Error("Terminal or Interrupted")
	}
}

// A card of both versions keeps 0.3's fields and gains 1.0's; a security scheme carries both
// shapes.
func TestWithLegacyCard(t *testing.T) {
	legacy := `{"name":"x","url":"http://h/a2a/x","protocolVersion":"0.3.0","securitySchemes":{"key":{"type":"http","scheme":"bearer"}},"security":[{"key":[]}]}`
	card := &AgentCard{Name: "x", SupportedInterfaces: []AgentInterface{{URL: "http://h/a2a/x", ProtocolBinding: BindingJSONRPC, ProtocolVersion: Version}},
		SecuritySchemes:      map[string]SecurityScheme{"key": {HTTP: &HTTPAuthSecurityScheme{Scheme: "Bearer"}}},
		SecurityRequirements: []SecurityRequirement{{Schemes: map[string]StringList{"key": {List: []string{}}}}}}
	b, err := WithLegacyCard(json.RawMessage(legacy), card)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(b, &got)
	scheme := got["securitySchemes"].(map[string]any)["key"].(map[string]any)
	if got["url"] != "http://h/a2a/x" || got["protocolVersion"] != "0.3.0" || got["security"] == nil || got["securityRequirements"] == nil ||
		scheme["type"] != "http" || scheme["httpAuthSecurityScheme"] == nil || len(got["supportedInterfaces"].([]any)) != 1 {
		t.Errorf("%s", b)
	}
	if _, err := WithLegacyCard(json.RawMessage(`[1]`), card); err == nil {
		t.Error("a card that is no object was merged")
	}
}

// fake answers as an agent whose tasks complete, echoing the message.
type fake struct{}

func (fake) SendMessage(_ context.Context, req *SendMessageRequest) (*SendMessageResponse, error) {
	if req.Message.Text() == "fail" {
		return nil, errors.New("a secret cause")
	}
	return &SendMessageResponse{Task: &Task{ID: "t1", ContextID: "c1", Status: TaskStatus{State: TaskStateCompleted,
		Message: &Message{MessageID: "m", Role: RoleAgent, Parts: []Part{TextPart("echo: " + req.Message.Text())}}}}}, nil
}

func (fake) SendStreamingMessage(_ context.Context, req *SendMessageRequest) iter.Seq2[*StreamResponse, error] {
	return func(yield func(*StreamResponse, error) bool) {
		if !yield(&StreamResponse{Task: &Task{ID: "t1", ContextID: "c1", Status: TaskStatus{State: TaskStateSubmitted}}}, nil) {
			return
		}
		if !yield(&StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{TaskID: "t1", ContextID: "c1", Status: TaskStatus{State: TaskStateCompleted}}}, nil) {
			return
		}
		if req.Message.Text() == "then fail" {
			yield(nil, Errorf(CodeTaskNotFound, "gone"))
		}
	}
}

func (fake) GetTask(_ context.Context, req *GetTaskRequest) (*Task, error) {
	if req.ID != "t1" {
		return nil, Errorf(CodeTaskNotFound, "no task %s", req.ID)
	}
	return &Task{ID: "t1", ContextID: "c1", Status: TaskStatus{State: TaskStateCompleted}}, nil
}

func (fake) CancelTask(context.Context, *CancelTaskRequest) (*Task, error) {
	return nil, Errorf(CodeTaskNotCancelable, "not cancelable")
}

func (f fake) SubscribeToTask(ctx context.Context, _ *SubscribeToTaskRequest) iter.Seq2[*StreamResponse, error] {
	return f.SendStreamingMessage(ctx, &SendMessageRequest{Message: &Message{Parts: []Part{TextPart("x")}}})
}

func serveFake(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body json.RawMessage
		json.NewDecoder(r.Body).Decode(&body)
		req, err := ParseRequest(body)
		if err != nil {
			WriteError(w, nil, err)
			return
		}
		Serve(w, r, req, fake{})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The server answers each method, or the error 1.0 gives it.
func TestServeErrors(t *testing.T) {
	srv := serveFake(t)
	tests := []struct {
		body string
		code int
		msg  string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"NoSuch","params":{}}`, CodeMethodNotFound, "NoSuch"},
		{`{"jsonrpc":"2.0","id":1,"method":"SendMessage"}`, CodeInvalidParams, "needs params"},
		{`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[]}}}`, CodeInvalidParams, "at least one part"},
		{`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":"hi"}}`, CodeInvalidParams, "params of SendMessage"},
		{`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{"text":"fail"}]}}}`, CodeInternalError, "internal error"},
		{`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}`, CodeInvalidParams, "params.id"},
		{`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"nope"}}`, CodeTaskNotFound, "no task nope"},
		{`{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"t1"}}`, CodeTaskNotCancelable, "not cancelable"},
		{`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`, CodeUnsupportedOperation, "list"},
		{`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{}}`, CodePushNotificationUnsupported, "push"},
		{`{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}`, CodeExtendedCardNotConfigured, "extended"},
		{`{"jsonrpc":"1.0","id":1,"method":"GetTask"}`, CodeInvalidRequest, "2.0"},
		{`{"jsonrpc":"2.0","id":{},"method":"GetTask"}`, CodeInvalidRequest, "id"},
		{`{"jsonrpc":"2.0","id":1}`, CodeInvalidRequest, "no method"},
		{`{nope`, CodeParseError, "not a JSON-RPC"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got Response
			json.NewDecoder(resp.Body).Decode(&got)
			if got.Error == nil || got.Error.Code != tt.code || !strings.Contains(got.Error.Message, tt.msg) || got.Result != nil {
				t.Errorf("got %+v %s", got.Error, got.Result)
			}
		})
	}
}

// The client calls the server: results, errors and streams.
func TestClient(t *testing.T) {
	c := &Client{Endpoint: serveFake(t).URL}
	ctx := context.Background()
	res, err := c.SendMessage(ctx, &SendMessageRequest{Message: &Message{MessageID: "m", Role: RoleUser, Parts: []Part{TextPart("hi")}}})
	if err != nil || res.Task == nil || res.Task.Status.Message.Text() != "echo: hi" {
		t.Fatalf("SendMessage: %+v %v", res, err)
	}
	if task, err := c.GetTask(ctx, &GetTaskRequest{ID: "t1"}); err != nil || task.Status.State != TaskStateCompleted {
		t.Errorf("GetTask: %+v %v", task, err)
	}
	var e *Error
	if _, err := c.GetTask(ctx, &GetTaskRequest{ID: "nope"}); !errors.As(err, &e) || e.Code != CodeTaskNotFound {
		t.Errorf("GetTask of no task: %v", err)
	}
	if _, err := c.CancelTask(ctx, &CancelTaskRequest{ID: "t1"}); !errors.As(err, &e) || e.Code != CodeTaskNotCancelable {
		t.Errorf("CancelTask: %v", err)
	}
	for _, tt := range []struct {
		text    string
		events  int
		wantErr bool
	}{{"hi", 2, false}, {"then fail", 2, true}} {
		var states []TaskState
		var last error
		for ev, err := range c.SendStreamingMessage(ctx, &SendMessageRequest{Message: &Message{Parts: []Part{TextPart(tt.text)}}}) {
			if err != nil {
				last = err
				break
			}
			switch {
			case ev.Task != nil:
				states = append(states, ev.Task.Status.State)
			case ev.StatusUpdate != nil:
				states = append(states, ev.StatusUpdate.Status.State)
			}
		}
		if len(states) != tt.events || states[len(states)-1] != TaskStateCompleted || (last != nil) != tt.wantErr {
			t.Errorf("stream %q: %v %v", tt.text, states, last)
		}
	}
	// A stream refused before it starts is the plain error.
	for _, err := range c.SendStreamingMessage(ctx, &SendMessageRequest{Message: &Message{}}) {
		if !errors.As(err, &e) || e.Code != CodeInvalidParams {
			t.Errorf("a refused stream: %v", err)
		}
	}
}

// An answer that is not JSON-RPC is an error that says so, not a crash.
func TestClientBadAnswers(t *testing.T) {
	for _, body := range []string{`not json`, `{"jsonrpc":"2.0","id":99,"result":{}}`, `{"jsonrpc":"2.0","id":1}`, `{"jsonrpc":"2.0","id":1,"result":{}}`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
		}))
		c := &Client{Endpoint: srv.URL}
		if _, err := c.SendMessage(context.Background(), &SendMessageRequest{Message: &Message{Parts: []Part{TextPart("x")}}}); err == nil {
			t.Errorf("%s: no error", body)
		}
		srv.Close()
	}
}
