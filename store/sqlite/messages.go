package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// row is a message checked and encoded, ready to insert.
type row struct {
	msg        *store.Message
	id         string
	toolCalls  sql.NullString // JSON
	calls      []callRow
	toolCallID sql.NullString
	toolName   sql.NullString
	result     sql.NullString // JSON
	usage      sql.NullString // JSON
}

type callRow struct {
	id, name, reasoning string
	args                sql.NullString
}

// Append adds msgs to the end of the thread in one transaction and sets their ID (when empty),
// ThreadID, Seq and CreatedAt. A tool message must answer a call of an earlier assistant
// message of the thread (store.ErrInvalid otherwise); a second result for a call fails with
// store.ErrResultExists. Call ids are unique within a thread: an assistant message repeating
// one fails with store.ErrInvalid. When Append fails nothing of the batch is stored and msgs are
// left as they were.
func (s *Store) Append(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	if len(msgs) == 0 {
		// Nothing to write, but a missing thread is still reported.
		if err := s.rThreadExists.QueryRowContext(ctx, threadID, workspaceID).Scan(new(int)); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				err = store.ErrNotFound
			}
			return fmt.Errorf("sqlite: append to %s: %w", threadID, err)
		}
		return nil
	}
	op := store.AppendOp{WorkspaceID: workspaceID, ThreadID: threadID, Messages: msgs}
	err := s.AppendBatch(ctx, []store.AppendOp{op})
	if be, ok := err.(*store.BatchError); ok {
		return be.Err
	}
	return err
}

// AppendBatch applies ops in order in one transaction (see store.BatchAppender): all of them,
// or none and a *store.BatchError naming the op that failed. Each op follows Append's rules and
// sets its messages' ID, ThreadID, Seq and CreatedAt (the op's At when set) once the batch is
// stored.
func (s *Store) AppendBatch(ctx context.Context, ops []store.AppendOp) error {
	_, err := s.appendBatch(ctx, ops, nil)
	return err
}

// AppendPeek is Append that also reports whether the thread has queued messages once msgs are
// stored, read in the append's transaction (see store.QueuePeeker).
func (s *Store) AppendPeek(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) (bool, error) {
	if len(msgs) == 0 {
		if err := s.Append(ctx, workspaceID, threadID); err != nil {
			return false, err
		}
		q, err := s.Queued(ctx, workspaceID, threadID)
		return len(q) > 0, err
	}
	queued, err := s.appendBatch(ctx, []store.AppendOp{{WorkspaceID: workspaceID, ThreadID: threadID, Messages: msgs}}, nil)
	if be, ok := err.(*store.BatchError); ok {
		return false, be.Err
	}
	return queued, err
}

// AppendFinal appends msgs and, when the thread has no queued messages once they are stored,
// applies fn to the thread, in one transaction (see store.FinalAppender). fn runs while the
// store's write lock is held, as UpdateThread's does.
func (s *Store) AppendFinal(ctx context.Context, workspaceID, threadID string, fn func(*store.Thread) error, msgs ...*store.Message) (*store.Thread, bool, error) {
	if len(msgs) == 0 {
		return nil, false, fmt.Errorf("sqlite: append to %s: no messages to end with: %w", threadID, store.ErrInvalid)
	}
	var out *store.Thread
	queued, err := s.appendBatch(ctx, []store.AppendOp{{WorkspaceID: workspaceID, ThreadID: threadID, Messages: msgs}},
		func(ctx context.Context, queued bool) error {
			if queued {
				return nil
			}
			var err error
			out, err = s.updateThread(ctx, workspaceID, threadID, fn)
			return err
		})
	if be, ok := err.(*store.BatchError); ok {
		return nil, false, be.Err
	}
	if err != nil {
		return nil, false, err
	}
	return out, queued, nil
}

