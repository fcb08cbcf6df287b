//go:build unix

package journal_test

import (
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
	"github.com/quiverhq/quiver/store/journal"
	"github.com/quiverhq/quiver/store/sqlite"
)

// The crash test runs this test binary again as a writer (TestCrashChild) and kills it with
// SIGKILL at random moments; these variables tell the child what to do.
const (
	crashEnvDir    = "QUIVER_JOURNAL_CRASH_DIR" // holds the database and the journal directory
	crashEnvThread = "QUIVER_JOURNAL_CRASH_THREAD"
	crashEnvStart  = "QUIVER_JOURNAL_CRASH_START"
	crashPrefix    = "appended "
)

// TestCrashChild is the writer the crash test kills: it opens the journal (storing what its
// killed predecessor left) and appends call records in a loop, printing "appended <call id>"
// once Append has returned. A small MaxDelay and segment size make kills land in every state:
// while appending, while the writer stores a batch, while a file is rotated or removed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnvDir)
	if dir == "" {
		return
	}
	fail := crashtest.Fail
	start, err := strconv.Atoi(os.Getenv(crashEnvStart))
	if err != nil {
		fail("start: %v", err)
	}
	st, err := sqlite.Open(filepath.Join(dir, "crash.db"))
	if err != nil {
		fail("open store: %v", err)
	}
	j, err := journal.Open(ctx, filepath.Join(dir, "journal"), st, &journal.Options{
		MaxDelay: 500 * time.Microsecond, MaxBatch: 16, SegmentBytes: 8 << 10, Logger: quiet()})
	if err != nil {
		fail("open journal: %v", err)
	}
	thread := os.Getenv(crashEnvThread)
	for i := start; i < start+1_000_000; i++ {
		id := fmt.Sprintf("call_%07d", i)
		if err := j.Append(ctx, ws, thread, record(id)...); err != nil {
			fail("append %s: %v", id, err)
		}
		crashtest.Report(crashPrefix + id)
	}
}

// TestCrashSafety kills a writer at random moments, 25 times, on the same database and journal
// directory. After each kill, opening the journal again must store every append the writer
// reported, exactly once and in order, and nothing else.
func TestCrashSafety(t *testing.T) {
	const kills = 25
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("QUIVER_JOURNAL_CRASH_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (set QUIVER_JOURNAL_CRASH_SEED to replay)", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "crash.db"))
	if err != nil {
		t.Fatal(err)
	}
	th := &store.Thread{WorkspaceID: ws}
	if err := st.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	st.Close()

	var reported []string // in the order the children reported them
	next := 0
	for run := range kills {
		lines := runAndKill(t, dir, th.ID, next, rng)
		reported = append(reported, lines...)
		// What the next writer's Open does: store what the killed one left.
		st, err := sqlite.Open(filepath.Join(dir, "crash.db"))
		if err != nil {
			t.Fatalf("run %d: the database does not open after the kill: %v", run, err)
		}
		j, err := journal.Open(ctx, filepath.Join(dir, "journal"), st, &journal.Options{Logger: quiet()})
		if err != nil {
			t.Fatalf("run %d: the journal does not open after the kill: %v", run, err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		got := callIDs(t, st, th.ID)
		st.Close()
		checkStored(t, run, got, reported)
		// A call the child appended and was killed before reporting is stored too: go on after it.
		next = max(next, lastIndex(got)+1)
		t.Logf("run %d: %d appends reported, %d records stored", run, len(lines), len(got))
	}
	if len(reported) < kills {
		t.Fatalf("only %d appends reported in %d runs: the kills came before the writer started", len(reported), kills)
	}
	if files := journalFiles(t, filepath.Join(dir, "journal")); len(files) != 0 {
		t.Fatalf("journal files left after the last clean close: %v", files)
	}
}

// checkStored: every reported append is stored once, in the order reported; the only other
// records allowed are appends a child made but was killed before reporting (at most one per
// run, and never twice).
func checkStored(t *testing.T, run int, got, reported []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("run %d: %s is stored twice", run, id)
		}
		seen[id] = true
	}
	k := 0
	for _, id := range got {
		if k < len(reported) && id == reported[k] {
			k++
		}
	}
	if k != len(reported) {
		t.Fatalf("run %d: reported append %s is missing or out of order (%d of %d found in order among %d stored)",
			run, reported[k], k, len(reported), len(got))
	}
	if extra := len(got) - len(reported); extra > run+1 || extra < 0 {
		t.Fatalf("run %d: %d records stored that no child reported (at most one per kill)", run, extra)
	}
}

func lastIndex(ids []string) int {
	if len(ids) == 0 {
		return -1
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(ids[len(ids)-1], "call_"))
	return n
}

// runAndKill starts a writer, kills it with SIGKILL and returns the call ids it reported
// appended. Every other run is killed at a random moment from its start (while it opens the
// store and replays the journal, or appends), the others a random 0 to 40 ms after their
// first append, so that most kills land while appends and batches are under way.
func runAndKill(t *testing.T, dir, thread string, start int, rng *rand.Rand) []string {
	t.Helper()
	c := crashtest.Start(t, "TestCrashChild", crashEnvDir+"="+dir, crashEnvThread+"="+thread, crashEnvStart+"="+strconv.Itoa(start))
	var ids []string
	take := func(line string) {
		if id, ok := strings.CutPrefix(line, crashPrefix); ok {
			ids = append(ids, id)
		} else if strings.HasPrefix(line, "error") {
			t.Fatalf("the writer failed: %s\n%s", line, c.Stderr())
		}
	}
	if rng.IntN(2) == 0 {
		time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
	} else {
		for len(ids) == 0 {
			line, ok := c.Line(20 * time.Second)
			if !ok {
				t.Fatalf("the writer ended before appending:\n%s", c.Stderr())
			}
			take(line)
		}
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
	}
	c.Kill()
	rest, killed := c.Finish()
	for _, line := range rest {
		take(line)
	}
	if !killed {
		t.Fatalf("the writer exited by itself before it was killed:\n%s", c.Stderr())
	}
	return ids
}
