package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/internal/apicontract"
)

// apiDo sends a request to quiver serve's /v1 API with key (none when empty) and returns the
// status, the Content-Type and the decoded JSON body. The answer is checked against the served
// OpenAPI document (internal/apicontract).
func apiDo(t testing.TB, method, url, key, body string) (int, string, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %q", method, url, resp.StatusCode, b)
	}
	// Every answer quiver serve gives these tests keeps the served OpenAPI document.
	if !apicontract.Skip(req.URL.Path) {
		if err := apicontract.Check(req, resp.StatusCode, resp.Header, b); err != nil {
			t.Errorf("%v\nbody: %.500s", err, b)
		}
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), out
}

// The first endpoints of the /v1 API, over real HTTP against quiver serve with API keys: the
// OpenAPI 3.1 document, the tools, a call through the dispatcher recorded on a thread, the
// threads and their messages, and the errors, each an RFC 9457 problem.
func TestServeAPI(t *testing.T) {
	db := filepath.Join(t.TempDir(), "q.db")
	endpoint, _, stderr := startServeWith(t, "--db", db)
	admin := firstKeyRE.FindString(stderr.String())
	base := strings.TrimSuffix(endpoint, "/mcp") + "/v1"

	if status, ctype, p := apiDo(t, "GET", base+"/tools", "", ""); status != 401 || ctype != "application/problem+json" || p["code"] != "unauthorized" {
		t.Fatalf("without a key: %d %s %v", status, ctype, p)
	}
	// The document needs no key (a client generator reads it from the server), and says that
	// every operation does.
	status, _, doc := apiDo(t, "GET", base+"/openapi.json", "", "")
	paths, _ := doc["paths"].(map[string]any)
	if status != 200 || doc["openapi"] != "3.1.0" || paths["/v1/tools/{name}/call"] == nil || paths["/v1/threads"] == nil {
		t.Fatalf("the OpenAPI document without a key: %d %v", status, doc["openapi"])
	}
	components, _ := doc["components"].(map[string]any)
	schemes, _ := components["securitySchemes"].(map[string]any)
	bearer, _ := schemes["apiKey"].(map[string]any)
	if security, _ := doc["security"].([]any); len(security) != 1 || bearer["type"] != "http" || bearer["scheme"] != "bearer" {
		t.Errorf("the document declares security %v with schemes %v, want the bearer API key on every operation", doc["security"], schemes)
	}
	status, _, tools := apiDo(t, "GET", base+"/tools/served", admin, "")
	if status != 200 || !strings.Contains(func() string { b, _ := json.Marshal(tools); return string(b) }(), `"name":"get_current_time"`) {
		t.Fatalf("GET /v1/tools/served: %d %v", status, tools)
	}

	status, _, call := apiDo(t, "POST", base+"/tools/get_current_time/call", admin, `{"args":{"timezone":"UTC"}}`)
	result, _ := call["result"].(map[string]any)
	threadID, _ := call["thread_id"].(string)
	if status != 200 || result["status"] != "success" || !strings.HasPrefix(threadID, "thr_") {
		t.Fatalf("a call: %d %v", status, call)
	}
	tests := []struct {
		name, body string
		code       string
	}{
		{"bad arguments", `{"args":{"timezone":5}}`, "invalid_arguments"},
		{"no arguments (the timezone is optional), on the same thread", `{"thread_id":"` + threadID + `"}`, ""},
	}
	for _, tt := range tests {
		status, _, out := apiDo(t, "POST", base+"/tools/get_current_time/call", admin, tt.body)
		r, _ := out["result"].(map[string]any)
		if status != 200 || (tt.code != "" && r["code"] != tt.code) {
			t.Errorf("%s: %d %v", tt.name, status, out)
		}
	}
	if status, _, out := apiDo(t, "POST", base+"/tools/no_such_tool/call", admin, `{}`); status != 200 || out["result"].(map[string]any)["code"] != "unknown_tool" {
		t.Errorf("an unknown tool: %d %v", status, out)
	}

	status, _, page := apiDo(t, "GET", base+"/threads?limit=10", admin, "")
	if threads, _ := page["threads"].([]any); status != 200 || len(threads) == 0 || !strings.Contains(func() string { b, _ := json.Marshal(page); return string(b) }(), threadID) {
		t.Fatalf("GET /v1/threads: %d %v", status, page)
	}
	if status, _, th := apiDo(t, "GET", base+"/threads/"+threadID, admin, ""); status != 200 || th["id"] != threadID {
		t.Errorf("GET the thread: %d %v", status, th)
	}
	// The call's record reaches the store through the journal within milliseconds.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		status, _, msgs := apiDo(t, "GET", base+"/threads/"+threadID+"/messages", admin, "")
		if list, _ := msgs["messages"].([]any); status == 200 && len(list) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the thread's messages: %d %v", status, msgs)
		}
	}

	bad := []struct{ name, method, path, body string }{
		{"a limit of 0", "GET", "/threads?limit=0", ""},
		{"a limit of 1000", "GET", "/threads?limit=1000", ""},
		{"a forged cursor", "GET", "/threads?cursor=not-a-cursor", ""},
		{"an unknown thread", "GET", "/threads/thr_nope", ""},
		{"the messages of an unknown thread", "GET", "/threads/thr_nope/messages", ""},
		{"a call on an unknown thread", "POST", "/tools/get_current_time/call", `{"args":{"timezone":"UTC"},"thread_id":"thr_nope"}`},
		{"malformed JSON", "POST", "/tools/get_current_time/call", `{"args":`},
		{"an unknown field", "POST", "/tools/get_current_time/call", `{"argz":{}}`},
		{"a body over the cap", "POST", "/tools/get_current_time/call", `{"args":{"timezone":"` + strings.Repeat("x", 2<<20) + `"}}`},
	}
	for _, tt := range bad {
		status, ctype, p := apiDo(t, tt.method, base+tt.path, admin, tt.body)
		if status < 400 || status >= 500 || ctype != "application/problem+json" || p["detail"] == nil {
			t.Errorf("%s: %d %s %v, want a 4xx problem", tt.name, status, ctype, p)
		}
	}

	code, viewer, _ := runCLI(t, "", "keys", "create", "--db", db, "--name", "reader", "--role", "viewer")
	viewer = strings.TrimSpace(viewer)
	if code != exitOK {
		t.Fatal("keys create failed")
	}
	if status, _, _ := apiDo(t, "GET", base+"/threads", viewer, ""); status != 200 {
		t.Errorf("a viewer reading threads: %d", status)
	}
	if status, _, p := apiDo(t, "POST", base+"/tools/get_current_time/call", viewer, `{"args":{"timezone":"UTC"}}`); status != 403 {
		t.Errorf("a viewer calling a tool: %d %v, want 403", status, p)
	}
}

