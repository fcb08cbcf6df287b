package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quiverhq/quiver/store"
)

// Enqueue, Decide, Decisions and Logs are sqlstore's (see dialect.go and sqlstore.ThreadState,
// which says why the rest is here).

// UpdateMessage locks a message of the thread, applies fn to it and stores its Content; nothing
// else may change, and tool messages not at all (store.ErrInvalid).
func (s *Store) UpdateMessage(ctx context.Context, workspaceID, threadID, messageID string, fn func(*store.Message) error) (*store.Message, error) {
	op := "update message " + messageID
	var out *store.Message
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, seq, role, content, tool_calls, COALESCE(tool_call_id, ''), tool_name, result, created_at, side, usage
FROM messages m
WHERE m.id = $1 AND m.thread_id = $2 AND EXISTS (SELECT FROM threads WHERE id = $2 AND workspace_id = $3)
FOR UPDATE`, messageID, threadID, workspaceID)
		if err != nil {
			return dialect.Err(op, err)
		}
		msgs, err := scanMessages(rows, threadID)
		if err != nil {
			return fmt.Errorf("postgres: %s: %w", op, err)
		}
		if len(msgs) == 0 {
			return fmt.Errorf("postgres: %s of thread %s: %w", op, threadID, store.ErrNotFound)
		}
		m := msgs[0]
		before, _ := json.Marshal(m)
		if err := fn(m); err != nil {
			return fmt.Errorf("postgres: %s: %w", op, err)
		}
		if err := store.CheckMessageUpdate(before, m); err != nil {
			return fmt.Errorf("postgres: %s: %w", op, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE messages SET content = $2 WHERE id = $1`, messageID, m.Content); err != nil {
			return dialect.Err(op, err)
		}
		out = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Queued returns the thread's queued messages, oldest first.
func (s *Store) Queued(ctx context.Context, workspaceID, threadID string) ([]*store.Message, error) {
	op := "read the queue of thread " + threadID
	rows, err := s.pool.Query(ctx, `SELECT q.id, q.role, q.content, q.created_at FROM threads t
LEFT JOIN queued_messages q ON q.thread_id = t.id
WHERE t.id = $1 AND t.workspace_id = $2 ORDER BY q.n`, threadID, workspaceID)
	if err != nil {
		return nil, dialect.Err(op, err)
	}
	var out []*store.Message
	found := false
	for rows.Next() {
		found = true
		var id, role, content *string
		var at *time.Time
		if err := rows.Scan(&id, &role, &content, &at); err != nil {
			rows.Close()
			return nil, dialect.Err(op, err)
		}
		if id == nil {
			continue // the thread's row, with nothing queued
		}
		out = append(out, &store.Message{ID: *id, ThreadID: threadID, Role: store.Role(*role), Content: *content, CreatedAt: at.UTC()})
	}
	if err := rows.Err(); err != nil {
		return nil, dialect.Err(op, err)
	}
	if !found {
		return nil, fmt.Errorf("postgres: %s: %w", op, store.ErrNotFound)
	}
	return out, nil
}

// AppendQueued moves the thread's queued messages to the end of its history in one
// transaction. Locking the thread row first serialises it with Append and with itself, so
// each queued message is appended once.
func (s *Store) AppendQueued(ctx context.Context, workspaceID, threadID string) ([]*store.Message, error) {
	op := "append the queue of thread " + threadID
	var out []*store.Message
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = appendQueued(ctx, tx, workspaceID, threadID)
		return dialect.Err(op, err)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// appendQueued is AppendQueued inside its transaction.
func appendQueued(ctx context.Context, tx pgx.Tx, workspaceID, threadID string) ([]*store.Message, error) {
	var last int64
	var at time.Time
	if err := tx.QueryRow(ctx, `SELECT last_seq, clock_timestamp() FROM threads WHERE id = $1 AND workspace_id = $2 FOR NO KEY UPDATE`,
		threadID, workspaceID).Scan(&last, &at); err != nil {
		return nil, err
	}
	q, err := takeQueue(ctx, tx, threadID)
	if err != nil || len(q) == 0 {
		return []*store.Message{}, err
	}
	out := make([]*store.Message, len(q))
	ids, roles, contents := make([]string, len(q)), make([]string, len(q)), make([]string, len(q))
	for i, m := range q {
		m.Seq, m.CreatedAt = last+int64(i)+1, at.UTC()
		ids[i], roles[i], contents[i] = m.ID, string(m.Role), m.Content
		out[i] = m
	}
	if _, err := tx.Exec(ctx, `INSERT INTO messages (id, thread_id, seq, role, content, created_at)
SELECT u.id, $1, $2 + u.n, u.role, u.content, $3
FROM unnest($4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS u(id, role, content, n)`,
		threadID, last, at, ids, roles, contents); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `UPDATE threads SET last_seq = $2 WHERE id = $1`, threadID, last+int64(len(q))); err != nil {
		return nil, err
	}
	return out, nil
}

// takeQueue deletes the thread's queued messages and returns them, in the order they were
// queued.
func takeQueue(ctx context.Context, tx pgx.Tx, threadID string) ([]*store.Message, error) {
	rows, err := tx.Query(ctx, `DELETE FROM queued_messages WHERE thread_id = $1 RETURNING id, n, role, content`, threadID)
	if err != nil {
		return nil, err
	}
	type queued struct {
		m *store.Message
		n int64
	}
	var q []queued
	for rows.Next() {
		e := queued{m: &store.Message{ThreadID: threadID}}
		if err := rows.Scan(&e.m.ID, &e.n, &e.m.Role, &e.m.Content); err != nil {
			rows.Close()
			return nil, err
		}
		q = append(q, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(q, func(a, b queued) int { return int(a.n - b.n) })
	msgs := make([]*store.Message, len(q))
	for i, e := range q {
		msgs[i] = e.m
	}
	return msgs, nil
}

// Log appends an entry to the thread's log; the thread row numbers the entries.
func (s *Store) Log(ctx context.Context, workspaceID, threadID string, e *store.LogEntry) error {
	if err := e.Check(); err != nil {
		return fmt.Errorf("postgres: log to thread %s: %w", threadID, err)
	}
	op := "log to thread " + threadID
	var at *time.Time
	if !e.Time.IsZero() {
		at = &e.Time
	}
	var seq int64
	var when time.Time
	err := s.pool.QueryRow(ctx, `WITH t AS (
	UPDATE threads SET last_log_seq = last_log_seq + 1 WHERE id = $1 AND workspace_id = $2 RETURNING last_log_seq
)
INSERT INTO thread_logs (thread_id, seq, level, message, data, time)
SELECT $1, t.last_log_seq, $3, $4, NULLIF($5, '')::json, COALESCE($6, clock_timestamp()) FROM t
RETURNING seq, time`, threadID, workspaceID, string(e.Level), e.Message, string(e.Data), at).Scan(&seq, &when)
	if err != nil {
		return dialect.Err(op, err)
	}
	e.Seq, e.Time = seq, when.UTC()
	return nil
}
