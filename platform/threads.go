package platform

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// Thread returns a thread of the actor's workspace (any other is not found).
func (p *Platform) Thread(ctx context.Context, a Actor, id string) (*store.Thread, error) {
	if err := checkID("id", store.PrefixThread, id); err != nil {
		return nil, err
	}
	th, err := p.cfg.Store.Thread(ctx, a.WorkspaceID, id)
	if err != nil {
		return nil, storeError(err, "thread "+id, "")
	}
	return th, nil
}

// CallScope is where a tool call the actor makes through the API is recorded: on threadID, a
// thread of the actor's workspace, or, when it is "", on a new thread tagged "api" (see
// CallThread). Viewers may list the tools but not call them.
func (p *Platform) CallScope(ctx context.Context, a Actor, threadID string) (quiver.Scope, error) {
	if err := a.mayChange("list the tools but not call them"); err != nil {
		return quiver.Scope{}, err
	}
	return p.CallThread(ctx, a, threadID, "api")
}

// RunAgent is the agent a run on the thread is for: name when given, else the agent that has
// the thread (agent.CurrentAgent: its own, or after a handoff the one it was handed to), so
// that a client need not repeat what the thread knows. A thread with neither is refused,
// naming the field to give.
func (p *Platform) RunAgent(ctx context.Context, a Actor, threadID, name string) (string, error) {
	if name != "" {
		return name, nil
	}
	if err := a.mayChange("read threads but not run agents"); err != nil {
		return "", err
	}
	th, err := p.Thread(ctx, a, threadID)
	if err != nil {
		return "", err
	}
	if current := agent.CurrentAgent(th); current != "" {
		return current, nil
	}
	return "", &Error{Kind: Invalid, Field: "agent", Detail: "thread " + threadID + " has no agent of its own: name the agent to run",
		Message: "required on a thread without an agent"}
}

// FileListing is a directory tree of a thread's file system, depth first.
type FileListing struct {
	Files     []*store.FileInfo // each directory's entries by name, each directory followed by what it holds
	Truncated bool              // there were more entries than the limit
}

// ThreadFiles lists what is at path in a thread's file system: a file alone, or a directory's
// tree, at most limit entries.
func (p *Platform) ThreadFiles(ctx context.Context, a Actor, threadID, path string, limit int) (*FileListing, error) {
	th, err := p.Thread(ctx, a, threadID)
	if err != nil {
		return nil, err
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	top, err := p.cfg.Store.Stat(ctx, th.WorkspaceID, th.ID, path)
	if err != nil {
		return nil, storeError(err, "file "+path+" of thread "+th.ID, "path")
	}
	if !top.IsDir {
		return &FileListing{Files: []*store.FileInfo{top}}, nil
	}
	w := fileWalk{fs: p.cfg.Store, ws: th.WorkspaceID, thread: th.ID, limit: limit, out: []*store.FileInfo{}}
	if err := w.dir(ctx, path); err != nil && !errors.Is(err, errWalkFull) {
		return nil, storeError(err, "the files of thread "+th.ID, "")
	}
	return &FileListing{Files: w.out, Truncated: w.truncated}, nil
}

// ThreadFile reads the file at path of a thread's file system, with its description.
func (p *Platform) ThreadFile(ctx context.Context, a Actor, threadID, path string) ([]byte, *store.FileInfo, error) {
	th, err := p.Thread(ctx, a, threadID)
	if err != nil {
		return nil, nil, err
	}
	if err := checkPath(path); err != nil {
		return nil, nil, err
	}
	// One read, of exactly the stored file: its size was capped (FileLimits.MaxFileBytes)
	// when it was written.
	data, fi, err := p.cfg.Store.ReadFile(ctx, th.WorkspaceID, th.ID, path)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil, fail(NotFound, "path", "thread "+th.ID+" has no file "+path)
	case errors.Is(err, store.ErrInvalid):
		return nil, nil, invalid("path", path+" is a directory, not a file: list what it holds instead")
	case err != nil:
		return nil, nil, storeError(err, "file "+path+" of thread "+th.ID, "")
	}
	return data, fi, nil
}

