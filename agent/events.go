package agent

import (
	"context"
	"sync"

	"github.com/quiverhq/quiver"
)

// EventType names what happened in a run.
type EventType string

// Event types, in the order a run emits them.
const (
	EventResumed     EventType = "resumed"      // a run continues work found in the store
	EventStepStarted EventType = "step_started" // a model turn begins
	EventTextDelta   EventType = "text_delta"   // a piece of streamed model text
	EventModelTurn   EventType = "model_turn"   // the model's turn is persisted (Text, Calls)
	EventToolCall    EventType = "tool_call"    // a call is about to run
	EventToolResult  EventType = "tool_result"  // its result is persisted
	EventPaused      EventType = "paused"       // waiting for a decision or a client result
	EventFinished    EventType = "finished"     // a stop rule holds
	// EventFailed: the run stopped on an error. With Outcome it failed for good (its thread
	// records that outcome, status failed); without, it stopped resumably and may be tried
	// again. Text says why, safe to show (see FailureText).
	EventFailed EventType = "failed"
	// EventRetrying: a background run's try failed and it is to be tried again (Text says
	// why): what jobs announces (Announce), as no run emits it.
	EventRetrying EventType = "retrying"
	// Events of the thread tree, on the parent's thread (Child says which child).
	EventChildStarted  EventType = "child_started"  // a child thread was spawned
	EventChildFinished EventType = "child_finished" // a child's run ended and its result was returned or queued
	EventHandoff       EventType = "handoff"        // the thread was handed to another agent (Text names it)
	// An event of no run: a message was recorded on the thread as its run was queued
	// (Runner.Announce).
	EventMessage EventType = "message"
)

// ChildEvent describes the child of a child_started or child_finished event.
type ChildEvent struct {
	Ref    string // the child thread's id
	Name   string
	Agent  string
	Parent string
	// Status and Text are set on child_finished: finished or failed, and the result.
	Status string
	Text   string
}

// Event is one thing that happened in a run.
type Event struct {
	Type     EventType
	ThreadID string
	// Step is the model turn the event belongs to (1 for the first of the thread).
	Step int
	Text string // text_delta, model_turn; failed and retrying: why, safe to show
	// Side is the acting side of a two-sided dual-AI agent (step_started, text_delta,
	// model_turn, tool_call, tool_result; finished and paused: the answer's side).
	Side   string
	Calls  []quiver.Call // model_turn
	Call   *quiver.Call  // tool_call, tool_result
	Result *quiver.Result
	// Outcome is set on paused and finished, and on failed when the run failed for good.
	Outcome *Outcome
	Err     error       // failed: the cause, for this process's subscribers (never relayed)
	Child   *ChildEvent // child_started, child_finished
	// Relayed says the event reached a fleet's other nodes already, sent in the transaction
	// that wrote what it announces (jobs, Runner.Announce): a relay does not send it again.
	Relayed bool
}

// events fans events out to subscribers, synchronously and in order: a subscriber must be
// quick (hand work to a goroutine of its own if it is not).
type events struct {
	mu   sync.RWMutex
	next int
	subs map[int]func(Event)
}

// Subscribe calls fn with every event of every run of the runner, until the returned function
// is called.
func (r *Runner) Subscribe(fn func(Event)) (unsubscribe func()) {
	e := &r.events
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.subs == nil {
		e.subs = map[int]func(Event){}
	}
	id := e.next
	e.next++
	e.subs[id] = fn
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.subs, id)
	}
}

// Announce tells the runner's subscribers of what happened to a thread outside a run (a
// message recorded as a run was queued), as if a run had said it: a thread's event streams,
// on this node and, through a fleet's relay, on the others, read the thread now rather than
// at their next poll. An event marked Relayed reached the others already.
func (r *Runner) Announce(e Event) { r.events.emit(e) }

// announcement is the events that will announce a write once it commits, offered to the
// write's transaction (see Announced).
type announcement struct {
	threadID string
	events   []Event
	sent     bool
}

type announcementKey struct{}

// withAnnouncement offers a's events to the transaction of the write made under the context
// returned.
func withAnnouncement(ctx context.Context, a *announcement) context.Context {
	return context.WithValue(ctx, announcementKey{}, a)
}

// Announced returns the events a run will announce once the write made under ctx to threadID
// commits (today: its last answer and its end, see Runner's loop), for the code that makes that
// transaction to send them to a fleet's other nodes in it, so that they hear of the write with
// its commit and the notifying transaction of their own is saved; sent is to be called once
// they are sent in the transaction, and the run announces them marked Relayed after the commit.
// nil when the write has none to offer.
func Announced(ctx context.Context, threadID string) (events []Event, sent func()) {
	a, ok := ctx.Value(announcementKey{}).(*announcement)
	if !ok || a.threadID != threadID || len(a.events) == 0 {
		return nil, nil
	}
	return a.events, func() { a.sent = true }
}

func (e *events) emit(ev Event) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, fn := range e.subs {
		fn(ev)
	}
}