// appendBatch is AppendBatch that also reports, for a batch of one op (AppendPeek's), whether
// its thread has queued messages: the transaction looks when it reads the thread's last seq,
// and as it holds the write lock from there to its commit, what it saw is still so then.
// then, when not nil, runs in the transaction after the inserts, told what was seen.
func (s *Store) appendBatch(ctx context.Context, ops []store.AppendOp, then func(ctx context.Context, queued bool) error) (queued bool, _ error) {
	rows := make([][]row, len(ops))
	if err := encodeOps(ctx, ops, rows); err != nil {
		return false, err
	}
	now := stamp.Now(ctx).Round(0)
	firsts := make([]int64, len(ops))
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		var err error
		if queued, err = s.insertOps(ctx, tx, ops, rows, firsts, now); err != nil || then == nil {
			return err
		}
		return then(ctx, queued)
	})
	if err != nil {
		return false, err
	}
	for k, op := range ops {
		at := opTime(op, now)
		for i, m := range op.Messages {
			m.ID, m.ThreadID, m.Seq, m.CreatedAt = rows[k][i].id, op.ThreadID, firsts[k]+int64(i), at
		}
	}
	return queued, nil
}

// encodeOps checks and encodes the messages of each op into rows.
func encodeOps(ctx context.Context, ops []store.AppendOp, rows [][]row) error {
	for k, op := range ops {
		rows[k] = make([]row, len(op.Messages))
		for i, m := range op.Messages {
			if err := encodeMessage(ctx, op.ThreadID, m, &rows[k][i]); err != nil {
				return &store.BatchError{Index: k, Err: fmt.Errorf("sqlite: append to %s: message %d: %w", op.ThreadID, i, err)}
			}
		}
	}
	return nil
}

// insertOps inserts the rows of each op inside tx, numbered after the last message of its
// thread, sets the first seq of each op in firsts, and reports whether the last thread looked
// up has queued messages.
func (s *Store) insertOps(ctx context.Context, tx querier, ops []store.AppendOp, rows [][]row, firsts []int64, now time.Time) (queued bool, err error) {
	// The last seq of each thread appended to so far in this transaction: the next append
	// to it need not look it up.
	lasts := map[[2]string]int64{}
	for k, op := range ops {
		key := [2]string{op.WorkspaceID, op.ThreadID}
		last, known := lasts[key]
		if !known {
			if last, queued, err = s.lastSeq(ctx, op.WorkspaceID, op.ThreadID); err != nil {
				return false, &store.BatchError{Index: k, Err: fmt.Errorf("sqlite: append to %s: %w", op.ThreadID, err)}
			}
		}
		if err := s.appendRows(ctx, tx, op.ThreadID, rows[k], last+1, opTime(op, now)); err != nil {
			return false, &store.BatchError{Index: k, Err: err}
		}
		firsts[k] = last + 1
		lasts[key] = last + int64(len(rows[k]))
	}
	return queued, nil
}

// opTime is when an op's messages were written: its At, else the batch's time.
func opTime(op store.AppendOp, batch time.Time) time.Time {
	if op.At.IsZero() {
		return batch
	}
	return op.At.UTC().Round(0)
}

// appendRows inserts one append's rows inside tx, numbered from first.
func (s *Store) appendRows(ctx context.Context, tx querier, threadID string, rows []row, first int64, at time.Time) error {
	for i := range rows {
		r := &rows[i]
		seq := first + int64(i)
		m := r.msg
		_, err := s.wInsertMessage.ExecContext(ctx, r.id, seq, string(m.Role), m.Content, r.toolCalls, r.toolCallID,
			r.toolName, r.result, at.UnixNano(), m.Side, r.usage, threadID)
		if err != nil {
			return s.insertError(ctx, tx, threadID, i, r, err)
		}
		for j, c := range r.calls {
			_, err := s.wInsertCall.ExecContext(ctx, threadID, c.id, seq, j, c.name, c.args, c.reasoning)
			if isConstraint(err) {
				return fmt.Errorf("sqlite: append to %s: message %d: call id %q is already used in the thread: %w",
					threadID, i, c.id, store.ErrInvalid)
			}
			if err != nil {
				return fmt.Errorf("sqlite: append to %s: message %d: %w", threadID, i, err)
			}
		}
	}
	return nil
}

// lastSeq returns the seq of the thread's newest message (0 for none) and whether it has
// queued messages, inside a write transaction (which keeps both as they are until it ends),
// or store.ErrNotFound when the workspace has no such thread.
func (s *Store) lastSeq(ctx context.Context, workspaceID, threadID string) (last int64, queued bool, _ error) {
	var seq sql.NullInt64
	err := s.wThreadSeq.QueryRowContext(ctx, threadID, workspaceID).Scan(&seq, &queued)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, store.ErrNotFound
	}
	return seq.Int64, queued, err
}

