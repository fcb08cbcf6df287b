package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlstore"
)

// CreateThread stores a new thread, setting its ID (when empty), CreatedAt and UpdatedAt. A
// ParentID must name a thread of the same workspace (store.ErrNotFound otherwise).
func (s *Store) CreateThread(ctx context.Context, t *store.Thread) error {
	id, status, err := store.PrepareThread(ctx, t)
	if err != nil {
		return fmt.Errorf("sqlite: create thread: %w", err)
	}
	tags, err := encodeTags(t.Tags)
	if err != nil {
		return err
	}
	now := stamp.Now(ctx).Round(0)
	err = s.write(ctx, func(ctx context.Context, tx querier) error {
		if err := s.checkParent(ctx, t); err != nil {
			return err
		}
		return s.insertThread(ctx, t, id, status, tags, now)
	})
	if err != nil {
		return err
	}
	t.ID, t.Status, t.CreatedAt, t.UpdatedAt = id, status, now, now
	return nil
}

// checkParent checks that a new thread's parent, if it has one, is a thread of its workspace.
func (s *Store) checkParent(ctx context.Context, t *store.Thread) error {
	if t.ParentID == "" {
		return nil
	}
	var ws string
	err := s.wThreadWorkspace.QueryRowContext(ctx, t.ParentID).Scan(&ws)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && ws != t.WorkspaceID) {
		return fmt.Errorf("sqlite: create thread: parent %s: %w", t.ParentID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlite: create thread: %w", err)
	}
	return nil
}