// checkPath refuses a path that breaks a rule of the thread file system (store.CheckPath: no
// traversal, no host path).
func checkPath(path string) error {
	var pe *store.PathError
	if err := store.CheckPath(path); errors.As(err, &pe) {
		return invalid("path", "the path "+pe.Rule)
	} else if err != nil {
		return invalid("path", err.Error())
	}
	return nil
}

// errWalkFull stops a fileWalk that has its limit.
var errWalkFull = errors.New("the listing is full")

// fileWalk lists a directory tree one directory at a time (store.Files.ReadDir: one query
// each, nothing of the files' content read), depth first, until it has limit entries. The
// directories are read one after another, not as one snapshot: a change made meanwhile may
// show in part.
type fileWalk struct {
	fs         store.Files
	ws, thread string
	limit      int
	out        []*store.FileInfo
	truncated  bool
}

func (w *fileWalk) dir(ctx context.Context, path string) error {
	entries, err := w.fs.ReadDir(ctx, w.ws, w.thread, path)
	if errors.Is(err, store.ErrNotFound) && len(w.out) > 0 {
		return nil // removed since its parent was read
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if len(w.out) == w.limit {
			w.truncated = true
			return errWalkFull
		}
		w.out = append(w.out, e)
		if e.IsDir {
			if err := w.dir(ctx, e.Path); err != nil {
				return err
			}
		}
	}
	return nil
}

// ThreadView is a thread with its state: the thread's own object and each instance's.
type ThreadView struct {
	Thread    *store.Thread
	Data      json.RawMessage
	Instances map[string]json.RawMessage // nil when the thread has none
}

// ThreadView returns a thread of the actor's workspace with its state.
func (p *Platform) ThreadView(ctx context.Context, a Actor, id string) (*ThreadView, error) {
	ws := a.WorkspaceID
	th, err := p.cfg.Store.Thread(ctx, ws, id)
	if err != nil {
		return nil, storeError(err, "thread "+id, "")
	}
	view := &ThreadView{Thread: th}
	if view.Data, err = p.cfg.Store.State(ctx, ws, th.ID, ""); err != nil {
		return nil, storeError(err, "the state of thread "+id, "")
	}
	names, err := p.cfg.Store.Instances(ctx, ws, th.ID)
	if err != nil {
		return nil, storeError(err, "the instances of thread "+id, "")
	}
	for _, name := range names {
		doc, err := p.cfg.Store.State(ctx, ws, th.ID, name)
		if err != nil {
			return nil, storeError(err, "the state of instance "+name+" of thread "+id, "")
		}
		if view.Instances == nil {
			view.Instances = map[string]json.RawMessage{}
		}
		view.Instances[name] = doc
	}
	return view, nil
}

// Messages returns a page of the messages of a thread of the actor's workspace, oldest first.
func (p *Platform) Messages(ctx context.Context, a Actor, id string, page store.Page) ([]*store.Message, error) {
	if _, err := p.cfg.Store.Thread(ctx, a.WorkspaceID, id); err != nil {
		return nil, storeError(err, "thread "+id, "")
	}
	msgs, err := p.cfg.Store.Messages(ctx, a.WorkspaceID, id, page)
	if err != nil {
		return nil, storeError(err, "messages of thread "+id, "")
	}
	return msgs, nil
}

// MaxChildrenListed bounds the children Children lists: a resumable sub-agent's cap is at
// most 1000 live instances per configuration, and children that ended stay listed.
const MaxChildrenListed = 10000

// Children lists the children registry of a thread of the actor's workspace, oldest first.
func (p *Platform) Children(ctx context.Context, a Actor, id string) ([]*store.Thread, error) {
	th, err := p.Thread(ctx, a, id)
	if err != nil {
		return nil, err
	}
	kids, err := p.cfg.Store.Children(ctx, th.WorkspaceID, th.ID)
	if err != nil {
		return nil, storeError(err, "the children of thread "+th.ID, "")
	}
	return kids[:min(len(kids), MaxChildrenListed)], nil
}

