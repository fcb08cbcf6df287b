package memstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

var _ store.BatchAppender = (*Store)(nil)

// errIDTaken is a message id already taken: both errors, as the SQL backends report it, so
// that a writer replaying appends (store/journal) tells "already done" from "refused".
var errIDTaken = fmt.Errorf("%w (%w)", store.ErrIDTaken, store.ErrInvalid)

// Append adds msgs to the end of the thread in one step, setting their ID (when empty),
// ThreadID, Seq and CreatedAt. A tool message must answer a call of an earlier assistant
// message of the thread (store.ErrInvalid otherwise), and a second result for a call is
// store.ErrResultExists; call ids are unique within a thread and message ids across the store
// (store.ErrIDTaken). When Append fails nothing is stored and msgs are left as they were.
func (s *Store) Append(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	if len(msgs) == 0 {
		// Nothing to write, but a missing thread is still reported.
		s.mu.Lock()
		defer s.mu.Unlock()
		_, err := s.th.thread(threadOp("append to "+threadID), workspaceID, threadID)
		return err
	}
	err := s.AppendBatch(ctx, []store.AppendOp{{WorkspaceID: workspaceID, ThreadID: threadID, Messages: msgs}})
	if be, ok := errors.AsType[*store.BatchError](err); ok {
		return be.Err
	}
	return err
}

// AppendPeek is Append that also reports whether the thread has queued messages once msgs are
// stored (see store.QueuePeeker).
func (s *Store) AppendPeek(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) (bool, error) {
	if err := s.Append(ctx, workspaceID, threadID, msgs...); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(threadOp("append to "+threadID), workspaceID, threadID)
	if err != nil {
		return false, err
	}
	return len(rec.queue) > 0, nil
}

// AppendFinal appends msgs and, when the thread has no queued messages once they are stored,
// applies fn to the thread, in one step (see store.FinalAppender).
func (s *Store) AppendFinal(ctx context.Context, workspaceID, threadID string, fn func(*store.Thread) error, msgs ...*store.Message) (*store.Thread, bool, error) {
	op := threadOp("append to " + threadID)
	if len(msgs) == 0 {
		return nil, false, op.fail(fmt.Errorf("no messages to end with: %w", store.ErrInvalid))
	}
	if err := checkMessages(threadID, msgs); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(op, workspaceID, threadID)
	if err != nil {
		return nil, false, err
	}
	tx := s.th.begin(ctx)
	if err := tx.add(rec, msgs, stamp.Now(ctx)); err != nil {
		return nil, false, err
	}
	if len(rec.queue) > 0 {
		tx.commit()
		return nil, true, nil
	}
	th, err := updated(ctx, threadOp("update thread "+threadID), rec, fn)
	if err != nil {
		return nil, false, err
	}
	tx.commit()
	rec.t = *copyThread(th)
	return th, false, nil
}

