package sqlite

import (
	"context"
	"path/filepath"
	"testing"
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
		if err := s.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("writer journal_mode %q, %v", mode, err)
		}
		if err := s.w.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil || sync != tc.want {
			t.Errorf("Synchronous %q: writer synchronous %d, %v, want %d", tc.sync, sync, err, tc.want)
		}
		if err := s.w.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
			t.Errorf("writer foreign_keys %d, %v", fk, err)
		}
		if err := s.w.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy); err != nil || busy != 5000 {
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
	if len(ms) == 0 || ms[0].version != 1 {
		t.Fatalf("migrations: %+v", ms)
	}
}
