//go:build unix

package sqlite_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver/internal/crashtest"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

// The crash test runs this test binary again as a writer (TestCrashChild) and kills it with
// SIGKILL at random moments. These variables tell the child what to do; without them
// TestCrashChild returns at once.
const (
	crashEnvDB     = "QUIVER_SQLITE_CRASH_DB"     // the database file
	crashEnvThread = "QUIVER_SQLITE_CRASH_THREAD" // the thread to append to
	crashEnvStart  = "QUIVER_SQLITE_CRASH_START"  // the index of the first new call
	crashWorkspace = "wsp_crash"
	crashPrefix    = "committed "
)

// crashCallID and crashText name call i and the result the child writes for it; results vary
// in size (up to a few pages) so that kills land in the middle of multi-page writes too.
func crashCallID(i int) string { return fmt.Sprintf("call_%06d", i) }

func crashText(callID string) string {
	i, _ := strconv.Atoi(strings.TrimPrefix(callID, "call_"))
	return "result of " + callID + ": " + strings.Repeat("résultat ", (i*37)%1500)
}

// TestCrashChild is the writer the crash test kills. It answers the calls a killed
// predecessor asked for and did not answer (what a resumed run does), then appends an assistant
// call and its tool result, as two transactions, in a loop. After each result is committed it
// prints "committed <call id>" (an unbuffered write to the pipe, so the parent has the line even
// if the child dies the next instant).
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnvDB)
	if path == "" {
		return
	}
	fail := crashtest.Fail
	start, err := strconv.Atoi(os.Getenv(crashEnvStart))
	if err != nil {
		fail("start: %v", err)
	}
	threadID := os.Getenv(crashEnvThread)
	// synchronous=NORMAL, the default: the test simulates a process being killed, not a power
	// loss, and NORMAL in WAL mode loses no committed transaction to a process kill.
	s, err := sqlite.Open(path)
	if err != nil {
		fail("open: %v", err)
	}
	commit := func(callID string) {
		res := &store.Message{Role: store.RoleTool, ToolCallID: callID, ToolName: "echo",
			Result: &store.ToolResult{Status: "success", Text: crashText(callID)}}
		if err := s.Append(ctx, crashWorkspace, threadID, res); err != nil {
			fail("result %s: %v", callID, err)
		}
		crashtest.Report(crashPrefix + callID)
	}
	pending, err := s.PendingCalls(ctx, crashWorkspace, threadID)
	if err != nil {
		fail("pending: %v", err)
	}
	for _, c := range pending {
		commit(c.ID)
	}
	for i := start; i < start+1_000_000; i++ {
		id := crashCallID(i)
		call := &store.Message{Role: store.RoleAssistant, Content: "calling " + id,
			ToolCalls: []store.ToolCall{{ID: id, Name: "echo", Args: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)}}}
		if err := s.Append(ctx, crashWorkspace, threadID, call); err != nil {
			fail("call %s: %v", id, err)
		}
		commit(id)
	}
	s.Close()
}