// ThreadPage is a page of threads, and the cursor of the next ("" on the last).
type ThreadPage struct {
	Threads    []*ThreadItem
	NextCursor string
}

// ThreadItem is a thread of a list, with its status as every door shows it.
type ThreadItem struct {
	*store.Thread
	Status Status
	Run    *agent.Outcome // how its last run ended; nil before any has
}

// Threads lists the threads of the actor's workspace that f and status keep, newest first, a
// page at a time. status, when set, is a door's status: f's stored status is ignored then.
// Idle keeps every thread no run is going on, waiting and failed ones among them.
func (p *Platform) Threads(ctx context.Context, a Actor, f store.ThreadFilter, status Status) (*ThreadPage, error) {
	// The store refuses the same values; checked here, the refusal names the field at fault.
	for _, q := range []struct{ field, v string }{{"agent", f.AgentID}, {"tag", f.Tag}, {"name", f.Name}} {
		if !utf8.ValidString(q.v) || strings.IndexByte(q.v, 0) >= 0 {
			return nil, invalid(q.field, "must be UTF-8 text without NUL")
		}
	}
	f, err := threadFilter(f, status)
	if err != nil {
		return nil, err
	}
	if err := store.CheckThreadCursor(a.WorkspaceID, f); err != nil {
		return nil, invalid("cursor", "not a cursor of this list: pass the next_cursor of the page before, with the same agent, tag and status")
	}
	threads, next, err := p.cfg.Store.Threads(ctx, a.WorkspaceID, f)
	if err != nil {
		return nil, storeError(err, "the thread page", "")
	}
	page := &ThreadPage{Threads: make([]*ThreadItem, len(threads)), NextCursor: next}
	for i, th := range threads {
		item := &ThreadItem{Thread: th}
		item.Status, item.Run = StatusOf(th)
		page.Threads[i] = item
	}
	return page, nil
}

// WaitingCall is a call that waits for a person's decision or a client's result.
type WaitingCall struct {
	Thread  *store.Thread
	Agent   string // the agent that has the thread
	Pending *agent.Pending
}

// WaitingCalls lists the calls of the actor's workspace that wait for a person's decision or a
// client's result, newest thread first, a page of threads at a time; the cursor of the next
// page is "" on the last.
func (p *Platform) WaitingCalls(ctx context.Context, a Actor, limit int, cursor string) ([]WaitingCall, string, error) {
	if p.Jobs() == nil {
		return nil, "", &Error{Kind: Unavailable, Message: "this server runs no agents"}
	}
	ws := a.WorkspaceID
	f := store.ThreadFilter{Tag: agent.WaitingTag, Limit: limit, Cursor: cursor}
	if err := store.CheckThreadCursor(ws, f); err != nil {
		return nil, "", invalid("cursor", "not a cursor of this list: pass the next_cursor of the page before")
	}
	threads, next, err := p.cfg.Store.Threads(ctx, ws, f)
	if err != nil {
		return nil, "", storeError(err, "the waiting threads", "")
	}
	calls := []WaitingCall{}
	for _, info := range threads {
		ag, err := p.Agent(ctx, agent.CurrentAgent(info))
		if err != nil {
			continue // an agent this server does not run: nothing it could resume
		}
		th, err := thread.Open(ctx, p.cfg.Store, ws, info.ID)
		if err != nil {
			return nil, "", storeError(err, "thread "+info.ID, "")
		}
		pending, err := p.runner.Waiting(ctx, th, ag)
		if err != nil {
			return nil, "", storeError(err, "what thread "+info.ID+" waits on", "")
		}
		if pending != nil { // nil: decided, its run about to resume
			calls = append(calls, WaitingCall{Thread: info, Agent: ag.Name, Pending: pending})
		}
	}
	return calls, next, nil
}
