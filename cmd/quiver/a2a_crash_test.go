//go:build unix

package main

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
)

// SIGKILL the server at random moments while tasks sent over A2A run, restart it, and check
// that every task ends completed, read through tasks/get from the last life, with each tool
// call executed once (or again only when the kill came before its result was stored): an A2A
// task is a run, and outlives a crash as runs do.
func TestServeCrashDuringA2ATasks(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test kills and restarts the server several times")
	}
	forEachCrashBackend(t, testServeCrashDuringA2ATasks)
}

func testServeCrashDuringA2ATasks(t *testing.T, db string, kills int) {
	const tasks = 8
	agents := counterAgent(t, "expose_as_tool: true\n")
	ctx := context.Background()
	h := newCrashHarness(t, apiCrashServer, db, agents)
	client := func(base string) *a2aclient.Client {
		return a2aClient(t, strings.TrimSuffix(base, "/v1")+"/a2a/counter", h.admin)
	}
	var ids []a2asdk.TaskID
	child, base, _ := h.killLives(kills,
		func() time.Duration { return time.Duration(100+rand.IntN(400)) * time.Millisecond },
		func(base string) {
			c := client(base)
			blocking := false
			for range tasks {
				res, err := c.SendMessage(ctx, &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "count"}),
					Config: &a2asdk.MessageSendConfig{Blocking: &blocking}})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, res.(*a2asdk.Task).ID)
			}
		})
	c := client(base)
	histories := map[string][]any{}
	deadline := time.Now().Add(90 * time.Second)
	for _, id := range ids {
		for {
			task, err := c.GetTask(ctx, &a2asdk.TaskQueryParams{ID: id})
			if err != nil {
				t.Fatalf("tasks/get %s: %v", id, err)
			}
			if task.Status.State == a2asdk.TaskStateCompleted {
				if text := task.Status.Message.Parts[0].(a2asdk.TextPart).Text; text != "Done." {
					t.Errorf("task %s answered %q", id, text)
				}
				_, _, page := apiDo(t, "GET", base+"/threads/"+task.ContextID+"/messages?limit=1000", h.admin, "")
				histories[task.ContextID], _ = page["messages"].([]any)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s is %s after %d kills\n%s", id, task.Status.State, kills, child.Stderr())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	h.stop(child)
	verifyCrashRuns(t, histories, h.ran)
}
