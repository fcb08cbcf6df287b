package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/store/storetest"
)

var ctx = context.Background()

func openTemp(t testing.TB, opts ...sqlite.Options) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "quiver.db")
	s, err := sqlite.Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, path
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := openTemp(t)
		return s
	})
}

func TestConformanceFull(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the suite already runs with synchronous=NORMAL; FULL repeats it with fsync on every commit")
	}
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := openTemp(t, sqlite.Options{Synchronous: "full", ReadConns: 1})
		return s
	})
}

// rawDB opens the file without the store, to look at what it holds.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	th := &store.Thread{WorkspaceID: "wsp_1"}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	s.Close()

	db := rawDB(t, path)
	versions := func() (n, max int) {
		t.Helper()
		if err := db.QueryRow(`SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &max); err != nil {
			t.Fatal(err)
		}
		return n, max
	}
	n1, v1 := versions()
	if n1 < 1 || v1 != n1 {
		t.Fatalf("schema_migrations: %d rows, max version %d", n1, v1)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}

	// Reopening an up-to-date database applies nothing and keeps the data.
	s, err = sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Thread(ctx, "wsp_1", th.ID); err != nil {
		t.Fatalf("after reopening: %v", err)
	}
	s.Close()
	if n2, v2 := versions(); n2 != n1 || v2 != v1 {
		t.Fatalf("reopening changed schema_migrations: %d/%d -> %d/%d", n1, v1, n2, v2)
	}

	// A database from a newer version is refused, clearly.
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from_the_future.sql', 0)`, v1+1); err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Open(path)
	if !errors.Is(err, sqlite.ErrSchemaTooNew) {
		t.Fatalf("newer schema: %v, want ErrSchemaTooNew", err)
	}
	t.Logf("newer schema: %v", err)
}

