package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/internal/wiretest"
	"github.com/quiverhq/quiver/model/openai"
	"github.com/quiverhq/quiver/schema"
)

const testKey = "sk-test-0123456789abcdef"

// tools renders a set with a name OpenAI forbids ("everything.echo") and a tool with an
// optional property, which strict mode makes nullable.
func tools(t *testing.T, d schema.Dialect) *schema.ToolSet {
	t.Helper()
	min := 1.0
	ts, err := schema.Render(d, []schema.ToolSchema{
		{Name: "everything.echo", Description: "Echo a message.", Input: &schema.Schema{
			Type: "object", Properties: map[string]*schema.Schema{"message": {Type: "string"}, "times": {Type: "integer", Minimum: &min}},
			PropertyOrder: []string{"message", "times"}, Required: []string{"message"}}},
		{Name: "clock", Description: "The time."},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func newModel(t *testing.T, url string, d schema.Dialect) *openai.Model {
	t.Helper()
	m, err := openai.New("gpt-4.1-mini", openai.Options{APIKey: testKey, BaseURL: url + "/v1", Retries: -1, Dialect: d, KeyVar: "OPENAI_API_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const completion = `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion","created":1741569952,
"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"Calling.",
"tool_calls":[{"id":"call_a1","type":"function","function":{"name":"everything_echo","arguments":"{\"message\":\"hi\",\"times\":null}"}},
{"id":"call_b2","type":"function","function":{"name":"clock","arguments":"{}"}}],"refusal":null,"annotations":[]},
"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99,
"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,
"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_b376dfbbd5"}`

func chunk(delta string, finish string) wiretest.Event {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return wiretest.Event{Data: `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-mini",` +
		`"system_fingerprint":"fp_1","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + f + `}],"usage":null}`}
}

var streamed = []wiretest.Event{
	chunk(`{"role":"assistant","content":"","refusal":null}`, ""),
	chunk(`{"content":"Hel"}`, ""),
	chunk(`{"content":"lo."}`, ""),
	chunk(`{"tool_calls":[{"index":0,"id":"call_s1","type":"function","function":{"name":"everything_echo","arguments":""}}]}`, ""),
	chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"message\":"}}]}`, ""),
	chunk(`{"tool_calls":[{"index":1,"id":"call_s2","type":"function","function":{"name":"clock","arguments":"{}"}}]}`, ""),
	chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"hi\"}"}}]}`, ""),
	chunk(`{}`, "tool_calls"),
	{Data: `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-mini","choices":[],` +
		`"usage":{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52}}`},
	{Data: `[DONE]`},
}

// conversation has a call answered with an error, a call left unanswered, and a tool result
// with an image, and names the first call by its canonical name.
func conversation() []model.Message {
	return []model.Message{
		{Role: model.RoleUser, Text: "Echo hi.", Images: []model.Image{{MIMEType: "image/png", Data: []byte{1, 2, 3}}}},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
			{ID: "call_1", Name: "everything.echo", Args: json.RawMessage(`{"message":"hi"}`)},
			{ID: "call_2", Name: "clock", Args: json.RawMessage(`{}`)},
		}},
		{Role: model.RoleTool, ToolCallID: "call_1", ToolName: "everything_echo", Text: "boom", IsError: true,
			Images: []model.Image{{MIMEType: "image/jpeg", Data: []byte{9}}}},
		{Role: model.RoleUser, Text: "Again."},
	}
}