// AppendBatch applies ops in order in one step (see store.BatchAppender): all of them, or none
// and a *store.BatchError naming the op that failed. Each op follows Append's rules and sets
// its messages' ID, ThreadID, Seq and CreatedAt (the op's At when set).
func (s *Store) AppendBatch(ctx context.Context, ops []store.AppendOp) error {
	for k, op := range ops {
		if err := checkMessages(op.ThreadID, op.Messages); err != nil {
			return &store.BatchError{Index: k, Err: err}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := stamp.Now(ctx)
	tx := s.th.begin(ctx)
	for k, op := range ops {
		rec, err := s.th.thread(threadOp("append to "+op.ThreadID), op.WorkspaceID, op.ThreadID)
		if err == nil {
			err = tx.add(rec, op.Messages, opTime(op, now))
		}
		if err != nil {
			return &store.BatchError{Index: k, Err: err}
		}
	}
	tx.commit()
	return nil
}

// opTime is when an op's messages were written: its At, else the batch's time.
func opTime(op store.AppendOp, batch time.Time) time.Time {
	if op.At.IsZero() {
		return batch
	}
	return op.At.UTC().Round(0)
}

// checkMessages checks what Append refuses in messages by themselves (store.CheckMessage,
// and a result a SQL backend could not encode), before the store is locked.
func checkMessages(threadID string, msgs []*store.Message) error {
	for i, m := range msgs {
		err := store.CheckMessage(threadID, m)
		if err == nil && m.Result != nil {
			r := m.Result
			for _, v := range []json.RawMessage{r.Value, r.Attachments, r.Content, r.Problems} {
				if len(v) > 0 && !json.Valid(v) {
					err = fmt.Errorf("result of call %q: a field is not JSON: %w", m.ToolCallID, store.ErrInvalid)
				}
			}
		}
		if err != nil {
			return threadOp("append to " + threadID).fail(fmt.Errorf("message %d: %w", i, err))
		}
	}
	return nil
}

// appendTx is one append step in progress: the messages of a batch, checked against the
// histories and what the batch holds before them, kept apart until every op has passed.
type appendTx struct {
	ctx     context.Context
	d       *threadData
	ids     map[string]bool              // the message ids the batch takes
	threads map[*threadRec]*threadAppend // what it appends to each thread
	filled  []filledMessage              // the callers' messages, filled in on commit
}

// threadAppend is what an appendTx appends to one thread.
type threadAppend struct {
	msgs     []*store.Message // the store's copies, numbered
	asked    map[string]bool  // the call ids they ask for
	answered map[string]bool  // the call ids they answer
}

type filledMessage struct{ caller, stored *store.Message }

// begin starts an append step; the caller holds the store's lock until it commits or drops it.
func (d *threadData) begin(ctx context.Context) *appendTx {
	return &appendTx{ctx: ctx, d: d, ids: map[string]bool{}, threads: map[*threadRec]*threadAppend{}}
}

// add checks msgs, appended to rec after what the step holds already, and keeps copies of them.
// The messages were checked by checkMessages.
func (tx *appendTx) add(rec *threadRec, msgs []*store.Message, at time.Time) error {
	ta := tx.threads[rec]
	if ta == nil {
		ta = &threadAppend{asked: map[string]bool{}, answered: map[string]bool{}}
		tx.threads[rec] = ta
	}
	op := threadOp("append to " + rec.t.ID)
	for i, m := range msgs {
		id := m.ID
		if id == "" {
			id = stamp.ID(tx.ctx, store.PrefixMessage)
		}
		if err := tx.check(rec, ta, m, id); err != nil {
			return op.fail(fmt.Errorf("message %d: %w", i, err))
		}
		c := copyMessage(m)
		c.ID, c.ThreadID, c.Seq, c.CreatedAt = id, rec.t.ID, int64(len(rec.msgs)+len(ta.msgs)+1), at
		ta.msgs = append(ta.msgs, c)
		tx.ids[id] = true
		tx.filled = append(tx.filled, filledMessage{m, c})
	}
	return nil
}

// check reports what refuses m, with id, as the next message of rec in the step: an id taken,
// a result that answers no call asked for before it or a call answered already, a call id used
// already. It marks m's calls asked and its call answered.
func (tx *appendTx) check(rec *threadRec, ta *threadAppend, m *store.Message, id string) error {
	if _, taken := tx.d.messageIDs[id]; taken || tx.ids[id] {
		return fmt.Errorf("id %q: %w", id, errIDTaken)
	}
	if m.Role == store.RoleTool {
		if err := ta.answer(rec, m.ToolCallID); err != nil {
			return err
		}
	}
	for _, c := range m.ToolCalls {
		if rec.calls[c.ID] != nil || ta.asked[c.ID] {
			return fmt.Errorf("call id %q is already used in the thread: %w", c.ID, store.ErrInvalid)
		}
		ta.asked[c.ID] = true
	}
	return nil
}

// answer marks the call callID answered in the step, unless it was answered already or never
// asked for.
func (ta *threadAppend) answer(rec *threadRec, callID string) error {
	c := rec.calls[callID]
	switch {
	case c != nil && c.answered || ta.answered[callID]:
		return fmt.Errorf("call %q: %w", callID, store.ErrResultExists)
	case c == nil && !ta.asked[callID]:
		return fmt.Errorf("no earlier assistant message of the thread asked for call %q: %w", callID, store.ErrInvalid)
	}
	ta.answered[callID] = true
	return nil
}

// commit stores what the step holds and fills in the callers' messages.
func (tx *appendTx) commit() {
	for rec, ta := range tx.threads {
		for _, m := range ta.msgs {
			rec.store(tx.d, m)
		}
	}
	for _, f := range tx.filled {
		f.caller.ID, f.caller.ThreadID, f.caller.Seq, f.caller.CreatedAt = f.stored.ID, f.stored.ThreadID, f.stored.Seq, f.stored.CreatedAt
	}
}

// store appends m, the store's own copy numbered next, to the history.
func (r *threadRec) store(d *threadData, m *store.Message) {
	r.msgs = append(r.msgs, m)
	d.messageIDs[m.ID] = msgRef{r, m.Seq}
	for _, c := range m.ToolCalls {
		if r.calls == nil {
			r.calls = map[string]*callRec{}
		}
		r.calls[c.ID] = &callRec{call: c}
		r.pending = append(r.pending, c.ID)
	}
	if c := r.calls[m.ToolCallID]; m.Role == store.RoleTool && c != nil {
		c.answered = true
		if i := slices.Index(r.pending, m.ToolCallID); i >= 0 {
			r.pending = slices.Delete(r.pending, i, i+1)
		}
	}
}

// Messages returns a page of the thread's messages, oldest first: the page.Limit newest (100
// when 0, at most 1000) with Seq below page.Before (from the end when 0).
func (s *Store) Messages(ctx context.Context, workspaceID, threadID string, page store.Page) ([]*store.Message, error) {
	return pageOf(s, threadOp("messages of "+threadID), workspaceID, threadID, page,
		func(r *threadRec) []*store.Message { return r.msgs }, copyMessage)
}

// pageOf returns a page of a thread's entries that list picks (messages or log entries,
// numbered 1 to n in order), copied with cp: the limit newest numbered below page.Before.
func pageOf[T any](s *Store, op threadOp, workspaceID, threadID string, page store.Page, list func(*threadRec) []T, cp func(T) T) ([]T, error) {
	limit, before, err := store.PageBounds(page)
	if err != nil {
		return nil, op.fail(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(op, workspaceID, threadID)
	if err != nil {
		return nil, err
	}
	entries := list(rec)
	hi := min(int64(len(entries)), before-1)
	lo := max(0, hi-int64(limit))
	out := make([]T, 0, hi-lo)
	for _, e := range entries[lo:hi] {
		out = append(out, cp(e))
	}
	return out, nil
}

// PendingCalls returns the calls of the thread's assistant messages that have no result yet,
// in the order they were asked for.
func (s *Store) PendingCalls(ctx context.Context, workspaceID, threadID string) ([]store.ToolCall, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(threadOp("pending calls of "+threadID), workspaceID, threadID)
	if err != nil {
		return nil, err
	}
	var out []store.ToolCall
	for _, id := range rec.pending {
		out = append(out, copyCall(rec.calls[id].call))
	}
	return out, nil
}

// UpdateMessage applies fn to a copy of a message of the thread and stores its Content if fn
// succeeds; nothing else may change, and tool messages not at all (store.ErrInvalid). An error
// from fn is returned as it is. fn runs while the store is locked: it must be quick and must
// not use the store.
func (s *Store) UpdateMessage(ctx context.Context, workspaceID, threadID, messageID string, fn func(*store.Message) error) (*store.Message, error) {
	op := threadOp("update message " + messageID)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(op, workspaceID, threadID)
	if err != nil {
		return nil, err
	}
	ref, ok := s.th.messageIDs[messageID]
	if !ok || ref.th != rec {
		return nil, op.failf(store.ErrNotFound, "no message %s in thread %s", messageID, threadID)
	}
	stored := rec.msgs[ref.seq-1]
	m := copyMessage(stored)
	before, err := json.Marshal(m)
	if err != nil {
		return nil, op.fail(err)
	}
	if err := fn(m); err != nil {
		return nil, err
	}
	if err := store.CheckMessageUpdate(before, m); err != nil {
		return nil, op.fail(err)
	}
	stored.Content = m.Content
	return m, nil
}

// copyMessage returns a copy of m that shares nothing with it; no calls are nil.
func copyMessage(m *store.Message) *store.Message {
	c := *m
	c.ToolCalls = nil
	for _, tc := range m.ToolCalls {
		c.ToolCalls = append(c.ToolCalls, copyCall(tc))
	}
	if m.Result != nil {
		r := *m.Result
		r.Value, r.Attachments = bytes.Clone(r.Value), bytes.Clone(r.Attachments)
		r.Content, r.Problems, r.Meta = bytes.Clone(r.Content), bytes.Clone(r.Problems), bytes.Clone(r.Meta)
		c.Result = &r
	}
	if m.Usage != nil {
		u := *m.Usage
		c.Usage = &u
	}
	return &c
}

func copyCall(c store.ToolCall) store.ToolCall {
	c.Args, c.Signature = bytes.Clone(c.Args), bytes.Clone(c.Signature)
	return c
}
