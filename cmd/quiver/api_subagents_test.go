package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sub-agents over the API, end to end against quiver serve on each backend: a resumable
// sub-agent deferred for want of its required variables (A7), provided through
// /v1/threads/{lead}/variables/{request} and run in the background, its answer waking the lead;
// and a handoff whose pending confirmation and later runs belong to the agent taking over.

// writeTestFiles writes files (path: content), making their directories.
func writeTestFiles(t testing.TB, files map[string]string) {
	t.Helper()
	for name, text := range files {
		if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// forEachServeBackend runs test as a subtest on each backend of serveBackends, with the flags
// that name its database.
func forEachServeBackend(t *testing.T, test func(t *testing.T, dbArgs []string)) {
	for _, b := range serveBackends(t) {
		t.Run(b.name, func(t *testing.T) { test(t, b.args(t)) })
	}
}

// scriptedAgentsDir returns a new agents directory, for --agents, and script, which names the
// file of a scripted model's turns: beside the directory, not in it, where every file is a
// definition.
func scriptedAgentsDir(t testing.TB) (agents string, script func(name string) string) {
	dir := t.TempDir()
	return filepath.Join(dir, "agents"), func(name string) string { return filepath.Join(dir, "scripts", name+".yaml") }
}

// serveAgentsAPI starts quiver serve on dbArgs with the definitions in agents, and returns the
// /v1 API's base URL and the admin key. quiver serve's log is shown if the test fails.
func serveAgentsAPI(t testing.TB, dbArgs []string, agents string) (base, admin string) {
	t.Helper()
	endpoint, _, stderr := startServeWith(t, append(dbArgs, "--agents", agents)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("quiver serve's log:\n%s", stderr.String())
		}
	})
	return strings.TrimSuffix(endpoint, "/mcp") + "/v1", firstKeyRE.FindString(stderr.String())
}

// newAPIThread creates a thread of agent over the API and returns its id.
func newAPIThread(t testing.TB, base, key, agent string) string {
	t.Helper()
	status, _, th := apiDo(t, "POST", base+"/threads", key, asJSON(map[string]string{"agent": agent}))
	id, _ := th["id"].(string)
	if status != 201 || id == "" {
		t.Fatalf("creating a thread of %s: %d %v", agent, status, th)
	}
	return id
}

// startAPIRun starts a run of agent with message on a thread over the API.
func startAPIRun(t testing.TB, base, key, threadID, agent, message string) {
	t.Helper()
	body := asJSON(map[string]string{"agent": agent, "message": message})
	if status, _, out := apiDo(t, "POST", base+"/threads/"+threadID+"/runs", key, body); status != 202 {
		t.Fatalf("a run of %s on %s: %d %v", agent, threadID, status, out)
	}
}