func TestGenerate(t *testing.T) {
	tests := []struct {
		name       string
		dialect    schema.Dialect
		stream     bool
		reply      wiretest.Reply
		wantText   string
		wantCalls  []model.ToolCall
		wantUsage  model.Usage
		wantStop   string
		wantStrict any // the strict flag of the first tool in the request; nil: absent
	}{
		{name: "strict, unary", dialect: schema.OpenAIStrict, reply: wiretest.Reply{Body: completion},
			wantText: "Calling.", wantStop: "tool_calls", wantUsage: model.Usage{InputTokens: 82, OutputTokens: 17},
			wantCalls: []model.ToolCall{{ID: "call_a1", Name: "everything_echo", Args: json.RawMessage(`{"message":"hi","times":null}`)},
				{ID: "call_b2", Name: "clock", Args: json.RawMessage(`{}`)}},
			wantStrict: true},
		{name: "plain, streamed", dialect: schema.OpenAI, stream: true, reply: wiretest.Reply{Events: streamed},
			wantText: "Hello.", wantStop: "tool_calls", wantUsage: model.Usage{InputTokens: 40, OutputTokens: 12},
			wantCalls: []model.ToolCall{{ID: "call_s1", Name: "everything_echo", Args: json.RawMessage(`{"message":"hi"}`)},
				{ID: "call_s2", Name: "clock", Args: json.RawMessage(`{}`)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := wiretest.New(t, tc.reply)
			m := newModel(t, srv.URL, tc.dialect)
			temp := 0.2
			req := &model.Request{System: "Be brief.", Messages: conversation(), Tools: tools(t, tc.dialect), MaxTokens: 100, Temperature: &temp}
			var deltas []string
			var onDelta func(model.Delta)
			if tc.stream {
				onDelta = func(d model.Delta) { deltas = append(deltas, d.Text) }
			}
			resp, err := m.Generate(context.Background(), req, onDelta)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != tc.wantText || resp.StopReason != tc.wantStop || resp.Usage != tc.wantUsage {
				t.Errorf("got text %q stop %q usage %+v", resp.Text, resp.StopReason, resp.Usage)
			}
			if got, want := mustJSON(t, resp.ToolCalls), mustJSON(t, tc.wantCalls); got != want {
				t.Errorf("calls:\n got %s\nwant %s", got, want)
			}
			if tc.stream && strings.Join(deltas, "|") != "Hel|lo." {
				t.Errorf("deltas %q", deltas)
			}
			// The calls map back to the registered names through the tool set.
			if name, _, ok := req.Tools.Inbound(resp.ToolCalls[0].Name, resp.ToolCalls[0].Args); !ok || name != "everything.echo" {
				t.Errorf("Inbound(%q) = %q, %v", resp.ToolCalls[0].Name, name, ok)
			}

			r := srv.Last(t)
			if r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+testKey {
				t.Errorf("request %s, auth %q", r.Path, r.Header.Get("Authorization"))
			}
			body := r.JSON(t)
			if body["model"] != "gpt-4.1-mini" || body["max_completion_tokens"] != 100.0 || body["temperature"] != 0.2 {
				t.Errorf("model %v max %v temperature %v", body["model"], body["max_completion_tokens"], body["temperature"])
			}
			if tc.stream != (body["stream"] == true) {
				t.Errorf("stream = %v", body["stream"])
			}
			checkTools(t, r.Body, req.Tools, tc.wantStrict)
			checkMessages(t, r.Body)
		})
	}
}

func checkTools(t *testing.T, body []byte, ts *schema.ToolSet, wantStrict any) {
	t.Helper()
	var sent struct {
		Tools []struct {
			Type     string
			Function struct {
				Name        string
				Description string
				Parameters  json.RawMessage
				Strict      *bool
			}
		}
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	if len(sent.Tools) != len(ts.Tools) {
		t.Fatalf("sent %d tools, want %d", len(sent.Tools), len(ts.Tools))
	}
	for i, st := range sent.Tools {
		rt := ts.Tools[i]
		if st.Type != "function" || st.Function.Name != rt.Name || st.Function.Description != rt.Description {
			t.Errorf("tool %d: %+v", i, st)
		}
		if got, want := canon(t, st.Function.Parameters), canon(t, rt.Parameters); got != want {
			t.Errorf("tool %s parameters:\n got %s\nwant %s", rt.Name, got, want)
		}
		// Property order survives: it steers the order the model writes arguments in.
		if i == 0 && strings.Index(string(st.Function.Parameters), `"message"`) > strings.Index(string(st.Function.Parameters), `"times"`) {
			t.Errorf("property order lost: %s", st.Function.Parameters)
		}
		var strict any
		if st.Function.Strict != nil {
			strict = *st.Function.Strict
		}
		if i == 0 && strict != wantStrict {
			t.Errorf("strict = %v, want %v", strict, wantStrict)
		}
	}
}

func checkMessages(t *testing.T, body []byte) {
	t.Helper()
	var sent struct {
		Messages []struct {
			Role       string
			Content    json.RawMessage
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		}
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range sent.Messages {
		roles = append(roles, m.Role)
	}
	// system, user, assistant, tool x2 (the missing result made up), user (tool images), user
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,tool,user,user" {
		t.Fatalf("roles %s", got)
	}
	ms := sent.Messages
	if !strings.Contains(string(ms[1].Content), `"url":"data:image/png;base64,AQID"`) {
		t.Errorf("user image: %s", ms[1].Content)
	}
	if c := ms[2].ToolCalls; len(c) != 2 || c[0].Function.Name != "everything_echo" || c[0].Function.Arguments != `{"message":"hi"}` {
		t.Errorf("assistant calls: %+v", c)
	}
	if ms[3].ToolCallID != "call_1" || string(ms[3].Content) != `"Error: boom"` {
		t.Errorf("error result: %s %s", ms[3].ToolCallID, ms[3].Content)
	}
	if ms[4].ToolCallID != "call_2" || !strings.Contains(string(ms[4].Content), "Error: No result") {
		t.Errorf("unanswered call: %s %s", ms[4].ToolCallID, ms[4].Content)
	}
	if !strings.Contains(string(ms[5].Content), "data:image/jpeg;base64,CQ==") {
		t.Errorf("tool image: %s", ms[5].Content)
	}
}

func TestOutputSchema(t *testing.T) {
	closed := &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"answer": {Type: "string"}},
		Required: []string{"answer"}, AdditionalProperties: &schema.Schema{Not: &schema.Schema{}}}
	open := &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"answer": {Type: "string"}}}
	composed, err := schema.Compose([]schema.ToolSchema{{Name: "clock"}}, closed)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		output     *schema.Schema
		outputName string
		wantName   string
		wantStrict bool
	}{
		{"strict as written", closed, "", "output", true},
		{"optional property: not strict", open, "my answer", "my_answer", false},
		// Without _reasoningForCall (off unless enabled) a composed schema over closed tools
		// is in strict form as written.
		{"composed calls and output", composed, "turn", "turn", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := wiretest.New(t, wiretest.Reply{Body: strings.Replace(completion, `"content":"Calling."`, `"content":"{\"answer\":\"42\"}"`, 1)})
			m := newModel(t, srv.URL, schema.OpenAIStrict)
			resp, err := m.Generate(context.Background(), &model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "?"}},
				Output: tc.output, OutputName: tc.outputName}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != `{"answer":"42"}` {
				t.Errorf("text %q", resp.Text)
			}
			var sent struct {
				ResponseFormat struct {
					Type       string
					JSONSchema struct {
						Name   string
						Strict bool
						Schema json.RawMessage
					} `json:"json_schema"`
				} `json:"response_format"`
			}
			remarshal(t, srv.Last(t).JSON(t), &sent)
			rf := sent.ResponseFormat
			if rf.Type != "json_schema" || rf.JSONSchema.Name != tc.wantName || rf.JSONSchema.Strict != tc.wantStrict {
				t.Errorf("response_format %+v", rf)
			}
			if got, want := canon(t, rf.JSONSchema.Schema), canon(t, mustJSON(t, tc.output)); got != want {
				t.Errorf("schema:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name       string
		reply      wiretest.Reply
		stream     bool
		wantStatus int
		wantText   string
		temporary  bool
	}{
		{"401", wiretest.Reply{Status: 401, Body: `{"error":{"message":"Incorrect API key provided: ` + testKey + `.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
			false, 401, "check the API key in OPENAI_API_KEY", false},
		{"429", wiretest.Reply{Status: 429, Body: `{"error":{"message":"Rate limit reached for gpt-4.1-mini.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
			false, 429, "Rate limit reached", true},
		{"500", wiretest.Reply{Status: 500, Body: `{"error":{"message":"The server had an error.","type":"server_error","param":null,"code":null}}`},
			true, 500, "The server had an error", true},
		{"404 model", wiretest.Reply{Status: 404, Body: `{"error":{"message":"The model 'nope' does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}`},
			false, 404, "check the model name", false},
		{"malformed body", wiretest.Reply{Body: `{"id":"chatcmpl-1","choices":[{"index":0,"message":`}, false, 0, "openai:gpt-4.1-mini", false},
		{"no choices", wiretest.Reply{Body: `{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`}, false, 0, "no choices", false},
		{"error event in stream", wiretest.Reply{Events: []wiretest.Event{chunk(`{"content":"a"}`, ""), {Data: `{"error":{"message":"overloaded","type":"server_error"}}`}}},
			true, 0, "overloaded", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := wiretest.New(t, tc.reply)
			m := newModel(t, srv.URL, schema.OpenAI)
			var onDelta func(model.Delta)
			if tc.stream {
				onDelta = func(model.Delta) {}
			}
			_, err := m.Generate(context.Background(), &model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, onDelta)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.wantText) || strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q: want it to contain %q and not the key", err, tc.wantText)
			}
			var ae *model.APIError
			if got := errors.As(err, &ae); got != (tc.wantStatus != 0) || (got && ae.StatusCode != tc.wantStatus) {
				t.Errorf("APIError %v %+v, want status %d", got, ae, tc.wantStatus)
			}
			if model.IsTemporary(err) != tc.temporary {
				t.Errorf("IsTemporary = %v", !tc.temporary)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests with retries off", n)
			}
		})
	}
}

