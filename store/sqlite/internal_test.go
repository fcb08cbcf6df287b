package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

// TestConnectionSettings checks the pragmas each pool runs with.
func TestConnectionSettings(t *testing.T) {
	for _, tc := range []struct {
		sync string
		want int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{{"", 1}, {"normal", 1}, {"FULL", 2}} {
		s, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{Synchronous: tc.sync})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var mode string
		var sync, fk, busy, queryOnly int
		if err := s.wc.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("writer journal_mode %q, %v", mode, err)
		}
		if err := s.wc.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil || sync != tc.want {
			t.Errorf("Synchronous %q: writer synchronous %d, %v, want %d", tc.sync, sync, err, tc.want)
		}
		if err := s.wc.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
			t.Errorf("writer foreign_keys %d, %v", fk, err)
		}
		if err := s.wc.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy); err != nil || busy != 5000 {
			t.Errorf("writer busy_timeout %d, %v", busy, err)
		}
		if err := s.r.QueryRowContext(ctx, `PRAGMA query_only`).Scan(&queryOnly); err != nil || queryOnly != 1 {
			t.Errorf("reader query_only %d, %v", queryOnly, err)
		}
		if err := s.r.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("reader journal_mode %q, %v", mode, err)
		}
		if _, err := s.r.ExecContext(ctx, `DELETE FROM threads`); err == nil {
			t.Error("the read pool can write")
		}
		s.Close()
	}
}

func TestMigrationFiles(t *testing.T) {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].Version != 1 {
		t.Fatalf("migrations: %+v", ms)
	}
}

// TestWriteTransactions: a write that fails, panics or is cancelled leaves nothing behind and
// the writer connection usable; writers waiting for their turn give up when their context ends.
func TestWriteTransactions(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	insert := func(tx querier, name string) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO workspaces (id, name, created_at, updated_at) VALUES (?, ?, 0, 0)`, "wsp_"+name, name)
		return err
	}
	count := func() int {
		var n int
		if err := s.wc.QueryRowContext(ctx, `SELECT count(*) FROM workspaces`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	boom := errors.New("boom")
	mustInsert := func(tx querier, name string) {
		if err := insert(tx, name); err != nil {
			t.Fatalf("insert %s: %v", name, err)
		}
	}
	if err := s.write(ctx, func(_ context.Context, tx querier) error { mustInsert(tx, "a"); return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing write: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not come through")
			}
		}()
		s.write(ctx, func(_ context.Context, tx querier) error { mustInsert(tx, "b"); panic("in the middle of a write") })
	}()
	cctx, cancel := context.WithCancel(ctx)
	err = s.write(cctx, func(_ context.Context, tx querier) error {
		mustInsert(tx, "c")
		cancel()
		return insert(tx, "d") // interrupted
	})
	if err == nil {
		t.Fatal("a write whose context was cancelled in the middle succeeded")
	}
	if n := count(); n != 0 {
		t.Fatalf("%d workspaces after three failed writes, want 0", n)
	}
	if err := s.write(ctx, func(_ context.Context, tx querier) error { return insert(tx, "e") }); err != nil {
		t.Fatalf("a write after the failed ones: %v", err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d workspaces, want 1", n)
	}

	// While one write holds the turn, another gives up when its context ends.
	holding, release := make(chan struct{}), make(chan struct{})
	go s.write(ctx, func(context.Context, querier) error { close(holding); <-release; return nil })
	<-holding
	short, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel2()
	if err := s.write(short, func(context.Context, querier) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for the turn: %v, want DeadlineExceeded", err)
	}
	close(release)
	if err := s.write(ctx, func(_ context.Context, tx querier) error { return insert(tx, "f") }); err != nil {
		t.Fatal(err)
	}
}

// TestCancelledWritesNeverWedgeTheWriter: writes whose context ends at any moment (before,
// during or just as their BEGIN or a statement completes) leave the writer connection outside
// any transaction, so the next write succeeds.
func TestCancelledWritesNeverWedgeTheWriter(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := range 400 {
		cctx, cancel := context.WithCancel(ctx)
		timer := time.AfterFunc(time.Duration(i%60)*time.Microsecond, cancel)
		_ = s.write(cctx, func(_ context.Context, tx querier) error {
			_, err := tx.ExecContext(cctx, `INSERT INTO workspaces (id, name, created_at, updated_at) VALUES (?, 'x', 0, 0)`, fmt.Sprintf("wsp_c%d", i))
			return err
		})
		timer.Stop()
		cancel()
		err := s.write(ctx, func(_ context.Context, tx querier) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO workspaces (id, name, created_at, updated_at) VALUES (?, 'y', 0, 0)`, fmt.Sprintf("wsp_ok%d", i))
			return err
		})
		if err != nil {
			t.Fatalf("write %d after a cancelled one: %v", i, err)
		}
	}
}

// TestDialectConstraint checks that the dialect tells SQLite's constraint violations apart, as
// the shared SQL reports them: the checks before each write leave them to races, so the store's
// methods alone never reach them on SQLite.
func TestDialectConstraint(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.wc.ExecContext(ctx, `INSERT INTO users (id, email, email_key, name, created_at) VALUES ('usr_1', 'a@b', 'a@b', '', 0)`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, sql string
		want      error
	}{
		{"primary key", `INSERT INTO users (id, email, email_key, name, created_at) VALUES ('usr_1', 'c@d', 'c@d', '', 0)`, store.ErrConflict},
		{"unique", `INSERT INTO users (id, email, email_key, name, created_at) VALUES ('usr_2', 'a@b', 'a@b', '', 0)`, store.ErrConflict},
		{"foreign key", `INSERT INTO memberships (workspace_id, user_id, role, created_at) VALUES ('wsp_none', 'usr_1', 'admin', 0)`, store.ErrNotFound},
		{"check", `INSERT INTO workspaces (id, name, retention_tier, created_at, updated_at) VALUES ('wsp_1', 'w', 'forever', 0, 0)`, store.ErrInvalid},
		{"not a constraint", `INSERT INTO no_such_table VALUES (1)`, nil},
	} {
		_, err := s.wc.ExecContext(ctx, tc.sql)
		if err == nil {
			t.Fatalf("%s: no error", tc.name)
		}
		if v := dialect.Constraint(err); v.Kind != tc.want || (v.Kind != nil && v.Message == "") {
			t.Errorf("%s: %v: kind %v, message %q; want %v", tc.name, err, v.Kind, v.Message, tc.want)
		}
	}
}
