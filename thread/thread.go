// Package thread is the state of one persisted conversation, as the runtime and tools use it:
// its ids and tags, its messages (read, inject, queue for the next step, update), the results
// of its tool calls, its file system and attachments, its log, its children and its execution
// state. It is a thin, typed layer over a store (store/sqlite or store/postgres): every method
// reads or writes the store, so several processes sharing a database see the same thread.
//
// The loop a runtime writes with it persists before it advances:
//
//	th.AppendAssistant(ctx, text, calls)      // the model's turn, with its calls
//	for _, call := range th.Pending(ctx) {    // what has no result yet, in order
//		d.Dispatch(ctx, call)                  // the dispatcher records the result (th is its Recorder)
//	}
//	th.Advance(ctx, ...)                      // the step is complete
//
// A result is stored once per call id (store.ErrResultExists for a second), so a run resumed
// after a crash asks Pending for what is left and never runs a completed call again.
package thread

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
)

// Store is what a thread needs from a backend: its history and its file system. Both
// store/sqlite and store/postgres provide it.
type Store interface {
	store.Store
	store.Files
}

// Thread is a handle on one stored thread. Its methods are safe for concurrent use; the
// identity (ids, parent) never changes, while Info returns what was last read or written.
type Thread struct {
	st                          Store
	ws, id, agent, user, parent string

	mu   sync.Mutex
	info store.Thread // the last snapshot read or written

	// queueSeen is what the latest append through this handle saw of the thread's queue in
	// its own transaction, until QueueSeen reports it.
	queueSeen atomic.Pointer[queueLook]
}

// queueLook is what an append saw of its thread's queue, and how many queue writes this
// process had made before it.
type queueLook struct {
	queued bool
	writes uint64
}

// queueWrites counts the queue writes this process has made, through any handle: one made
// after an append (a sub-agent run in between delivering its answer to this thread, through
// its own handle on it) makes what the append saw of the queue too old to use.
var queueWrites atomic.Uint64

func newHandle(st Store, info *store.Thread) *Thread {
	return &Thread{st: st, ws: info.WorkspaceID, id: info.ID, agent: info.AgentID, user: info.UserID,
		parent: info.ParentID, info: *info}
}

func (t *Thread) snapshot() store.Thread {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.info
}

func (t *Thread) keep(info *store.Thread) store.Thread {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.info = *info
	return t.info
}

// Options describe a new thread.
type Options struct {
	WorkspaceID string // required
	AgentID     string
	UserID      string
	// ParentID makes the thread a child of a thread of the same workspace.
	ParentID string
	// Name, when set, is stored as the tag "name:<Name>".
	Name string
	Tags []string
	// Blocking and Resumable are the thread's entry in its parent's children registry.
	Blocking  bool
	Resumable bool
	// Status is the initial status; empty means idle.
	Status store.ThreadStatus
}

// ErrNameTag reports a Name or a tag that cannot be stored as a name tag.
var ErrNameTag = errors.New("thread: bad name")

// Create stores a new thread and returns a handle on it. It knows no agent, so it checks no
// variables: for a thread an agent runs, agent.Runner.CreateThread refuses one whose required
// variables are missing before it exists; a thread made here is refused by its first run.
func Create(ctx context.Context, st Store, o Options) (*Thread, error) {
	tags := append([]string(nil), o.Tags...)
	if o.Name != "" {
		if strings.TrimSpace(o.Name) != o.Name || len(o.Name) > store.MaxNameLen {
			return nil, fmt.Errorf("%w %q: a name has no surrounding spaces and at most %d bytes", ErrNameTag, o.Name, store.MaxNameLen)
		}
		for _, t := range tags {
			if strings.HasPrefix(t, "name:") {
				return nil, fmt.Errorf("%w: both Name and a %q tag given", ErrNameTag, t)
			}
		}
		tags = append(tags, "name:"+o.Name)
	}
	t := &store.Thread{WorkspaceID: o.WorkspaceID, AgentID: o.AgentID, UserID: o.UserID, ParentID: o.ParentID,
		Tags: tags, Blocking: o.Blocking, Resumable: o.Resumable, Status: o.Status}
	if err := st.CreateThread(ctx, t); err != nil {
		return nil, err
	}
	return newHandle(st, t), nil
}

