package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"

	msqlite "modernc.org/sqlite"
)

// Checkpoints: copying the write-ahead log back into the database file.
//
// Left to itself, SQLite checkpoints inside the commit that takes the log past 1,000 pages
// (wal_autocheckpoint): that commit also copies the pages and waits for two fsyncs, a few
// milliseconds, while the median commit takes tens of microseconds. In the agent loop this was
// one step in a hundred and made the p99 step 19 times the median. So the writer connection runs
// with wal_autocheckpoint=0 and a goroutine of the store checkpoints on a connection of its own,
// which does not block the writer (PASSIVE), each time the writer has written checkpointPages
// pages since the last time it asked.
//
// A checkpoint never touches a transaction that has not been backfilled yet, so a crash at any
// point loses nothing that committed; what it must not do is let the log grow without bound. The
// log is only rewound (reused from its start) by a writer that begins while every frame in it
// has been copied, and a passive checkpoint racing a busy writer never quite catches up: each
// pass copies what was there when it started and the writer has added more by the time it ends.
// Hence two bounds:
//
//   - once the log holds about walSyncPages pages, the writer checkpoints itself after its
//     commit (what SQLite did every 1,000 pages, now every 4,000, and with most pages already
//     copied by the goroutine), so the next write transaction rewinds the log;
//   - when even that does not rewind it, because a reader holds an old snapshot, the goroutine
//     runs a RESTART checkpoint once the log passes walRestartPages: it holds the writers back
//     and waits (up to the busy timeout) for those readers to finish.
//
// The store only learns the log's size from checkpoints and from the pages its own writer
// writes (sqlite3_db_status's cache-write counter), so the sizes above are estimates within a
// transaction's pages; writers in other processes are bounded by their own stores.
const (
	checkpointPages = 1000
	walSyncPages    = 4 * checkpointPages
	walRestartPages = 8 * checkpointPages
)

var errCheckpointBusy = errors.New("sqlite: checkpoint: another checkpoint is running")

// checkpointer is the store's checkpoint goroutine and what it shares with the writer.
type checkpointer struct {
	db     *sql.DB // one connection, which runs only checkpoints
	kick   chan struct{}
	ctx    context.Context // ends when the store closes, and with it a checkpoint in progress
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has returned

	stopOnce sync.Once
	stopErr  error

	// written counts the pages the writer has written since Open; only the writer adds to it.
	written atomic.Int64

	// The log's size as the latest checkpoint found it (log) and written when that checkpoint
	// started (at): the log holds at most log + written - at pages now.
	mu      sync.Mutex
	log, at int64

	// The writer's own state, used under the store's write turn (wsem).
	pages    int   // the counter rawPages reads into
	kickedAt int64 // written when the writer last kicked the goroutine
	syncAt   int64 // written before which the writer does not try to checkpoint itself again
	rawPages func(driverConn any) error
}

// startCheckpointer opens the checkpoint connection and starts its goroutine.
func (s *Store) startCheckpointer(uri, busyMS string) error {
	db, err := sql.Open("sqlite", uri+"?"+url.Values{"_pragma": {"busy_timeout(" + busyMS + ")"}}.Encode())
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.rawPages = func(dc any) error {
		n, _, err := dc.(msqlite.DBStatus).Status(msqlite.DBStatusCacheWrite, true)
		c.pages = n
		return err
	}
	s.ckpt = c
	go s.checkpointLoop()
	return nil
}

// stop ends the goroutine, interrupting a checkpoint in progress, and closes its connection.
// Calls after the first do nothing.
func (c *checkpointer) stop() error {
	c.stopOnce.Do(func() {
		c.cancel()
		<-c.done
		c.stopErr = c.db.Close()
	})
	return c.stopErr
}

