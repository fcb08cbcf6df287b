package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
)

// Two quiver serve nodes on one PostgreSQL database, only A given --agents: every node takes
// runs, so some of the runs started through A are taken by B, which has no such agent. Such a
// run used to end with the thread idle, no step and nothing said but in River's table; now it
// ends failed, with the reason, at every door: GET /v1/threads/{id} on either node (status
// failed, run.reason unknown_agent, run.error naming the agent), A's event stream (the state,
// and a run event of type failed relayed from B), A2A (the task failed, the reason as its
// status message) and B's log (one warning with the thread, the agent and the reason). Runs
// are started until B has taken one.
func TestRunOnANodeWithoutTheAgentFails(t *testing.T) {
	var pg *serveBackend
	for _, b := range serveBackends(t) {
		if b.name == "postgres" {
			pg = &b
		}
	}
	if pg == nil {
		t.Skip("two nodes need PostgreSQL")
	}
	dbArgs := pg.args(t)
	script, agents := filepath.Join(t.TempDir(), "turns.yaml"), filepath.Join(t.TempDir(), "agents")
	writeTestFiles(t, map[string]string{
		script: "turns:\n  - text: Sunny.\n",
		filepath.Join(agents, "forecaster.yaml"): "name: forecaster\ndescription: Tells the weather.\nmodel: scripted:" + script +
			"\nexpose_as_tool: true\n",
	})
	endpointA, _, stderrA := startServeWith(t, append(dbArgs, "--agents", agents)...)
	key := firstKeyRE.FindString(stderrA.String())
	t.Setenv("QUIVER_AGENTS", "")
	endpointB, _, stderrB := startServeWith(t, dbArgs...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node A's log:\n%s\nnode B's log:\n%s", stderrA.String(), stderrB.String())
		}
	})
	a, b := strings.TrimSuffix(endpointA, "/mcp"), strings.TrimSuffix(endpointB, "/mcp")

	for run := 1; ; run++ {
		if run > 40 {
			t.Fatal("node B took none of 40 runs")
		}
		threadID := newAPIThread(t, a+"/v1", key, "forecaster")
		events := openEvents(t, a+"/v1/threads/"+threadID+"/events", key, "")
		status, _, started := apiDo(t, "POST", a+"/v1/threads/"+threadID+"/runs", key, `{"message":"Weather?"}`)
		if status != 202 {
			t.Fatalf("starting run %d: %d %v", run, status, started)
		}
		end, _ := next(t, events, "the run's end", func(e sseEvent) bool { return e.Event == "run" })
		var ended struct {
			Type    string
			Error   string
			Outcome struct{ Status, Reason, Error string }
		}
		if err := json.Unmarshal([]byte(end.Data), &ended); err != nil {
			t.Fatal(err)
		}
		if ended.Type == "finished" {
			continue // node A took it
		}
		if ended.Type != "failed" || ended.Outcome.Status != "failed" || ended.Outcome.Reason != "unknown_agent" ||
			!strings.Contains(ended.Error, `"forecaster"`) || ended.Error != ended.Outcome.Error {
			t.Fatalf("the run event on A's stream: %s, want failed for unknown_agent naming the agent", end.Data)
		}
		next(t, events, "the failed state", func(e sseEvent) bool {
			return e.Event == "state" && strings.Contains(e.Data, `"status":"failed"`) && strings.Contains(e.Data, `"reason":"unknown_agent"`)
		})
		for _, node := range []string{a, b} {
			checkFailedThread(t, node, key, threadID, ended.Outcome.Error)
		}
		checkFailedTask(t, a, key, fmt.Sprintf("%s:%.0f", threadID, started["job_id"]), ended.Outcome.Error)
		warned := 0
		for _, line := range strings.Split(stderrB.String(), "\n") {
			if strings.Contains(line, "level=WARN") && strings.Contains(line, `msg="agent: the run failed"`) && strings.Contains(line, "thread="+threadID) &&
				strings.Contains(line, "agent=forecaster") && strings.Contains(line, "reason=unknown_agent") {
				warned++
			}
		}
		if warned != 1 {
			t.Errorf("node B's log has %d warnings of the failure, want 1:\n%s", warned, stderrB.String())
		}
		return
	}
}

// checkFailedThread checks that GET /v1/threads/{id} on node reads the thread's last run failed
// for unknown_agent with the words why.
func checkFailedThread(t *testing.T, node, key, threadID, why string) {
	t.Helper()
	status, _, th := apiDo(t, "GET", node+"/v1/threads/"+threadID, key, "")
	var view struct {
		Status    string
		StepCount int `json:"step_count"`
		Run       struct{ Status, Reason, Error string }
	}
	b, _ := json.Marshal(th)
	if status != 200 || json.Unmarshal(b, &view) != nil || view.Status != "failed" || view.StepCount != 0 ||
		view.Run.Status != "failed" || view.Run.Reason != "unknown_agent" || view.Run.Error != why {
		t.Errorf("GET /v1/threads/%s on %s: %d %s, want failed for unknown_agent: %q", threadID, node, status, b, why)
	}
}

// checkFailedTask checks that A2A's tasks/get on node reads the run's task failed, the reason
// its status message, once the task has settled (the thread records the failure a moment
// before River records its job's end).
func checkFailedTask(t *testing.T, node, key, taskID, why string) {
	t.Helper()
	client := a2aClient(t, node+"/a2a/forecaster", key)
	var task *a2asdk.Task
	waitUntil(t, "task "+taskID+" to settle", 20*time.Second, func() (bool, string) {
		var err error
		task, err = client.GetTask(context.Background(), &a2asdk.TaskQueryParams{ID: a2asdk.TaskID(taskID)})
		if err != nil {
			t.Fatalf("tasks/get %s: %v", taskID, err)
		}
		return task.Status.State != a2asdk.TaskStateSubmitted && task.Status.State != a2asdk.TaskStateWorking, string(task.Status.State)
	})
	var said string
	if m := task.Status.Message; m != nil && len(m.Parts) > 0 {
		if tp, ok := m.Parts[0].(a2asdk.TextPart); ok {
			said = tp.Text
		}
	}
	if task.Status.State != a2asdk.TaskStateFailed || !strings.Contains(said, "unknown_agent") || !strings.Contains(said, why) {
		t.Errorf("tasks/get %s: %s %q, want failed saying unknown_agent: %q", taskID, task.Status.State, said, why)
	}
}