// insertError explains why inserting message i failed. A constraint failure on a tool message
// is either a second result for its call or a call the thread never asked for: the indexes
// refuse both, and one query tells which it was.
func (s *Store) insertError(ctx context.Context, tx querier, threadID string, i int, r *row, err error) error {
	if !isConstraint(err) {
		return fmt.Errorf("sqlite: append to %s: message %d: %w", threadID, i, err)
	}
	var taken bool
	if err := s.wMessageExists.QueryRowContext(ctx, r.id).Scan(&taken); err != nil {
		return fmt.Errorf("sqlite: append to %s: message %d: %w", threadID, i, err)
	}
	if taken {
		return fmt.Errorf("sqlite: append to %s: message %d: id %q: %w (%w)", threadID, i, r.id, store.ErrIDTaken, store.ErrInvalid)
	}
	if r.toolCallID.Valid {
		var asked, answered bool
		if err := s.wCallState.QueryRowContext(ctx, threadID, r.toolCallID.String).Scan(&asked, &answered); err != nil {
			return fmt.Errorf("sqlite: append to %s: message %d: %w", threadID, i, err)
		}
		switch {
		case answered:
			return fmt.Errorf("sqlite: append to %s: message %d: call %q: %w", threadID, i, r.toolCallID.String, store.ErrResultExists)
		case !asked:
			return fmt.Errorf("sqlite: append to %s: message %d: no earlier assistant message of the thread asked for call %q: %w",
				threadID, i, r.toolCallID.String, store.ErrInvalid)
		}
	}
	return fmt.Errorf("sqlite: append to %s: message %d: %v: %w", threadID, i, err, store.ErrInvalid)
}

// encodeMessage checks m (store.CheckMessage) and encodes its JSON columns.
func encodeMessage(ctx context.Context, threadID string, m *store.Message, r *row) error {
	if err := store.CheckMessage(threadID, m); err != nil {
		return err
	}
	r.msg = m
	r.id = m.ID
	if r.id == "" {
		r.id = stamp.ID(ctx, store.PrefixMessage)
	}
	if m.Role == store.RoleTool {
		if err := r.encodeResult(m); err != nil {
			return err
		}
	}
	if m.Usage != nil {
		b, err := store.EncodeUsage(m.Usage)
		if err != nil {
			return fmt.Errorf("usage: %v: %w", err, store.ErrInvalid)
		}
		r.usage = sql.NullString{String: string(b), Valid: true}
	}
	if len(m.ToolCalls) > 0 {
		return r.encodeCalls(m.ToolCalls)
	}
	return nil
}

// encodeResult encodes the columns of a tool message: the call it answers and its result.
func (r *row) encodeResult(m *store.Message) error {
	r.toolCallID = sql.NullString{String: m.ToolCallID, Valid: true}
	r.toolName = nullString(m.ToolName)
	if m.Result == nil {
		return nil
	}
	b, err := store.EncodeResult(m.Content, m.Result)
	if err != nil {
		return fmt.Errorf("result of call %q: %v: %w", m.ToolCallID, err, store.ErrInvalid)
	}
	r.result = sql.NullString{String: string(b), Valid: true}
	return nil
}

// encodeCalls encodes the calls an assistant message makes: a row each, and the message's
// column of them.
func (r *row) encodeCalls(calls []store.ToolCall) error {
	r.calls = make([]callRow, len(calls))
	for j, c := range calls {
		cr := callRow{id: c.ID, name: c.Name, reasoning: c.Reasoning}
		if len(c.Args) > 0 {
			var buf bytes.Buffer
			if err := json.Compact(&buf, c.Args); err != nil {
				return fmt.Errorf("tool call %q: arguments: %v: %w", c.ID, err, store.ErrInvalid)
			}
			cr.args = sql.NullString{String: buf.String(), Valid: true}
		}
		r.calls[j] = cr
	}
	b, err := store.EncodeToolCalls(calls)
	if err != nil {
		return fmt.Errorf("tool calls: %v: %w", err, store.ErrInvalid)
	}
	r.toolCalls = sql.NullString{String: string(b), Valid: true}
	return nil
}