// Open returns a handle on a stored thread (store.ErrNotFound when the workspace has none
// with that id).
func Open(ctx context.Context, st Store, workspaceID, threadID string) (*Thread, error) {
	t, err := st.Thread(ctx, workspaceID, threadID)
	if err != nil {
		return nil, err
	}
	return newHandle(st, t), nil
}

// ID is the thread's id (thr_...).
func (t *Thread) ID() string { return t.id }

// WorkspaceID is the workspace the thread belongs to.
func (t *Thread) WorkspaceID() string { return t.ws }

// AgentID is the agent the thread was created for ("" for none).
func (t *Thread) AgentID() string { return t.agent }

// UserID is the user the thread was created for ("" for none).
func (t *Thread) UserID() string { return t.user }

// ParentID is the parent thread's id ("" for a root thread).
func (t *Thread) ParentID() string { return t.parent }

// Name is the value of the thread's "name:<value>" tag, or "".
func (t *Thread) Name() string {
	info := t.snapshot()
	return info.Name()
}

// Store is the store the thread lives in.
func (t *Thread) Store() Store { return t.st }

// Scope is who calls on this thread run for, for quiver.WithScope.
func (t *Thread) Scope() quiver.Scope {
	return quiver.Scope{AgentID: t.agent, UserID: t.user, WorkspaceID: t.ws, ThreadID: t.id}
}

// Info is the thread as last read from or written to the store by this handle.
func (t *Thread) Info() store.Thread { return t.snapshot() }

// Refresh reads the thread again and returns it.
func (t *Thread) Refresh(ctx context.Context) (store.Thread, error) {
	info, err := t.st.Thread(ctx, t.ws, t.id)
	if err != nil {
		return store.Thread{}, err
	}
	return t.keep(info), nil
}

// Update changes the thread's tags, execution state, status or run state in one transaction
// (see store.Store.UpdateThread for what may change) and returns the result.
func (t *Thread) Update(ctx context.Context, fn func(*store.Thread) error) (store.Thread, error) {
	info, err := t.st.UpdateThread(ctx, t.ws, t.id, fn)
	if err != nil {
		return store.Thread{}, err
	}
	return t.keep(info), nil
}

// Execution is the thread's execution state as last read or written.
func (t *Thread) Execution() quiver.Execution {
	info := t.snapshot()
	return quiver.Execution{StepCount: info.StepCount, Side: info.CurrentSide}
}

// Advance records that a step completed: the step count grows by one and side becomes the
// current side ("" keeps it).
func (t *Thread) Advance(ctx context.Context, side string) (store.Thread, error) {
	return t.Update(ctx, func(x *store.Thread) error {
		x.StepCount++
		if side != "" {
			x.CurrentSide = side
		}
		return nil
	})
}

// SetStatus changes the thread's status; a terminated thread stays terminated
// (store.ErrInvalid).
func (t *Thread) SetStatus(ctx context.Context, s store.ThreadStatus) (store.Thread, error) {
	return t.Update(ctx, func(x *store.Thread) error { x.Status = s; return nil })
}

// Stop marks the thread's run stopped (no further step is taken until a new message).
func (t *Thread) Stop(ctx context.Context, stopped bool) (store.Thread, error) {
	return t.Update(ctx, func(x *store.Thread) error { x.Stopped = stopped; return nil })
}

type threadKey struct{}

// NewContext returns a context carrying the thread, for handlers that need its messages,
// files or log; it also carries the thread's scope and execution state for the
// dispatcher.
func NewContext(ctx context.Context, t *Thread) context.Context {
	ctx = quiver.WithScope(ctx, t.Scope())
	ctx = quiver.WithExecution(ctx, t.Execution())
	return context.WithValue(ctx, threadKey{}, t)
}

// FromContext returns the thread a call runs on, if any.
func FromContext(ctx context.Context) (*Thread, bool) {
	t, ok := ctx.Value(threadKey{}).(*Thread)
	return t, ok
}
