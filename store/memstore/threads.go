package memstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// threadData holds the threads and everything kept per thread. Like entityData, its records
// are the Store's own copies: what a method takes in is copied before it is kept, and what it
// hands out is a copy too.
type threadData struct {
	threads map[string]*threadRec // by id, of every workspace
	// listed holds each workspace's threads oldest first, by (CreatedAt, ID): the thread list
	// reads it backwards.
	listed map[string][]*threadRec
	// messageIDs are the ids of every history's messages and queuedIDs those of the queued
	// ones: unique across the store, as the SQL backends' primary keys make them.
	messageIDs map[string]msgRef
	queuedIDs  map[string]struct{}
	vars       map[varOwner]map[string]*store.Variable // by owner, then name
}

func (d *threadData) init() {
	*d = threadData{
		threads:    map[string]*threadRec{},
		listed:     map[string][]*threadRec{},
		messageIDs: map[string]msgRef{},
		queuedIDs:  map[string]struct{}{},
		vars:       map[varOwner]map[string]*store.Variable{},
	}
}

// threadRec is a thread and what is kept for it.
type threadRec struct {
	t        store.Thread
	children []*threadRec // in the order they were created

	msgs    []*store.Message    // the history: msgs[i].Seq is i+1
	calls   map[string]*callRec // the calls the history asks for, by id
	pending []string            // the ids of the calls without a result, in the order asked

	queue     []*store.Message
	decisions []*store.Decision // in the order Decisions lists them
	logs      []*store.LogEntry // logs[i].Seq is i+1
	states    map[string]*stateObj
	files     *fileTree // nil until first used
}

// callRec is a call of the history, and whether it has a result.
type callRec struct {
	call     store.ToolCall
	answered bool
}

// msgRef locates a message of a history.
type msgRef struct {
	th  *threadRec
	seq int64
}

// threadOp names an operation of the thread half in its errors, worded as the SQL backends
// word them.
type threadOp string

// fail wraps err, from a rule that package store checks, with the operation.
func (op threadOp) fail(err error) error { return fmt.Errorf("memstore: %s: %w", string(op), err) }

// failf reports a broken rule: kind is the store error it wraps.
func (op threadOp) failf(kind error, format string, args ...any) error {
	return fmt.Errorf("memstore: %s: %s: %w", string(op), fmt.Sprintf(format, args...), kind)
}

// lookup returns the workspace's thread, or nil: a thread of another workspace is not found
// either.
func (d *threadData) lookup(workspaceID, threadID string) *threadRec {
	if r := d.threads[threadID]; r != nil && r.t.WorkspaceID == workspaceID {
		return r
	}
	return nil
}

// thread returns the workspace's thread, or store.ErrNotFound.
func (d *threadData) thread(op threadOp, workspaceID, threadID string) (*threadRec, error) {
	if r := d.lookup(workspaceID, threadID); r != nil {
		return r, nil
	}
	return nil, op.failf(store.ErrNotFound, "no thread %s in the workspace", threadID)
}

// CreateThread stores a new thread, setting its ID (when empty, from the context's ids),
// Status (idle when empty), CreatedAt and UpdatedAt. A ParentID must name a thread of the same
// workspace (store.ErrNotFound otherwise); an id already taken is store.ErrInvalid.
func (s *Store) CreateThread(ctx context.Context, t *store.Thread) error {
	const op threadOp = "create thread"
	if t == nil {
		_, _, err := store.PrepareThread(ctx, nil)
		return op.fail(err)
	}
	c := *t
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.ID == "" {
		c.ID = stamp.ID(ctx, store.PrefixThread)
	}
	id, status, err := store.PrepareThread(ctx, &c)
	if err != nil {
		return op.fail(err)
	}
	parent := s.th.lookup(c.WorkspaceID, c.ParentID)
	if c.ParentID != "" && parent == nil {
		return op.failf(store.ErrNotFound, "parent %s", c.ParentID)
	}
	if _, taken := s.th.threads[id]; taken {
		return op.failf(store.ErrInvalid, "id %s is taken", id)
	}
	now := stamp.Now(ctx)
	c.Status, c.CreatedAt, c.UpdatedAt = status, now, now
	rec := &threadRec{t: *copyThread(&c)}
	s.th.threads[id] = rec
	s.th.listed[c.WorkspaceID] = insertOrdered(s.th.listed[c.WorkspaceID], rec, threadOrder)
	if parent != nil {
		parent.children = append(parent.children, rec)
	}
	t.ID, t.Status, t.CreatedAt, t.UpdatedAt = id, status, now, now
	return nil
}

func threadOrder(a, b *threadRec) int {
	return creationOrder(a.t.CreatedAt, a.t.ID, b.t.CreatedAt, b.t.ID)
}