// Messages returns a page of the thread's messages, oldest first: the page.Limit newest (100
// when 0, at most 1000) with Seq below page.Before (from the end when 0).
func (s *Store) Messages(ctx context.Context, workspaceID, threadID string, page store.Page) ([]*store.Message, error) {
	limit, before, err := store.PageBounds(page)
	if err != nil {
		return nil, fmt.Errorf("sqlite: messages of %s: %w", threadID, err)
	}
	rows, err := s.rLastMessages.QueryContext(ctx, threadID, before, workspaceID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: messages of %s: %w", threadID, err)
	}
	defer rows.Close()
	out := make([]*store.Message, 0, limit)
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: messages of %s: %w", threadID, err)
		}
		m.ThreadID = threadID
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: messages of %s: %w", threadID, err)
	}
	if len(out) == 0 {
		if err := s.checkThread(ctx, workspaceID, threadID); err != nil {
			return nil, fmt.Errorf("sqlite: messages of %s: %w", threadID, err)
		}
	}
	slices.Reverse(out)
	return out, nil
}

func (s *Store) checkThread(ctx context.Context, workspaceID, threadID string) error {
	err := s.rThreadExists.QueryRowContext(ctx, threadID, workspaceID).Scan(new(int))
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

func scanMessage(rows *sql.Rows) (*store.Message, error) {
	var (
		m                    store.Message
		role                 string
		toolCalls, result    []byte
		usage                []byte
		toolCallID, toolName sql.NullString
		created              int64
	)
	if err := rows.Scan(&m.ID, &m.Seq, &role, &m.Content, &toolCalls, &toolCallID, &toolName, &result, &created, &m.Side, &usage); err != nil {
		return nil, err
	}
	if err := store.DecodeUsage(&m, usage); err != nil {
		return nil, err
	}
	m.Role = store.Role(role)
	m.ToolCallID, m.ToolName = toolCallID.String, toolName.String
	m.CreatedAt = fromNanos(created)
	if err := store.DecodeStoredMessage(&m, toolCalls, result); err != nil {
		return nil, err
	}
	return &m, nil
}

// PendingCalls returns the calls of the thread's assistant messages that have no result yet,
// in the order they were asked for.
func (s *Store) PendingCalls(ctx context.Context, workspaceID, threadID string) (_ []store.ToolCall, err error) {
	defer func() { err = readErr(ctx, err) }()
	// One read transaction, so that the thread check and the calls see the same snapshot.
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: pending calls of %s: %w", threadID, err)
	}
	defer tx.Rollback()
	if err := tx.StmtContext(ctx, s.rThreadExists).QueryRowContext(ctx, threadID, workspaceID).Scan(new(int)); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			err = store.ErrNotFound
		}
		return nil, fmt.Errorf("sqlite: pending calls of %s: %w", threadID, err)
	}
	rows, err := tx.StmtContext(ctx, s.rPending).QueryContext(ctx, threadID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: pending calls of %s: %w", threadID, err)
	}
	defer rows.Close()
	var out []store.ToolCall
	for rows.Next() {
		var (
			c    store.ToolCall
			args []byte
		)
		if err := rows.Scan(&c.ID, &c.Name, &args, &c.Reasoning); err != nil {
			return nil, fmt.Errorf("sqlite: pending calls of %s: %w", threadID, err)
		}
		if len(args) > 0 {
			c.Args = json.RawMessage(args)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: pending calls of %s: %w", threadID, err)
	}
	return out, nil
}

// isConstraint reports whether err is a SQLite constraint violation (unique, primary key,
// foreign key, check...).
func isConstraint(err error) bool {
	var e *msqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

// isBusy reports whether err is SQLITE_BUSY: another connection holds a lock.
func isBusy(err error) bool {
	var e *msqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// readErr makes a read that failed because its context ended say so. database/sql rolls a
// transaction back as soon as its context ends, and the statements after that fail with "sql:
// statement is closed" or sql.ErrTxDone, which hide the cancellation a caller needs to see to
// know the read failed only because it was cancelled (and may be tried again).
func readErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); err != nil && cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (the read's context ended: %w)", err, cerr)
	}
	return err
}
