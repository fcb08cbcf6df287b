package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

// A limit holds in agent runs as at every door: the configuration's limits block gives the
// built-in clock one call a day in the server's workspace. A run of one agent started over /v1
// calls it and reads the time; a run of another started over A2A calls it again, is answered
// quota_exhausted without the tool running, and its model reads when to try again and says so.
func TestLimitsHoldInRuns(t *testing.T) {
	agents, script := scriptedAgentsDir(t)
	config := filepath.Join(t.TempDir(), "quiver.yaml")
	writeTestFiles(t, map[string]string{
		config: "limits:\n  limits:\n    - {name: one-clock-a-day, tools: [get_current_time], calls: {per_day: 1}}\n",
		script("timekeeper"): `turns:
  - calls: [{name: get_current_time, args: {}}]
  - expect: {result_is_error: false, result_contains: "timezone"}
    text: It is now.
`,
		script("latecomer"): `turns:
  - calls: [{name: get_current_time, args: {}}]
  - expect: {result_is_error: true, result_contains: "the limit \"one-clock-a-day\" allows 1 calls per day and is reached: try again in"}
    text: The clock's quota is used up; I will ask again tomorrow.
`,
		filepath.Join(agents, "timekeeper.yaml"): "name: timekeeper\ndescription: Tells the time.\nmodel: scripted:" + script("timekeeper") +
			"\ntools: [get_current_time]\n",
		filepath.Join(agents, "latecomer.yaml"): "name: latecomer\ndescription: Tells the time, later.\nmodel: scripted:" + script("latecomer") +
			"\ntools: [get_current_time]\nexpose_as_tool: true\n",
		// A lead whose sub-agent (dual_ai, in a child thread) is refused as any run is.
		script("helper"): `turns:
  - calls: [{name: get_current_time, args: {}}]
  - expect: {result_is_error: true, result_contains: "the limit \"one-clock-a-day\" allows 1 calls per day and is reached"}
    text: The clock's quota is used up.
`,
		filepath.Join(agents, "helper.yaml"): "name: helper\ntype: dual_ai\ndescription: Tells the time to a lead.\nmodel: scripted:" + script("helper") +
			"\ntools: [get_current_time]\nexpose_as_tool: true\n",
		script("lead"): `turns:
  - calls: [{name: helper, args: {message: "What time is it?"}}]
  - expect: {result_is_error: false, result_contains: "quota is used up"}
    text: My helper could not tell.
`,
		filepath.Join(agents, "lead.yaml"): "name: lead\ndescription: Asks its helper.\nmodel: scripted:" + script("lead") + "\ntools: [helper, get_current_time]\n",
	})
	endpoint, _, stderr := startServeWith(t, "--db", filepath.Join(t.TempDir(), "q.db"), "--agents", agents, "--config", config)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("quiver serve's log:\n%s", stderr.String())
		}
	})
	base, admin := strings.TrimSuffix(endpoint, "/mcp"), firstKeyRE.FindString(stderr.String())
	if status, _, out := apiDo(t, "GET", base+"/v1/limits", admin, ""); status != 200 || !strings.Contains(asJSON(out), "one-clock-a-day") {
		t.Fatalf("the configuration's limits are not the workspace's: %d %v", status, out)
	}

	th := newAPIThread(t, base+"/v1", admin, "timekeeper")
	startAPIRun(t, base+"/v1", admin, th, "timekeeper", "What time is it?")
	if got := lastAnswer(t, base+"/v1", admin, th); got != "It is now." {
		t.Fatalf("the first run answered %q", got)
	}

	c := a2aClient(t, base+"/a2a/latecomer", admin)
	res, err := c.SendMessage(context.Background(), &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "And now?"})})
	task, ok := res.(*a2asdk.Task)
	if err != nil || !ok || task.Status.State != a2asdk.TaskStateCompleted || len(task.Artifacts) != 1 {
		t.Fatalf("message/send: %+v %v", res, err)
	}
	if got := task.Artifacts[0].Parts[0].(a2asdk.TextPart).Text; got != "The clock's quota is used up; I will ask again tomorrow." {
		_, raw := threadMessages(t, base+"/v1", admin, task.ContextID)
		t.Fatalf("the run over A2A answered %q; its thread: %s", got, raw)
	}
	// The refusal is recorded on the run's thread like any result.
	if _, raw := threadMessages(t, base+"/v1", admin, task.ContextID); !strings.Contains(raw, `"code":"quota_exhausted"`) {
		t.Fatalf("the A2A run's thread does not record the refusal: %s", raw)
	}

	// A sub-agent's call is counted and refused as its run's caller's: the child reads the
	// refusal and its parent reads the child's answer.
	lead := newAPIThread(t, base+"/v1", admin, "lead")
	startAPIRun(t, base+"/v1", admin, lead, "lead", "Ask your helper the time.")
	if got := lastAnswer(t, base+"/v1", admin, lead); got != "My helper could not tell." {
		_, raw := threadMessages(t, base+"/v1", admin, lead)
		t.Fatalf("the lead answered %q; its thread: %s", got, raw)
	}
	// Usage says the same, by the agent whose run called: the timekeeper's one call, the
	// latecomer's refusal over A2A, and the helper's as the lead's sub-agent.
	status, _, out := apiDo(t, "GET", base+"/v1/usage?bucket=all&group_by=agent,tool", admin, "")
	if status != 200 {
		t.Fatalf("usage: %d %v", status, out)
	}
	byAgent := map[string]string{}
	rows, _ := out["rows"].([]any)
	for _, r := range rows {
		row := r.(map[string]any)
		if row["tool"] == "get_current_time" {
			byAgent[fmt.Sprint(row["agent"])] = fmt.Sprintf("%v calls, %v refusals", row["calls"], row["refusals"])
		}
	}
	if byAgent["timekeeper"] != "1 calls, 0 refusals" || byAgent["latecomer"] != "1 calls, 1 refusals" || byAgent["helper"] != "1 calls, 1 refusals" {
		t.Errorf("usage by agent: %v", byAgent)
	}
}

