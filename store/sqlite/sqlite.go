// Package sqlite is the embedded store backend, the default: one database file, no server, no
// cgo (it runs on modernc.org/sqlite, SQLite translated to Go). It implements store.Store and
// passes the conformance suite in store/storetest.
//
// # Durability
//
// The database runs in WAL mode. Open takes Options.Synchronous:
//
//   - "NORMAL" (the default): a transaction that returned is safe if the process crashes or is
//     killed at any moment (the crash test kills writers with SIGKILL), but the last few
//     transactions may be rolled back if the machine loses power or the kernel panics before
//     the write-ahead log reaches the disk. The database itself stays consistent either way.
//
//   - "FULL": every commit waits for the write-ahead log to be flushed to stable storage
//     (fsync), so a transaction that returned also survives a power loss. Appends are then
//     bounded by the disk's flush latency.
//
// To ask for FULL:
//
//	s, err := sqlite.Open("quiver.db", sqlite.Options{Synchronous: "FULL"})
//
// # Concurrency
//
// A Store holds two connection pools on the same file. Writes go through a single connection,
// held for the store's life, and each is one BEGIN IMMEDIATE transaction, so writers in one
// process queue in Go rather than racing for the SQLite lock (no SQLITE_BUSY); writers in other
// processes wait for the lock under a busy timeout. Reads use a separate pool of read-only connections and, thanks to WAL,
// never wait for a writer. A result is stored at most once per call id even with several
// processes writing (see Schema).
//
// # Schema
//
// Threads and their history: threads (with their run state and place in the children
// registry); messages, numbered 1, 2, 3... per thread by a unique
// (thread_id, seq); and tool_calls, one row per call an assistant message asks for, with a
// unique (thread_id, call_id). A tool message references its call (a foreign key, so a result
// answers a call of its own thread) and a unique index on (thread_id, tool_call_id) over tool
// messages makes a second result for a call impossible, whichever process writes it; likewise
// call_decisions holds at most one decision per call. queued_messages waits for a thread's
// next step, thread_logs is its log, thread_states has a row for its state object and one per
// instance (store.StateWrite), and thread_state_values the values written in them, by path.
// Beside
// them: files and file_usage (the thread file system, store.Files), variables
// (store.Variables) and the entities of store.Entities (workspaces, users, memberships,
// schemas, functions and their versions, tools), whose SQL, shared with store/postgres, is
// store/sqlstore's (see dialect.go).
//
// Migrations are numbered SQL files beside PostgreSQL's in store/sqlstore/migrations
// (0001_threads_messages.sqlite.sql, 0002_...). Open applies the ones a database lacks, each in its own
// transaction, and records them in the schema_migrations table; a database written by a newer
// version of this package is refused with ErrSchemaTooNew.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/quiverhq/quiver/store"
)

// Options tunes Open. The zero value is the default.
type Options struct {
	// Synchronous is SQLite's synchronous setting: "NORMAL" (the default, safe against process
	// crashes) or "FULL" (also safe against power loss, slower). See the package documentation.
	Synchronous string
	// BusyTimeout is how long a write waits for another process holding the database lock
	// (default 5 seconds).
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool (default: the number of CPUs, at least 4).
	ReadConns int
}

// Store is the SQLite backend of store.Store. It is safe for concurrent use.
//
// It also implements store.Entities, store.Files and store.Variables, and WithFileLimits
// (store.Files under other caps): those methods are sqlstore.Store's, which Store embeds (see
// dialect.go), so this package's documentation does not list them.
type Store struct {
	w  *sql.DB   // a pool of one connection, which wc holds
	wc *sql.Conn // the writer connection: every write transaction
	r  *sql.DB   // read-only pool

	// wsem admits one write transaction at a time on wc.
	wsem chan struct{}
	// BEGIN IMMEDIATE, COMMIT and ROLLBACK prepared once: database/sql's own transactions parse
	// them anew each time, which is a tenth of a small write's cost.
	wBegin, wCommit, wRollback *sql.Stmt

	// Prepared statements of the writer connection.
	wThreadSeq, wInsertMessage, wInsertCall, wCallState, wMessageExists, wThread, wUpdateThread, wInsertThread, wThreadWorkspace,
	wInsertTags, wDeleteTags *sql.Stmt
	// Prepared statements of the read pool.
	rThread, rThreadExists, rLastMessages, rChildren, rPending, rQueued *sql.Stmt

	// ckpt checkpoints the log off the writer's path (see checkpoint.go).
	ckpt *checkpointer

	// The entities, files, variables and part of the thread state (see dialect.go).
	*shared
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.BatchAppender = (*Store)(nil)
)