// insertThread inserts the new thread t under id, with its tags' rows.
func (s *Store) insertThread(ctx context.Context, t *store.Thread, id string, status store.ThreadStatus, tags string, now time.Time) error {
	_, err := s.wInsertThread.ExecContext(ctx, id, t.WorkspaceID, t.AgentID, t.UserID,
		nullString(t.ParentID), tags, t.StepCount, t.CurrentSide, t.Stopped, string(status), t.Blocking, t.Resumable,
		nullJSON(t.State), now.UnixNano(), now.UnixNano())
	if isConstraint(err) {
		return fmt.Errorf("sqlite: create thread: id %s is taken: %w", id, store.ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("sqlite: create thread: %w", err)
	}
	if _, err := s.wInsertTags.ExecContext(ctx, id, t.WorkspaceID, now.UnixNano(), tags); err != nil {
		return fmt.Errorf("sqlite: create thread: tags: %w", err)
	}
	return nil
}

// Thread returns the thread, or store.ErrNotFound.
func (s *Store) Thread(ctx context.Context, workspaceID, threadID string) (*store.Thread, error) {
	th, err := scanThread(s.rThread.QueryRowContext(ctx, threadID, workspaceID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: thread %s: %w", threadID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: thread %s: %w", threadID, err)
	}
	return th, nil
}

// UpdateThread applies fn to the thread inside one write transaction and stores the result.
// Only Tags, StepCount, CurrentSide, Stopped, Status and State may change, and a terminated
// thread stays terminated (store.ErrInvalid otherwise); the store sets UpdatedAt. An error from fn is returned as is and nothing is stored. fn runs while
// the store's write lock is held: it must be quick and must not write to the store.
func (s *Store) UpdateThread(ctx context.Context, workspaceID, threadID string, fn func(*store.Thread) error) (*store.Thread, error) {
	var out *store.Thread
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		var err error
		out, err = s.updateThread(ctx, workspaceID, threadID, fn)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// updateThread is UpdateThread inside the write transaction.
func (s *Store) updateThread(ctx context.Context, workspaceID, threadID string, fn func(*store.Thread) error) (*store.Thread, error) {
	th, err := scanThread(s.wThread.QueryRowContext(ctx, threadID, workspaceID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: update thread %s: %w", threadID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: update thread %s: %w", threadID, err)
	}
	before := *th
	before.Tags = slices.Clone(th.Tags)
	if err := fn(th); err != nil {
		return nil, err
	}
	if err := store.CheckThreadUpdate(&before, th); err != nil {
		return nil, fmt.Errorf("sqlite: update thread %s: %w", threadID, err)
	}
	if th.Status == "" {
		th.Status = store.StatusIdle
	}
	tags, err := encodeTags(th.Tags)
	if err != nil {
		return nil, err
	}
	now := stamp.Now(ctx).Round(0)
	if now.Before(before.UpdatedAt) { // the clock went back: UpdatedAt does not
		now = before.UpdatedAt
	}
	if _, err := s.wUpdateThread.ExecContext(ctx, tags, th.StepCount, th.CurrentSide,
		th.Stopped, string(th.Status), nullJSON(th.State), now.UnixNano(), threadID); err != nil {
		return nil, fmt.Errorf("sqlite: update thread %s: %w", threadID, err)
	}
	if !slices.Equal(before.Tags, th.Tags) { // the tags' index follows the tags, rarely changed
		if err := s.replaceTags(ctx, threadID, th, tags); err != nil {
			return nil, err
		}
	}
	th.UpdatedAt = now
	return th, nil
}

// replaceTags replaces the rows of the thread's tags.
func (s *Store) replaceTags(ctx context.Context, threadID string, th *store.Thread, tags string) error {
	if _, err := s.wDeleteTags.ExecContext(ctx, threadID); err != nil {
		return fmt.Errorf("sqlite: update thread %s: tags: %w", threadID, err)
	}
	if _, err := s.wInsertTags.ExecContext(ctx, threadID, th.WorkspaceID, th.CreatedAt.UnixNano(), tags); err != nil {
		return fmt.Errorf("sqlite: update thread %s: tags: %w", threadID, err)
	}
	return nil
}

// Children lists the threads whose parent is threadID, oldest first. A thread without children,
// or of another workspace, has none.
func (s *Store) Children(ctx context.Context, workspaceID, threadID string) ([]*store.Thread, error) {
	rows, err := s.rChildren.QueryContext(ctx, threadID, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: children of %s: %w", threadID, err)
	}
	defer rows.Close()
	var out []*store.Thread
	for rows.Next() {
		th, err := scanThread(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: children of %s: %w", threadID, err)
		}
		out = append(out, th)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: children of %s: %w", threadID, err)
	}
	return out, nil
}

// Threads lists the workspace's threads that f keeps, newest first, a page at a time (see
// store.Store; the statement is sqlstore.ThreadList's).
func (s *Store) Threads(ctx context.Context, workspaceID string, f store.ThreadFilter) ([]*store.Thread, string, error) {
	q, err := store.PrepareThreadList(workspaceID, f)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list threads: %w", err)
	}
	query, args := sqlstore.ThreadList(dialect, threadColsT, q)
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list threads: %w", readErr(ctx, err))
	}
	defer rows.Close()
	var out []*store.Thread
	for rows.Next() {
		th, err := scanThread(rows)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: list threads: %w", err)
		}
		out = append(out, th)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: list threads: %w", readErr(ctx, err))
	}
	page, next := q.Page(out)
	return page, next, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanThread(row scanner) (*store.Thread, error) {
	var (
		th               store.Thread
		parent           sql.NullString
		tags, state      []byte
		status           string
		created, updated int64
	)
	if err := row.Scan(&th.ID, &th.WorkspaceID, &th.AgentID, &th.UserID, &parent, &tags, &th.StepCount,
		&th.CurrentSide, &th.Stopped, &status, &th.Blocking, &th.Resumable, &state, &created, &updated); err != nil {
		return nil, err
	}
	th.Status = store.ThreadStatus(status)
	if len(state) > 0 {
		th.State = json.RawMessage(state)
	}
	th.ParentID = parent.String
	if len(tags) > 0 && string(tags) != "[]" {
		if err := json.Unmarshal(tags, &th.Tags); err != nil {
			return nil, fmt.Errorf("thread %s: tags: %w", th.ID, err)
		}
	}
	th.CreatedAt, th.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &th, nil
}

func encodeTags(tags []string) (string, error) {
	if len(tags) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(tags)
	if err != nil {
		return "", fmt.Errorf("sqlite: tags: %v: %w", err, store.ErrInvalid)
	}
	return string(b), nil
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// nullJSON stores an empty JSON value as NULL, after checking it is JSON.
func nullJSON(b json.RawMessage) sql.NullString {
	return sql.NullString{String: string(b), Valid: len(b) > 0}
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
