package journal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/journal"
	"github.com/quiverhq/quiver/store/sqlite"
)

const ws = "wsp_journal"

var ctx = context.Background()

// openStore opens a fresh SQLite store with n threads in workspace ws.
func openStore(t *testing.T, n int) (*sqlite.Store, []string) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "j.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var ids []string
	for range n {
		th := &store.Thread{WorkspaceID: ws}
		if err := st.CreateThread(ctx, th); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, th.ID)
	}
	return st, ids
}

// record is what the MCP server appends for one call: the call, then its result.
func record(callID string) []*store.Message {
	return []*store.Message{
		{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: callID, Name: "echo", Args: json.RawMessage(`{"text":"` + callID + `"}`)}}},
		{Role: store.RoleTool, ToolCallID: callID, ToolName: "echo", Content: "echo " + callID,
			Result: &store.ToolResult{Status: "success", Text: "echo " + callID}},
	}
}

// callIDs lists the calls recorded in a thread, in order, failing on anything that is not a
// call followed by its result.
func callIDs(t *testing.T, st store.Store, threadID string) []string {
	t.Helper()
	var out []string
	before := int64(0)
	var all []*store.Message
	for {
		page, err := st.Messages(ctx, ws, threadID, store.Page{Before: before, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		all = append(page, all...)
		if len(page) < 1000 {
			break
		}
		before = page[0].Seq
	}
	for i := 0; i+1 < len(all); i += 2 {
		call, res := all[i], all[i+1]
		if len(call.ToolCalls) != 1 || res.ToolCallID != call.ToolCalls[0].ID || res.Result.Text != "echo "+res.ToolCallID {
			t.Fatalf("messages %d and %d are not a call and its result: %+v %+v", call.Seq, res.Seq, call, res)
		}
		out = append(out, res.ToolCallID)
	}
	if len(all)%2 != 0 {
		t.Fatalf("thread %s has %d messages: a record was split", threadID, len(all))
	}
	return out
}

func journalFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.journal"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestAppendsReachTheStoreInOrder(t *testing.T) {
	st, threads := openStore(t, 3)
	dir := t.TempDir()
	j, err := journal.Open(ctx, dir, st, &journal.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	const per = 200
	var wg sync.WaitGroup
	for _, th := range threads {
		wg.Go(func() {
			for i := range per {
				if err := j.Append(ctx, ws, th, record(fmt.Sprintf("%s_%04d", th, i))...); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	first := record("last_one")
	if err := j.Append(ctx, ws, threads[0], first...); err != nil {
		t.Fatal(err)
	}
	if first[0].ID == "" || first[1].ThreadID != threads[0] || first[1].CreatedAt.IsZero() {
		t.Fatalf("Append did not fill id, thread and time: %+v", first[1])
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := j.Pending(); n != 0 {
		t.Fatalf("Pending after Flush = %d", n)
	}
	for k, th := range threads {
		got := callIDs(t, st, th)
		want := per
		if k == 0 {
			want++
		}
		if len(got) != want {
			t.Fatalf("thread %d has %d records, want %d", k, len(got), want)
		}
		for i := range per {
			if got[i] != fmt.Sprintf("%s_%04d", th, i) {
				t.Fatalf("thread %d record %d is %s: out of order", k, i, got[i])
			}
		}
	}
	// The stored message is the one Append was given: same id, same time.
	msgs, err := st.Messages(ctx, ws, threads[0], store.Page{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if msgs[0].ID != first[0].ID || !msgs[1].CreatedAt.Equal(first[1].CreatedAt) {
		t.Fatalf("stored %s at %v, appended %s at %v", msgs[0].ID, msgs[1].CreatedAt, first[0].ID, first[1].CreatedAt)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if files := journalFiles(t, dir); len(files) != 0 {
		t.Fatalf("journal files left after a clean Close: %v", files)
	}
	if err := j.Append(ctx, ws, threads[0], record("late")...); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
}

// TestStoredWithinMaxDelay: without Flush, the writer stores appends on its own.
func TestStoredWithinMaxDelay(t *testing.T) {
	st, threads := openStore(t, 1)
	j, err := journal.Open(ctx, t.TempDir(), st, &journal.Options{MaxDelay: time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Append(ctx, ws, threads[0], record("c1")...); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(callIDs(t, st, threads[0])) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the append never reached the store without a Flush")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAppendRejectsBadMessages(t *testing.T) {
	st, threads := openStore(t, 1)
	dir := t.TempDir()
	j, err := journal.Open(ctx, dir, st, &journal.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	th := threads[0]
	for _, tc := range []struct {
		name      string
		ws, th    string
		msgs      []*store.Message
		wantInErr string
	}{
		{"no messages", ws, th, nil, "no messages"},
		{"no thread", ws, "", record("c"), "a workspace and a thread"},
		{"nil message", ws, th, []*store.Message{nil}, "nil"},
		{"unknown role", ws, th, []*store.Message{{Role: "robot"}}, `unknown role "robot"`},
		{"tool message without a call", ws, th, []*store.Message{{Role: store.RoleTool}}, "answers a call"},
		{"result on a user message", ws, th, []*store.Message{{Role: store.RoleUser, Result: &store.ToolResult{}}}, "answers a call"},
		{"calls on a user message", ws, th, []*store.Message{{Role: store.RoleUser, ToolCalls: []store.ToolCall{{ID: "a", Name: "b"}}}}, "has tool calls"},
		{"call without a name", ws, th, []*store.Message{{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "a"}}}}, "no id or no name"},
		{"message of another thread", ws, th, []*store.Message{{Role: store.RoleUser, ThreadID: "thr_other"}}, "belongs to thread thr_other"},
		{"arguments that are not JSON", ws, th, []*store.Message{{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "a", Name: "b", Args: json.RawMessage(`{nope`)}}}}, "arguments are not JSON"},
	} {
		err := j.Append(ctx, tc.ws, tc.th, tc.msgs...)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.wantInErr) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", tc.name, err, tc.wantInErr)
		}
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := callIDs(t, st, th); len(got) != 0 {
		t.Fatalf("rejected appends were stored: %v", got)
	}
}

// TestRefusedAppendsAreDroppedNotBlocking: an append the store refuses (a thread that does not
// exist, a call answered twice) is logged and dropped; the appends around it are stored.
func TestRefusedAppendsAreDroppedNotBlocking(t *testing.T) {
	st, threads := openStore(t, 1)
	var logs bytes.Buffer
	j, err := journal.Open(ctx, t.TempDir(), st, &journal.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	th := threads[0]
	steps := []struct {
		thread string
		msgs   []*store.Message
	}{
		{th, record("a")},
		{"thr_missing", record("b")},
		{th, record("c")},
		{th, []*store.Message{{Role: store.RoleTool, ToolCallID: "a", ToolName: "echo", Result: &store.ToolResult{Status: "success", Text: "echo a"}}}},
		{th, record("d")},
	}
	for _, s := range steps {
		if err := j.Append(ctx, ws, s.thread, s.msgs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(callIDs(t, st, th), ","); got != "a,c,d" {
		t.Fatalf("stored %s, want a,c,d", got)
	}
	if n := j.Refused(); n != 2 {
		t.Fatalf("Refused = %d, want 2", n)
	}
	for _, want := range []string{"thr_missing", "not found", "already has a result"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}
}

// flaky is a store whose appends fail (as a database that is down does) while down is set, and
// which can hide that it batches.
type flaky struct {
	*sqlite.Store
	down  atomic.Bool
	calls atomic.Int64
}

var errDown = errors.New("database is down")

func (f *flaky) AppendBatch(ctx context.Context, ops []store.AppendOp) error {
	f.calls.Add(1)
	if f.down.Load() {
		return errDown
	}
	return f.Store.AppendBatch(ctx, ops)
}

func (f *flaky) Append(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	f.calls.Add(1)
	if f.down.Load() {
		return errDown
	}
	return f.Store.Append(ctx, workspaceID, threadID, msgs...)
}

// oneByOne is a store without AppendBatch.
type oneByOne struct{ store.Store }

func TestStoreDownIsRetriedAndNothingIsLost(t *testing.T) {
	for _, batching := range []bool{true, false} {
		t.Run(fmt.Sprintf("batching=%v", batching), func(t *testing.T) {
			sq, threads := openStore(t, 1)
			f := &flaky{Store: sq}
			var st store.Store = f
			if !batching {
				st = oneByOne{f}
			}
			f.down.Store(true)
			j, err := journal.Open(ctx, t.TempDir(), st, &journal.Options{RetryDelay: time.Millisecond, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			for i := range 20 {
				if err := j.Append(ctx, ws, threads[0], record(fmt.Sprintf("c%02d", i))...); err != nil {
					t.Fatal(err)
				}
			}
			for f.calls.Load() < 3 { // the writer has tried and failed a few times
				time.Sleep(time.Millisecond)
			}
			short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			if err := j.Flush(short); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Flush while the store is down: %v, want DeadlineExceeded", err)
			}
			if err := j.Failing(); !errors.Is(err, errDown) || j.Pending() != 20 {
				t.Fatalf("while the store is down: Failing %v, Pending %d; want errDown, 20", err, j.Pending())
			}
			f.down.Store(false)
			if err := j.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := j.Failing(); err != nil || j.Pending() != 0 {
				t.Fatalf("once the store is back: Failing %v, Pending %d", err, j.Pending())
			}
			got := callIDs(t, sq, threads[0])
			if len(got) != 20 || got[0] != "c00" || got[19] != "c19" || j.Refused() != 0 {
				t.Fatalf("after the store came back: %v (refused %d)", got, j.Refused())
			}
		})
	}
}

// TestBackpressure: Append waits while MaxPending appends wait for the store, until its
// context ends.
func TestBackpressure(t *testing.T) {
	sq, threads := openStore(t, 1)
	f := &flaky{Store: sq}
	f.down.Store(true)
	j, err := journal.Open(ctx, t.TempDir(), f, &journal.Options{MaxPending: 3, RetryDelay: time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := range 3 {
		if err := j.Append(ctx, ws, threads[0], record(fmt.Sprintf("c%d", i))...); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	err = j.Append(short, ws, threads[0], record("c3")...)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "3 appends are waiting") {
		t.Fatalf("Append with a full journal: %v, want DeadlineExceeded saying why", err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Append(ctx, ws, threads[0], record("c4")...) }()
	select {
	case err := <-done:
		t.Fatalf("Append returned (%v) while the journal was full", err)
	case <-time.After(20 * time.Millisecond):
	}
	f.down.Store(false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(callIDs(t, sq, threads[0]), ","); got != "c0,c1,c2,c4" {
		t.Fatalf("stored %s", got)
	}
}

// TestCloseWithTheStoreDownKeepsTheAppends: what Close cannot store stays in the files, and the
// next Open stores it.
func TestCloseWithTheStoreDownKeepsTheAppends(t *testing.T) {
	sq, threads := openStore(t, 1)
	f := &flaky{Store: sq}
	f.down.Store(true)
	dir := t.TempDir()
	j, err := journal.Open(ctx, dir, f, &journal.Options{RetryDelay: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := j.Append(ctx, ws, threads[0], record(fmt.Sprintf("c%d", i))...); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err == nil || !strings.Contains(err.Error(), "5 appends could not be stored") {
		t.Fatalf("Close with the store down: %v", err)
	}
	if len(journalFiles(t, dir)) != 1 {
		t.Fatalf("journal files after Close: %v", journalFiles(t, dir))
	}
	// Opening again while the store is still down fails and keeps the file.
	if _, err := journal.Open(ctx, dir, f, &journal.Options{Logger: quiet()}); !errors.Is(err, errDown) {
		t.Fatalf("Open with the store down: %v", err)
	}
	if len(journalFiles(t, dir)) != 1 {
		t.Fatalf("journal files after a failed Open: %v", journalFiles(t, dir))
	}
	f.down.Store(false)
	j2, err := journal.Open(ctx, dir, f, &journal.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if got := strings.Join(callIDs(t, sq, threads[0]), ","); got != "c0,c1,c2,c3,c4" {
		t.Fatalf("stored after the replay: %s", got)
	}
}

// TestLiveFilesAreNotReplayed: a second journal on the same directory leaves the files of a
// journal that is still open alone.
func TestLiveFilesAreNotReplayed(t *testing.T) {
	sq, threads := openStore(t, 2)
	f := &flaky{Store: sq}
	f.down.Store(true)
	dir := t.TempDir()
	j1, err := journal.Open(ctx, dir, f, &journal.Options{RetryDelay: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := j1.Append(ctx, ws, threads[0], record("from_j1")...); err != nil {
		t.Fatal(err)
	}
	j2, err := journal.Open(ctx, dir, sq, &journal.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := j2.Append(ctx, ws, threads[1], record("from_j2")...); err != nil {
		t.Fatal(err)
	}
	if err := j2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := callIDs(t, sq, threads[0]); len(got) != 0 {
		t.Fatalf("j2 replayed the file j1 still writes: %v", got)
	}
	if got := callIDs(t, sq, threads[1]); len(got) != 1 {
		t.Fatalf("j2's own append: %v", got)
	}
	j1.Close() // the store is down: the append stays
	j3, err := journal.Open(ctx, dir, sq, &journal.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer j3.Close()
	if got := callIDs(t, sq, threads[0]); len(got) != 1 || got[0] != "from_j1" {
		t.Fatalf("after j1 closed, the next Open stored: %v", got)
	}
}

func TestSegmentsRotateAndAreRemoved(t *testing.T) {
	sq, threads := openStore(t, 1)
	f := &flaky{Store: sq}
	f.down.Store(true)
	dir := t.TempDir()
	j, err := journal.Open(ctx, dir, f, &journal.Options{SegmentBytes: 2048, RetryDelay: time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := range 40 {
		if err := j.Append(ctx, ws, threads[0], record(fmt.Sprintf("c%02d", i))...); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(journalFiles(t, dir)); n < 5 {
		t.Fatalf("%d journal files for 40 appends of ~500 bytes with 2 KiB segments", n)
	}
	f.down.Store(false)
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if files := journalFiles(t, dir); len(files) != 1 {
		t.Fatalf("journal files once everything is stored: %v, want the current one", files)
	}
	if got := callIDs(t, sq, threads[0]); len(got) != 40 {
		t.Fatalf("stored %d", len(got))
	}
}

func TestOpenRefusesAFileThatIsNotAJournal(t *testing.T) {
	sq, _ := openStore(t, 0)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.journal"), []byte("dear diary, today I"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := journal.Open(ctx, dir, sq, nil)
	if err == nil || !strings.Contains(err.Error(), "not a journal file") || !strings.Contains(err.Error(), "notes.journal") {
		t.Fatalf("Open with a foreign file: %v", err)
	}
}

// hanging is a store whose appends wait until released, as a database connection that stopped
// answering does, then fail.
type hanging struct {
	*sqlite.Store
	release chan struct{}
}

func (h hanging) AppendBatch(context.Context, []store.AppendOp) error {
	<-h.release
	return errDown
}

// TestCloseGivesUpOnAHangingStore: Close returns after CloseTimeout when the store hangs; the
// appends stay for the next Open, once the stuck call has returned.
func TestCloseGivesUpOnAHangingStore(t *testing.T) {
	sq, threads := openStore(t, 1)
	dir := t.TempDir()
	h := hanging{sq, make(chan struct{})}
	j, err := journal.Open(ctx, dir, h, &journal.Options{MaxDelay: time.Millisecond, CloseTimeout: 50 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(ctx, ws, threads[0], record("c1")...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // the writer is inside the hanging store call
	done := make(chan error, 1)
	go func() { done <- j.Close() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "did not answer within 50ms; 1 appends stay") {
			t.Fatalf("Close with a hanging store: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with the store hanging")
	}
	if files := journalFiles(t, dir); len(files) != 1 {
		t.Fatalf("journal files after Close gave up: %v", files)
	}
	close(h.release) // the stuck call returns; the writer leaves the file and closes it
	var j2 *journal.Journal
	for deadline := time.Now().Add(10 * time.Second); ; {
		j2, err = journal.Open(ctx, dir, sq, &journal.Options{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		if len(callIDs(t, sq, threads[0])) == 1 || time.Now().After(deadline) {
			break
		}
		j2.Close() // the old writer had not closed the file yet: its lock kept it from replay
		time.Sleep(5 * time.Millisecond)
	}
	defer j2.Close()
	if got := callIDs(t, sq, threads[0]); len(got) != 1 {
		t.Fatalf("after the next Open: %v", got)
	}
}
