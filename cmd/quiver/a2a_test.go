package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type greeter struct{}

func (greeter) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return q.Write(ctx, a2asdk.NewMessage(a2asdk.MessageRoleAgent, a2asdk.TextPart{Text: "Greetings from the other platform."}))
}

func (greeter) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error { return nil }

// TestA2AAgentsFromTheConfiguration: an agent of the configuration's a2a block is a tool of
// quiver call (recorded, with a key from the environment) and of quiver serve over MCP; one
// that requires confirmation waits for it.
func TestA2AAgentsFromTheConfiguration(t *testing.T) {
	mux := http.NewServeMux()
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Key") != "agent-key-0123456789" {
			http.Error(w, "a key, please", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	defer agent.Close()
	card := &a2asdk.AgentCard{Name: "Greeter", Description: "Greets.", URL: agent.URL + "/invoke", Version: "1",
		PreferredTransport: a2asdk.TransportProtocolJSONRPC, DefaultInputModes: []string{"text"}, DefaultOutputModes: []string{"text"}}
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(greeter{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))

	t.Setenv("GREETER_KEY", "agent-key-0123456789")
	cfg := filepath.Join(t.TempDir(), "quiver.yaml")
	doc := "a2a:\n  agents:\n    - {name: greeter, url: '" + agent.URL + "', headers: {X-Key: '${GREETER_KEY}'}}\n" +
		"    - {name: careful_greeter, url: '" + agent.URL + "', headers: {X-Key: '${GREETER_KEY}'}, requires_confirmation: true}\n"
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv(configEnv, cfg)
	code, out, errOut := runOwn(t, "", "call", "greeter", "--args", `{"message":"hello"}`)
	if code != exitOK || !strings.Contains(out, "Greetings from the other platform.") || strings.Contains(out+errOut, "agent-key-0123456789") {
		t.Fatalf("call: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runOwn(t, "", "threads", "list")
	if code != exitOK || !strings.Contains(out, "cli") {
		t.Errorf("the call is not recorded: exit %d\n%s", code, out)
	}
	code, out, _ = runOwn(t, "", "call", "careful_greeter", "--args", `{"message":"hello"}`)
	if code != exitError || !strings.Contains(out, `"code": "confirmation_required"`) {
		t.Errorf("a confirmed agent called without confirmation: exit %d\n%s", code, out)
	}

	endpoint, _, _ := startServe(t, "--config", cfg)
	cs := connectServe(t, endpoint)
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "greeter", Arguments: map[string]any{"message": "hi"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "Greetings from the other platform.") {
		t.Fatalf("over MCP: %+v %v", res, err)
	}
}

// TestServeAgentsOverA2A: quiver serve serves its exposed agents as A2A agents: the card at
// the well-known path, message/send (blocking) a run whose answer is the task's, tasks/get the
// thread read again, streaming, a key required, another workspace's or an unknown task not
// found; and Quiver's own a2a block imports the served agent as a tool of another command.
func TestServeAgentsOverA2A(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "turns.yaml")
	agents := filepath.Join(dir, "agents")
	writeTestFiles(t, map[string]string{
		script: "turns:\n  - text: It is sunny in Oslo.\n  - text: Still sunny.\n  - text: Sunny again.\n  - text: Sunny as ever.\n",
		filepath.Join(agents, "forecaster.yaml"): "name: forecaster\ndescription: Tells the weather.\nmodel: scripted:" + script +
			"\nexpose_as_tool: true\n",
		filepath.Join(agents, "private.yaml"): "name: private\nmodel: scripted:" + script + "\n",
	})
	endpoint, _, stderr := startServeWith(t, "--db", filepath.Join(dir, "q.db"), "--agents", agents)
	key := firstKeyRE.FindString(stderr.String())
	base := strings.TrimSuffix(endpoint, "/mcp")
	ctx := context.Background()

	card, err := agentcard.NewResolver(http.DefaultClient).Resolve(ctx, base+"/a2a/forecaster")
	if err != nil {
		t.Fatal(err)
	}
	if card.Name != "forecaster" || card.Description != "Tells the weather." || card.URL != base+"/a2a/forecaster" || len(card.SecuritySchemes) != 1 {
		t.Fatalf("card: %+v", card)
	}
	if _, err := agentcard.NewResolver(http.DefaultClient).Resolve(ctx, base+"/a2a/private"); err == nil {
		t.Error("an agent not exposed as a tool has a card")
	}
	client := func(key string) *a2aclient.Client { return a2aClient(t, base+"/a2a/forecaster", key) }
	c := client(key)
	res, err := c.SendMessage(ctx, &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "Weather?"})})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2asdk.Task)
	if !ok || task.Status.State != a2asdk.TaskStateCompleted || !strings.HasPrefix(string(task.ID), "thr_") ||
		len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].(a2asdk.TextPart).Text != "It is sunny in Oslo." {
		t.Fatalf("message/send: %#v", res)
	}
	got, err := c.GetTask(ctx, &a2asdk.TaskQueryParams{ID: task.ID})
	if err != nil || got.Status.State != a2asdk.TaskStateCompleted {
		t.Fatalf("tasks/get: %+v %v", got, err)
	}
	// The task's context is the thread: the API shows the run's messages on it.
	status, _, msgs := apiDo(t, "GET", base+"/v1/threads/"+task.ContextID+"/messages", key, "")
	if b, _ := json.Marshal(msgs); status != 200 || !strings.Contains(string(b), "Weather?") || !strings.Contains(string(b), "It is sunny in Oslo.") {
		t.Errorf("the thread of the task: %d %s", status, b)
	}
	// A message in the same context is a new task, a run on the same thread: its answer is
	// its own, and the first task still reads as it ended.
	next := a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "And now?"})
	next.ContextID = task.ContextID
	res, err = c.SendMessage(ctx, &a2asdk.MessageSendParams{Message: next})
	if err != nil {
		t.Fatal(err)
	}
	if follow := res.(*a2asdk.Task); follow.ID == task.ID || follow.ContextID != task.ContextID || follow.Status.State != a2asdk.TaskStateCompleted ||
		follow.Status.Message.Parts[0].(a2asdk.TextPart).Text != "Still sunny." {
		t.Errorf("the follow-up: %+v", follow)
	}
	// A message too large for the door is refused before any run.
	big := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"` +
		strings.Repeat("x", 5<<20) + `"}]}}}`
	req, _ := http.NewRequest(http.MethodPost, base+"/a2a/forecaster", strings.NewReader(big))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		var body struct {
			Error  any `json:"error"`
			Result any `json:"result"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if body.Error == nil || body.Result != nil {
			t.Errorf("a 5 MB message: %d %+v", resp.StatusCode, body)
		}
	}
	var final a2asdk.TaskState
	for ev, err := range c.SendStreamingMessage(ctx, &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "Again?"})}) {
		if err != nil {
			t.Fatal(err)
		}
		if up, ok := ev.(*a2asdk.TaskStatusUpdateEvent); ok && up.Final {
			final = up.Status.State
		}
	}
	if final != a2asdk.TaskStateCompleted {
		t.Errorf("the stream ended in %q", final)
	}
	if _, err := c.GetTask(ctx, &a2asdk.TaskQueryParams{ID: "thr_nope"}); err == nil {
		t.Error("an unknown task was found")
	}
	if _, err := client("").SendMessage(ctx, &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "hi"})}); err == nil ||
		!strings.Contains(err.Error(), "401") {
		t.Errorf("without a key: %v", err)
	}

	// Quiver against itself: the served agent imported by the a2a block, called by quiver call.
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("FORECASTER_KEY", key)
	cfg := filepath.Join(t.TempDir(), "quiver.yaml")
	if err := os.WriteFile(cfg, []byte("a2a:\n  agents:\n    - {name: remote_forecaster, url: '"+base+"/a2a/forecaster', headers: {Authorization: 'Bearer ${FORECASTER_KEY}'}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(configEnv, cfg)
	code, out, errOut := runOwn(t, "", "call", "remote_forecaster", "--args", `{"message":"And tomorrow?"}`)
	if code != exitOK || !strings.Contains(out, `"answer": "It is sunny in Oslo."`) || !strings.Contains(out, `"state": "completed"`) {
		t.Fatalf("quiver calling its own agent over A2A: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestSDKExampleClientAgainstServe: the SDK's own example client (examples/helloworld/client,
// which sends no key) talks to an agent of quiver serve --insecure-local.
func TestSDKExampleClientAgainstServe(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "turns.yaml")
	agents := filepath.Join(dir, "agents")
	writeTestFiles(t, map[string]string{
		script:                                "turns:\n  - text: Hello back from Quiver.\n",
		filepath.Join(agents, "greeter.yaml"): "name: greeter\ndescription: Greets.\nmodel: scripted:" + script + "\nexpose_as_tool: true\n",
	})
	bin := filepath.Join(dir, "client")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/a2aproject/a2a-go/examples/helloworld/client").CombinedOutput(); err != nil {
		t.Fatalf("building the SDK's example client: %v\n%s", err, out)
	}
	endpoint, _, _ := startServe(t, "--db", filepath.Join(dir, "q.db"), "--agents", agents)
	base := strings.TrimSuffix(endpoint, "/mcp")
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, bin, "-card-url", base+"/a2a/greeter").CombinedOutput()
	task := regexp.MustCompile(`Server responded with: &\{ID:(thr_[a-z0-9]+):[0-9]+ .*State:completed`).FindSubmatch(out)
	if err != nil || task == nil {
		t.Fatalf("the example client: %v\n%s", err, out)
	}
	// It prints the task's parts as pointers: the thread says what the agent answered.
	status, _, msgs := apiDo(t, "GET", base+"/v1/threads/"+string(task[1])+"/messages", "", "")
	if b, _ := json.Marshal(msgs); status != 200 || !strings.Contains(string(b), "Hello, world") || !strings.Contains(string(b), "Hello back from Quiver.") {
		t.Errorf("the task's thread: %d %s", status, b)
	}
}

// TestA2ATaskOutlivesTheServer: a task sent without waiting is a run queued in the database;
// a new server on the same database answers tasks/get for it, completed.
func TestA2ATaskOutlivesTheServer(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "turns.yaml")
	agents := filepath.Join(dir, "agents")
	writeTestFiles(t, map[string]string{
		script:                               "turns:\n  - text: Still here.\n",
		filepath.Join(agents, "keeper.yaml"): "name: keeper\nmodel: scripted:" + script + "\nexpose_as_tool: true\n",
	})
	db := filepath.Join(dir, "q.db")
	ctx := context.Background()
	connect := func(endpoint string) *a2aclient.Client {
		return a2aClient(t, strings.TrimSuffix(endpoint, "/mcp")+"/a2a/keeper", "")
	}
	endpoint, stop, _ := startServe(t, "--db", db, "--agents", agents)
	blocking := false
	res, err := connect(endpoint).SendMessage(ctx, &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "Are you there?"}),
		Config: &a2asdk.MessageSendConfig{Blocking: &blocking}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2asdk.Task).ID
	if code := stop(); code != exitOK {
		t.Fatalf("serve exited with %d", code)
	}
	endpoint, _, _ = startServe(t, "--db", db, "--agents", agents)
	c := connect(endpoint)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		task, err := c.GetTask(ctx, &a2asdk.TaskQueryParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if task.Status.State == a2asdk.TaskStateCompleted {
			if text := task.Status.Message.Parts[0].(a2asdk.TextPart).Text; text != "Still here." {
				t.Fatalf("the answer: %q", text)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task stayed %s", task.Status.State)
		}
	}
}

// TestA2ATaskWaitingOnAConfirmation: a run that pauses on a call needing confirmation is an
// input-required task naming the call; a message to it is refused (the call is decided
// through the API); once approved, the next run on the thread completes.
func TestA2ATaskWaitingOnAConfirmation(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "turns.yaml")
	agents := filepath.Join(dir, "agents")
	def := filepath.Join(dir, "charge.yaml")
	db := filepath.Join(dir, "q.db")
	writeTestFiles(t, map[string]string{
		script:                              "turns:\n  - calls: [{name: charge, args: {amount: 5}}]\n  - text: Charged.\n",
		filepath.Join(agents, "payer.yaml"): "name: payer\nmodel: scripted:" + script + "\ntools: [charge]\nexpose_as_tool: true\n",
		def: "name: charge\ndescription: Charges an amount.\nrequires_confirmation: true\ncode: |\n  export default ({ amount }) => \"charged \" + amount\n" +
			"input_schema: {type: object, properties: {amount: {type: integer}}, required: [amount]}\n",
	})
	if code, _, errOut := runCLI(t, "", "tools", "add", def, "--db", db); code != exitOK {
		t.Fatalf("tools add: %d %s", code, errOut)
	}
	endpoint, _, _ := startServe(t, "--db", db, "--agents", agents)
	base := strings.TrimSuffix(endpoint, "/mcp")
	ctx := context.Background()
	c := a2aClient(t, base+"/a2a/payer", "")
	res, err := c.SendMessage(ctx, &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "pay"})})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2asdk.Task)
	if task.Status.State != a2asdk.TaskStateInputRequired || !strings.Contains(task.Status.Message.Parts[0].(a2asdk.TextPart).Text, "charge") {
		t.Fatalf("the paused run's task: %+v", task)
	}
	more := a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "go on"})
	more.TaskID = task.ID
	if _, err := c.SendMessage(ctx, &a2asdk.MessageSendParams{Message: more}); err == nil || !strings.Contains(err.Error(), "waits on the call charge") {
		t.Fatalf("a message to a waiting task: %v", err)
	}
	// Approved through the API, the run goes on, and the thread's next run completes.
	status, _, th := apiDo(t, "GET", base+"/v1/threads/"+task.ContextID, "", "")
	pending, _ := th["pending"].(map[string]any)
	call, _ := pending["call"].(map[string]any)
	if status != 200 || call["id"] == nil {
		t.Fatalf("the thread: %d %v", status, th)
	}
	if status, _, out := apiDo(t, "POST", base+"/v1/threads/"+task.ContextID+"/decisions", "", `{"call_id":"`+call["id"].(string)+`","action":"approve"}`); status != 202 {
		t.Fatalf("approving: %d %v", status, out)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, _, msgs := apiDo(t, "GET", base+"/v1/threads/"+task.ContextID+"/messages", "", "")
		if b, _ := json.Marshal(msgs); strings.Contains(string(b), "Charged.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the approved run did not answer")
		}
	}
}

// a2aClient is the SDK's client of the A2A agent at url (its card under it), sending key
// ("" for none).
func a2aClient(t *testing.T, url, key string) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.NewResolver(http.DefaultClient).Resolve(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithDefaultsDisabled(),
		a2aclient.WithJSONRPCTransport(&http.Client{Transport: bearer{key: key, next: http.DefaultTransport}}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestA2ATasksStayInTheirWorkspace: a task is read within its thread and its workspace.
// Another workspace naming its own thread with A's job number (THREAD:JOB) finds no task, by
// tasks/get and tasks/resubscribe alike, and the answer is the one a job number that does not
// exist gets: nothing tells B which jobs exist or how A's runs stand.
func TestA2ATasksStayInTheirWorkspace(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "turns.yaml")
	agents := filepath.Join(dir, "agents")
	writeTestFiles(t, map[string]string{
		script:                                   "turns:\n  - text: One.\n  - text: Two.\n  - text: Three.\n",
		filepath.Join(agents, "forecaster.yaml"): "name: forecaster\nmodel: scripted:" + script + "\nexpose_as_tool: true\n",
	})
	endpoint, _, stderr := startServeWith(t, "--db", filepath.Join(dir, "q.db"), "--agents", agents)
	admin := firstKeyRE.FindString(stderr.String())
	base := strings.TrimSuffix(endpoint, "/mcp")
	ctx := context.Background()
	status, _, body := apiDo(t, "POST", base+"/v1/workspaces", admin, `{"name":"other"}`)
	other, _ := body["secret"].(string)
	if status != http.StatusCreated || other == "" {
		t.Fatalf("creating another workspace: %d %v", status, body)
	}
	send := func(c *a2aclient.Client) *a2asdk.Task {
		t.Helper()
		res, err := c.SendMessage(ctx, &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "Weather?"})})
		task, ok := res.(*a2asdk.Task)
		if err != nil || !ok {
			t.Fatalf("message/send: %v %v", res, err)
		}
		return task
	}
	a, b := a2aClient(t, base+"/a2a/forecaster", admin), a2aClient(t, base+"/a2a/forecaster", other)
	theirs, mine := send(a), send(b)
	job := func(id a2asdk.TaskID) string { return string(id)[strings.LastIndex(string(id), ":")+1:] }
	for _, c := range []struct {
		name string
		id   a2asdk.TaskID
		held bool // whether b may read it
	}{
		{"B's own task", mine.ID, true},
		{"A's job on B's thread", a2asdk.TaskID(mine.ContextID + ":" + job(theirs.ID)), false},
		{"A's task as A names it", theirs.ID, false},
		{"a job that does not exist on B's thread", a2asdk.TaskID(mine.ContextID + ":987654"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := b.GetTask(ctx, &a2asdk.TaskQueryParams{ID: c.id})
			if c.held {
				if err != nil || got.Status.State != a2asdk.TaskStateCompleted {
					t.Fatalf("tasks/get: %+v %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "task not found") {
				t.Errorf("tasks/get: %+v, %v; want task not found", got, err)
			}
			for ev, err := range b.ResubscribeToTask(ctx, &a2asdk.TaskIDParams{ID: c.id}) {
				if err == nil || !strings.Contains(err.Error(), "task not found") {
					t.Errorf("tasks/resubscribe: %+v, %v; want task not found", ev, err)
				}
				break
			}
		})
	}
}

// A run started over A2A that fails (its model is one no provider opens) ends its task failed,
// the reason and the run's words as its status message, as every other door says it (no run
// ends silently).
func TestA2ATaskOfAFailedRun(t *testing.T) {
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	writeTestFiles(t, map[string]string{
		filepath.Join(agents, "broken.yaml"): "name: broken\nmodel: nosuch:model\nexpose_as_tool: true\n",
	})
	endpoint, _, _ := startServe(t, "--db", filepath.Join(dir, "q.db"), "--agents", agents)
	base := strings.TrimSuffix(endpoint, "/mcp")
	c := a2aClient(t, base+"/a2a/broken", "")
	res, err := c.SendMessage(context.Background(), &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "hi"})})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2asdk.Task)
	waitUntil(t, "the task to settle", 20*time.Second, func() (bool, string) {
		if task.Status.State != a2asdk.TaskStateSubmitted && task.Status.State != a2asdk.TaskStateWorking {
			return true, ""
		}
		if task, err = c.GetTask(context.Background(), &a2asdk.TaskQueryParams{ID: task.ID}); err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		return false, string(task.Status.State)
	})
	status, _, th := apiDo(t, "GET", base+"/v1/threads/"+task.ContextID, "", "")
	run, _ := th["run"].(map[string]any)
	why, _ := run["error"].(string)
	var said string
	if m := task.Status.Message; m != nil && len(m.Parts) > 0 {
		said, _ = m.Parts[0].(a2asdk.TextPart).Text, true
	}
	if status != 200 || th["status"] != "failed" || why == "" || task.Status.State != a2asdk.TaskStateFailed ||
		!strings.Contains(said, "The run failed ("+run["reason"].(string)+"): "+why) {
		t.Fatalf("the failed run's task: %s %q; the thread: %d %v", task.Status.State, said, status, th)
	}
}