// Thread returns the thread, or store.ErrNotFound.
func (s *Store) Thread(ctx context.Context, workspaceID, threadID string) (*store.Thread, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(threadOp("thread "+threadID), workspaceID, threadID)
	if err != nil {
		return nil, err
	}
	return copyThread(&rec.t), nil
}

// UpdateThread applies fn to a copy of the thread and stores the result if fn succeeds and the
// change keeps the rules (store.CheckThreadUpdate: store.ErrInvalid or store.ErrTooLarge
// otherwise); the store sets UpdatedAt. An error from fn is returned as it is. fn runs while
// the store is locked: it must be quick and must not use the store.
func (s *Store) UpdateThread(ctx context.Context, workspaceID, threadID string, fn func(*store.Thread) error) (*store.Thread, error) {
	op := threadOp("update thread " + threadID)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(op, workspaceID, threadID)
	if err != nil {
		return nil, err
	}
	th, err := updated(ctx, op, rec, fn)
	if err != nil {
		return nil, err
	}
	rec.t = *copyThread(th)
	return th, nil
}

// updated is rec's thread as fn leaves it, checked by UpdateThread's rules, not yet stored.
func updated(ctx context.Context, op threadOp, rec *threadRec, fn func(*store.Thread) error) (*store.Thread, error) {
	th := copyThread(&rec.t)
	if err := fn(th); err != nil {
		return nil, err
	}
	if err := store.CheckThreadUpdate(&rec.t, th); err != nil {
		return nil, op.fail(err)
	}
	if th.Status == "" {
		th.Status = store.StatusIdle
	}
	th.UpdatedAt = notEarlier(stamp.Now(ctx), rec.t.UpdatedAt)
	return th, nil
}

// Children lists the threads whose parent is threadID, oldest first. A thread without
// children, of another workspace or that does not exist has none.
func (s *Store) Children(ctx context.Context, workspaceID, threadID string) ([]*store.Thread, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.th.lookup(workspaceID, threadID)
	if rec == nil {
		return nil, nil
	}
	// Oldest first, then in the order created: a clock that went back may have made them
	// out of order.
	kids := slices.Clone(rec.children)
	slices.SortStableFunc(kids, func(a, b *threadRec) int { return a.t.CreatedAt.Compare(b.t.CreatedAt) })
	out := make([]*store.Thread, len(kids))
	for i, k := range kids {
		out[i] = copyThread(&k.t)
	}
	return out, nil
}

// Threads lists the workspace's threads that f keeps, newest first, a page at a time (see
// store.Threads): the page starts at the cursor's place, found by binary search.
func (s *Store) Threads(ctx context.Context, workspaceID string, f store.ThreadFilter) ([]*store.Thread, string, error) {
	q, err := store.PrepareThreadList(workspaceID, f)
	if err != nil {
		return nil, "", threadOp("list threads").fail(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.th.listed[workspaceID]
	end := len(list)
	if !q.After.IsStart() {
		end, _ = slices.BinarySearchFunc(list, q.After, func(r *threadRec, c store.ThreadCursor) int {
			return creationOrder(r.t.CreatedAt, r.t.ID, c.CreatedAt, c.ID)
		})
	}
	var rows []*store.Thread
	for i := end - 1; i >= 0 && len(rows) <= q.Limit; i-- {
		if listKeeps(q, &list[i].t) {
			rows = append(rows, copyThread(&list[i].t))
		}
	}
	page, next := q.Page(rows)
	return page, next, nil
}

// listKeeps reports whether the list q keeps t.
func listKeeps(q store.ThreadQuery, t *store.Thread) bool {
	switch {
	case q.AgentID != "" && t.AgentID != q.AgentID,
		q.Tag != "" && !slices.Contains(t.Tags, q.Tag),
		q.AlsoTag != "" && !slices.Contains(t.Tags, q.AlsoTag),
		q.Status != "" && t.Status != q.Status:
		return false
	case q.Name == "":
		return true
	}
	// A substring of a name tag's value, in any case of ASCII letters.
	want := lowerASCII(q.Name)
	return slices.ContainsFunc(t.Tags, func(tag string) bool {
		v, ok := strings.CutPrefix(tag, "name:")
		return ok && strings.Contains(lowerASCII(v), want)
	})
}

// lowerASCII lowers the ASCII letters of s, and only them, as the SQL backends' search does.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// copyThread returns a copy of t that shares nothing with it. Empty tags and state are nil, as
// a SQL backend reads them back.
func copyThread(t *store.Thread) *store.Thread {
	c := *t
	c.Tags, c.State = nil, nil
	if len(t.Tags) > 0 {
		c.Tags = slices.Clone(t.Tags)
	}
	if len(t.State) > 0 {
		c.State = bytes.Clone(t.State)
	}
	return &c
}
