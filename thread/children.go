package thread

import (
	"context"
	"fmt"

	"github.com/quiverhq/quiver/store"
)

// Child is an entry of a thread's children registry.
type Child struct {
	// Ref is the child thread's id: what a parent passes to subagent_message.
	Ref       string             `json:"ref"`
	Name      string             `json:"name,omitempty"`
	AgentID   string             `json:"agent_id,omitempty"`
	Status    store.ThreadStatus `json:"status"`
	Blocking  bool               `json:"blocking"`
	Resumable bool               `json:"resumable"`
}

// ChildOptions describe a new child thread. The child belongs to the parent's workspace and,
// unless set, its user.
type ChildOptions struct {
	Name      string
	AgentID   string
	UserID    string
	Tags      []string
	Blocking  bool
	Resumable bool
	// Status is the child's initial status; empty means running (a child is spawned to run).
	Status store.ThreadStatus
}

// Spawn creates a child thread of t and returns a handle on it.
func (t *Thread) Spawn(ctx context.Context, o ChildOptions) (*Thread, error) {
	user := o.UserID
	if user == "" {
		user = t.user
	}
	status := o.Status
	if status == "" {
		status = store.StatusRunning
	}
	return Create(ctx, t.st, Options{WorkspaceID: t.ws, AgentID: o.AgentID, UserID: user, ParentID: t.id, Name: o.Name,
		Tags: o.Tags, Blocking: o.Blocking, Resumable: o.Resumable, Status: status})
}

// Children returns the thread's children registry, oldest first.
func (t *Thread) Children(ctx context.Context) ([]Child, error) {
	kids, err := t.st.Children(ctx, t.ws, t.id)
	if err != nil {
		return nil, err
	}
	out := make([]Child, len(kids))
	for i, k := range kids {
		out[i] = Child{Ref: k.ID, Name: k.Name(), AgentID: k.AgentID, Status: k.Status, Blocking: k.Blocking, Resumable: k.Resumable}
	}
	return out, nil
}

// Child opens the child of t that ref names, refusing a thread that is not t's child
// (store.ErrNotFound), so a reference from a model can never reach another thread.
func (t *Thread) Child(ctx context.Context, ref string) (*Thread, error) {
	c, err := Open(ctx, t.st, t.ws, ref)
	if err != nil {
		return nil, err
	}
	if c.parent != t.id {
		return nil, fmt.Errorf("thread %s has no child %s: %w", t.id, ref, store.ErrNotFound)
	}
	return c, nil
}

// Parent opens t's parent thread (store.ErrNotFound for a root thread).
func (t *Thread) Parent(ctx context.Context) (*Thread, error) {
	if t.parent == "" {
		return nil, fmt.Errorf("thread %s is a root thread: %w", t.id, store.ErrNotFound)
	}
	return Open(ctx, t.st, t.ws, t.parent)
}

// Live counts the children that are not terminated, for caps like maxInstances.
func Live(children []Child) int {
	n := 0
	for _, c := range children {
		if c.Status != store.StatusTerminated {
			n++
		}
	}
	return n
}
