package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// ThreadState implements the parts of a thread's state (migration 0005) that both databases
// store alike: queueing messages (Enqueue), decisions on calls (Decide, Decisions) and reading
// the log (Logs). The backends embed it.
//
// The rest stays each backend's own, for reasons of their own: reading and emptying the queue
// (Queued, AppendQueued) are on a run's path at every step, where SQLite uses statements
// prepared once and PostgreSQL numbers messages with the thread row's counter; writing the log
// (Log) numbers entries with a counter of PostgreSQL's thread row, which SQLite's schema does
// not have; and UpdateMessage reads a message in each backend's own encoding.
type ThreadState struct{ db }

// threadExists returns store.ErrNotFound unless the workspace has the thread.
func (d *Dialect) threadExists(ctx context.Context, q Querier, op, workspaceID, threadID string) error {
	var ok bool
	if err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM threads WHERE id = $1 AND workspace_id = $2)`,
		threadID, workspaceID).Scan(&ok); err != nil {
		return d.Err(op, err)
	}
	if !ok {
		return d.failf(op, store.ErrNotFound, "thread %s", threadID)
	}
	return nil
}

// nullJSON stores an empty JSON value as NULL.
func nullJSON(b json.RawMessage) sql.NullString {
	return sql.NullString{String: string(b), Valid: len(b) > 0}
}

// Enqueue queues messages for the thread's next step, in one write transaction.
func (ts *ThreadState) Enqueue(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	op := "enqueue to thread " + threadID
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		if err := store.CheckQueued(m); err != nil {
			return ts.d.fail(op, fmt.Errorf("message %d: %w", i, err))
		}
		ids[i] = m.ID
		if ids[i] == "" {
			ids[i] = stamp.ID(ctx, store.PrefixMessage)
		}
	}
	var at time.Time
	err := ts.write(ctx, func(ctx context.Context, tx Querier) error {
		if err := ts.d.threadExists(ctx, tx, op, workspaceID, threadID); err != nil {
			return err
		}
		var err error
		if at, err = ts.d.Now(ctx, tx); err != nil {
			return ts.d.Err(op, err)
		}
		for i, m := range msgs {
			if err := ts.enqueueOne(ctx, tx, op, threadID, ids[i], m, at); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, m := range msgs {
		m.ID, m.ThreadID, m.CreatedAt = ids[i], threadID, at
	}
	return nil
}

// enqueueOne inserts m, under id, into the thread's queue. Messages are inserted in order: the
// queue is read in the order of its rows (Dialect.RowOrder).
func (ts *ThreadState) enqueueOne(ctx context.Context, tx Querier, op, threadID, id string, m *store.Message, at time.Time) error {
	if m.ID != "" {
		if err := ts.checkIDFree(ctx, tx, op, id); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO queued_messages (id, thread_id, role, content, created_at) VALUES ($1, $2, $3, $4, $5)`,
		id, threadID, m.Role, m.Content, ts.d.Time(at))
	if err != nil && ts.d.Constraint(err).Kind == store.ErrConflict {
		return ts.d.failf(op, errIDTaken, "message id %s is taken", id)
	}
	return ts.d.Err(op, err)
}

