package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// a2aPost posts a JSON-RPC body to url with the A2A-Version header version ("" for none) and
// returns the answer's result and error.
func a2aPost(t *testing.T, url, version, body string) (map[string]any, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return out.Result, out.Error
}

// TestA2AVersions: each request to /a2a/NAME (with or without its trailing slash) is answered
// in the version it speaks: its method names it (1.0's SendMessage, 0.3's message/send), and an
// A2A-Version header, where sent, must name 1.0 or 0.3. The card, at the well-known path and at
// the agent's URL, declares both; /a2a/.well-known/agent-card.json, where a client given
// /a2a/NAME looks, says where the cards are.
func TestA2AVersions(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "turns.yaml")
	agents := filepath.Join(dir, "agents")
	writeTestFiles(t, map[string]string{
		script:                               "turns:\n  - text: Still here.\n",
		filepath.Join(agents, "keeper.yaml"): "name: keeper\nmodel: scripted:" + script + "\nexpose_as_tool: true\n",
	})
	endpoint, _, _ := startServe(t, "--db", filepath.Join(dir, "q.db"), "--agents", agents)
	base := strings.TrimSuffix(endpoint, "/mcp") + "/a2a/keeper"
	send1 := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"Are you there?"}]}}}`
	send03 := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"Are you there?"}]}}}`

	res, _ := a2aPost(t, base+"/", "1.0", send1)
	task, _ := res["task"].(map[string]any)
	status, _ := task["status"].(map[string]any)
	if status["state"] != "TASK_STATE_COMPLETED" || !strings.Contains(mustJSON(task), `"artifacts":[{"artifactId":"answer-`) ||
		!strings.Contains(mustJSON(task), `"parts":[{"text":"Still here."}]`) {
		t.Fatalf("1.0 SendMessage: %v", res)
	}
	id := task["id"].(string)
	tests := []struct {
		name, url, version, body string
		result                   string // in the result's JSON
		code                     float64
		msg                      string
	}{
		{"1.0 by its method alone", base, "", `{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"` + id + `"}}`, `"state":"TASK_STATE_COMPLETED"`, 0, ""},
		{"0.3 without a header", base, "", send03, `"kind":"task"`, 0, ""},
		{"0.3 named", base + "/", "0.3", `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"id":"` + id + `"}}`, `"state":"completed"`, 0, ""},
		{"a version not spoken", base, "2.0", send1, "", -32009, "1.0 and 0.3"},
		{"0.3's method named 1.0", base, "1.0", send03, "", -32601, "SendMessage"},
		{"1.0 cancel refused", base, "1.0", `{"jsonrpc":"2.0","id":4,"method":"CancelTask","params":{"id":"` + id + `"}}`, "", -32002, ""},
		{"1.0 cancel of no task", base, "1.0", `{"jsonrpc":"2.0","id":5,"method":"CancelTask","params":{"id":"thr_nope:1"}}`, "", -32001, ""},
		{"1.0 no text", base, "1.0", `{"jsonrpc":"2.0","id":6,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"url":"http://x/y"}]}}}`, "", -32602, "no text"},
		{"1.0 ListTasks", base, "1.0", `{"jsonrpc":"2.0","id":7,"method":"ListTasks","params":{}}`, "", -32004, ""},
		{"1.0 not JSON", base, "1.0", `{`, "", -32700, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, rerr := a2aPost(t, tt.url, tt.version, tt.body)
			switch {
			case tt.code == 0 && (rerr != nil || !strings.Contains(mustJSON(res), tt.result)):
				t.Errorf("got %v %v, want a result with %s", res, rerr, tt.result)
			case tt.code != 0 && (rerr == nil || rerr["code"] != tt.code || !strings.Contains(mustJSON(rerr), tt.msg)):
				t.Errorf("got %v %v, want the error %v (%s)", res, rerr, tt.code, tt.msg)
			}
		})
	}

	for _, url := range []string{base + "/.well-known/agent-card.json", base, base + "/"} {
		st, _, card := apiDo(t, "GET", url, "", "")
		if b := mustJSON(card); st != 200 || !strings.Contains(b, `"supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0","url":"`+base+`"},{"protocolBinding":"JSONRPC","protocolVersion":"0.3","url":"`+base+`"}]`) ||
			card["protocolVersion"] != "0.3.0" || card["url"] != base {
			t.Errorf("the card at %s: %d %s", url, st, b)
		}
	}
	st, _, body := apiDo(t, "GET", strings.TrimSuffix(base, "keeper")+".well-known/agent-card.json", "", "")
	if st != 404 || !strings.Contains(mustJSON(body), "/a2a/keeper/.well-known/agent-card.json") {
		t.Errorf("/a2a/.well-known/agent-card.json: %d %v", st, body)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
