package runcode

import (
	"context"
	"sync"

	"github.com/quiverhq/quiver"
)

// slots shares the sandboxes among callers: at most total runs at once, at most perOwner of
// them for one owner, and a free slot goes to the waiting owner with the fewest runs, owners
// with as many taking turns. So one owner with a hundred calls queued delays another's first
// call by at most the time it takes one run to end, instead of the whole queue.
//
// Written by hand because the semaphores at hand serve their waiters in arrival order
// (golang.org/x/sync/semaphore, a buffered channel): one owner's queue would stand in front of
// everyone else's. It is a mutex, a map of owners and a list of the owners that wait.
type slots struct {
	total, perOwner int

	mu      sync.Mutex
	running int               // runs holding a slot
	owners  map[string]*owner // owners with a run or a waiting call
	turns   []*owner          // owners with waiting calls, whose turn comes first first
}

type owner struct {
	key     string
	running int
	waiting []*waiter // in arrival order
}

type waiter struct {
	ready   chan struct{} // closed once the waiter holds a slot
	granted bool
}

func newSlots(total, perOwner int) *slots {
	return &slots{total: total, perOwner: min(perOwner, total), owners: map[string]*owner{}}
}

// ownerOf is who a call counts against: the most specific identity its scope has. An MCP
// session has a thread of its own, so it is the thread; without one, the user, the workspace,
// and last a single owner for every call that has none.
func ownerOf(ctx context.Context) string {
	s := quiver.ScopeFrom(ctx)
	switch {
	case s.ThreadID != "":
		return "thread " + s.ThreadID
	case s.UserID != "":
		return "user " + s.UserID
	case s.WorkspaceID != "":
		return "workspace " + s.WorkspaceID
	}
	return "anonymous"
}

// acquire waits for a slot for key until ctx ends, and returns the function that gives it
// back. On failure it returns what key had running and waiting when it gave up.
func (s *slots) acquire(ctx context.Context, key string) (release func(), running, waiting int, err error) {
	s.mu.Lock()
	o := s.owners[key]
	if o == nil {
		o = &owner{key: key}
		s.owners[key] = o
	}
	// A free slot means no waiter could take it: either nobody waits, or those who wait are at
	// their own limit. A newcomer under its limit takes it, unless its own earlier calls wait.
	if s.running < s.total && o.running < s.perOwner && len(o.waiting) == 0 {
		s.grant(o)
		s.mu.Unlock()
		return func() { s.release(o) }, 0, 0, nil
	}
	w := &waiter{ready: make(chan struct{})}
	if len(o.waiting) == 0 {
		s.turns = append(s.turns, o)
	}
	o.waiting = append(o.waiting, w)
	s.mu.Unlock()

	select {
	case <-w.ready:
		return func() { s.release(o) }, 0, 0, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.granted { // granted as the context ended: hand the slot on
		s.running--
		o.running--
		s.dispatch()
	} else {
		s.leave(o, w)
	}
	running, waiting = o.running, len(o.waiting)
	s.forget(o)
	return nil, running, waiting, context.Cause(ctx)
}

// grant gives o a slot; s.mu is held.
func (s *slots) grant(o *owner) {
	s.running++
	o.running++
}

func (s *slots) release(o *owner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	o.running--
	s.dispatch()
	s.forget(o)
}

// dispatch hands free slots to waiters: each time to the owner under its limit with the fewest
// runs, the first in turn among equals, who then goes to the back of the turns. s.mu is held.
func (s *slots) dispatch() {
	for s.running < s.total {
		next := -1
		for i, o := range s.turns {
			if o.running < s.perOwner && (next < 0 || o.running < s.turns[next].running) {
				next = i
			}
		}
		if next < 0 {
			return
		}
		o := s.turns[next]
		w := o.waiting[0]
		o.waiting = o.waiting[1:]
		s.turns = append(s.turns[:next], s.turns[next+1:]...)
		if len(o.waiting) > 0 {
			s.turns = append(s.turns, o)
		}
		s.grant(o)
		w.granted = true
		close(w.ready)
	}
}

// leave takes w, which gave up, out of o's queue; s.mu is held.
func (s *slots) leave(o *owner, w *waiter) {
	for i, x := range o.waiting {
		if x == w {
			o.waiting = append(o.waiting[:i], o.waiting[i+1:]...)
			break
		}
	}
	if len(o.waiting) == 0 {
		for i, x := range s.turns {
			if x == o {
				s.turns = append(s.turns[:i], s.turns[i+1:]...)
				break
			}
		}
	}
}

// forget drops an owner with nothing running or waiting, so that the map holds only owners
// with work; s.mu is held.
func (s *slots) forget(o *owner) {
	if o.running == 0 && len(o.waiting) == 0 {
		delete(s.owners, o.key)
	}
}

// state reports the runs holding a slot and the calls waiting, in all and for key.
func (s *slots) state(key string) (running, waiting, ownerRunning, ownerWaiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.turns {
		waiting += len(o.waiting)
	}
	if o := s.owners[key]; o != nil {
		ownerRunning, ownerWaiting = o.running, len(o.waiting)
	}
	return s.running, waiting, ownerRunning, ownerWaiting
}