// querier is what the store's SQL runs on: the writer connection inside a write transaction,
// or a read transaction of the read pool.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// Open opens the database file at path (a file name, not a URI or ":memory:"), creating it if
// needed, and applies the schema migrations it lacks. Pass at most one Options.
func Open(path string, opts ...Options) (*Store, error) {
	o, err := openOptions(opts)
	if err != nil {
		return nil, err
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlite: Open wants a file path, not %q", path)
	}
	uri, err := fileURI(path)
	if err != nil {
		return nil, err
	}
	busyMS := fmt.Sprint(o.BusyTimeout.Milliseconds())
	w, err := openWriter(path, uri, busyMS, o)
	if err != nil {
		return nil, err
	}
	s := &Store{w: w, wsem: make(chan struct{}, 1)}
	// Readers open once the writer has switched the file to WAL (a persistent setting).
	if s.r, err = openReaders(uri, busyMS, o.ReadConns); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := s.start(path, uri, busyMS); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openOptions is the Options Open was given (at most one), with the defaults filled in.
func openOptions(opts []Options) (Options, error) {
	var o Options
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		return o, errors.New("sqlite: Open takes at most one Options")
	}
	return o.withDefaults()
}

// start readies a store whose pools are open: the writer's connection, its statements, the
// checkpointer.
func (s *Store) start(path, uri, busyMS string) error {
	s.shared = s.newShared()
	var err error
	if s.wc, err = s.w.Conn(context.Background()); err != nil {
		return fmt.Errorf("sqlite: %s: %w", path, err)
	}
	if err := s.prepare(); err != nil {
		return fmt.Errorf("sqlite: %s: %w", path, err)
	}
	if err := s.startCheckpointer(uri, busyMS); err != nil {
		return fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return nil
}

// withDefaults checks o and fills in the defaults of its zero fields; Synchronous comes back
// upper case.
func (o Options) withDefaults() (Options, error) {
	sync := strings.ToUpper(o.Synchronous)
	switch sync {
	case "":
		sync = "NORMAL"
	case "NORMAL", "FULL":
	default:
		return o, fmt.Errorf("sqlite: Synchronous %q: want NORMAL or FULL", o.Synchronous)
	}
	o.Synchronous = sync
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.ReadConns <= 0 {
		o.ReadConns = max(4, runtime.NumCPU())
	}
	return o, nil
}

// openWriter opens the pool of the one writer connection and applies the migrations the
// database lacks.
func openWriter(path, uri, busyMS string, o Options) (*sql.DB, error) {
	w, err := sql.Open("sqlite", uri+"?"+url.Values{
		"_pragma": {"busy_timeout(" + busyMS + ")", "foreign_keys(1)", "journal_mode(WAL)", "journal_size_limit(67108864)", "wal_autocheckpoint(0)", "synchronous(" + o.Synchronous + ")"},
		"_txlock": {"immediate"},
	}.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	// Switching a new file to WAL takes an exclusive lock without waiting for it, so processes
	// creating the same database at once can see SQLITE_BUSY here: retry until BusyTimeout.
	for deadline := time.Now().Add(o.BusyTimeout); ; {
		err := migrate(context.Background(), w)
		if err == nil {
			return w, nil
		}
		if !isBusy(err) || time.Now().After(deadline) {
			w.Close()
			return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openReaders opens the pool of read-only connections.
func openReaders(uri, busyMS string, conns int) (*sql.DB, error) {
	r, err := sql.Open("sqlite", uri+"?"+url.Values{
		"_pragma": {"busy_timeout(" + busyMS + ")", "query_only(1)"},
	}.Encode())
	if err != nil {
		return nil, err
	}
	r.SetMaxOpenConns(conns)
	r.SetMaxIdleConns(conns)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)
	return r, nil
}

// fileURI turns a path into a SQLite URI, so that no character of the path is taken for a
// query parameter.
func fileURI(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlite: %s: %w", path, err)
	}
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // C:/x -> /C:/x
	}
	return "file:" + (&url.URL{Path: p}).EscapedPath(), nil
}

// Close stops the store's checkpoints and closes its connections. It does not wait for
// operations in flight to finish first; call it once the store is no longer used.
func (s *Store) Close() error {
	var errs []error
	if s.ckpt != nil {
		errs = append(errs, s.ckpt.stop())
	}
	for _, st := range []*sql.Stmt{s.wBegin, s.wCommit, s.wRollback, s.wThreadSeq, s.wInsertMessage, s.wInsertCall, s.wCallState, s.wMessageExists, s.wThread,
		s.wUpdateThread, s.wInsertThread, s.wThreadWorkspace, s.wInsertTags, s.wDeleteTags, s.rThread, s.rThreadExists, s.rLastMessages,
		s.rChildren, s.rPending, s.rQueued} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	// Readers first: the last connection to close checkpoints the log, let it be the writer.
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	if s.wc != nil {
		errs = append(errs, s.wc.Close())
	}
	errs = append(errs, s.w.Close())
	return errors.Join(errs...)
}

const (
	threadCols = `id, workspace_id, agent_id, user_id, parent_id, tags, step_count, current_side, stopped, status, blocking, resumable, state, created_at, updated_at`
	// threadColsT are threadCols of the table aliased t, for a statement that joins it.
	threadColsT = `t.id, t.workspace_id, t.agent_id, t.user_id, t.parent_id, t.tags, t.step_count, t.current_side, t.stopped, t.status, t.blocking, t.resumable, t.state, t.created_at, t.updated_at`
	messageCols = `id, seq, role, content, tool_calls, tool_call_id, tool_name, result, created_at, side, usage`
)

func (s *Store) prepare() error {
	var err error
	prep := func(db interface {
		PrepareContext(context.Context, string) (*sql.Stmt, error)
	}, dst **sql.Stmt, query string) {
		if err != nil {
			return
		}
		if *dst, err = db.PrepareContext(context.Background(), query); err != nil {
			err = fmt.Errorf("prepare %q: %w", query, err)
		}
	}
	prep(s.wc, &s.wBegin, `BEGIN IMMEDIATE`)
	prep(s.wc, &s.wCommit, `COMMIT`)
	prep(s.wc, &s.wRollback, `ROLLBACK`)
	prep(s.wc, &s.wThreadSeq, `SELECT (SELECT max(seq) FROM messages WHERE thread_id = ?1),
		EXISTS (SELECT 1 FROM queued_messages WHERE thread_id = ?1) FROM threads WHERE id = ?1 AND workspace_id = ?2`)
	prep(s.wc, &s.wInsertMessage, `INSERT INTO messages (`+messageCols+`, thread_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	prep(s.wc, &s.wInsertCall, `INSERT INTO tool_calls (thread_id, call_id, seq, idx, name, args, reasoning) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	prep(s.wc, &s.wCallState, `SELECT EXISTS (SELECT 1 FROM tool_calls WHERE thread_id = ?1 AND call_id = ?2),
		EXISTS (SELECT 1 FROM messages WHERE thread_id = ?1 AND tool_call_id = ?2)`)
	prep(s.wc, &s.wMessageExists, `SELECT EXISTS (SELECT 1 FROM messages WHERE id = ?)`)
	prep(s.wc, &s.wThread, `SELECT `+threadCols+` FROM threads WHERE id = ? AND workspace_id = ?`)
	prep(s.wc, &s.wUpdateThread, `UPDATE threads SET tags = ?, step_count = ?, current_side = ?, stopped = ?, status = ?, state = ?, updated_at = ? WHERE id = ?`)
	prep(s.wc, &s.wInsertThread, `INSERT INTO threads (`+threadCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	prep(s.wc, &s.wThreadWorkspace, `SELECT workspace_id FROM threads WHERE id = ?`)
	// A thread's tags (the JSON array its tags column holds), each once, for the list by tag.
	prep(s.wc, &s.wInsertTags, `INSERT INTO thread_tags (thread_id, tag, workspace_id, created_at)
		SELECT DISTINCT ?1, value, ?2, ?3 FROM json_each(?4)`)
	prep(s.wc, &s.wDeleteTags, `DELETE FROM thread_tags WHERE thread_id = ?`)

	prep(s.r, &s.rThread, `SELECT `+threadCols+` FROM threads WHERE id = ? AND workspace_id = ?`)
	prep(s.r, &s.rThreadExists, `SELECT 1 FROM threads WHERE id = ? AND workspace_id = ?`)
	// The EXISTS term is constant: SQLite evaluates it once, and an empty page then means either
	// an empty range or a thread of another workspace, which the caller tells apart.
	prep(s.r, &s.rLastMessages, `SELECT `+messageCols+` FROM messages
		WHERE thread_id = ?1 AND seq < ?2 AND EXISTS (SELECT 1 FROM threads WHERE id = ?1 AND workspace_id = ?3)
		ORDER BY seq DESC LIMIT ?4`)
	prep(s.r, &s.rChildren, `SELECT `+threadCols+` FROM threads WHERE parent_id = ? AND workspace_id = ? ORDER BY created_at, rowid`)
	prep(s.r, &s.rQueued, `SELECT q.id, q.role, q.content, q.created_at FROM threads t
		LEFT JOIN queued_messages q ON q.thread_id = t.id
		WHERE t.id = ? AND t.workspace_id = ? ORDER BY q.rowid`)
	prep(s.r, &s.rPending, `SELECT c.call_id, c.name, c.args, c.reasoning FROM tool_calls c
		WHERE c.thread_id = ?1 AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = ?1 AND m.tool_call_id = c.call_id)
		ORDER BY c.seq, c.idx`)
	return err
}

// write runs fn in one write transaction (BEGIN IMMEDIATE on the writer connection) and commits
// it if fn returns nil; otherwise, or if fn panics, it rolls it back. Write transactions of the
// store take turns; waiting for one's turn ends with ctx.
//
// fn gets ctx without its cancellation, for the statements it runs: with a cancellable context
// modernc's driver arms a watcher around every statement (a dozen allocations and a few
// microseconds each), and a write transaction is short. A ctx that ends before the commit
// still rolls the transaction back.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx querier) error) error {
	select {
	case s.wsem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("sqlite: waiting to write: %w", ctx.Err())
	}
	defer func() { <-s.wsem }()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	// Not cancellable either: the driver reports a cancellation that arrives as a statement
	// ends as that statement's error, even when it succeeded, and a BEGIN that succeeded unseen
	// would leave the connection inside a transaction. The wait for the lock is bounded by the
	// busy timeout.
	quiet := context.WithoutCancel(ctx)
	if _, err := s.wBegin.ExecContext(quiet); err != nil {
		_, _ = s.wRollback.ExecContext(quiet) // in case; fails when none is open
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	done := false
	defer func() {
		if !done {
			// Also after a failed COMMIT, which leaves the transaction open. An error here means
			// SQLite rolled back already (as it does after some errors).
			_, _ = s.wRollback.ExecContext(quiet)
		}
	}()
	if err := fn(quiet, s.wc); err != nil {
		return err
	}
	// As with database/sql's transactions, a context that ended before the commit rolls back.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: before commit: %w", err)
	}
	if _, err := s.wCommit.ExecContext(quiet); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	done = true
	s.afterCommit()
	return nil
}
