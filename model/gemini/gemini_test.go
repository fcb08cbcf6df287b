package gemini_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/gemini"
	"github.com/quiverhq/quiver/model/internal/wiretest"
	"github.com/quiverhq/quiver/schema"
)

const testKey = "AIza-test-0123456789"

func tools(t *testing.T) *schema.ToolSet {
	t.Helper()
	ts, err := schema.Render(schema.Gemini, []schema.ToolSchema{
		{Name: "fs/read", Description: "Read a file.", Input: &schema.Schema{
			Type: "object", Properties: map[string]*schema.Schema{"path": {Type: "string"}, "limit": {Type: "integer", Default: json.RawMessage("10")}},
			PropertyOrder: []string{"path", "limit"}, Required: []string{"path"}}},
		{Name: "clock", Description: "The time."},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func newModel(t *testing.T, url, name string) *gemini.Model {
	t.Helper()
	n := 0
	m, err := gemini.New(name, gemini.Options{APIKey: testKey, BaseURL: url, Retries: -1, KeyVar: "GEMINI_API_KEY",
		NewID: func() string { n++; return fmt.Sprintf("%sx%d", gemini.MadeUpIDPrefix, n) }})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const reply = `{"candidates":[{"content":{"parts":[{"text":"Reading."},
{"functionCall":{"name":"fs_read","args":{"path":"/a","limit":12345678901}},"thoughtSignature":"c2lnMQ=="},
{"functionCall":{"id":"fc_7","name":"clock","args":{}}}],"role":"model"},"finishReason":"STOP","index":0}],
"usageMetadata":{"promptTokenCount":120,"candidatesTokenCount":30,"thoughtsTokenCount":10,"totalTokenCount":160},
"modelVersion":"gemini-2.5-flash","responseId":"mXw3aN6ZKs2ZkdUP"}`

var streamed = []wiretest.Event{
	{Data: `{"candidates":[{"content":{"parts":[{"text":"Read"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":120,"totalTokenCount":120},"modelVersion":"gemini-2.5-flash"}`},
	{Data: `{"candidates":[{"content":{"parts":[{"text":"ing."}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash"}`},
	{Data: `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"fs_read","args":{"path":"/a","limit":12345678901}},"thoughtSignature":"c2lnMQ=="},` +
		`{"functionCall":{"id":"fc_7","name":"clock","args":{}}}],"role":"model"},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":120,"candidatesTokenCount":30,"thoughtsTokenCount":10,"totalTokenCount":160},"modelVersion":"gemini-2.5-flash"}`},
}

func conversation() []model.Message {
	return []model.Message{
		{Role: model.RoleUser, Text: "Read /a.", Images: []model.Image{{MIMEType: "image/png", Data: []byte{1, 2, 3}}}},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
			{ID: gemini.MadeUpIDPrefix + "1", Name: "fs/read", Args: json.RawMessage(`{"path":"/a","limit":12345}`)},
			{ID: "fc_2", Name: "clock", Args: json.RawMessage(`{}`), Signature: []byte("sig2")},
		}},
		{Role: model.RoleTool, ToolCallID: gemini.MadeUpIDPrefix + "1", ToolName: "fs_read", Text: "no such file", IsError: true},
		{Role: model.RoleTool, ToolCallID: "fc_2", ToolName: "clock", Text: "noon"},
		{Role: model.RoleUser, Text: "Again."},
	}
}

func TestGenerate(t *testing.T) {
	wantCalls := `[{"ID":"gemini_call_x1","Name":"fs_read","Args":{"limit":12345678901,"path":"/a"},"Signature":"c2lnMQ=="},` +
		`{"ID":"fc_7","Name":"clock","Args":{}}]`
	tests := []struct {
		name   string
		stream bool
		reply  wiretest.Reply
		path   string
	}{
		{"unary", false, wiretest.Reply{Body: reply}, "/v1beta/models/gemini-2.5-flash:generateContent"},
		{"streamed", true, wiretest.Reply{Events: streamed}, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := wiretest.New(t, tc.reply)
			temp := 0.5
			req := &model.Request{System: "Be brief.", Messages: conversation(), Tools: tools(t), MaxTokens: 200, Temperature: &temp}
			var deltas []string
			var onDelta func(model.Delta)
			if tc.stream {
				onDelta = func(d model.Delta) { deltas = append(deltas, d.Text) }
			}
			resp, err := newModel(t, srv.URL, "gemini-2.5-flash").Generate(context.Background(), req, onDelta)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "Reading." || resp.StopReason != "STOP" || resp.Usage != (model.Usage{InputTokens: 120, OutputTokens: 40}) {
				t.Errorf("text %q stop %q usage %+v", resp.Text, resp.StopReason, resp.Usage)
			}
			if got := mustJSON(t, resp.ToolCalls); got != wantCalls {
				t.Errorf("calls\n got %s\nwant %s", got, wantCalls)
			}
			if tc.stream && strings.Join(deltas, "|") != "Read|ing." {
				t.Errorf("deltas %q", deltas)
			}
			if name, args, ok := req.Tools.Inbound(resp.ToolCalls[0].Name, resp.ToolCalls[0].Args); !ok || name != "fs/read" || !strings.Contains(string(args), "12345678901") {
				t.Errorf("Inbound = %q %s %v", name, args, ok)
			}

			r := srv.Last(t)
			if r.Path != tc.path || r.Header.Get("X-Goog-Api-Key") != testKey {
				t.Errorf("path %s key %q", r.Path, r.Header.Get("X-Goog-Api-Key"))
			}
			checkRequest(t, r.Body, req.Tools)
		})
	}
}

func checkRequest(t *testing.T, body []byte, ts *schema.ToolSet) {
	t.Helper()
	var sent struct {
		SystemInstruction struct{ Parts []struct{ Text string } }
		GenerationConfig  struct {
			MaxOutputTokens int
			Temperature     float64
		}
		Tools []struct {
			FunctionDeclarations []struct {
				Name, Description string
				Parameters        json.RawMessage
			}
		}
		Contents []struct {
			Role  string
			Parts []struct {
				Text         string
				InlineData   *struct{ MimeType, Data string }
				FunctionCall *struct {
					ID   string
					Name string
					Args json.RawMessage
				}
				FunctionResponse *struct {
					ID       string
					Name     string
					Response map[string]string
				}
				ThoughtSignature string
			}
		}
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.SystemInstruction.Parts[0].Text != "Be brief." || sent.GenerationConfig.MaxOutputTokens != 200 || sent.GenerationConfig.Temperature != 0.5 {
		t.Errorf("system %+v config %+v", sent.SystemInstruction, sent.GenerationConfig)
	}
	decls := sent.Tools[0].FunctionDeclarations
	if len(decls) != 2 {
		t.Fatalf("declarations %+v", decls)
	}
	if decls[0].Name != "fs_read" || canon(t, decls[0].Parameters) != canon(t, ts.Tools[0].Parameters) {
		t.Errorf("declaration %s %s\nwant %s", decls[0].Name, decls[0].Parameters, ts.Tools[0].Parameters)
	}
	if decls[1].Name != "clock" || decls[1].Parameters != nil {
		t.Errorf("no-argument declaration %s %s", decls[1].Name, decls[1].Parameters)
	}
	var shape []string
	for _, c := range sent.Contents {
		var kinds []string
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				kinds = append(kinds, "call")
			case p.FunctionResponse != nil:
				kinds = append(kinds, "response")
			case p.InlineData != nil:
				kinds = append(kinds, "image")
			default:
				kinds = append(kinds, "text")
			}
		}
		shape = append(shape, c.Role+"("+strings.Join(kinds, ",")+")")
	}
	if got, want := strings.Join(shape, " "), "user(text,image) model(call,call) user(response,response,text)"; got != want {
		t.Fatalf("contents\n got %s\nwant %s", got, want)
	}
	calls, results := sent.Contents[1].Parts, sent.Contents[2].Parts
	if c := calls[0].FunctionCall; c.ID != "" || c.Name != "fs_read" || string(c.Args) != `{"limit":12345,"path":"/a"}` {
		t.Errorf("first call (made-up id left out): %+v %s", c, c.Args)
	}
	if c := calls[1]; c.FunctionCall.ID != "fc_2" || c.ThoughtSignature != "c2lnMg==" {
		t.Errorf("second call keeps its id and signature: %+v", c)
	}
	if r := results[0].FunctionResponse; r.ID != "" || r.Name != "fs_read" || r.Response["error"] != "no such file" {
		t.Errorf("error result %+v", r)
	}
	if r := results[1].FunctionResponse; r.ID != "fc_2" || r.Response["output"] != "noon" {
		t.Errorf("result %+v", r)
	}
}