func TestRetryBounded(t *testing.T) {
	srv := wiretest.New(t,
		wiretest.Reply{Status: 429, Header: map[string]string{"Retry-After-Ms": "1"}, Body: `{"error":{"message":"slow down","type":"requests"}}`},
		wiretest.Reply{Body: completion})
	m, err := openai.New("gpt-4.1-mini", openai.Options{APIKey: testKey, BaseURL: srv.URL + "/v1", Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Generate(context.Background(), &model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, nil)
	if err != nil || resp.Text != "Calling." || len(srv.Requests()) != 2 {
		t.Fatalf("err %v, %d requests", err, len(srv.Requests()))
	}
}

func TestCancel(t *testing.T) {
	for _, stream := range []bool{false, true} {
		srv := wiretest.New(t, wiretest.Reply{Hang: true})
		m := newModel(t, srv.URL, schema.OpenAI)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			var onDelta func(model.Delta)
			if stream {
				onDelta = func(model.Delta) {}
			}
			_, err := m.Generate(ctx, &model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, onDelta)
			done <- err
		}()
		select {
		case <-srv.Hung:
		case err := <-done:
			t.Fatalf("returned before the request arrived: %v", err)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("stream %v: err = %v, want context.Canceled", stream, err)
		}
	}
}

func TestBadRequest(t *testing.T) {
	tests := []struct {
		name string
		req  *model.Request
		want string
	}{
		{"gemini tools", &model.Request{Tools: tools(t, schema.Gemini)}, "rendered for gemini"},
		{"orphan result", &model.Request{Messages: []model.Message{{Role: model.RoleTool, ToolCallID: "x"}}}, "follows no assistant"},
		{"bad role", &model.Request{Messages: []model.Message{{Role: "system"}}}, "unknown role"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := wiretest.New(t)
			_, err := newModel(t, srv.URL, schema.OpenAI).Generate(context.Background(), tc.req, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
			if len(srv.Requests()) != 0 {
				t.Error("a bad request was sent")
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// canon re-encodes JSON with sorted keys, for comparing documents.
func canon[T ~string | ~[]byte](t *testing.T, raw T) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return mustJSON(t, v)
}

func remarshal(t *testing.T, from, to any) {
	t.Helper()
	if err := json.Unmarshal([]byte(mustJSON(t, from)), to); err != nil {
		t.Fatal(err)
	}
}
