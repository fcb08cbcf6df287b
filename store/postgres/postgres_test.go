package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/storetest"
)

func testDSN(tb testing.TB) string { return pgtest.DSN(tb) }

func newSchema(tb testing.TB, dsn string) string { return pgtest.Schema(tb, dsn) }

// openTest opens a store in a fresh schema, closed and dropped when the test ends.
func openTest(tb testing.TB) *Store {
	tb.Helper()
	dsn := testDSN(tb)
	schema := newSchema(tb, dsn)
	s, err := Open(context.Background(), dsn, WithSchema(schema))
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	testDSN(t)
	storetest.Run(t, func(t *testing.T) store.Store { return openTest(t) })
}

type appliedMigration struct {
	Version   int
	Name      string
	AppliedAt time.Time
}

func appliedMigrations(t *testing.T, s *Store) []appliedMigration {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), "SELECT version, name, applied_at FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowToStructByPos[appliedMigration])
	if err != nil {
		t.Fatal(err)
	}
	return applied
}

func TestMigrationsAppliedOnce(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	s, err := Open(ctx, dsn, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	first := appliedMigrations(t, s)
	s.Close()
	if len(first) != latestVersion() {
		t.Fatalf("%d migrations recorded, want %d", len(first), latestVersion())
	}
	for i, m := range first {
		if m.Version != i+1 || m.Name != migrations[i].Name {
			t.Fatalf("migration %d recorded as %+v", i+1, m)
		}
	}

	s, err = Open(ctx, dsn, WithSchema(schema))
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	defer s.Close()
	second := appliedMigrations(t, s)
	if len(second) != len(first) {
		t.Fatalf("reopening recorded %d migrations, want %d", len(second), len(first))
	}
	for i := range first {
		if !second[i].AppliedAt.Equal(first[i].AppliedAt) {
			t.Fatalf("migration %d was applied again on reopen", first[i].Version)
		}
	}
}

// TestConcurrentOpen starts several nodes at once on a new database (an empty schema, or no
// schema at all): the advisory lock makes them migrate one after the other, so all succeed and
// the migrations run once.
func TestConcurrentOpen(t *testing.T) {
	for _, precreate := range []bool{true, false} {
		name := "NoSchema"
		if precreate {
			name = "EmptySchema"
		}
		t.Run(name, func(t *testing.T) { testConcurrentOpen(t, precreate) })
	}
}

func testConcurrentOpen(t *testing.T, precreate bool) {
	ctx := context.Background()
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	if precreate {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
	}
	const nodes = 8
	stores := make([]*Store, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { stores[i], errs[i] = Open(ctx, dsn, WithSchema(schema)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: Open: %v", i, err)
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	if got := appliedMigrations(t, stores[0]); len(got) != latestVersion() {
		t.Fatalf("%d migrations recorded, want %d", len(got), latestVersion())
	}
	// Every node sees the same tables.
	th := &store.Thread{WorkspaceID: "wsp_1"}
	if err := stores[0].CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[nodes-1].Thread(ctx, "wsp_1", th.ID); err != nil {
		t.Fatal(err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	s, err := Open(ctx, dsn, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	future := latestVersion() + 1
	if _, err := s.pool.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, 'from_the_future')", future); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, dsn, WithSchema(schema))
	if err == nil {
		s.Close()
		t.Fatal("a database of a newer version was opened")
	}
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open: %v, want ErrSchemaTooNew", err)
	}
	for _, want := range []string{"version " + strconv.Itoa(future), "up to " + strconv.Itoa(latestVersion())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestMigrationFiles checks the embedded migrations (the loader's rules are tested in
// store/sqlstore).
func TestMigrationFiles(t *testing.T) {
	if len(migrations) == 0 {
		t.Fatal("no migrations embedded")
	}
	for i, m := range migrations {
		if m.Version != i+1 || m.Name == "" || strings.TrimSpace(m.SQL) == "" {
			t.Fatalf("migration %d: %+v", i, m)
		}
	}
}

func TestOpenBadDSN(t *testing.T) {
	if _, err := Open(context.Background(), "postgres://nobody@127.0.0.1:1/x?connect_timeout=1"); err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
	if _, err := Open(context.Background(), "not a dsn = = ="); err == nil {
		t.Fatal("Open of a malformed DSN succeeded")
	}
}

// TestResultUniqueInDatabase writes a second result with plain SQL, around the store: the
// unique index refuses it, so exactly-once holds for any writer of the database.
func TestResultUniqueInDatabase(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	th := &store.Thread{WorkspaceID: "wsp_1"}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "wsp_1", th.ID,
		&store.Message{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "c1", Name: "echo"}}},
		&store.Message{Role: store.RoleTool, ToolCallID: "c1", Result: &store.ToolResult{Status: "success"}}); err != nil {
		t.Fatal(err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO messages (id, thread_id, seq, role, tool_call_id, created_at)
VALUES ('msg_x', $1, 99, 'tool', 'c1', now())`, th.ID)
	if got := dialect.Err("raw insert", err); !errors.Is(got, store.ErrResultExists) {
		t.Fatalf("a second result written with SQL: %v, want a unique violation", err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO messages (id, thread_id, seq, role, tool_call_id, created_at)
VALUES ('msg_y', $1, 98, 'tool', 'nobody_asked', now())`, th.ID)
	if got := dialect.Err("raw insert", err); !errors.Is(got, store.ErrInvalid) {
		t.Fatalf("a result for an unknown call written with SQL: %v, want a foreign key violation", err)
	}
}

// TestAppendRules covers the rules Append enforces beyond the conformance suite.
func TestAppendRules(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	const ws = "wsp_1"
	th := &store.Thread{WorkspaceID: ws}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	call := func(ids ...string) *store.Message {
		m := &store.Message{Role: store.RoleAssistant}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, store.ToolCall{ID: id, Name: "echo", Args: json.RawMessage(`{"x": 1}`)})
		}
		return m
	}
	res := func(id string) *store.Message {
		return &store.Message{Role: store.RoleTool, ToolCallID: id, Result: &store.ToolResult{Status: "success"}}
	}
	if err := s.Append(ctx, ws, th.ID, call("c1")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		msgs []*store.Message
		want error
	}{
		{"call id repeated in a later message", []*store.Message{call("c1")}, store.ErrInvalid},
		{"call id repeated in one batch", []*store.Message{call("c2"), call("c2")}, store.ErrInvalid},
		{"call id repeated in one message", []*store.Message{call("c3", "c3")}, store.ErrInvalid},
		{"result before its call", []*store.Message{res("c4"), call("c4")}, store.ErrInvalid},
		{"call without an id", []*store.Message{call("")}, store.ErrInvalid},
		{"arguments not JSON", []*store.Message{{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "c5", Args: json.RawMessage(`{`)}}}}, store.ErrInvalid},
		{"calls on a user message", []*store.Message{{Role: store.RoleUser, ToolCalls: []store.ToolCall{{ID: "c6"}}}}, store.ErrInvalid},
		{"result on a user message", []*store.Message{{Role: store.RoleUser, ToolCallID: "c1"}}, store.ErrInvalid},
		{"NUL in content", []*store.Message{{Role: store.RoleUser, Content: "a\x00b"}}, store.ErrInvalid},
		{"message of another thread", []*store.Message{{Role: store.RoleUser, ThreadID: "thr_other"}}, store.ErrInvalid},
		{"nil message", []*store.Message{nil}, store.ErrInvalid},
	}
	for _, c := range cases {
		if err := s.Append(ctx, ws, th.ID, c.msgs...); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// None of the refused batches left anything, and seqs go on without a gap.
	m := &store.Message{Role: store.RoleUser, Content: "next"}
	if err := s.Append(ctx, ws, th.ID, m); err != nil {
		t.Fatal(err)
	}
	if m.Seq != 2 {
		t.Fatalf("seq after refused batches = %d, want 2", m.Seq)
	}
	// An empty batch checks the thread and stores nothing.
	if err := s.Append(ctx, ws, th.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "wsp_other", th.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("empty append in another workspace: %v", err)
	}
	// Arguments come back byte for byte.
	pending, err := s.PendingCalls(ctx, ws, th.ID)
	if err != nil || len(pending) != 1 || string(pending[0].Args) != `{"x": 1}` {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
}

// TestTimes checks that times are UTC, to the microsecond, and grow with seq.
func TestTimes(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	th := &store.Thread{WorkspaceID: "wsp_1"}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Append(ctx, "wsp_1", th.ID, &store.Message{Role: store.RoleUser}); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := s.Messages(ctx, "wsp_1", th.ID, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	times := []time.Time{th.CreatedAt, th.UpdatedAt}
	for i, m := range msgs {
		times = append(times, m.CreatedAt)
		if i > 0 && m.CreatedAt.Before(msgs[i-1].CreatedAt) {
			t.Errorf("message %d is older than message %d", m.Seq, msgs[i-1].Seq)
		}
	}
	for _, at := range times {
		if at.Location() != time.UTC || at.Truncate(time.Microsecond) != at {
			t.Errorf("time %v is not UTC to the microsecond", at)
		}
	}
}

// TestDeleteThreadCascades checks that the schema lets a thread be deleted with its history
// (what a retention worker will do).
func TestDeleteThreadCascades(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	th := &store.Thread{WorkspaceID: "wsp_1"}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "wsp_1", th.ID,
		&store.Message{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "c1", Name: "echo"}}},
		&store.Message{Role: store.RoleTool, ToolCallID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM threads WHERE id = $1", th.ID); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM messages) + (SELECT count(*) FROM tool_calls)").Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d rows left, %v", left, err)
	}
}

func TestSchemaNameQuoted(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	schema := newSchema(t, dsn) + `_Odd "Name"`
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			conn.Close(ctx)
		}
	})
	s, err := Open(ctx, dsn, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateThread(ctx, &store.Thread{WorkspaceID: "wsp_1"}); err != nil {
		t.Fatal(err)
	}
}