// Agent runs over the API, in the background: a thread made for an agent (refused, naming the
// variable, when a required one is missing), a run queued on it that answers, and the errors.
func TestServeRuns(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "turns.yaml")
	agents := filepath.Join(dir, "agents")
	for name, text := range map[string]string{
		script:                               "turns:\n  - calls: [{name: get_current_time, args: {timezone: UTC}}]\n  - text: It is now.\n",
		filepath.Join(agents, "helper.yaml"): "name: helper\nmodel: scripted:" + script + "\ntools: [get_current_time]\n",
		filepath.Join(agents, "regional.yaml"): "name: regional\nmodel: scripted:" + script + "\ntools: [get_current_time]\n" +
			"variables:\n  - {name: REGION, type: text, required: true}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, "q.db")
	endpoint, _, stderr := startServeWith(t, "--db", db, "--agents", agents)
	admin := firstKeyRE.FindString(stderr.String())
	base := strings.TrimSuffix(endpoint, "/mcp") + "/v1"

	status, _, th := apiDo(t, "POST", base+"/threads", admin, `{"agent":"helper","tags":["api-test"]}`)
	threadID, _ := th["id"].(string)
	if status != 201 || !strings.HasPrefix(threadID, "thr_") {
		t.Fatalf("creating a thread: %d %v", status, th)
	}
	status, _, run := apiDo(t, "POST", base+"/threads/"+threadID+"/runs", admin, `{"agent":"helper","message":"What time is it?"}`)
	if status != 202 || run["job_id"] == nil {
		t.Fatalf("starting a run: %d %v", status, run)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, _, msgs := apiDo(t, "GET", base+"/threads/"+threadID+"/messages", admin, "")
		b, _ := json.Marshal(msgs)
		if strings.Contains(string(b), "It is now.") && strings.Contains(string(b), "What time is it?") && strings.Contains(string(b), `"tool_name":"get_current_time"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not answer: %s", b)
		}
	}

	_, _, empty := apiDo(t, "POST", base+"/threads", admin, `{"agent":"helper"}`)
	emptyID, _ := empty["id"].(string)
	_, _, bare := apiDo(t, "POST", base+"/threads", admin, `{}`)
	bareID, _ := bare["id"].(string)
	bad := []struct {
		name, path, body string
		status           int
		says             string
	}{
		{"a thread for an agent whose required variable is missing", "/threads", `{"agent":"regional"}`, 422, "body.variables.REGION"},
		{"a thread for an unknown agent", "/threads", `{"agent":"nobody"}`, 400, "no agent"},
		{"a run of an unknown agent", "/threads/" + threadID + "/runs", `{"agent":"nobody","message":"hi"}`, 400, "no agent"},
		{"a run on an unknown thread", "/threads/thr_nope/runs", `{"agent":"helper","message":"hi"}`, 404, "no thread"},
		{"a run naming no agent on a thread of none", "/threads/" + bareID + "/runs", `{"message":"hi"}`, 422, "body.agent"},
		{"a run without a message on a thread without any", "/threads/" + emptyID + "/runs", `{"agent":"helper"}`, 400, "body.message"},
	}
	for _, tt := range bad {
		status, ctype, p := apiDo(t, "POST", base+tt.path, admin, tt.body)
		b, _ := json.Marshal(p)
		if status != tt.status || ctype != "application/problem+json" || !strings.Contains(string(b), tt.says) {
			t.Errorf("%s: %d %s %s, want %d saying %q", tt.name, status, ctype, b, tt.status, tt.says)
		}
	}
	code, viewer, _ := runCLI(t, "", "keys", "create", "--db", db, "--name", "reader", "--role", "viewer")
	if code != exitOK {
		t.Fatal("keys create failed")
	}
	if status, _, _ := apiDo(t, "POST", base+"/threads/"+threadID+"/runs", strings.TrimSpace(viewer), `{"agent":"helper","message":"hi"}`); status != 403 {
		t.Errorf("a viewer starting a run: %d, want 403", status)
	}
}

// A run that waits for a person's confirmation is decided over the API: the call runs once
// approved, a second decision on it is a conflict, and a denial answers the model.
func TestServeDecisions(t *testing.T) {
	for _, b := range serveBackends(t) {
		t.Run(b.name, func(t *testing.T) { testServeDecisions(t, b.args(t)) })
	}
}

func testServeDecisions(t *testing.T, dbArgs []string) {
	dir := t.TempDir()
	script := filepath.Join(dir, "turns.yaml")
	agents := filepath.Join(dir, "agents")
	def := filepath.Join(dir, "charge.yaml")
	for name, text := range map[string]string{
		script:                              "turns:\n  - calls: [{name: charge, args: {amount: 5}}]\n  - text: Charged.\n",
		filepath.Join(agents, "payer.yaml"): "name: payer\nmodel: scripted:" + script + "\ntools: [charge]\n",
		def: "name: charge\ndescription: Charges an amount.\nrequires_confirmation: true\ncode: |\n  export default ({ amount }) => \"charged \" + amount\n" +
			"input_schema: {type: object, properties: {amount: {type: integer}}, required: [amount]}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errOut := runCLI(t, "", append([]string{"tools", "add", def}, dbArgs...)...); code != exitOK {
		t.Fatalf("tools add: %d %s", code, errOut)
	}
	endpoint, _, stderr := startServeWith(t, append(dbArgs, "--agents", agents)...)
	admin := firstKeyRE.FindString(stderr.String())
	base := strings.TrimSuffix(endpoint, "/mcp") + "/v1"

	run := func(t *testing.T) (threadID, callID string) {
		t.Helper()
		_, _, th := apiDo(t, "POST", base+"/threads", admin, `{"agent":"payer"}`)
		threadID, _ = th["id"].(string)
		// No agent named: the thread's runs.
		if status, _, out := apiDo(t, "POST", base+"/threads/"+threadID+"/runs", admin, `{"message":"pay"}`); status != 202 {
			t.Fatalf("the run: %d %v", status, out)
		}
		// The run pauses: the thread's state names the call that waits, and the thread reads
		// waiting, with the call it waits on.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, _, th := apiDo(t, "GET", base+"/threads/"+threadID, admin, "")
			var state struct {
				Status  string
				Pending *struct{ Call struct{ ID string } }
			}
			b, _ := json.Marshal(th["state"])
			if json.Unmarshal(b, &state) == nil && state.Status == "paused" && state.Pending != nil && th["status"] == "waiting" {
				var pending struct {
					Reason string
					Call   struct{ ID, Name string }
				}
				b, _ := json.Marshal(th["pending"])
				if json.Unmarshal(b, &pending) != nil || pending.Call.ID != state.Pending.Call.ID || pending.Call.Name != "charge" || pending.Reason == "" {
					t.Fatalf("a thread waiting on call %s shows pending %s", state.Pending.Call.ID, b)
				}
				return threadID, state.Pending.Call.ID
			}
			if time.Now().After(deadline) {
				t.Fatalf("the run did not pause for the confirmation: %v", th)
			}
		}
	}
	waitFor := func(t *testing.T, threadID, text string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, _, msgs := apiDo(t, "GET", base+"/threads/"+threadID+"/messages", admin, "")
			if b, _ := json.Marshal(msgs); strings.Contains(string(b), text) {
				return
			}
			if time.Now().After(deadline) {
				_, _, th := apiDo(t, "GET", base+"/threads/"+threadID, admin, "")
				_, _, msgs := apiDo(t, "GET", base+"/threads/"+threadID+"/messages", admin, "")
				b1, _ := json.Marshal(th)
				b2, _ := json.Marshal(msgs)
				t.Fatalf("no %q in the thread:\n%s\n%s\n%s", text, b1, b2, stderr.String())
			}
		}
	}

	t.Run("approve", func(t *testing.T) {
		threadID, callID := run(t)
		body := `{"agent":"payer","call_id":"` + callID + `","action":"approve"}`
		if status, _, out := apiDo(t, "POST", base+"/threads/"+threadID+"/decisions", admin, body); status != 202 {
			t.Fatalf("approve: %d %v", status, out)
		}
		if status, _, out := apiDo(t, "POST", base+"/threads/"+threadID+"/decisions", admin, body); status != 409 {
			t.Errorf("a second decision: %d %v, want 409", status, out)
		}
		waitFor(t, threadID, "charged 5")
		waitFor(t, threadID, "Charged.")
		// Decided and run: the thread waits on nothing any more.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, _, th := apiDo(t, "GET", base+"/threads/"+threadID, admin, "")
			if th["status"] == "idle" && th["pending"] == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the run finished the thread reads %v", th)
			}
		}
	})
	t.Run("a run needs an agent", func(t *testing.T) {
		// A thread of no agent: the run must name one, 422 naming the field when it does not.
		status, _, th := apiDo(t, "POST", base+"/threads", admin, `{}`)
		threadID, _ := th["id"].(string)
		if status != 201 || threadID == "" {
			t.Fatalf("a thread without an agent: %d %v", status, th)
		}
		status, ctype, out := apiDo(t, "POST", base+"/threads/"+threadID+"/runs", admin, `{"message":"pay"}`)
		if b := asJSON(out); status != 422 || ctype != "application/problem+json" || !strings.Contains(b, `"location":"body.agent"`) ||
			!strings.Contains(b, "has no agent") {
			t.Errorf("a run of no agent on a thread of none: %d %s, want 422 naming body.agent", status, b)
		}
		if status, _, out := apiDo(t, "POST", base+"/threads/thr_missing/runs", admin, `{"message":"pay"}`); status != 404 {
			t.Errorf("a run of no agent on a thread that does not exist: %d %v, want 404", status, out)
		}
	})
	t.Run("deny", func(t *testing.T) {
		threadID, callID := run(t)
		body := `{"agent":"payer","call_id":"` + callID + `","action":"deny","message":"not today"}`
		if status, _, out := apiDo(t, "POST", base+"/threads/"+threadID+"/decisions", admin, body); status != 202 {
			t.Fatalf("deny: %d %v", status, out)
		}
		waitFor(t, threadID, "not today")
	})
	t.Run("concurrent decisions", func(t *testing.T) {
		// Eight people approve at once: one decision is recorded, the others are told 409.
		threadID, callID := run(t)
		body := `{"agent":"payer","call_id":"` + callID + `","action":"approve"}`
		statuses := make(chan int, 8)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("POST", base+"/threads/"+threadID+"/decisions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+admin)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					statuses <- 0
					return
				}
				resp.Body.Close()
				statuses <- resp.StatusCode
			}()
		}
		wg.Wait()
		close(statuses)
		count := map[int]int{}
		for st := range statuses {
			count[st]++
		}
		if count[202] != 1 || count[409] != 7 {
			t.Fatalf("eight concurrent approvals: %v, want one 202 and seven 409", count)
		}
		waitFor(t, threadID, "charged 5")
		_, _, msgs := apiDo(t, "GET", base+"/threads/"+threadID+"/messages", admin, "")
		if b, _ := json.Marshal(msgs); strings.Count(string(b), `"role":"tool"`) != 1 {
			t.Errorf("the approved call ran more than once: %s", b)
		}
	})
	t.Run("bad decisions", func(t *testing.T) {
		threadID, callID := run(t)
		for _, tt := range []struct {
			body   string
			status int
		}{
			{`{"agent":"payer","call_id":"call_nope","action":"approve"}`, 409},
			{`{"agent":"payer","call_id":"` + callID + `","action":"maybe"}`, 422},
			{`{"agent":"nobody","call_id":"` + callID + `","action":"approve"}`, 400},
		} {
			if status, ctype, out := apiDo(t, "POST", base+"/threads/"+threadID+"/decisions", admin, tt.body); status != tt.status || ctype != "application/problem+json" {
				t.Errorf("%s: %d %v, want %d", tt.body, status, out, tt.status)
			}
		}
		// Edited arguments are checked against the tool's schema, each problem naming its
		// field, and nothing is decided: the call still waits.
		for body, field := range map[string]string{
			`{"agent":"payer","call_id":"` + callID + `","action":"edit","args":{"amount":"lots"}}`: "body.args.amount",
			`{"agent":"payer","call_id":"` + callID + `","action":"edit","args":{}}`:                "body.args.amount",
		} {
			status, _, out := apiDo(t, "POST", base+"/threads/"+threadID+"/decisions", admin, body)
			if b := asJSON(out); status != 400 || !strings.Contains(b, `"location":"`+field+`"`) {
				t.Errorf("%s: %d %s, want 400 naming %s", body, status, b, field)
			}
		}
		if status, _, out := apiDo(t, "GET", base+"/threads/"+threadID+"/pending", admin, ""); status != 200 || !strings.Contains(asJSON(out), callID) {
			t.Errorf("after refused edits the call no longer waits: %d %v", status, out)
		}
	})
}