// checkIDFree checks that no message of the history has id. A writer that gives its own id
// queues a message once (a child's result delivered again after a crash): an id already in
// the history is taken too.
func (ts *ThreadState) checkIDFree(ctx context.Context, tx Querier, op, id string) error {
	var taken bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE id = $1)`, id).Scan(&taken); err != nil {
		return ts.d.Err(op, err)
	}
	if taken {
		return ts.d.failf(op, errIDTaken, "message id %s is taken", id)
	}
	return nil
}

// Decide records a decision on a pending call of the thread: one it asked for that has no
// result yet (store.ErrInvalid otherwise), decided once (store.ErrDecided).
func (ts *ThreadState) Decide(ctx context.Context, workspaceID, threadID string, d *store.Decision) error {
	if err := d.Check(); err != nil {
		return ts.d.fail("decide in thread "+threadID, err)
	}
	op := fmt.Sprintf("decide on call %q of thread %s", d.CallID, threadID)
	var at time.Time
	err := ts.write(ctx, func(ctx context.Context, tx Querier) error {
		var err error
		at, err = ts.decide(ctx, tx, op, workspaceID, threadID, d)
		return err
	})
	if err == nil {
		d.DecidedAt = at
	}
	return err
}

// decide is Decide inside the write transaction; it returns the time of the decision as stored.
func (ts *ThreadState) decide(ctx context.Context, tx Querier, op, workspaceID, threadID string, d *store.Decision) (time.Time, error) {
	if err := ts.checkPending(ctx, tx, op, workspaceID, threadID, d.CallID); err != nil {
		return time.Time{}, err
	}
	decided := d.DecidedAt
	if decided.IsZero() {
		var err error
		if decided, err = ts.d.Now(ctx, tx); err != nil {
			return time.Time{}, ts.d.Err(op, err)
		}
	}
	var at time.Time
	err := tx.QueryRowContext(ctx, `INSERT INTO call_decisions (thread_id, call_id, action, args, message, user_id, key_id, access_token, decided_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING decided_at`,
		threadID, d.CallID, d.Action, nullJSON(d.Args), d.Message, d.UserID, d.KeyID, d.AccessToken,
		ts.d.Time(decided.UTC().Round(0))).Scan(scanTime{&at})
	if err != nil && ts.d.Constraint(err).Kind == store.ErrConflict {
		return time.Time{}, ts.d.fail(op, store.ErrDecided)
	}
	return at, ts.d.Err(op, err)
}

// checkPending checks that the thread exists and asked for the call, which has no result yet.
func (ts *ThreadState) checkPending(ctx context.Context, tx Querier, op, workspaceID, threadID, callID string) error {
	if err := ts.d.threadExists(ctx, tx, op, workspaceID, threadID); err != nil {
		return err
	}
	var asked, answered bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM tool_calls WHERE thread_id = $1 AND call_id = $2),
		EXISTS (SELECT 1 FROM messages WHERE thread_id = $1 AND tool_call_id = $2)`, threadID, callID).Scan(&asked, &answered); err != nil {
		return ts.d.Err(op, err)
	}
	if !asked || answered {
		return ts.d.failf(op, store.ErrInvalid, "not a pending call of the thread")
	}
	return nil
}

// Decisions returns the decisions on the thread's calls, in the order they were made.
func (ts *ThreadState) Decisions(ctx context.Context, workspaceID, threadID string) ([]*store.Decision, error) {
	op := "read the decisions of thread " + threadID
	rows, err := ts.read.QueryContext(ctx, `SELECT call_id, action, args, message, user_id, key_id, access_token, decided_at FROM call_decisions
		WHERE thread_id = $1 AND EXISTS (SELECT 1 FROM threads WHERE id = $1 AND workspace_id = $2)
		ORDER BY decided_at, `+ts.d.RowOrder, threadID, workspaceID)
	if err != nil {
		return nil, ts.d.Err(op, readErr(ctx, err))
	}
	out, err := collect(&ts.d, rows, op, func(row scanner) (*store.Decision, error) {
		var (
			d    store.Decision
			args []byte
		)
		if err := row.Scan(&d.CallID, &d.Action, &args, &d.Message, &d.UserID, &d.KeyID, &d.AccessToken, scanTime{&d.DecidedAt}); err != nil {
			return nil, err
		}
		if len(args) > 0 {
			d.Args = json.RawMessage(args)
		}
		return &d, nil
	})
	if err != nil {
		return nil, readErr(ctx, err)
	}
	if len(out) == 0 { // none, or no such thread
		if err := ts.d.threadExists(ctx, ts.read, op, workspaceID, threadID); err != nil {
			return nil, readErr(ctx, err)
		}
	}
	return out, nil
}

// Logs returns a page of the thread's log, oldest first.
func (ts *ThreadState) Logs(ctx context.Context, workspaceID, threadID string, page store.Page) ([]*store.LogEntry, error) {
	op := "read the log of thread " + threadID
	limit, before, err := store.PageBounds(page)
	if err != nil {
		return nil, ts.d.fail(op, err)
	}
	rows, err := ts.read.QueryContext(ctx, `SELECT seq, level, message, data, time FROM thread_logs
		WHERE thread_id = $1 AND seq < $3 AND EXISTS (SELECT 1 FROM threads WHERE id = $1 AND workspace_id = $2)
		ORDER BY seq DESC LIMIT $4`, threadID, workspaceID, before, limit)
	if err != nil {
		return nil, ts.d.Err(op, readErr(ctx, err))
	}
	out, err := collect(&ts.d, rows, op, func(row scanner) (*store.LogEntry, error) {
		var (
			e    store.LogEntry
			data []byte
		)
		if err := row.Scan(&e.Seq, &e.Level, &e.Message, &data, scanTime{&e.Time}); err != nil {
			return nil, err
		}
		if len(data) > 0 {
			e.Data = json.RawMessage(data)
		}
		return &e, nil
	})
	if err != nil {
		return nil, readErr(ctx, err)
	}
	if len(out) == 0 { // an empty page, or no such thread
		if err := ts.d.threadExists(ctx, ts.read, op, workspaceID, threadID); err != nil {
			return nil, readErr(ctx, err)
		}
		return []*store.LogEntry{}, nil
	}
	slices.Reverse(out)
	return out, nil
}