// TestCrashSafety kills a writer process at random moments, at least 20 times, on the same
// database file. After each kill the database must open cleanly and hold every result the
// writer reported as committed, intact and exactly once, with no gap in the sequence.
func TestCrashSafety(t *testing.T) {
	const kills = 30
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("QUIVER_SQLITE_CRASH_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (set QUIVER_SQLITE_CRASH_SEED to replay)", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	path := filepath.Join(t.TempDir(), "crash.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	th := &store.Thread{WorkspaceID: crashWorkspace}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	s.Close()

	began := time.Now()
	reported := map[string]bool{} // every call id a child said was committed, over all runs
	next := 0                     // the index of the next call
	for run := range kills {
		lines, stderr := runAndKill(t, path, th.ID, next, rng)
		for _, id := range lines {
			if reported[id] {
				t.Fatalf("run %d: %s was reported committed twice: its result was written twice", run, id)
			}
			reported[id] = true
		}
		next = checkCrashDB(t, path, th.ID, reported)
		t.Logf("run %d: %d results reported, %d calls in the thread%s", run, len(lines), next, stderr)
	}
	t.Logf("%d kills in %v, %d results committed", kills, time.Since(began).Round(time.Millisecond), len(reported))
	if len(reported) == 0 {
		t.Fatal("no child ever committed a result: the test tested nothing")
	}
}

// runAndKill starts a writer and kills it with SIGKILL: after a random 2-60 ms from its start,
// or a random delay after its first committed result, or right after its N-th. It returns the
// call ids the writer reported as committed.
func runAndKill(t *testing.T, path, threadID string, start int, rng *rand.Rand) (committed []string, note string) {
	t.Helper()
	c := crashtest.Start(t, "TestCrashChild", crashEnvDB+"="+path, crashEnvThread+"="+threadID, crashEnvStart+"="+strconv.Itoa(start))
	var got []string
	take := func(line string) {
		switch {
		case strings.HasPrefix(line, crashPrefix):
			got = append(got, strings.TrimPrefix(line, crashPrefix))
		case strings.HasPrefix(line, "error"):
			t.Fatalf("child: %s\n%s", line, c.Stderr())
		}
	}
	waitLines := func(n int) { // until n results are reported, or the child ends
		for len(got) < n {
			line, ok := c.Line(20 * time.Second)
			if !ok {
				return
			}
			take(line)
		}
	}
	delay := time.Duration(2+rng.IntN(59)) * time.Millisecond
	// One kill in four counts from the start (it may land while the child opens the database),
	// the others from the child's committed results, so most land amid writes.
	switch mode := rng.IntN(4); mode {
	case 0:
		note = fmt.Sprintf(" (killed %v after start)", delay)
		time.Sleep(delay)
	case 1:
		note = fmt.Sprintf(" (killed %v after the first result)", delay)
		waitLines(1)
		time.Sleep(delay)
	default:
		n := 1 + rng.IntN(40)
		note = fmt.Sprintf(" (killed after result %d)", n)
		waitLines(n)
	}
	c.Kill()
	// What the child wrote before it died, up to EOF.
	rest, killed := c.Finish()
	for _, line := range rest {
		take(line)
	}
	if !killed {
		t.Fatalf("the child exited by itself before it was killed\n%s", c.Stderr())
	}
	return got, note
}

// checkCrashDB opens the database after a kill and checks it; it returns the number of calls in
// the thread, which is the index of the next one.
func checkCrashDB(t *testing.T, path, threadID string, reported map[string]bool) int {
	t.Helper()
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatalf("open after a kill: %v", err)
	}
	defer s.Close()
	var msgs []*store.Message
	for before := int64(0); ; {
		page, err := s.Messages(ctx, crashWorkspace, threadID, store.Page{Before: before, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(page, msgs...)
		if len(page) < 1000 {
			break
		}
		before = page[0].Seq
	}
	calls, results := map[string]int{}, map[string]int{}
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Fatalf("message %d has seq %d: a gap", i, m.Seq)
		}
		switch m.Role {
		case store.RoleAssistant:
			if len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != crashCallID(len(calls)) {
				t.Fatalf("assistant message %d: calls %+v, want %s", m.Seq, m.ToolCalls, crashCallID(len(calls)))
			}
			calls[m.ToolCalls[0].ID]++
		case store.RoleTool:
			if calls[m.ToolCallID] != 1 {
				t.Fatalf("message %d answers %s, which was not asked before", m.Seq, m.ToolCallID)
			}
			if m.Result == nil || m.Result.Status != "success" || m.Result.Text != crashText(m.ToolCallID) {
				t.Fatalf("result of %s is damaged: %+v", m.ToolCallID, m.Result)
			}
			results[m.ToolCallID]++
			if results[m.ToolCallID] > 1 {
				t.Fatalf("%s has %d results", m.ToolCallID, results[m.ToolCallID])
			}
		default:
			t.Fatalf("unexpected message %+v", m)
		}
	}
	for id := range reported {
		if calls[id] != 1 || results[id] != 1 {
			t.Fatalf("%s was reported committed, but the database has %d calls and %d results for it", id, calls[id], results[id])
		}
	}
	pending, err := s.PendingCalls(ctx, crashWorkspace, threadID)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) > 1 || len(pending) != len(calls)-len(results) {
		t.Fatalf("%d pending calls, %d calls, %d results", len(pending), len(calls), len(results))
	}

	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var integrity string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check: %q, %v", integrity, err)
	}
	rows, err := db.Query(`PRAGMA foreign_key_check`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if rows.Next() {
		t.Fatal("foreign_key_check found rows without their parent")
	}
	return len(calls)
}
