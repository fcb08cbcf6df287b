//go:build unix

package jobs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/crashtest"
	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

// The child's side of TestKilledRunFinishesAfterRestart: it queues a run whose first call
// completes and whose second blocks, reports each call as it starts, and waits to be killed.
func TestCrashChild(t *testing.T) {
	path := os.Getenv("JOBS_CRASH_DB")
	if path == "" {
		return // not the child
	}
	st, err := sqlite.Open(path)
	if err != nil {
		crashtest.Fail("%v", err)
	}
	reg := &quiver.Registry{}
	for _, name := range []string{"work", "wait"} {
		reg.Register(quiver.Func(name, name, func(ctx context.Context, _ struct{}) (string, error) {
			crashtest.Report("ran " + quiver.CallFrom(ctx).ID)
			if name == "wait" {
				<-ctx.Done() // until the process is killed
			}
			return "done " + name, nil
		}))
	}
	j, err := StartSQLite(context.Background(), path, config(st, reg, &stepModel{turns: []string{"work", "wait"}}))
	if err != nil {
		crashtest.Fail("%v", err)
	}
	th, err := thread.Create(context.Background(), st, thread.Options{WorkspaceID: ws})
	if err != nil {
		crashtest.Fail("%v", err)
	}
	if _, err := j.Start(context.Background(), RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", MessageID: ids.New("msg"), Message: "go"}); err != nil {
		crashtest.Fail("%v", err)
	}
	crashtest.Report("thread " + th.ID())
	select {}
}

// A process killed in the middle of a background run: the next process on the database makes
// the run available again and finishes it. The call that completed before the kill is not run
// again; the one that was running (it has no result) is.
func TestKilledRunFinishesAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	child := crashtest.Start(t, "TestCrashChild", "JOBS_CRASH_DB="+path)
	var threadID string
	ran := map[string]int{}
	for !(threadID != "" && ran["call_2"] == 1) {
		line, ok := child.Line(30 * time.Second)
		if !ok {
			t.Fatalf("the child ended early: %s", child.Stderr())
		}
		switch {
		case strings.HasPrefix(line, "thread "):
			threadID = strings.TrimPrefix(line, "thread ")
		case strings.HasPrefix(line, "ran "):
			ran[strings.TrimPrefix(line, "ran ")]++
		case strings.HasPrefix(line, "error "):
			t.Fatal(line)
		}
	}
	child.Kill()
	if _, killed := child.Finish(); !killed {
		t.Fatal("the child was not killed")
	}

	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tl, reg := newTools(t)
	close(tl.release) // this time the call that waited returns
	j, err := StartSQLite(context.Background(), path, config(st, reg, &stepModel{turns: []string{"work", "wait"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop(context.Background())
	th, err := thread.Open(context.Background(), st, ws, threadID)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := th.Refresh(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if h := history(t, th); len(h) > 0 && h[len(h)-1] == "assistant:done" && out.Status != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not finish after the restart: %q", history(t, th))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, want := strings.Join(history(t, th), " | "), "user:go | call:work | tool:work | call:wait | tool:wait | assistant:done"; got != want {
		t.Errorf("history %q, want %q", got, want)
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if ran["call_1"]+tl.ran["call_1"] != 1 || tl.ran["call_2"] != 1 {
		t.Errorf("calls run: %v before the kill, %v after; want call_1 once in all, call_2 again after", ran, tl.ran)
	}
	_ = rivertype.JobStateCompleted
}
