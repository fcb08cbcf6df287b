package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/anthropic"
	"github.com/quiverhq/quiver/model/internal/wiretest"
	"github.com/quiverhq/quiver/schema"
)

const testKey = "sk-ant-test-0123456789"

func tools(t *testing.T) *schema.ToolSet {
	t.Helper()
	ts, err := schema.Render(schema.Anthropic, []schema.ToolSchema{
		{Name: "everything.echo", Description: "Echo a message.", Input: &schema.Schema{
			Type: "object", Properties: map[string]*schema.Schema{"message": {Type: "string", MinLength: new(int)}, "times": {Type: "integer"}},
			PropertyOrder: []string{"message", "times"}, Required: []string{"message"}}},
		{Name: "clock", Description: "The time."},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func newModel(t *testing.T, url string) *anthropic.Model {
	t.Helper()
	m, err := anthropic.New("claude-sonnet-4-5", anthropic.Options{APIKey: testKey, BaseURL: url, Retries: -1, KeyVar: "ANTHROPIC_API_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func message(content string, stop string) string {
	return `{"id":"msg_01Aq9w938a90dw8q","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",` +
		`"content":[` + content + `],"stop_reason":"` + stop + `","stop_sequence":null,"usage":{"input_tokens":472,` +
		`"output_tokens":91,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"service_tier":"standard"}}`
}

const textAndCalls = `{"type":"text","text":"Echoing."},` +
	`{"type":"tool_use","id":"toolu_01A","name":"everything_echo","input":{"message":"hi","times":2}},` +
	`{"type":"tool_use","id":"toolu_01B","name":"clock","input":{}}`

func ev(name, data string) wiretest.Event { return wiretest.Event{Name: name, Data: data} }

func delta(i, d string) wiretest.Event {
	return ev("content_block_delta", `{"type":"content_block_delta","index":`+i+`,"delta":`+d+`}`)
}

var streamed = []wiretest.Event{
	ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`),
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
	ev("ping", `{"type": "ping"}`),
	delta("0", `{"type":"text_delta","text":"Echo"}`),
	delta("0", `{"type":"text_delta","text":"ing."}`),
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
	ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01A","name":"everything_echo","input":{}}}`),
	delta("1", `{"type":"input_json_delta","partial_json":""}`),
	delta("1", `{"type":"input_json_delta","partial_json":"{\"message\": \"hi\""}`),
	delta("1", `{"type":"input_json_delta","partial_json":",\"times\":2}"}`),
	ev("content_block_stop", `{"type":"content_block_stop","index":1}`),
	ev("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01B","name":"clock","input":{}}}`),
	ev("content_block_stop", `{"type":"content_block_stop","index":2}`),
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":91}}`),
	ev("message_stop", `{"type":"message_stop"}`),
}

func conversation() []model.Message {
	return []model.Message{
		{Role: model.RoleUser, Text: "Echo hi."},
		{Role: model.RoleUser, Images: []model.Image{{MIMEType: "image/png", Data: []byte{1, 2, 3}}}},
		{Role: model.RoleAssistant, Text: "Sure.", ToolCalls: []model.ToolCall{
			{ID: "toolu_1", Name: "everything.echo", Args: json.RawMessage(`{"message":"hi"}`)},
			{ID: "toolu_2", Name: "clock", Args: json.RawMessage(`not json`)},
		}},
		{Role: model.RoleTool, ToolCallID: "toolu_1", ToolName: "everything_echo", Text: "boom", IsError: true,
			Images: []model.Image{{MIMEType: "image/jpeg", Data: []byte{9}}}},
		{Role: model.RoleUser, Text: "Again."},
	}
}

func TestGenerate(t *testing.T) {
	wantCalls := `[{"ID":"toolu_01A","Name":"everything_echo","Args":{"message":"hi","times":2}},{"ID":"toolu_01B","Name":"clock","Args":{}}]`
	tests := []struct {
		name      string
		stream    bool
		reply     wiretest.Reply
		wantUsage model.Usage
	}{
		{"unary", false, wiretest.Reply{Body: message(textAndCalls, "tool_use")}, model.Usage{InputTokens: 472, OutputTokens: 91}},
		{"streamed", true, wiretest.Reply{Events: streamed}, model.Usage{InputTokens: 25, OutputTokens: 91}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := wiretest.New(t, tc.reply)
			req := &model.Request{System: "Be brief.", Messages: conversation(), Tools: tools(t)}
			var deltas []string
			var onDelta func(model.Delta)
			if tc.stream {
				onDelta = func(d model.Delta) { deltas = append(deltas, d.Text) }
			}
			resp, err := newModel(t, srv.URL).Generate(context.Background(), req, onDelta)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "Echoing." || resp.StopReason != "tool_use" || resp.Usage != tc.wantUsage {
				t.Errorf("text %q stop %q usage %+v", resp.Text, resp.StopReason, resp.Usage)
			}
			if got := canon(t, mustJSON(t, resp.ToolCalls)); got != canon(t, wantCalls) {
				t.Errorf("calls %s", got)
			}
			if tc.stream && strings.Join(deltas, "|") != "Echo|ing." {
				t.Errorf("deltas %q", deltas)
			}
			if name, _, ok := req.Tools.Inbound(resp.ToolCalls[0].Name, resp.ToolCalls[0].Args); !ok || name != "everything.echo" {
				t.Errorf("Inbound = %q %v", name, ok)
			}

			r := srv.Last(t)
			if r.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != testKey || r.Header.Get("Anthropic-Version") == "" {
				t.Errorf("path %s headers %v", r.Path, r.Header)
			}
			body := r.JSON(t)
			if body["model"] != "claude-sonnet-4-5" || body["max_tokens"] != float64(anthropic.DefaultMaxTokens) || tc.stream != (body["stream"] == true) {
				t.Errorf("model %v max_tokens %v stream %v", body["model"], body["max_tokens"], body["stream"])
			}
			if _, set := body["tool_choice"]; set {
				t.Errorf("tool_choice %v without an output schema", body["tool_choice"])
			}
			checkTools(t, r.Body, req.Tools)
			checkMessages(t, r.Body)
		})
	}
}

func checkTools(t *testing.T, body []byte, ts *schema.ToolSet) {
	t.Helper()
	var sent struct {
		Tools []struct {
			Name, Description string
			InputSchema       json.RawMessage `json:"input_schema"`
		}
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	if len(sent.Tools) != len(ts.Tools) {
		t.Fatalf("%d tools sent", len(sent.Tools))
	}
	for i, st := range sent.Tools {
		rt := ts.Tools[i]
		if st.Name != rt.Name || st.Description != rt.Description || canon(t, st.InputSchema) != canon(t, rt.Parameters) {
			t.Errorf("tool %d: %s %s\nwant %s", i, st.Name, st.InputSchema, rt.Parameters)
		}
	}
	if s := string(sent.Tools[0].InputSchema); strings.Index(s, `"message"`) > strings.Index(s, `"times"`) {
		t.Errorf("property order lost: %s", s)
	}
}

func checkMessages(t *testing.T, body []byte) {
	t.Helper()
	var sent struct {
		System   []struct{ Text string }
		Messages []struct {
			Role    string
			Content []struct {
				Type      string
				Text      string
				ID        string
				Name      string
				Input     json.RawMessage
				ToolUseID string `json:"tool_use_id"`
				IsError   *bool  `json:"is_error"`
				Content   []struct {
					Type, Text string
					Source     struct{ Type, MediaType, Data string } `json:"source"`
				}
				Source struct {
					MediaType string `json:"media_type"`
					Data      string
				}
			}
		}
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	if len(sent.System) != 1 || sent.System[0].Text != "Be brief." {
		t.Errorf("system %+v", sent.System)
	}
	var shape []string
	for _, m := range sent.Messages {
		var kinds []string
		for _, c := range m.Content {
			kinds = append(kinds, c.Type)
		}
		shape = append(shape, m.Role+"("+strings.Join(kinds, ",")+")")
	}
	// Both user messages merge; both results and the next user text share one user message.
	want := "user(text,image) assistant(text,tool_use,tool_use) user(tool_result,tool_result,text)"
	if got := strings.Join(shape, " "); got != want {
		t.Fatalf("messages\n got %s\nwant %s", got, want)
	}
	ms := sent.Messages
	if img := ms[0].Content[1].Source; img.MediaType != "image/png" || img.Data != "AQID" {
		t.Errorf("image %+v", img)
	}
	use := ms[1].Content
	if use[1].Name != "everything_echo" || use[1].ID != "toolu_1" || string(use[2].Input) != "{}" {
		t.Errorf("tool uses: %+v", use)
	}
	res := ms[2].Content
	if res[0].ToolUseID != "toolu_1" || res[0].IsError == nil || !*res[0].IsError || res[0].Content[0].Text != "boom" ||
		res[0].Content[1].Type != "image" {
		t.Errorf("error result %+v", res[0])
	}
	if res[1].ToolUseID != "toolu_2" || res[1].IsError == nil || !*res[1].IsError || !strings.Contains(res[1].Content[0].Text, "No result") {
		t.Errorf("unanswered call %+v", res[1])
	}
}

func TestOutput(t *testing.T) {
	obj := &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"answer": {Type: "string"}}, Required: []string{"answer"}}
	tests := []struct {
		name       string
		output     *schema.Schema
		tools      bool
		content    string
		stream     bool
		wantChoice string
		wantText   string
		wantCalls  int
		wantSchema string
	}{
		{name: "object", output: obj, content: `{"type":"tool_use","id":"toolu_9","name":"output","input":{"answer":"42"}}`,
			wantChoice: `{"name":"output","type":"tool"}`, wantText: `{"answer":"42"}`, wantSchema: mustJSON(t, obj)},
		{name: "object, streamed", output: obj, stream: true,
			wantChoice: `{"name":"output","type":"tool"}`, wantText: `{"answer":"42"}`, wantSchema: mustJSON(t, obj)},
		{name: "not an object", output: &schema.Schema{Type: "string"}, content: `{"type":"tool_use","id":"toolu_9","name":"output","input":{"value":"hi"}}`,
			wantChoice: `{"name":"output","type":"tool"}`, wantText: `"hi"`,
			wantSchema: `{"type":"object","properties":{"value":{"type":"string"}},"required":["value"]}`},
		{name: "with tools", output: obj, tools: true,
			content:    `{"type":"tool_use","id":"toolu_8","name":"clock","input":{}},{"type":"tool_use","id":"toolu_9","name":"output","input":{"answer":"42"}}`,
			wantChoice: `{"type":"any"}`, wantText: `{"answer":"42"}`, wantCalls: 1, wantSchema: mustJSON(t, obj)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reply := wiretest.Reply{Body: message(tc.content, "tool_use")}
			var onDelta func(model.Delta)
			var deltas strings.Builder
			if tc.stream {
				reply = wiretest.Reply{Events: []wiretest.Event{
					streamed[0],
					ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_9","name":"output","input":{}}}`),
					delta("0", `{"type":"input_json_delta","partial_json":"{\"answer\":"}`),
					delta("0", `{"type":"input_json_delta","partial_json":"\"42\"}"}`),
					ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}`),
				}}
				onDelta = func(d model.Delta) { deltas.WriteString(d.Text) }
			}
			srv := wiretest.New(t, reply)
			req := &model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "?"}}, Output: tc.output}
			if tc.tools {
				req.Tools = tools(t)
			}
			resp, err := newModel(t, srv.URL).Generate(context.Background(), req, onDelta)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != tc.wantText || len(resp.ToolCalls) != tc.wantCalls {
				t.Errorf("text %q calls %+v", resp.Text, resp.ToolCalls)
			}
			if tc.stream && deltas.String() != tc.wantText {
				t.Errorf("deltas %q", deltas.String())
			}
			var sent struct {
				ToolChoice json.RawMessage `json:"tool_choice"`
				Tools      []struct {
					Name        string
					InputSchema json.RawMessage `json:"input_schema"`
				}
			}
			if err := json.Unmarshal(srv.Last(t).Body, &sent); err != nil {
				t.Fatal(err)
			}
			if canon(t, sent.ToolChoice) != canon(t, tc.wantChoice) {
				t.Errorf("tool_choice %s", sent.ToolChoice)
			}
			last := sent.Tools[len(sent.Tools)-1]
			if last.Name != "output" || canon(t, last.InputSchema) != canon(t, tc.wantSchema) {
				t.Errorf("output tool %s %s", last.Name, last.InputSchema)
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
	}{
		{"401", wiretest.Reply{Status: 401, Body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + testKey + `"},"request_id":"req_011"}`},
			false, 401, "check the API key in ANTHROPIC_API_KEY"},
		{"429", wiretest.Reply{Status: 429, Body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`},
			true, 429, "rate_limit_error"},
		{"500", wiretest.Reply{Status: 500, Body: `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`},
			false, 500, "Internal server error"},
		{"529 in a stream", wiretest.Reply{Events: []wiretest.Event{streamed[0], ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)}},
			true, 529, "Overloaded"},
		{"malformed body", wiretest.Reply{Body: `{"id":"msg_1","content":[`}, false, 0, "anthropic:claude-sonnet-4-5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := wiretest.New(t, tc.reply)
			var onDelta func(model.Delta)
			if tc.stream {
				onDelta = func(model.Delta) {}
			}
			_, err := newModel(t, srv.URL).Generate(context.Background(), &model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, onDelta)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.wantText) || strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q: want %q and no key", err, tc.wantText)
			}
			var ae *model.APIError
			if got := errors.As(err, &ae); got != (tc.wantStatus != 0) || (got && ae.StatusCode != tc.wantStatus) {
				t.Errorf("APIError %v %+v", got, ae)
			}
			if len(srv.Requests()) != 1 {
				t.Errorf("%d requests with retries off", len(srv.Requests()))
			}
		})
	}
}

func TestCancel(t *testing.T) {
	for _, stream := range []bool{false, true} {
		srv := wiretest.New(t, wiretest.Reply{Hang: true})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			var onDelta func(model.Delta)
			if stream {
				onDelta = func(model.Delta) {}
			}
			_, err := newModel(t, srv.URL).Generate(ctx, &model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, onDelta)
			done <- err
		}()
		select {
		case <-srv.Hung:
		case err := <-done:
			t.Fatalf("returned early: %v", err)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("stream %v: %v", stream, err)
		}
	}
}

func TestOutputNameClash(t *testing.T) {
	srv := wiretest.New(t)
	_, err := newModel(t, srv.URL).Generate(context.Background(), &model.Request{Tools: tools(t), Output: &schema.Schema{Type: "object"}, OutputName: "clock"}, nil)
	if err == nil || !strings.Contains(err.Error(), "OutputName") || len(srv.Requests()) != 0 {
		t.Errorf("err = %v", err)
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

func canon[T ~string | ~[]byte](t *testing.T, raw T) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return mustJSON(t, v)
}
