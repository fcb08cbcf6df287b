//go:build unix

package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/crashtest"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

// The resume test runs this test binary again as the agent process (TestResumeChild) and kills
// it with SIGKILL at random moments; the next process resumes the run from the store.
const (
	resumeEnvDB     = "QUIVER_AGENT_RESUME_DB"
	resumeEnvThread = "QUIVER_AGENT_RESUME_THREAD"
	resumeEnvLog    = "QUIVER_AGENT_RESUME_LOG" // the file each execution of the tool appends to
	resumeWorkspace = "wsp_resume"
	resumeSteps     = 100 // model turns with calls, then one final answer
)

// resumeScript is the same in every process: turn i calls "work" twice.
func resumeScript() *turnModel {
	m := &turnModel{}
	for i := range resumeSteps {
		m.turns = append(m.turns, model.Response{ToolCalls: calls(
			call(fmt.Sprintf("w%02d_a", i), "work", fmt.Sprintf(`{"n":%d}`, 2*i)),
			call(fmt.Sprintf("w%02d_b", i), "work", fmt.Sprintf(`{"n":%d}`, 2*i+1)),
		)})
	}
	m.turns = append(m.turns, model.Response{Text: "all work done"})
	return m
}

// TestResumeChild is the agent process the resume test kills. It resumes the run on the
// thread and prints "committed <call id>" after each result is persisted, and "finished" at
// the end; the work tool records every execution in the log file before returning.
func TestResumeChild(t *testing.T) {
	path := os.Getenv(resumeEnvDB)
	if path == "" {
		return
	}
	fail := crashtest.Fail
	st, err := sqlite.Open(path)
	if err != nil {
		fail("open: %v", err)
	}
	logFile, err := os.OpenFile(os.Getenv(resumeEnvLog), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		fail("log: %v", err)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(quiver.Func("work", "Does a unit of work.", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (int, error) {
		// The side effect happens before the result is persisted: a kill in between makes the
		// resumed run execute the call again, which the test allows only for unpersisted calls.
		if _, err := logFile.WriteString(quiver.CallFrom(ctx).ID + "\n"); err != nil {
			return 0, err
		}
		return in.N * in.N, nil
	})); err != nil {
		fail("register: %v", err)
	}
	r := &agent.Runner{Store: st, Registry: reg, Model: resumeScript()}
	r.Subscribe(func(e agent.Event) {
		if e.Type == agent.EventToolResult {
			crashtest.Report("committed " + e.Call.ID)
		}
	})
	th, err := thread.Open(ctx, st, resumeWorkspace, os.Getenv(resumeEnvThread))
	if err != nil {
		fail("thread: %v", err)
	}
	a := &agent.Agent{Name: "worker", Prompt: &agent.Prompt{Name: "worker", Tools: []string{"work"}, Stop: agent.StopRules{MaxSteps: 100}}}
	out, err := r.Resume(ctx, th, a)
	if err != nil {
		fail("resume: %v", err)
	}
	fmt.Fprintf(os.Stdout, "finished %s %s\n", out.Reason, out.Text)
	os.Exit(0)
}

// TestResumeAfterKills kills the agent process at random moments, at least 20 times: between
// the model's response and a tool, between a tool and its persistence, anywhere. After each
// kill the next process resumes. At the end the run is complete, every call has exactly one
// result, no model turn was stored twice, and no call whose result had been persisted ran
// again.
func TestResumeAfterKills(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a process 20+ times; run without -short")
	}
	dbPath, logPath, threadID := resumeThread(t, "do all the work")
	killUntilDone(t, 0x5bd1e995, logPath, "finished no_calls all work done", func() *crashtest.Child {
		return crashtest.Start(t, "TestResumeChild", resumeEnvDB+"="+dbPath, resumeEnvThread+"="+threadID, resumeEnvLog+"="+logPath)
	})

	st, err := sqlite.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	th, err := thread.Open(ctx, st, resumeWorkspace, threadID)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := th.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assistants, results := 0, map[string]int{}
	for _, m := range hist {
		switch m.Role {
		case store.RoleAssistant:
			assistants++
		case store.RoleTool:
			results[m.ToolCallID]++
			var v int
			if err := json.Unmarshal(m.Result.Value, &v); err != nil {
				t.Fatalf("result of %s: %s", m.ToolCallID, m.Result.Value)
			}
		}
	}
	if assistants != resumeSteps+1 {
		t.Fatalf("%d model turns stored, want %d (none lost, none twice)", assistants, resumeSteps+1)
	}
	if len(results) != 2*resumeSteps {
		t.Fatalf("%d calls have results, want %d", len(results), 2*resumeSteps)
	}
	for id, n := range results {
		if n != 1 {
			t.Fatalf("call %s has %d results", id, n)
		}
	}
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, id := range strings.Fields(string(raw)) {
		runs[id]++
	}
	reran := 0
	for id := range results {
		switch {
		case runs[id] == 0:
			t.Fatalf("call %s has a result but never ran", id)
		case runs[id] > 1:
			reran++ // killed after running, before its result was persisted
		}
	}
	t.Logf("%d calls ran again after a kill between execution and persistence", reran)
}

