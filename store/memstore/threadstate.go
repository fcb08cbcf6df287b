package memstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// The rest of a thread's state: messages queued for its next step, decisions on its calls and
// its log.

// Enqueue queues messages for the thread's next step, setting their ID (when empty), ThreadID
// and CreatedAt. Only system, user and assistant messages without tool calls may be queued
// (store.ErrInvalid); an id queued or in a history already is store.ErrIDTaken, and then
// nothing is queued.
func (s *Store) Enqueue(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	op := threadOp("enqueue to thread " + threadID)
	for i, m := range msgs {
		if err := store.CheckQueued(m); err != nil {
			return op.fail(fmt.Errorf("message %d: %w", i, err))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(op, workspaceID, threadID)
	if err != nil {
		return err
	}
	now := stamp.Now(ctx)
	queued := make([]*store.Message, len(msgs))
	taken := map[string]bool{}
	for i, m := range msgs {
		id := m.ID
		if id == "" {
			id = stamp.ID(ctx, store.PrefixMessage)
		}
		_, inHistory := s.th.messageIDs[id]
		_, inQueue := s.th.queuedIDs[id]
		if inHistory || inQueue || taken[id] {
			return op.failf(errIDTaken, "message id %s is taken", id)
		}
		taken[id] = true
		// What a queue keeps of a message: the rest is refused by CheckQueued.
		queued[i] = &store.Message{ID: id, ThreadID: threadID, Role: m.Role, Content: m.Content, CreatedAt: now}
	}
	for i, q := range queued {
		rec.queue = append(rec.queue, q)
		s.th.queuedIDs[q.ID] = struct{}{}
		msgs[i].ID, msgs[i].ThreadID, msgs[i].CreatedAt = q.ID, threadID, now
	}
	return nil
}

// Queued returns the thread's queued messages, oldest first.
func (s *Store) Queued(ctx context.Context, workspaceID, threadID string) ([]*store.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(threadOp("queued messages of "+threadID), workspaceID, threadID)
	if err != nil {
		return nil, err
	}
	var out []*store.Message
	for _, m := range rec.queue {
		out = append(out, copyMessage(m))
	}
	return out, nil
}

// AppendQueued moves the thread's queued messages to the end of its history, in the order they
// were queued, and returns them as appended (an empty slice for none). An id a history took
// since it was queued (an Append given that id) is store.ErrIDTaken, and nothing moves.
func (s *Store) AppendQueued(ctx context.Context, workspaceID, threadID string) ([]*store.Message, error) {
	op := threadOp("append queued to " + threadID)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(op, workspaceID, threadID)
	if err != nil {
		return nil, err
	}
	for _, q := range rec.queue {
		if _, taken := s.th.messageIDs[q.ID]; taken {
			return nil, op.failf(errIDTaken, "message id %s is taken", q.ID)
		}
	}
	now := stamp.Now(ctx)
	out := make([]*store.Message, 0, len(rec.queue))
	for _, q := range rec.queue {
		q.Seq, q.CreatedAt = int64(len(rec.msgs)+1), now
		rec.store(&s.th, q)
		delete(s.th.queuedIDs, q.ID)
		out = append(out, copyMessage(q))
	}
	rec.queue = nil
	return out, nil
}

// Decide records a decision on a pending call of the thread: one it asked for that has no
// result yet (store.ErrInvalid otherwise), decided once (store.ErrDecided). It sets DecidedAt
// when zero.
func (s *Store) Decide(ctx context.Context, workspaceID, threadID string, d *store.Decision) error {
	if err := d.Check(); err != nil {
		return threadOp("decide in thread " + threadID).fail(err)
	}
	op := threadOp(fmt.Sprintf("decide on call %q of thread %s", d.CallID, threadID))
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(op, workspaceID, threadID)
	if err != nil {
		return err
	}
	if c := rec.calls[d.CallID]; c == nil || c.answered {
		return op.failf(store.ErrInvalid, "not a pending call of the thread")
	}
	for _, prev := range rec.decisions {
		if prev.CallID == d.CallID {
			return op.fail(store.ErrDecided)
		}
	}
	c := *d
	if c.DecidedAt.IsZero() {
		c.DecidedAt = stamp.Now(ctx)
	}
	c.DecidedAt = c.DecidedAt.UTC().Round(0)
	c.Args = bytes.Clone(d.Args)
	// Listed by the time decided, then in the order made: after every decision not later.
	i := len(rec.decisions)
	for i > 0 && rec.decisions[i-1].DecidedAt.After(c.DecidedAt) {
		i--
	}
	rec.decisions = slices.Insert(rec.decisions, i, &c)
	d.DecidedAt = c.DecidedAt
	return nil
}

// Decisions returns the decisions on the thread's calls, in the order they were made (by
// DecidedAt).
func (s *Store) Decisions(ctx context.Context, workspaceID, threadID string) ([]*store.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(threadOp("read the decisions of thread "+threadID), workspaceID, threadID)
	if err != nil {
		return nil, err
	}
	var out []*store.Decision
	for _, d := range rec.decisions {
		c := *d
		c.Args = bytes.Clone(d.Args)
		out = append(out, &c)
	}
	return out, nil
}

// Log appends an entry to the thread's log, setting Seq and Time (when zero).
func (s *Store) Log(ctx context.Context, workspaceID, threadID string, e *store.LogEntry) error {
	op := threadOp("log to " + threadID)
	if err := e.Check(); err != nil {
		return op.fail(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(op, workspaceID, threadID)
	if err != nil {
		return err
	}
	c := *e
	if c.Time.IsZero() {
		c.Time = stamp.Now(ctx)
	}
	c.Seq, c.Time, c.Data = int64(len(rec.logs)+1), c.Time.UTC().Round(0), bytes.Clone(e.Data)
	rec.logs = append(rec.logs, &c)
	e.Seq, e.Time = c.Seq, c.Time
	return nil
}

// Logs returns a page of the thread's log, oldest first, paged like Messages.
func (s *Store) Logs(ctx context.Context, workspaceID, threadID string, page store.Page) ([]*store.LogEntry, error) {
	return pageOf(s, threadOp("read the log of thread "+threadID), workspaceID, threadID, page,
		func(r *threadRec) []*store.LogEntry { return r.logs }, func(e *store.LogEntry) *store.LogEntry {
			c := *e
			c.Data = bytes.Clone(e.Data)
			return &c
		})
}
