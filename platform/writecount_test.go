package platform_test

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// writeCounter is a pgx tracer that groups the statements of the connections it traces into
// their transactions (an explicit BEGIN ... COMMIT, a batch, or a statement on its own) and
// keeps the committed ones that wrote: each is a commit PostgreSQL waits for the disk for. It
// traces the store's pool and River's (the leases' and the relay's connections are River's
// pool's), so River's own transactions count as the store's do.
//
// A transaction wrote when one of its statements changed rows (INSERT, UPDATE, DELETE, or a
// WITH that does), locked rows (FOR UPDATE, FOR NO KEY UPDATE) or notified (pg_notify): those
// are what give a transaction an id, and a commit record to flush.
type writeCounter struct {
	mu     sync.Mutex
	open   map[*pgx.Conn]*tracedTxn // an explicit transaction under way, by connection
	writes []tracedTxn              // committed write transactions since reset
}

// tracedTxn is a transaction as the tracer saw it.
type tracedTxn struct {
	stmts []tracedStmt
	write bool
	err   bool // a statement failed: the transaction rolled back
}

// tracedStmt is a statement, the code that made it and what it did.
type tracedStmt struct {
	sql    string
	origin string
	tag    pgconn.CommandTag
}

func newWriteCounter() *writeCounter { return &writeCounter{open: map[*pgx.Conn]*tracedTxn{}} }

// take returns the write transactions counted so far and forgets them.
func (w *writeCounter) take() []tracedTxn {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.writes
	w.writes = nil
	return out
}

// waitFor waits, at most a second, for a write transaction whose statements match name: River
// answers a read of its job as completed a moment before the statement that completed it
// returns to River, and the tracer, to see it.
func (w *writeCounter) waitFor(name string) {
	for range 1000 {
		w.mu.Lock()
		seen := slices.ContainsFunc(w.writes, func(t tracedTxn) bool {
			return slices.ContainsFunc(t.stmts, func(s tracedStmt) bool { return strings.Contains(s.sql, name) })
		})
		w.mu.Unlock()
		if seen {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

type stmtKey struct{}

// startedStmt is what TraceQueryStart hands TraceQueryEnd.
type startedStmt struct{ sql, origin string }

func (w *writeCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, stmtKey{}, startedStmt{sql: data.SQL, origin: origin()})
}

func (w *writeCounter) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	s, _ := ctx.Value(stmtKey{}).(startedStmt)
	w.mu.Lock()
	defer w.mu.Unlock()
	word := strings.ToLower(strings.Fields(s.sql + " x")[0])
	tx := w.open[conn]
	switch {
	case word == "begin":
		w.open[conn] = &tracedTxn{}
	case word == "commit" || word == "rollback":
		delete(w.open, conn)
		if tx != nil && tx.write && !tx.err && word == "commit" && data.Err == nil {
			w.writes = append(w.writes, *tx)
		}
	case tx != nil:
		tx.add(tracedStmt{sql: s.sql, origin: s.origin, tag: data.CommandTag}, data.Err)
	default:
		one := tracedTxn{}
		one.add(tracedStmt{sql: s.sql, origin: s.origin, tag: data.CommandTag}, data.Err)
		if one.write && !one.err {
			w.writes = append(w.writes, one)
		}
	}
}

type batchKey struct{}

// A batch is one transaction (pgx sends its statements with one Sync), unless it is sent
// inside an explicit one.
func (w *writeCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, batchKey{}, &tracedTxn{stmts: []tracedStmt{{origin: origin()}}})
}

func (w *writeCounter) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if b, ok := ctx.Value(batchKey{}).(*tracedTxn); ok {
		b.add(tracedStmt{sql: data.SQL, origin: b.stmts[0].origin, tag: data.CommandTag}, data.Err)
	}
}

func (w *writeCounter) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	b, ok := ctx.Value(batchKey{}).(*tracedTxn)
	if !ok {
		return
	}
	b.stmts = b.stmts[1:]
	w.mu.Lock()
	defer w.mu.Unlock()
	if tx := w.open[conn]; tx != nil {
		tx.stmts = append(tx.stmts, b.stmts...)
		tx.write = tx.write || b.write
		tx.err = tx.err || b.err
		return
	}
	if b.write && !b.err && data.Err == nil {
		w.writes = append(w.writes, *b)
	}
}

// writing matches the statements that may give their transaction an id.
var writing = regexp.MustCompile(`(?is)\b(insert\s+into|update\s+\S+\s+set|delete\s+from|for\s+(no\s+key\s+)?update|pg_notify|notify)\b`)

func (t *tracedTxn) add(s tracedStmt, err error) {
	t.stmts = append(t.stmts, s)
	if err != nil {
		t.err = true
		return
	}
	if writing.MatchString(s.sql) && (s.tag.RowsAffected() > 0 || strings.Contains(strings.ToLower(s.sql), "notify")) {
		t.write = true
	}
}

// origin names the code that made a statement: the first function outside pgx and
// database/sql, and the first of Quiver's outside its stores, when that is another.
func origin() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	var near, far string
	for {
		f, more := frames.Next()
		fn := f.Function
		switch {
		case strings.Contains(fn, "jackc/pgx") || strings.HasPrefix(fn, "database/sql") || strings.Contains(fn, "platform_test.(*writeCounter)"):
		case near == "":
			near = short(fn)
		case far == "" && strings.Contains(fn, "quiverhq/quiver") && !strings.Contains(fn, "quiver/store/") && !strings.Contains(fn, "quiver/thread."):
			far = short(fn)
		}
		if !more || far != "" {
			break
		}
	}
	if far == "" || far == near {
		return near
	}
	return near + " ← " + far
}

// short is a function's name without its module's path.
func short(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		fn = fn[i+1:]
	}
	return fn
}

// runRiver names the statements of River's that a run makes: its job's insert (and the
// notification of it), its fetch and its completion. River's others (its leader's election,
// its maintenance) are the node's, whatever the runs.
var runRiver = regexp.MustCompile(`-- name: (JobInsertFastMany|PGNotifyMany|JobGetAvailable|JobSetStateIfRunningMany) `)

// background says whether the transaction is River's own upkeep rather than a run's.
func (t tracedTxn) background() bool {
	for _, s := range t.stmts {
		if !strings.Contains(s.sql, "-- name: ") || runRiver.MatchString(s.sql) {
			return false
		}
	}
	return true
}

// notifyOnly says whether the transaction only notified: it has an id and a commit record,
// but wrote nothing else to the WAL, so PostgreSQL commits it without waiting for the disk.
func (t tracedTxn) notifyOnly() bool {
	for _, s := range t.stmts {
		if writing.MatchString(s.sql) && !strings.Contains(strings.ToLower(s.sql), "pg_notify(") {
			return false
		}
	}
	return true
}

// describe is a transaction on one line: where it came from and what it wrote.
func (t tracedTxn) describe() string {
	var parts []string
	for _, s := range t.stmts {
		if !writing.MatchString(s.sql) {
			continue
		}
		sql := strings.Join(strings.Fields(s.sql), " ")
		if len(sql) > 60 {
			sql = sql[:60] + "..."
		}
		parts = append(parts, fmt.Sprintf("%s [%s] %s", s.origin, s.tag, sql))
	}
	return fmt.Sprintf("%d statements; %s", len(t.stmts), strings.Join(parts, " | "))
}