// asJSON is v as JSON text, for messages and substring checks.
func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// waitUntil polls cond every 25 ms until it holds, failing after limit with what cond last said.
func waitUntil(t testing.TB, what string, limit time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last seen: %s", what, limit, last)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// apiMessage is a message as GET /v1/threads/{id}/messages returns it.
type apiMessage struct {
	Seq        int64  `json:"seq"`
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	ToolName   string `json:"tool_name"`
	ToolCalls  []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"tool_calls"`
	Result *struct {
		Status string          `json:"status"`
		Text   string          `json:"result"`
		Value  json.RawMessage `json:"value"`
		Error  string          `json:"error"`
		Code   string          `json:"code"`
	} `json:"result"`
}

// threadMessages reads a thread's messages (the last 1000) over the API, and their JSON.
func threadMessages(t testing.TB, base, key, threadID string) ([]apiMessage, string) {
	t.Helper()
	status, _, out := apiDo(t, "GET", base+"/threads/"+threadID+"/messages?limit=1000", key, "")
	if status != 200 {
		t.Fatalf("GET the messages of %s: %d %v", threadID, status, out)
	}
	raw := asJSON(out)
	var page struct {
		Messages []apiMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(raw), &page); err != nil {
		t.Fatal(err)
	}
	return page.Messages, raw
}

// apiThread is a thread as the API returns it.
type apiThread struct {
	ID        string   `json:"id"`
	AgentID   string   `json:"agent_id"`
	ParentID  string   `json:"parent_id"`
	Tags      []string `json:"tags"`
	Status    string   `json:"status"`
	Resumable bool     `json:"resumable"`
	Blocking  bool     `json:"blocking"`
}

func listThreads(t testing.TB, base, key, query string) []apiThread {
	t.Helper()
	status, _, out := apiDo(t, "GET", base+"/threads?limit=100"+query, key, "")
	if status != 200 {
		t.Fatalf("GET /v1/threads%s: %d %v", query, status, out)
	}
	var page struct {
		Threads []apiThread `json:"threads"`
	}
	if err := json.Unmarshal([]byte(asJSON(out)), &page); err != nil {
		t.Fatal(err)
	}
	return page.Threads
}

// seqOf is a message event's id: the message's seq.
func seqOf(e sseEvent) int64 {
	n, _ := strconv.ParseInt(e.ID, 10, 64)
	return n
}

// problemLocations lists the locations of a problem's fields.
func problemLocations(p map[string]any) []string {
	var out []string
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		if m, ok := e.(map[string]any); ok {
			loc, _ := m["location"].(string)
			out = append(out, loc)
		}
	}
	return out
}

// createJSTool stores a JavaScript function and a server tool of the workspace that runs it.
func createJSTool(t testing.TB, base, key, name, code, input string, confirm bool) {
	t.Helper()
	status, _, fn := apiDo(t, "POST", base+"/functions", key, `{"name":"`+name+`"}`)
	fnID, _ := fn["id"].(string)
	if status != 201 || fnID == "" {
		t.Fatalf("creating function %s: %d %v", name, status, fn)
	}
	body := asJSON(map[string]any{"code": code, "input_schema": json.RawMessage(input)})
	if status, _, v := apiDo(t, "POST", base+"/functions/"+fnID+"/versions", key, body); status != 201 {
		t.Fatalf("a version of function %s: %d %v", name, status, v)
	}
	body = asJSON(map[string]any{"name": name, "target": "server", "function_id": fnID, "input_schema": json.RawMessage(input),
		"requires_confirmation": confirm})
	if status, _, tool := apiDo(t, "POST", base+"/tools", key, body); status != 201 {
		t.Fatalf("creating tool %s: %d %v", name, status, tool)
	}
}

// dbArgsPath returns the database flag's value: the SQLite file, or the PostgreSQL DSN.
func dbArgsPath(dbArgs []string) (sqlitePath, dsn string) {
	for i := 0; i+1 < len(dbArgs); i++ {
		switch dbArgs[i] {
		case "--db":
			sqlitePath = dbArgs[i+1]
		case "--postgres":
			dsn = dbArgs[i+1]
		}
	}
	return sqlitePath, dsn
}

// rawVariable is a row of the variables table as it is stored.
type rawVariable struct {
	Name, Value    string
	Secret, Scoped bool
}

// rawVariables reads the variables table of the database straight, without the store: what
// is on disk for ownerID's thread, and how many rows of the whole table hold needle.
func rawVariables(t testing.TB, dbArgs []string, ownerID, needle string) ([]rawVariable, int) {
	t.Helper()
	path, dsn := dbArgsPath(dbArgs)
	var out []rawVariable
	var holding int
	ctx := context.Background()
	if path != "" {
		db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.QueryContext(ctx, `SELECT name, value, secret, scoped FROM variables WHERE layer = 'thread' AND owner_id = ? ORDER BY name`, ownerID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var v rawVariable
			var secret, scoped int
			if err := rows.Scan(&v.Name, &v.Value, &secret, &scoped); err != nil {
				t.Fatal(err)
			}
			v.Secret, v.Scoped = secret == 1, scoped == 1
			out = append(out, v)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM variables WHERE instr(value, ?) > 0`, needle).Scan(&holding); err != nil {
			t.Fatal(err)
		}
		return out, holding
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT name, value, secret, scoped FROM variables WHERE layer = 'thread' AND owner_id = $1 ORDER BY name`, ownerID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v rawVariable
		if err := rows.Scan(&v.Name, &v.Value, &v.Secret, &v.Scoped); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM variables WHERE strpos(value, $1) > 0`, needle).Scan(&holding); err != nil {
		t.Fatal(err)
	}
	return out, holding
}

