package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// openCheckpointTest opens a store with a table of a few rows whose blobs every burst write
// rewrites, so the log grows by about a dozen pages per transaction and the database does not.
func openCheckpointTest(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.write(context.Background(), func(ctx context.Context, tx querier) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE burst (id INTEGER PRIMARY KEY, b BLOB);
			INSERT INTO burst VALUES (1, NULL), (2, NULL), (3, NULL), (4, NULL)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return s, path
}

// burst writes at least pages pages to the log, one transaction at a time, through the store's
// writer.
func burst(t *testing.T, s *Store, pages int64) {
	t.Helper()
	for start := s.ckpt.written.Load(); s.ckpt.written.Load()-start < pages; {
		if err := s.write(context.Background(), func(ctx context.Context, tx querier) error {
			_, err := tx.ExecContext(ctx, `UPDATE burst SET b = randomblob(12000)`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// haltCheckpointer ends the goroutine but keeps its connection, for a test to run its passes
// itself.
func haltCheckpointer(s *Store) {
	s.ckpt.cancel()
	<-s.ckpt.done
	s.ckpt.ctx = context.Background()
}

// walPages is the number of frames the log file has room for: it only grows while the log is
// not rewound, so it is the largest the log has been.
func walPages(t *testing.T, s *Store, path string) int64 {
	t.Helper()
	var pageSize int64
	if err := s.wc.QueryRowContext(context.Background(), `PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return (fi.Size() - 32) / (pageSize + 24) // the log's header, then a header per frame
}

// TestCommitsDoNotCheckpoint: the writer runs without auto-checkpoints, so with the goroutine
// stopped, a log well past SQLite's 1,000 pages (and below the writer's own bound) is never
// rewound by a commit.
func TestCommitsDoNotCheckpoint(t *testing.T) {
	s, path := openCheckpointTest(t)
	var auto int
	if err := s.wc.QueryRowContext(context.Background(), `PRAGMA wal_autocheckpoint`).Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("writer wal_autocheckpoint %d, %v; want 0", auto, err)
	}
	haltCheckpointer(s)
	burst(t, s, 3*checkpointPages)
	if n := walPages(t, s, path); n < 3*checkpointPages {
		t.Errorf("log of %d pages after writing %d: a commit checkpointed", n, 3*checkpointPages)
	}
}

// TestBackgroundCheckpoint: the goroutine's checkpoint copies the log, and the next write
// rewinds it.
func TestBackgroundCheckpoint(t *testing.T) {
	s, path := openCheckpointTest(t)
	haltCheckpointer(s)
	burst(t, s, 2*checkpointPages)
	s.checkpointPass(walRestartPages)
	before := walPages(t, s, path)
	burst(t, s, 1)
	log, _, err := checkpoint(context.Background(), s.wc, "PASSIVE")
	if err != nil {
		t.Fatal(err)
	}
	if log >= before || log > checkpointPages/10 {
		t.Errorf("log of %d pages after a checkpoint of %d and one write: not rewound", log, before)
	}
}

// TestWALBoundedUnderBurst: with the goroutine on, a burst of writes many times the bound leaves
// the log file within it (plus what the goroutine's pass lets the writer add).
func TestWALBoundedUnderBurst(t *testing.T) {
	s, path := openCheckpointTest(t)
	burst(t, s, 3*walSyncPages)
	if n, limit := walPages(t, s, path), int64(2*walSyncPages+checkpointPages); n > limit {
		t.Errorf("log reached %d pages under a burst of %d; want at most %d", n, 3*walSyncPages, limit)
	}
}

// TestRestartWhenReadersBlock: a reader holding an old snapshot stops passive checkpoints from
// copying the log; once the log passes walRestartPages the goroutine's RESTART waits for it, and
// the log is rewound after it ends.
func TestRestartWhenReadersBlock(t *testing.T) {
	s, path := openCheckpointTest(t)
	haltCheckpointer(s)
	ctx := context.Background()
	rtx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := rtx.QueryRowContext(ctx, `SELECT count(*) FROM burst`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	burst(t, s, walRestartPages+checkpointPages)
	if log, complete, err := checkpoint(ctx, s.wc, "PASSIVE"); err != nil || complete {
		t.Fatalf("with a reader on an old snapshot: checkpoint of %d pages complete %v, %v", log, complete, err)
	}
	passed := make(chan int64)
	go func() { passed <- s.checkpointPass(walRestartPages) }()
	rtx.Rollback() // before or while the RESTART waits for it
	if next := <-passed; next != walRestartPages {
		t.Fatalf("checkpointPass returned %d: the RESTART did not complete", next)
	}
	before := walPages(t, s, path)
	burst(t, s, 1)
	log, _, err := checkpoint(ctx, s.wc, "PASSIVE")
	if err != nil {
		t.Fatal(err)
	}
	if before < walRestartPages || log > checkpointPages/10 {
		t.Errorf("log file of %d pages, then %d pages after the RESTART and one write: not rewound", before, log)
	}
}

// TestCloseStopsCheckpointer: Close ends the goroutine, including one busy checkpointing.
func TestCloseStopsCheckpointer(t *testing.T) {
	s, _ := openCheckpointTest(t)
	burst(t, s, 2*checkpointPages)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.ckpt.done:
	default:
		t.Fatal("the checkpoint goroutine outlived Close")
	}
	if err := s.ckpt.stop(); err != nil {
		t.Fatalf("a second stop: %v", err)
	}
}