func TestConcurrentOpens(t *testing.T) {
	// Several stores opening one new file at once: each migration is applied once.
	path := filepath.Join(t.TempDir(), "c.db")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			s, err := sqlite.Open(path)
			if err != nil {
				errs <- err
				return
			}
			errs <- s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n, v int
	if err := rawDB(t, path).QueryRow(`SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &v); err != nil || n != v {
		t.Fatalf("schema_migrations: %d rows, version %d, %v", n, v, err)
	}
}

func TestOpenOptions(t *testing.T) {
	dir := t.TempDir()
	if _, err := sqlite.Open(filepath.Join(dir, "x.db"), sqlite.Options{Synchronous: "OFF"}); err == nil {
		t.Error("Synchronous OFF was accepted")
	}
	if _, err := sqlite.Open(filepath.Join(dir, "x.db"), sqlite.Options{}, sqlite.Options{}); err == nil {
		t.Error("two Options were accepted")
	}
	if _, err := sqlite.Open(":memory:"); err == nil {
		t.Error(":memory: was accepted")
	}
	// Characters that mean something in a URI are part of the file name.
	odd := filepath.Join(dir, "a b?c#d%e.db")
	s, err := sqlite.Open(odd, sqlite.Options{Synchronous: "FULL"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(odd); err != nil {
		t.Fatalf("the database is not where asked: %v", err)
	}
}

// TestResultUniqueInDatabase checks that exactly-once does not rest on the Go code: a second
// result written behind the store's back is refused by the database itself.
func TestResultUniqueInDatabase(t *testing.T) {
	s, path := openTemp(t)
	th := &store.Thread{WorkspaceID: "wsp_1"}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	call := &store.Message{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "c1", Name: "echo"}}}
	res := &store.Message{Role: store.RoleTool, ToolCallID: "c1", Result: &store.ToolResult{Status: "success", Text: "x"}}
	if err := s.Append(ctx, "wsp_1", th.ID, call, res); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	insert := `INSERT INTO messages (id, thread_id, seq, role, content, tool_call_id, created_at) VALUES (?, ?, ?, 'tool', '', ?, 0)`
	if _, err := db.Exec(insert, "msg_dup", th.ID, 3, "c1"); err == nil || !strings.Contains(err.Error(), "UNIQUE") {
		t.Fatalf("a second result inserted directly: %v", err)
	}
	if _, err := db.Exec(insert, "msg_unknown", th.ID, 3, "nobody_asked"); err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
		t.Fatalf("a result for an unknown call inserted directly: %v", err)
	}
}

func TestAppendRules(t *testing.T) {
	s, _ := openTemp(t)
	const ws = "wsp_1"
	th := &store.Thread{WorkspaceID: ws}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	call := func(id string) *store.Message {
		return &store.Message{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: id, Name: "echo", Args: json.RawMessage(`{ "a" : 1 }`)}}}
	}
	if err := s.Append(ctx, ws, th.ID, call("c1")); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]*store.Message{
		"a call id used twice in a thread": {call("c1")},
		"a call id used twice in a batch":  {call("c2"), call("c2")},
		"a call without a name":            {{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "c3"}}}},
		"a call without an id":             {{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{Name: "echo"}}}},
		"arguments that are not JSON":      {{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "c4", Name: "echo", Args: json.RawMessage(`{`)}}}},
		"a user message with a result":     {{Role: store.RoleUser, Result: &store.ToolResult{}}},
		"a user message with calls":        {{Role: store.RoleUser, ToolCalls: []store.ToolCall{{ID: "c5", Name: "echo"}}}},
		"a result value that is not JSON":  {{Role: store.RoleTool, ToolCallID: "c1", Result: &store.ToolResult{Value: json.RawMessage(`nope`)}}},
		"a nil message":                    {nil},
		"a valid message then an empty id": {{Role: store.RoleUser}, {Role: store.RoleTool}},
	}
	for name, msgs := range cases {
		if err := s.Append(ctx, ws, th.ID, msgs...); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	msgs, err := s.Messages(ctx, ws, th.ID, store.Page{})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("after refused batches: %d messages, %v", len(msgs), err)
	}
	// Arguments are stored compact; a failed batch left the messages untouched.
	if got := string(msgs[0].ToolCalls[0].Args); got != `{"a":1}` {
		t.Errorf("args = %s", got)
	}
	if err := s.Append(ctx, ws, th.ID); err != nil {
		t.Errorf("empty append: %v", err)
	}
	if err := s.Append(ctx, ws, "thr_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("empty append to a missing thread: %v", err)
	}
	m := &store.Message{Role: store.RoleTool, ToolCallID: "c1", Result: &store.ToolResult{Status: "success"}}
	if err := s.Append(ctx, ws, th.ID, m, m); !errors.Is(err, store.ErrResultExists) {
		t.Fatalf("one message twice: %v", err)
	}
	if m.ID != "" || m.Seq != 0 {
		t.Fatalf("a failed append changed its messages: %+v", m)
	}
	if err := s.Append(ctx, ws, th.ID, m); err != nil || m.Seq != 2 || m.ThreadID != th.ID {
		t.Fatalf("append: %v, %+v", err, m)
	}
}

func TestUpdateThreadPanics(t *testing.T) {
	s, _ := openTemp(t)
	th := &store.Thread{WorkspaceID: "wsp_1"}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { recover() }()
		s.UpdateThread(ctx, "wsp_1", th.ID, func(x *store.Thread) error { x.StepCount = 7; panic("boom") })
	}()
	// The write lock was released and nothing was stored.
	got, err := s.UpdateThread(ctx, "wsp_1", th.ID, func(x *store.Thread) error { x.StepCount++; return nil })
	if err != nil || got.StepCount != 1 {
		t.Fatalf("after a panic: %+v, %v", got, err)
	}
}

// TestReadsDoNotWaitForWrites reads while a write transaction holds the write lock.
func TestReadsDoNotWaitForWrites(t *testing.T) {
	s, _ := openTemp(t)
	th := &store.Thread{WorkspaceID: "wsp_1"}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	_, err := s.UpdateThread(ctx, "wsp_1", th.ID, func(x *store.Thread) error {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := s.Thread(tctx, "wsp_1", th.ID); err != nil {
			return err
		}
		if _, err := s.Messages(tctx, "wsp_1", th.ID, store.Page{}); err != nil {
			return err
		}
		_, err := s.PendingCalls(tctx, "wsp_1", th.ID)
		return err
	})
	if err != nil {
		t.Fatalf("reading during a write: %v", err)
	}
}

// TestStoresSharingAFile runs two stores on one file, as two processes would: their writes
// wait for each other (no SQLITE_BUSY) and a call still gets one result.
func TestStoresSharingAFile(t *testing.T) {
	a, path := openTemp(t)
	b, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	th := &store.Thread{WorkspaceID: "wsp_1"}
	if err := a.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	const calls = 50
	for i := range calls {
		call := &store.Message{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: fmt.Sprint("c", i), Name: "echo"}}}
		if err := a.Append(ctx, "wsp_1", th.ID, call); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[string]int{}
	for _, s := range []*sqlite.Store{a, b, a, b} {
		wg.Go(func() {
			for i := range calls {
				id := fmt.Sprint("c", i)
				err := s.Append(ctx, "wsp_1", th.ID, &store.Message{Role: store.RoleTool, ToolCallID: id, Result: &store.ToolResult{Status: "success"}})
				switch {
				case err == nil:
					mu.Lock()
					wins[id]++
					mu.Unlock()
				case !errors.Is(err, store.ErrResultExists):
					t.Errorf("append: %v", err)
				}
			}
		})
	}
	wg.Wait()
	for i := range calls {
		if id := fmt.Sprint("c", i); wins[id] != 1 {
			t.Errorf("%s: %d results stored", id, wins[id])
		}
	}
	msgs, err := b.Messages(ctx, "wsp_1", th.ID, store.Page{Limit: 1000})
	if err != nil || len(msgs) != 2*calls {
		t.Fatalf("%d messages, %v", len(msgs), err)
	}
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Fatalf("seq %d at %d", m.Seq, i)
		}
	}
}