// A7 over HTTP: a lead's subagent_create of a resumable sub-agent whose required variables (a
// scoped secret and a text) are not set answers subagent_env_required with a request; the
// request is read and answered at its endpoint under the workspace's keys only; the sub-agent
// starts once both are given, its tool reads the secret (masked in what it returns, sealed
// at rest, in no message of any thread), and its answer wakes the lead.
func TestServeSubagentDeferred(t *testing.T) {
	forEachServeBackend(t, testServeSubagentDeferred)
}

func testServeSubagentDeferred(t *testing.T, dbArgs []string) {
	agents, script := scriptedAgentsDir(t)
	writeTestFiles(t, map[string]string{
		script("lead"): `turns:
  - calls:
      - {name: subagent_create, args: {agent: deployer, name: prod-deploy, message: Deploy release 42.}}
  - expect: {result_is_error: true, result_contains: DEPLOY_TOKEN}
    text: The deployer waits for its variables.
  - text: The deployer has reported back.
`,
		script("deployer"): `turns:
  - calls: [{name: read_deploy_token, args: {}}]
  - expect: {result_contains: "[REDACTED]"}
    text: Deployed release 42 to staging.
`,
		filepath.Join(agents, "lead.yaml"): `name: lead
model: scripted:` + script("lead") + `
system: You run deployments through sub-agents.
tools: [read_deploy_token]          # a child calls only what its parent may too (P2)
subagents:
  - {name: deployer, blocking: false, resumable: {parentCommunication: implicit}}
`,
		filepath.Join(agents, "deployer.yaml"): `name: deployer
type: dual_ai
description: Deploys releases.
model: scripted:` + script("deployer") + `
system: You deploy releases.
tools: [read_deploy_token]
variables:
  - {name: DEPLOY_TOKEN, type: secret, required: true, scoped: true, description: the deploy key}
  - {name: DEPLOY_TARGET, type: text, required: true, description: where to deploy}
`,
	})
	base, admin := serveAgentsAPI(t, dbArgs, agents)

	// The deployer's tool: it reads the token through the variables it declares and returns
	// it, carelessly; masking must hide it.
	createJSTool(t, base, admin, "read_deploy_token",
		`export default (args, state) => ({ token: state.env("DEPLOY_TOKEN"), target: state.env("DEPLOY_TARGET") })`,
		`{"type":"object","description":"Reads the deploy token and target.","properties":{},`+
			`"variables":[{"name":"DEPLOY_TOKEN","type":"secret","required":true},{"name":"DEPLOY_TARGET","type":"text"}]}`, false)

	leadID := newAPIThread(t, base, admin, "lead")
	events := openEvents(t, base+"/threads/"+leadID+"/events", admin, "")
	startAPIRun(t, base, admin, leadID, "lead", "Ship release 42.")

	// The call's result: subagent_env_required, naming the request and its endpoint.
	var created apiMessage
	waitUntil(t, "the lead's first run to end", 20*time.Second, func() (bool, string) {
		msgs, raw := threadMessages(t, base, admin, leadID)
		for _, m := range msgs {
			if m.Role == "tool" && m.ToolName == "subagent_create" {
				created = m
			}
		}
		return created.Result != nil && slices.ContainsFunc(msgs, func(m apiMessage) bool {
			return m.Role == "assistant" && m.Content == "The deployer waits for its variables."
		}), raw
	})
	if created.Result.Status != "error" || created.Result.Code != "subagent_env_required" {
		t.Fatalf("subagent_create's result: %+v, want an error subagent_env_required", created.Result)
	}
	var req struct {
		RequestID string   `json:"request_id"`
		Endpoint  string   `json:"endpoint"`
		Missing   []string `json:"missing"`
	}
	if err := json.Unmarshal(created.Result.Value, &req); err != nil || !strings.HasPrefix(req.RequestID, "thr_") {
		t.Fatalf("the result's value %s: %v", created.Result.Value, err)
	}
	if want := "/v1/threads/" + leadID + "/variables/" + req.RequestID; req.Endpoint != want {
		t.Errorf("endpoint %q, want %q", req.Endpoint, want)
	}
	if got := slices.Sorted(slices.Values(req.Missing)); !slices.Equal(got, []string{"DEPLOY_TARGET", "DEPLOY_TOKEN"}) {
		t.Errorf("missing %v, want DEPLOY_TARGET and DEPLOY_TOKEN", req.Missing)
	}
	if !strings.Contains(created.Result.Error, req.Endpoint) || !strings.Contains(created.Result.Error, "DEPLOY_TOKEN") {
		t.Errorf("the error the model reads does not say where to provide what: %q", created.Result.Error)
	}
	childID := req.RequestID
	reqURL := strings.TrimSuffix(base, "/v1") + req.Endpoint

	// The request, as its endpoint shows it.
	type requested struct {
		RequestID string `json:"request_id"`
		ParentID  string `json:"parent_id"`
		Agent     string `json:"agent"`
		Name      string `json:"name"`
		Missing   []struct {
			Name        string `json:"name"`
			Secret      bool   `json:"secret"`
			Description string `json:"description"`
		} `json:"missing"`
		Started bool `json:"started"`
	}
	readRequest := func(key string) requested {
		t.Helper()
		status, _, out := apiDo(t, "GET", reqURL, key, "")
		if status != 200 {
			t.Fatalf("GET %s: %d %v", req.Endpoint, status, out)
		}
		var r requested
		if err := json.Unmarshal([]byte(asJSON(out)), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	missingNames := func(r requested) []string {
		var out []string
		for _, m := range r.Missing {
			out = append(out, m.Name)
		}
		slices.Sort(out)
		return out
	}
	r := readRequest(admin)
	if r.RequestID != childID || r.ParentID != leadID || r.Agent != "deployer" || r.Name != "prod-deploy" || r.Started {
		t.Errorf("the request: %+v", r)
	}
	if got := missingNames(r); !slices.Equal(got, []string{"DEPLOY_TARGET", "DEPLOY_TOKEN"}) {
		t.Errorf("the request's missing variables: %v", got)
	}
	for _, m := range r.Missing {
		want := map[string]struct {
			secret bool
			desc   string
		}{"DEPLOY_TOKEN": {true, "the deploy key"}, "DEPLOY_TARGET": {false, "where to deploy"}}[m.Name]
		if m.Secret != want.secret || m.Description != want.desc {
			t.Errorf("missing %s: secret %v, description %q; want %v, %q", m.Name, m.Secret, m.Description, want.secret, want.desc)
		}
	}
	if status, _, p := apiDo(t, "GET", base+"/threads/"+leadID+"/variables/thr_nosuchrequest", admin, ""); status != 404 || p["code"] != "not_found" {
		t.Errorf("GET an unknown request: %d %v, want 404", status, p)
	}

	// Other keys: a viewer of the workspace reads but does not provide; a key of another
	// workspace sees nothing at all.
	status, _, vk := apiDo(t, "POST", base+"/keys", admin, `{"role":"viewer","name":"dashboard"}`)
	viewer, _ := vk["secret"].(string)
	if status != 201 || viewer == "" {
		t.Fatalf("creating a viewer key: %d %v", status, vk)
	}
	status, _, ws := apiDo(t, "POST", base+"/workspaces", admin, `{"name":"elsewhere"}`)
	other, _ := ws["secret"].(string)
	if status != 201 || other == "" {
		t.Fatalf("creating another workspace: %d %v", status, ws)
	}
	if status, _, p := apiDo(t, "GET", reqURL, other, ""); status != 404 || p["code"] != "not_found" {
		t.Errorf("GET the request with another workspace's key: %d %v, want 404", status, p)
	}
	if status, _, p := apiDo(t, "POST", reqURL, other, `{"values":{"DEPLOY_TARGET":"x"}}`); status != 404 {
		t.Errorf("POST to the request with another workspace's key: %d %v, want 404", status, p)
	}
	if got := readRequest(viewer); got.RequestID != childID || got.Started {
		t.Errorf("the request as a viewer reads it: %+v", got)
	}
	if status, _, p := apiDo(t, "POST", reqURL, viewer, `{"values":{"DEPLOY_TARGET":"staging"}}`); status != 403 || p["code"] != "forbidden" {
		t.Errorf("POST with a viewer's key: %d %v, want 403", status, p)
	}
	storedNames := func() []string {
		t.Helper()
		status, _, out := apiDo(t, "GET", base+"/threads/"+childID+"/variables", admin, "")
		if status != 200 {
			t.Fatalf("GET the sub-agent's variables: %d %v", status, out)
		}
		var names []string
		list, _ := out["variables"].([]any)
		for _, v := range list {
			if m, ok := v.(map[string]any); ok {
				n, _ := m["name"].(string)
				names = append(names, n)
			}
		}
		slices.Sort(names)
		return names
	}
	if got := storedNames(); len(got) != 0 {
		t.Fatalf("after refused requests the sub-agent has variables %v", got)
	}

	// A name the request does not ask for: refused, naming it, and nothing of the body stored.
	status, _, p := apiDo(t, "POST", reqURL, admin, `{"values":{"DEPLOY_TARGET":"staging","NOT_ASKED":"x"}}`)
	if status != 400 || !slices.Contains(problemLocations(p), "body.values.NOT_ASKED") {
		t.Errorf("POST with an unknown variable: %d %v, want 400 naming body.values.NOT_ASKED", status, p)
	}
	if got := storedNames(); len(got) != 0 {
		t.Errorf("a refused POST stored %v", got)
	}

	// One of the two: stored, and the answer names the other.
	status, _, p = apiDo(t, "POST", reqURL, admin, `{"values":{"DEPLOY_TARGET":"staging"}}`)
	if status != 400 || p["code"] != "missing_variables" || !strings.Contains(asJSON(p), "DEPLOY_TOKEN") {
		t.Errorf("POST with one of two: %d %v, want 400 missing_variables naming DEPLOY_TOKEN", status, p)
	}
	if detail, _ := p["detail"].(string); strings.Contains(detail, "DEPLOY_TARGET") {
		t.Errorf("POST with one of two says DEPLOY_TARGET is still needed: %q", detail)
	}
	if got := storedNames(); !slices.Equal(got, []string{"DEPLOY_TARGET"}) {
		t.Errorf("after the first value the sub-agent has variables %v, want DEPLOY_TARGET", got)
	}
	r = readRequest(admin)
	if r.Started {
		t.Errorf("the sub-agent started with a variable missing: %+v", r)
	}
	if got := missingNames(r); !slices.Equal(got, []string{"DEPLOY_TOKEN"}) {
		t.Errorf("after DEPLOY_TARGET was given the request still asks for %v, want DEPLOY_TOKEN only", got)
	}
	if msgs, _ := threadMessages(t, base, admin, childID); len(msgs) != 0 {
		t.Errorf("the deferred sub-agent has messages before it started: %+v", msgs)
	}

	// The last one: the sub-agent starts at once, in the background.
	token := "dtok-" + strings.ToLower(rand.Text())
	status, _, out := apiDo(t, "POST", reqURL, admin, `{"values":{"DEPLOY_TOKEN":"`+token+`"}}`)
	if status != 202 || out["started"] != true || out["request_id"] != childID {
		t.Fatalf("POST the last variable: %d %v, want 202 started", status, out)
	}
	if strings.Contains(asJSON(out), token) {
		t.Errorf("the answer to the POST shows the secret: %v", out)
	}
	if status, _, p := apiDo(t, "POST", reqURL, admin, `{"values":{"DEPLOY_TOKEN":"another"}}`); status != 409 || p["code"] != "conflict" {
		t.Errorf("a second POST after the start: %d %v, want 409 conflict", status, p)
	}

	// The sub-agent's run: its tool read the secret, masked in its result.
	waitUntil(t, "the sub-agent's answer", 30*time.Second, func() (bool, string) {
		msgs, raw := threadMessages(t, base, admin, childID)
		return slices.ContainsFunc(msgs, func(m apiMessage) bool {
			return m.Role == "assistant" && m.Content == "Deployed release 42 to staging."
		}), raw
	})
	msgs, raw := threadMessages(t, base, admin, childID)
	if !strings.Contains(raw, "Deploy release 42.") {
		t.Errorf("the sub-agent's first message is not the one subagent_create gave: %s", raw)
	}
	var read *apiMessage
	for i, m := range msgs {
		if m.Role == "tool" && m.ToolName == "read_deploy_token" {
			read = &msgs[i]
		}
	}
	if read == nil || read.Result == nil || read.Result.Status != "success" {
		t.Fatalf("the sub-agent's tool result: %s", raw)
	}
	var value struct{ Token, Target string }
	if err := json.Unmarshal(read.Result.Value, &value); err != nil || value.Token != "[REDACTED]" || value.Target != "staging" {
		t.Errorf("the tool's value %s: want the token masked and the target staging (%v)", read.Result.Value, err)
	}

	// The answer is queued to the lead, which is woken: the delivery, then a further turn.
	label := `[sub-agent deployer ("prod-deploy") (ref ` + childID + `) finished]`
	waitUntil(t, "the lead woken by the sub-agent's answer", 30*time.Second, func() (bool, string) {
		msgs, raw := threadMessages(t, base, admin, leadID)
		at := slices.IndexFunc(msgs, func(m apiMessage) bool { return m.Role == "system" && strings.HasPrefix(m.Content, label) })
		return at >= 0 && slices.ContainsFunc(msgs[at:], func(m apiMessage) bool {
			return m.Role == "assistant" && m.Content == "The deployer has reported back."
		}), raw
	})
	msgs, raw = threadMessages(t, base, admin, leadID)
	delivered := 0
	for _, m := range msgs {
		if m.Role == "system" && strings.HasPrefix(m.Content, label) {
			delivered++
			if !strings.Contains(m.Content, "Deployed release 42 to staging.") {
				t.Errorf("the delivered message does not carry the answer: %q", m.Content)
			}
		}
	}
	if delivered != 1 {
		t.Errorf("the answer was delivered %d times: %s", delivered, raw)
	}

	// The lead's event stream has the same messages: the delivery and the turn after it.
	ev, _ := next(t, events, "the delivery on the lead's stream", func(e sseEvent) bool {
		return e.Event == "message" && strings.Contains(e.Data, "[sub-agent deployer") && strings.Contains(e.Data, childID)
	})
	after, _ := next(t, events, "the lead's turn after the delivery", func(e sseEvent) bool {
		return e.Event == "message" && strings.Contains(e.Data, "The deployer has reported back.")
	})
	if seqOf(after) <= seqOf(ev) {
		t.Errorf("the lead's turn (event %s) came before the delivery (event %s)", after.ID, ev.ID)
	}
	if !strings.Contains(ev.Data, `"role":"system"`) {
		t.Errorf("the delivery's event: %s", ev.Data)
	}
	again := openEvents(t, base+"/threads/"+leadID+"/events", admin, "")
	seen := ""
	next(t, again, "the lead's last message on a new stream", func(e sseEvent) bool {
		seen += e.Data
		return e.Event == "message" && strings.Contains(e.Data, "The deployer has reported back.")
	})
	if strings.Contains(seen, token) {
		t.Errorf("the lead's event stream shows the secret")
	}

	// The tree, as the API lists it: the child names its parent and carries its name tag.
	var child *apiThread
	all := listThreads(t, base, admin, "")
	for i, th := range all {
		if th.ID == childID {
			child = &all[i]
		}
	}
	if child == nil {
		t.Fatalf("the threads listing has no %s: %+v", childID, all)
	}
	if child.ParentID != leadID || child.AgentID != "deployer" || !slices.Contains(child.Tags, "name:prod-deploy") || !child.Resumable {
		t.Errorf("the sub-agent's thread in the listing: %+v", *child)
	}
	if tagged := listThreads(t, base, admin, "&tag=name:prod-deploy"); len(tagged) != 1 || tagged[0].ID != childID {
		t.Errorf("the threads tagged name:prod-deploy: %+v", tagged)
	}
	status, _, one := apiDo(t, "GET", base+"/threads/"+childID, admin, "")
	if status != 200 || one["parent_id"] != leadID {
		t.Errorf("GET the sub-agent's thread: %d %v", status, one)
	}
	if status, _, lead := apiDo(t, "GET", base+"/threads/"+leadID, admin, ""); status != 200 || lead["parent_id"] != nil {
		t.Errorf("GET the lead's thread: %d %v (a root has no parent_id)", status, lead)
	}
	status, _, reg := apiDo(t, "GET", base+"/threads/"+leadID+"/children", admin, "")
	var registry struct {
		Children []struct {
			Ref, Name, Agent string
			Resumable        bool
		}
	}
	if err := json.Unmarshal([]byte(asJSON(reg)), &registry); err != nil || status != 200 || len(registry.Children) != 1 ||
		registry.Children[0].Ref != childID || registry.Children[0].Name != "prod-deploy" || registry.Children[0].Agent != "deployer" ||
		!registry.Children[0].Resumable {
		t.Errorf("the lead's children registry: %d %v", status, reg)
	}
	if status, _, p := apiDo(t, "GET", base+"/threads/"+childID, other, ""); status != 404 {
		t.Errorf("GET the sub-agent's thread with another workspace's key: %d %v", status, p)
	}

	// The secret: in no message of any thread, and sealed at rest.
	for _, th := range all {
		if _, raw := threadMessages(t, base, admin, th.ID); strings.Contains(raw, token) {
			t.Errorf("thread %s (%s) shows the secret in its messages", th.ID, th.AgentID)
		}
	}
	if status, _, vs := apiDo(t, "GET", base+"/threads/"+childID+"/variables", admin, ""); status != 200 || strings.Contains(asJSON(vs), token) {
		t.Errorf("GET the sub-agent's variables: %d, shows the secret: %v", status, strings.Contains(asJSON(vs), token))
	}
	rows, holding := rawVariables(t, dbArgs, childID, token)
	if holding != 0 {
		t.Errorf("%d rows of the variables table hold the secret in plain text", holding)
	}
	byName := map[string]rawVariable{}
	for _, v := range rows {
		byName[v.Name] = v
	}
	if v, ok := byName["DEPLOY_TOKEN"]; !ok || !v.Secret || !v.Scoped || v.Value == "" || strings.Contains(v.Value, token) {
		t.Errorf("DEPLOY_TOKEN as stored: %+v (present %v), want secret, scoped and sealed", v, ok)
	}
	if v, ok := byName["DEPLOY_TARGET"]; !ok || v.Secret || !v.Scoped || v.Value != "staging" {
		t.Errorf("DEPLOY_TARGET as stored: %+v (present %v), want a scoped text", v, ok)
	}
	if path, _ := dbArgsPath(dbArgs); path != "" {
		// Nowhere in the database's files either (the WAL, the call journal beside it).
		_ = filepath.WalkDir(filepath.Dir(path), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(token)) {
				t.Errorf("%s holds the secret in plain text", p)
			}
			return nil
		})
	}
}

