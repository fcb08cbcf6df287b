package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// Enqueue, Decide, Decisions and Logs are sqlstore's (see dialect.go and sqlstore.ThreadState,
// which says why the rest is here).

// UpdateMessage applies fn to a message of the thread in one write transaction and stores its
// Content; nothing else may change, and tool messages not at all (store.ErrInvalid).
func (s *Store) UpdateMessage(ctx context.Context, workspaceID, threadID, messageID string, fn func(*store.Message) error) (*store.Message, error) {
	var out *store.Message
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+messageCols+` FROM messages m
			WHERE m.id = ?1 AND m.thread_id = ?2 AND EXISTS (SELECT 1 FROM threads WHERE id = ?2 AND workspace_id = ?3)`,
			messageID, threadID, workspaceID)
		if err != nil {
			return fmt.Errorf("sqlite: update message %s: %w", messageID, err)
		}
		var m *store.Message
		if rows.Next() {
			m, err = scanMessage(rows)
		}
		rows.Close()
		if err != nil {
			return fmt.Errorf("sqlite: update message %s: %w", messageID, err)
		}
		if m == nil {
			return fmt.Errorf("sqlite: update message %s of thread %s: %w", messageID, threadID, store.ErrNotFound)
		}
		m.ThreadID = threadID
		before, _ := json.Marshal(m)
		if err := fn(m); err != nil {
			return err
		}
		if err := store.CheckMessageUpdate(before, m); err != nil {
			return fmt.Errorf("sqlite: update message %s: %w", messageID, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET content = ? WHERE id = ?`, m.Content, messageID); err != nil {
			return fmt.Errorf("sqlite: update message %s: %w", messageID, err)
		}
		out = m
		return nil
	})
	return out, err
}

// Queued returns the thread's queued messages, oldest first. It is one prepared query, since a
// run asks before every step and the answer is nearly always none: the thread's row joined
// with its queue gives one row of NULLs for an empty queue and no row for no thread.
func (s *Store) Queued(ctx context.Context, workspaceID, threadID string) ([]*store.Message, error) {
	rows, err := s.rQueued.QueryContext(ctx, threadID, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: queued messages of %s: %w", threadID, err)
	}
	defer rows.Close()
	found := false
	var out []*store.Message
	for rows.Next() {
		found = true
		var (
			id, role, content sql.NullString
			created           sql.NullInt64
		)
		if err := rows.Scan(&id, &role, &content, &created); err != nil {
			return nil, fmt.Errorf("sqlite: queued messages of %s: %w", threadID, err)
		}
		if !id.Valid {
			continue
		}
		out = append(out, &store.Message{ID: id.String, ThreadID: threadID, Role: store.Role(role.String), Content: content.String,
			CreatedAt: fromNanos(created.Int64)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: queued messages of %s: %w", threadID, err)
	}
	if !found {
		return nil, fmt.Errorf("sqlite: queued messages of %s: %w", threadID, store.ErrNotFound)
	}
	return out, nil
}

// AppendQueued moves the thread's queued messages to the end of its history.
func (s *Store) AppendQueued(ctx context.Context, workspaceID, threadID string) ([]*store.Message, error) {
	now := stamp.Now(ctx).Round(0)
	var out []*store.Message
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		last, _, err := s.lastSeq(ctx, workspaceID, threadID)
		if err != nil {
			return fmt.Errorf("sqlite: append queued to %s: %w", threadID, err)
		}
		if out, err = queued(ctx, tx, threadID); err != nil {
			return fmt.Errorf("sqlite: append queued to %s: %w", threadID, err)
		}
		ins := s.wInsertMessage
		for i, m := range out {
			m.Seq, m.CreatedAt = last+1+int64(i), now
			if _, err := ins.ExecContext(ctx, m.ID, m.Seq, string(m.Role), m.Content, nil, nil, nil, nil, now.UnixNano(), "", nil, threadID); err != nil {
				return fmt.Errorf("sqlite: append queued to %s: %w", threadID, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM queued_messages WHERE thread_id = ?`, threadID); err != nil {
			return fmt.Errorf("sqlite: append queued to %s: %w", threadID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []*store.Message{}
	}
	return out, nil
}

func queued(ctx context.Context, tx querier, threadID string) ([]*store.Message, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, role, content, created_at FROM queued_messages WHERE thread_id = ? ORDER BY rowid`, threadID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Message
	for rows.Next() {
		var (
			m       store.Message
			role    string
			created int64
		)
		if err := rows.Scan(&m.ID, &role, &m.Content, &created); err != nil {
			return nil, err
		}
		m.ThreadID, m.Role, m.CreatedAt = threadID, store.Role(role), fromNanos(created)
		out = append(out, &m)
	}
	return out, rows.Err()
}

// Log appends an entry to the thread's log.
func (s *Store) Log(ctx context.Context, workspaceID, threadID string, e *store.LogEntry) error {
	if err := e.Check(); err != nil {
		return fmt.Errorf("sqlite: log to %s: %w", threadID, err)
	}
	at := e.Time
	if at.IsZero() {
		at = stamp.Now(ctx)
	}
	at = at.UTC().Round(0)
	var seq int64
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		if err := threadInTx(ctx, tx, workspaceID, threadID); err != nil {
			return fmt.Errorf("sqlite: log to %s: %w", threadID, err)
		}
		err := tx.QueryRowContext(ctx, `INSERT INTO thread_logs (thread_id, seq, level, message, data, time)
			VALUES (?1, (SELECT coalesce(max(seq), 0) + 1 FROM thread_logs WHERE thread_id = ?1), ?2, ?3, ?4, ?5) RETURNING seq`,
			threadID, string(e.Level), e.Message, nullJSON(e.Data), at.UnixNano()).Scan(&seq)
		if err != nil {
			return fmt.Errorf("sqlite: log to %s: %w", threadID, err)
		}
		return nil
	})
	if err == nil {
		e.Seq, e.Time = seq, at
	}
	return err
}

// threadInTx reports store.ErrNotFound unless the thread exists in the workspace.
func threadInTx(ctx context.Context, tx querier, workspaceID, threadID string) error {
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE id = ? AND workspace_id = ?`, threadID, workspaceID).Scan(new(int))
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}
