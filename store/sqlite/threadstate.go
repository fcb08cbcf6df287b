package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quiverhq/quiver/store"
)

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

// Enqueue queues messages for the thread's next step.
func (s *Store) Enqueue(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	for i, m := range msgs {
		if err := store.CheckQueued(m); err != nil {
			return fmt.Errorf("sqlite: enqueue to %s: message %d: %w", threadID, i, err)
		}
	}
	now := time.Now().UTC().Round(0)
	ids := make([]string, len(msgs))
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		if err := threadInTx(ctx, tx, workspaceID, threadID); err != nil {
			return fmt.Errorf("sqlite: enqueue to %s: %w", threadID, err)
		}
		for i, m := range msgs {
			ids[i] = m.ID
			if ids[i] == "" {
				ids[i] = store.NewID(store.PrefixMessage)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO queued_messages (id, thread_id, role, content, created_at) VALUES (?, ?, ?, ?, ?)`,
				ids[i], threadID, string(m.Role), m.Content, now.UnixNano())
			if isConstraint(err) {
				return fmt.Errorf("sqlite: enqueue to %s: message id %s is taken: %w", threadID, ids[i], store.ErrInvalid)
			}
			if err != nil {
				return fmt.Errorf("sqlite: enqueue to %s: %w", threadID, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, m := range msgs {
		m.ID, m.ThreadID, m.CreatedAt = ids[i], threadID, now
	}
	return nil
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
	now := time.Now().UTC().Round(0)
	var out []*store.Message
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		last, err := s.lastSeq(ctx, tx, workspaceID, threadID)
		if err != nil {
			return fmt.Errorf("sqlite: append queued to %s: %w", threadID, err)
		}
		if out, err = queued(ctx, tx, threadID); err != nil {
			return fmt.Errorf("sqlite: append queued to %s: %w", threadID, err)
		}
		ins := s.wInsertMessage
		for i, m := range out {
			m.Seq, m.CreatedAt = last+1+int64(i), now
			if _, err := ins.ExecContext(ctx, m.ID, m.Seq, string(m.Role), m.Content, nil, nil, nil, nil, now.UnixNano(), threadID); err != nil {
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

// Decide records a decision on a pending call of the thread.
func (s *Store) Decide(ctx context.Context, workspaceID, threadID string, d *store.Decision) error {
	if err := d.Check(); err != nil {
		return fmt.Errorf("sqlite: decide in %s: %w", threadID, err)
	}
	decided := d.DecidedAt
	if decided.IsZero() {
		decided = time.Now()
	}
	decided = decided.UTC().Round(0)
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		if err := threadInTx(ctx, tx, workspaceID, threadID); err != nil {
			return fmt.Errorf("sqlite: decide in %s: %w", threadID, err)
		}
		var asked, answered bool
		if err := s.wCallState.QueryRowContext(ctx, threadID, d.CallID).Scan(&asked, &answered); err != nil {
			return fmt.Errorf("sqlite: decide in %s: %w", threadID, err)
		}
		if !asked || answered {
			return fmt.Errorf("sqlite: decide in %s: call %q is not a pending call of the thread: %w", threadID, d.CallID, store.ErrInvalid)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO call_decisions (thread_id, call_id, action, args, message, user_id, decided_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, threadID, d.CallID, string(d.Action), nullJSON(d.Args), d.Message, d.UserID, decided.UnixNano())
		if isConstraint(err) {
			return fmt.Errorf("sqlite: decide in %s: call %q: %w", threadID, d.CallID, store.ErrDecided)
		}
		if err != nil {
			return fmt.Errorf("sqlite: decide in %s: %w", threadID, err)
		}
		return nil
	})
	if err == nil {
		d.DecidedAt = decided
	}
	return err
}

// Decisions returns the decisions on the thread's calls, in the order they were made.
func (s *Store) Decisions(ctx context.Context, workspaceID, threadID string) (_ []*store.Decision, err error) {
	defer func() { err = readErr(ctx, err) }()
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: decisions of %s: %w", threadID, err)
	}
	defer tx.Rollback()
	if err := threadInTx(ctx, tx, workspaceID, threadID); err != nil {
		return nil, fmt.Errorf("sqlite: decisions of %s: %w", threadID, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT call_id, action, args, message, user_id, decided_at FROM call_decisions
		WHERE thread_id = ? ORDER BY decided_at, rowid`, threadID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: decisions of %s: %w", threadID, err)
	}
	defer rows.Close()
	var out []*store.Decision
	for rows.Next() {
		var (
			d       store.Decision
			action  string
			args    []byte
			decided int64
		)
		if err := rows.Scan(&d.CallID, &action, &args, &d.Message, &d.UserID, &decided); err != nil {
			return nil, fmt.Errorf("sqlite: decisions of %s: %w", threadID, err)
		}
		d.Action, d.DecidedAt = store.DecisionAction(action), fromNanos(decided)
		if len(args) > 0 {
			d.Args = json.RawMessage(args)
		}
		out = append(out, &d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: decisions of %s: %w", threadID, err)
	}
	return out, nil
}

// Log appends an entry to the thread's log.
func (s *Store) Log(ctx context.Context, workspaceID, threadID string, e *store.LogEntry) error {
	if err := e.Check(); err != nil {
		return fmt.Errorf("sqlite: log to %s: %w", threadID, err)
	}
	at := e.Time
	if at.IsZero() {
		at = time.Now()
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

// Logs returns a page of the thread's log, oldest first.
func (s *Store) Logs(ctx context.Context, workspaceID, threadID string, page store.Page) (_ []*store.LogEntry, err error) {
	defer func() { err = readErr(ctx, err) }()
	limit, before, err := store.PageBounds(page)
	if err != nil {
		return nil, fmt.Errorf("sqlite: logs of %s: %w", threadID, err)
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: logs of %s: %w", threadID, err)
	}
	defer tx.Rollback()
	if err := threadInTx(ctx, tx, workspaceID, threadID); err != nil {
		return nil, fmt.Errorf("sqlite: logs of %s: %w", threadID, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, level, message, data, time FROM thread_logs
		WHERE thread_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?`, threadID, before, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: logs of %s: %w", threadID, err)
	}
	defer rows.Close()
	out := []*store.LogEntry{}
	for rows.Next() {
		var (
			e     store.LogEntry
			level string
			data  []byte
			at    int64
		)
		if err := rows.Scan(&e.Seq, &level, &e.Message, &data, &at); err != nil {
			return nil, fmt.Errorf("sqlite: logs of %s: %w", threadID, err)
		}
		e.Level, e.Time = store.LogLevel(level), fromNanos(at)
		if len(data) > 0 {
			e.Data = json.RawMessage(data)
		}
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: logs of %s: %w", threadID, err)
	}
	slices.Reverse(out)
	return out, nil
}

// threadInTx reports store.ErrNotFound unless the thread exists in the workspace.
func threadInTx(ctx context.Context, tx querier, workspaceID, threadID string) error {
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE id = ? AND workspace_id = ?`, threadID, workspaceID).Scan(new(int))
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}