// quiver call meters its call as every door does: the usage is written when the command ends,
// and a server on the same database answers it.
func TestCallIsMetered(t *testing.T) {
	db := filepath.Join(t.TempDir(), "q.db")
	for _, tool := range []string{"get_current_time", "get_current_time", "no_such_tool"} {
		runCLI(t, "", "call", tool, "--db", db)
	}
	st, err := sqlite.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.UsageSums(context.Background(), &store.UsageQuery{WorkspaceID: localWorkspaceID, Span: 3600, Dims: store.UsageTool,
		From: 0, To: time.Now().Unix() + 3600, GroupBy: []string{store.UsageTool}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.Tool] = fmt.Sprintf("%d calls, %d errors", r.Calls, r.Errors)
	}
	if got["get_current_time"] != "2 calls, 0 errors" || got["(unknown)"] != "1 calls, 1 errors" {
		t.Errorf("usage of quiver call: %v", got)
	}
}

// A budget holds at every door that runs an agent: a run started over A2A and one over /v1
// by the same agent share its day's tokens; once they are spent, the next run stops before
// its request, and /v1 (the thread waiting, its run budget_exhausted with the limit) and A2A
// (the task working, saying so) both show it. An admin who raises the budget has the runs go
// on, and the A2A task completes.
func TestBudgetAtTheDoors(t *testing.T) {
	agents, script := scriptedAgentsDir(t)
	writeTestFiles(t, map[string]string{
		script("thrifty"): `turns:
  - calls: [{name: get_current_time, args: {}}]
    usage: {input_tokens: 6, output_tokens: 2}
  - text: It is now.
    usage: {input_tokens: 6, output_tokens: 2}
  - text: Still now.
    usage: {input_tokens: 6}
`,
		filepath.Join(agents, "thrifty.yaml"): "name: thrifty\ndescription: Tells the time on a budget.\nmodel: scripted:" + script("thrifty") +
			"\ntools: [get_current_time]\nexpose_as_tool: true\n",
	})
	endpoint, _, stderr := startServeWith(t, "--db", filepath.Join(t.TempDir(), "q.db"), "--agents", agents)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("quiver serve's log:\n%s", stderr.String())
		}
	})
	base, admin := strings.TrimSuffix(endpoint, "/mcp"), firstKeyRE.FindString(stderr.String())
	limitsDoc := func(perDay int) string {
		return fmt.Sprintf(`{"document": {"limits": [{"name": "day-tokens", "who": {"agent": "thrifty"}, "tokens": {"input_per_day": %d}}]}, "after": %d}`,
			perDay, map[int]int{10: 0, 100: 1}[perDay])
	}
	if status, _, out := apiDo(t, "PUT", base+"/v1/limits", admin, limitsDoc(10)); status != 200 {
		t.Fatalf("limits: %d %v", status, out)
	}

	c := a2aClient(t, base+"/a2a/thrifty", admin)
	res, err := c.SendMessage(context.Background(), &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "What time is it?"})})
	if task, ok := res.(*a2asdk.Task); err != nil || !ok || task.Status.State != a2asdk.TaskStateCompleted {
		t.Fatalf("the first task: %+v %v", res, err)
	}
	// 12 of the day's 10 input tokens are spent: the next run stops before its request.
	th := newAPIThread(t, base+"/v1", admin, "thrifty")
	startAPIRun(t, base+"/v1", admin, th, "thrifty", "And now?")
	waitUntil(t, "the /v1 run to stop for its budget", 30*time.Second, func() (bool, string) {
		_, _, out := apiDo(t, "GET", base+"/v1/threads/"+th, admin, "")
		run, _ := out["run"].(map[string]any)
		budget, _ := run["budget"].(map[string]any)
		return out["status"] == "waiting" && run["reason"] == "budget_exhausted" && budget["limit"] == "day-tokens" &&
			strings.Contains(fmt.Sprint(budget["message"]), "allows 10 input tokens per day and is reached"), asJSON(out)
	})
	res, err = c.SendMessage(context.Background(), &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "Once more?"})})
	task, ok := res.(*a2asdk.Task)
	if err != nil || !ok || task.Status.State != a2asdk.TaskStateWorking || task.Status.Message == nil ||
		!strings.Contains(task.Status.Message.Parts[0].(a2asdk.TextPart).Text, "budget_exhausted") {
		t.Fatalf("the A2A task over the budget: %+v %v", res, err)
	}

	// Raised, the budget has room: both runs go on by themselves.
	if status, _, out := apiDo(t, "PUT", base+"/v1/limits", admin, limitsDoc(100)); status != 200 {
		t.Fatalf("raising the budget: %d %v", status, out)
	}
	if got := lastAnswer(t, base+"/v1", admin, th); got == "" {
		t.Fatal("the /v1 run did not go on")
	}
	waitUntil(t, "the A2A task to complete", 30*time.Second, func() (bool, string) {
		got, err := c.GetTask(context.Background(), &a2asdk.TaskQueryParams{ID: task.ID})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.State == a2asdk.TaskStateCompleted, string(got.Status.State)
	})
}