// resumeThread makes a thread with message in a new SQLite database for a resume test, and
// returns the database, the file the processes log executions to, and the thread.
func resumeThread(t *testing.T, message string) (dbPath, logPath, threadID string) {
	t.Helper()
	dir := t.TempDir()
	dbPath, logPath = filepath.Join(dir, "q.db"), filepath.Join(dir, "executions.log")
	st, err := sqlite.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: resumeWorkspace})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.AppendUser(ctx, message); err != nil {
		t.Fatal(err)
	}
	return dbPath, logPath, th.ID()
}

// killUntilDone starts the agent process (start) again and again, killing the first 20 lives
// at random moments (playLife, seeded from salt and the time), until one finishes with the
// line want. After each life it checks that no call ran again once its result was persisted
// (ledger). It fails unless the run took 20 kills and then finished.
func killUntilDone(t *testing.T, salt uint64, logPath, want string, start func() *crashtest.Child) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^salt))
	var led ledger
	kills, finished := 0, false
	for attempt := 0; !finished && attempt < 100; attempt++ {
		lines := playLife(start(), kills < 20, rng, 1, 15, 4)
		led.check(t, logPath, attempt)
		led.note(lines, attempt)
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "finished "):
				finished = true
				if l != want {
					t.Fatalf("child finished with %q, want %q", l, want)
				}
			case strings.HasPrefix(l, "error "):
				t.Fatalf("child: %s", l)
			}
		}
		if !finished {
			kills++
		}
	}
	if !finished || kills < 20 {
		t.Fatalf("finished %v after %d kills", finished, kills)
	}
	t.Logf("%d kills", kills)
}

// ledger follows, across the lives of a process killed again and again, which calls each
// life reported persisted ("committed ID"), and checks that no call ran in a later life once
// its result was persisted. The processes log each execution to a file, a line each, whose
// first word is the call's id.
type ledger struct {
	committedIn map[string]int // the life that first reported the call's result persisted
	offset      int            // what of the log the last check read
}

// check reads the executions logged since the last check, by life attempt.
func (l *ledger) check(t *testing.T, logPath string, attempt int) {
	t.Helper()
	raw, _ := os.ReadFile(logPath)
	for _, line := range strings.Split(string(raw[l.offset:]), "\n") {
		id, _, _ := strings.Cut(line, " ")
		if p, ok := l.committedIn[id]; ok && id != "" {
			t.Fatalf("call %s ran in process %d although process %d had persisted its result", id, attempt, p)
		}
	}
	l.offset = len(raw)
}

// note records the calls life attempt reported persisted.
func (l *ledger) note(lines []string, attempt int) {
	if l.committedIn == nil {
		l.committedIn = map[string]int{}
	}
	for _, line := range lines {
		if id, ok := strings.CutPrefix(line, "committed "); ok {
			if _, seen := l.committedIn[id]; !seen {
				l.committedIn[id] = attempt
			}
		}
	}
}

// playLife reads a child's lines until it ends; when kill is set the child is killed with
// SIGKILL right after a random number (1 to maxLines) of lines (each reporting a committed
// result), and every other time sooner if a random minMs to maxMs milliseconds pass first
// (often while it starts, opens the database or waits on the model). A life to be killed is
// killed however fast the machine runs it: the line count bounds it. It returns the lines the
// process printed.
func playLife(c *crashtest.Child, kill bool, rng *rand.Rand, minMs, maxMs, maxLines int) []string {
	afterLines := -1
	if kill {
		afterLines = 1 + rng.IntN(maxLines)
		if rng.IntN(2) == 0 {
			timer := time.AfterFunc(time.Duration(minMs+rng.IntN(maxMs-minMs+1))*time.Millisecond, c.Kill)
			defer timer.Stop()
		}
	}
	var lines []string
	for {
		line, ok := c.Line(60 * time.Second)
		if !ok {
			break
		}
		lines = append(lines, line)
		if afterLines > 0 && len(lines) >= afterLines {
			c.Kill() // right after a result was reported persisted
		}
	}
	rest, _ := c.Finish()
	return append(lines, rest...)
}