func TestOutputSchema(t *testing.T) {
	out := &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"answer": {Type: "string"}}, Required: []string{"answer"}}
	srv := wiretest.New(t, wiretest.Reply{Body: `{"candidates":[{"content":{"parts":[{"text":"{\"answer\":\"42\"}"}],"role":"model"},"finishReason":"STOP"}]}`})
	resp, err := newModel(t, srv.URL, "gemini-2.5-flash").Generate(context.Background(),
		&model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "?"}}, Output: out}, nil)
	if err != nil || resp.Text != `{"answer":"42"}` {
		t.Fatalf("%v %+v", err, resp)
	}
	var sent struct {
		GenerationConfig struct {
			ResponseMimeType   string
			ResponseJsonSchema json.RawMessage
		}
	}
	if err := json.Unmarshal(srv.Last(t).Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.GenerationConfig.ResponseMimeType != "application/json" || canon(t, sent.GenerationConfig.ResponseJsonSchema) != canon(t, mustJSON(t, out)) {
		t.Errorf("config %+v", sent.GenerationConfig)
	}
}

func TestGemini3Signature(t *testing.T) {
	srv := wiretest.New(t, wiretest.Reply{Body: reply})
	msgs := []model.Message{{Role: model.RoleUser, Text: "hi"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "a", Name: "clock"}, {ID: "b", Name: "clock"}}}}
	if _, err := newModel(t, srv.URL, "gemini-3-pro-preview").Generate(context.Background(), &model.Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	body := string(srv.Last(t).Body)
	// Only the first call of a turn carries the signature; the call history came without one.
	if strings.Count(body, `"thoughtSignature"`) != 1 || !strings.Contains(body, `"c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I="`) {
		t.Errorf("body %s", body)
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
		{"401", wiretest.Reply{Status: 401, Body: `{"error":{"code":401,"message":"API key not valid: ` + testKey + `","status":"UNAUTHENTICATED"}}`},
			false, 401, "check the API key in GEMINI_API_KEY"},
		{"429", wiretest.Reply{Status: 429, Body: `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`},
			true, 429, "RESOURCE_EXHAUSTED"},
		{"500", wiretest.Reply{Status: 500, Body: `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`},
			false, 500, "internal error"},
		{"malformed body", wiretest.Reply{Body: `{"candidates":[`}, false, 0, "gemini:gemini-2.5-flash"},
		{"malformed chunk", wiretest.Reply{Events: []wiretest.Event{{Data: `{"candidates":[`}}}, true, 0, "gemini:gemini-2.5-flash"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := wiretest.New(t, tc.reply)
			var onDelta func(model.Delta)
			if tc.stream {
				onDelta = func(model.Delta) {}
			}
			_, err := newModel(t, srv.URL, "gemini-2.5-flash").Generate(context.Background(), &model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, onDelta)
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
			_, err := newModel(t, srv.URL, "gemini-2.5-flash").Generate(ctx, &model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, onDelta)
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