// afterCommit runs after each commit of the writer, in its write turn: it counts the pages the
// transaction wrote to the log, asks the goroutine for a checkpoint every checkpointPages pages
// and checkpoints on the writer connection when the log has grown past walSyncPages.
func (s *Store) afterCommit() {
	c := s.ckpt
	if c == nil {
		return
	}
	c.pages = 0
	if err := s.wc.Raw(c.rawPages); err != nil || c.pages == 0 {
		return
	}
	written := c.written.Add(int64(c.pages))
	c.kickEvery(written)
	if c.logSize(written) < walSyncPages || written < c.syncAt {
		return
	}
	s.checkpointWriter(written)
}

// kickEvery asks the goroutine for a checkpoint each time checkpointPages more pages are
// written.
func (c *checkpointer) kickEvery(written int64) {
	if written-c.kickedAt < checkpointPages {
		return
	}
	c.kickedAt = written
	select {
	case c.kick <- struct{}{}:
	default: // one is pending already
	}
}

// logSize is the pages the log holds once written pages are written.
func (c *checkpointer) logSize(written int64) int64 {
	c.mu.Lock()
	size := c.log + written - c.at
	c.mu.Unlock()
	return size
}

// checkpointWriter checkpoints on the writer connection, once written pages are written.
// Outside the transaction and without the caller's cancellation: the commit is done whatever
// happens here.
func (s *Store) checkpointWriter(written int64) {
	c := s.ckpt
	_, complete, err := checkpoint(context.Background(), s.wc, "PASSIVE")
	switch {
	case errors.Is(err, errCheckpointBusy):
		// The goroutine is checkpointing, which takes milliseconds: try again at the next
		// commit (a checkpoint that finds the lock taken returns at once).
	case err != nil || !complete:
		// A reader holds an old snapshot: trying again at every commit would only add fsyncs.
		c.syncAt = written + checkpointPages
	default:
		// No writer can come in between: this store's next write rewinds the log.
		c.record(0, written)
	}
}

// record notes that the log held log pages when written was at.
func (c *checkpointer) record(log, at int64) {
	c.mu.Lock()
	c.log, c.at = log, at
	c.mu.Unlock()
}

func (s *Store) checkpointLoop() {
	c := s.ckpt
	defer close(c.done)
	restartAt := int64(walRestartPages)
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.kick:
		}
		restartAt = s.checkpointPass(restartAt)
	}
}

// checkpointPass is one turn of the goroutine: a passive checkpoint and, when the log has
// reached restartAt pages, a RESTART. It returns the size at which to restart next.
func (s *Store) checkpointPass(restartAt int64) int64 {
	c := s.ckpt
	at := c.written.Load()
	log, _, err := checkpoint(c.ctx, c.db, "PASSIVE")
	if err != nil {
		return restartAt // the next kick tries again; the writer's own bound still holds
	}
	c.record(log, at)
	if log < walRestartPages {
		return walRestartPages
	}
	if log < restartAt {
		return restartAt
	}
	// A RESTART that times out on a reader holding its snapshot is not retried before the log
	// has grown by half as much again, so such a reader costs the writers a busy timeout that
	// often, not at every kick.
	next := log + walRestartPages/2
	select {
	case s.wsem <- struct{}{}:
	case <-c.ctx.Done():
		return next
	}
	at = c.written.Load()
	_, complete, err := checkpoint(c.ctx, c.db, "RESTART")
	<-s.wsem
	if err != nil || !complete {
		return next
	}
	c.record(0, at)
	return walRestartPages
}

// checkpoint runs a checkpoint of the given mode on q and returns the log's size in pages and
// whether every page of it has been copied to the database.
func checkpoint(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, mode string) (log int64, complete bool, err error) {
	var busy, done int64
	if err := q.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &log, &done); err != nil {
		return 0, false, fmt.Errorf("sqlite: checkpoint: %w", err)
	}
	if log < 0 {
		// Another checkpoint held the lock (or the database is not in WAL mode): nothing was
		// learnt about the log.
		return 0, false, errCheckpointBusy
	}
	return log, busy == 0 && done == log, nil
}