// A handoff over the API: front hands the thread to billing (an ai_human agent exposed as a
// tool), whose tool waits for a confirmation. The pending call is billing's; a decision that
// names no agent resumes billing, and a later run on the thread is billing's too.
func TestServeSubagentHandoff(t *testing.T) {
	forEachServeBackend(t, testServeSubagentHandoff)
}

func testServeSubagentHandoff(t *testing.T, dbArgs []string) {
	agents, script := scriptedAgentsDir(t)
	writeTestFiles(t, map[string]string{
		// front has one turn: a run of front's after the handoff would exhaust its script.
		script("front"): `turns:
  - calls: [{name: billing, args: {message: A refund for order 7.}}]
`,
		// billing's model plays on from the conversation's turns: the first is front's.
		script("billing"): `turns:
  - text: (front's turn)
  - expect: {tools: [refund]}
    calls: [{name: refund, args: {order: 7}}]
  - expect: {result_contains: refunded}
    text: Order 7 is refunded.
  - expect: {user_contains: receipt}
    text: Billing here again; the receipt is on its way.
`,
		filepath.Join(agents, "front.yaml"): `name: front
model: scripted:` + script("front") + `
system: You greet customers and pass them on.
tools: [billing]
`,
		filepath.Join(agents, "billing.yaml"): `name: billing
type: ai_human
expose_as_tool: true
description: Handles refunds.
model: scripted:` + script("billing") + `
system: You handle refunds.
tools: [refund]
`,
	})
	base, admin := serveAgentsAPI(t, dbArgs, agents)
	createJSTool(t, base, admin, "refund", `export default ({ order }) => ({ refunded: order })`,
		`{"type":"object","description":"Refunds an order.","properties":{"order":{"type":"integer"}},"required":["order"]}`, true)

	threadID := newAPIThread(t, base, admin, "front")
	events := openEvents(t, base+"/threads/"+threadID+"/events", admin, "")
	startAPIRun(t, base, admin, threadID, "front", "I want my money back.")
	paused, _ := next(t, events, "the pause on billing's confirmation", func(e sseEvent) bool {
		return e.Event == "state" && strings.Contains(e.Data, `"reason":"confirmation"`)
	})
	var state struct {
		Pending struct {
			Call struct{ ID, Name string }
		}
	}
	if err := json.Unmarshal([]byte(paused.Data), &state); err != nil || state.Pending.Call.Name != "refund" {
		t.Fatalf("the paused state: %s (%v)", paused.Data, err)
	}
	callID := state.Pending.Call.ID
	// The workspace's inbox lists it too, with the agent that has the thread.
	status, _, inbox := apiDo(t, "GET", base+"/pending", admin, "")
	if b := asJSON(inbox); status != 200 || !strings.Contains(b, callID) || !strings.Contains(b, `"thread_id":"`+threadID+`"`) || !strings.Contains(b, `"agent":"billing"`) {
		t.Fatalf("GET /v1/pending: %d %s", status, b)
	}
	if status, _, sess := apiDo(t, "GET", base+"/session", admin, ""); status != 200 || sess["role"] != "admin" {
		t.Fatalf("GET /v1/session: %d %v", status, sess)
	}
	status, _, pending := apiDo(t, "GET", base+"/threads/"+threadID+"/pending", admin, "")
	if b := asJSON(pending); status != 200 || !strings.Contains(b, callID) || !strings.Contains(b, `"name":"refund"`) || !strings.Contains(b, "confirmation") {
		t.Fatalf("GET pending: %d %s", status, b)
	}
	msgs, raw := threadMessages(t, base, admin, threadID)
	if !slices.ContainsFunc(msgs, func(m apiMessage) bool {
		return m.Role == "tool" && m.ToolName == "billing" && m.Result != nil && strings.Contains(m.Result.Text, "handed over to billing")
	}) {
		t.Errorf("no handoff result on the thread: %s", raw)
	}

	// The decision names no agent: the thread's, billing since the handoff, resumes.
	if status, _, out := apiDo(t, "POST", base+"/threads/"+threadID+"/decisions", admin,
		`{"call_id":"`+callID+`","action":"approve"}`); status != 202 {
		t.Fatalf("approving without body.agent: %d %v, want 202", status, out)
	}
	next(t, events, "billing's answer after the approval", func(e sseEvent) bool {
		return e.Event == "message" && strings.Contains(e.Data, "Order 7 is refunded.")
	})
	next(t, events, "the idle state after the run", func(e sseEvent) bool {
		return e.Event == "state" && strings.Contains(e.Data, `"status":"idle"`) && strings.Contains(e.Data, `"status":"finished"`)
	})
	msgs, raw = threadMessages(t, base, admin, threadID)
	if !slices.ContainsFunc(msgs, func(m apiMessage) bool {
		return m.Role == "tool" && m.ToolName == "refund" && m.Result != nil && m.Result.Status == "success" && strings.Contains(string(m.Result.Value), `"refunded":7`)
	}) {
		t.Errorf("the refund did not run once approved: %s", raw)
	}
	if status, _, p := apiDo(t, "POST", base+"/threads/"+threadID+"/decisions", admin,
		`{"call_id":"`+callID+`","action":"approve"}`); status != 409 || p["code"] != "not_pending" {
		t.Errorf("a second decision: %d %v, want 409 not_pending", status, p)
	}

	// A new run on the thread is billing's, whichever agent the request names.
	// The thread turns idle a moment before River records the run's job as completed; until
	// then a new run is refused as run_queued, which a client tries again.
	tries := 0
	waitUntil(t, "a new run accepted", 10*time.Second, func() (bool, string) {
		tries++
		status, _, out := apiDo(t, "POST", base+"/threads/"+threadID+"/runs", admin, `{"agent":"front","message":"And a receipt, please."}`)
		if status != 202 && (status != 409 || out["code"] != "run_queued") {
			t.Fatalf("a new run: %d %v", status, out)
		}
		return status == 202, asJSON(out)
	})
	if tries > 1 {
		t.Logf("the new run was refused as run_queued %d time(s) after the thread was idle", tries-1)
	}
	next(t, events, "billing's answer to the new run", func(e sseEvent) bool {
		return e.Event == "message" && strings.Contains(e.Data, "Billing here again; the receipt is on its way.")
	})
	status, _, one := apiDo(t, "GET", base+"/threads/"+threadID, admin, "")
	if status != 200 || one["parent_id"] != nil {
		t.Errorf("GET the thread: %d %v (a handoff makes no child thread)", status, one)
	}
	if kids := listThreads(t, base, admin, ""); len(kids) != 1 {
		t.Errorf("the workspace has %d threads after a handoff, want 1: %+v", len(kids), kids)
	}
}
