package agent

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
)

// ThreadState is what the runner keeps in a thread's store.Thread.State: how its last run
// ended, who has the thread after a handoff, and, for a child thread, how it was spawned. It is
// kept in the store so that any process can resume, deliver and govern the thread.
type ThreadState struct {
	// Outcome is how the last run ended. Its fields are the state's own (status, reason,
	// pending...), as they were before the rest was kept beside them, so that readers of a
	// thread's state (the API's thread view) see the same shape.
	*Outcome
	// Agent is the agent that has the thread after a handoff; empty means the thread's own
	// (store.Thread.AgentID).
	Agent string `json:"agent,omitempty"`
	// Spawn describes a child thread: set when it is created, never changed but for Deferred
	// and Message while the child waits for variables.
	Spawn *Spawn `json:"spawn,omitempty"`
	// RanBy is the agent of the last run, which a thread created without an agent is woken
	// with when a child's result arrives.
	RanBy string `json:"ran_by,omitempty"`
	// Attempts counts, for each call without a result, the executions of it that may have
	// started: what the next run's attempt number for the call follows (see attempts.go).
	Attempts map[string]int `json:"attempts,omitempty"`
	// Caller is who started the thread's last run at a door, as the runner's Entitlements
	// read it (the platform encodes it): a run resumed later (a decision, a client's result, a
	// restart) is entitled as the run it continues was.
	Caller json.RawMessage `json:"caller,omitempty"`
	// Queued says the thread was marked running in the transaction that queued its run
	// (MarkQueued): the run's job has it, and the run does not mark it again. The run's end
	// clears it.
	Queued bool `json:"queued,omitempty"`
}

// MarkQueued marks t running as its run is queued, inside the transaction that queues the run
// (package jobs, on PostgreSQL, where the store's tables and the queue's are one database):
// the thread reads as running from the moment its run is queued, and the run, when it begins,
// has no mark of its own to write. caller, when set, is who the run is entitled as (see
// WithCaller), kept as the run would keep it. A terminated thread is left as it is: its run
// fails when it begins.
func MarkQueued(t *store.Thread, caller json.RawMessage) error {
	if t.Status == store.StatusTerminated {
		return nil
	}
	st := ReadState(t)
	st.Queued = true
	if len(caller) > 0 {
		st.Caller = caller
	}
	t.Status = store.StatusRunning
	return writeState(t, st)
}

// QueuedMark says whether t is marked running by the queue (MarkQueued): its run not begun, or
// not ended.
func QueuedMark(t *store.Thread) bool {
	return t.Status == store.StatusRunning && ReadState(t).Queued
}

// Spawn is how a child thread came to be.
type Spawn struct {
	// Agent is the agent (or, for a prompt tool's flow, the prompt) the child runs.
	Agent string `json:"agent"`
	// Prompt marks a prompt tool's nested flow. It and Call are for whoever reads the tree
	// (the API's thread view); the runtime finds a call's child by its tag.
	Prompt bool `json:"prompt,omitempty"`
	// Call is the parent's call that spawned the child ("" for an immediate child).
	Call string `json:"call,omitempty"`
	// Path is the agents from the root thread's down to this child's: its depth in the tree
	// is len(Path)-1.
	Path []string `json:"path"`
	// Ceiling is the policy of the parent, restricted by its own ceiling: the child may call
	// only what it permits too.
	Ceiling *quiver.Policy `json:"ceiling,omitempty"`
	// Communication is implicit or explicit (see Resumable); Receives is side_a or side_b.
	Communication string `json:"communication,omitempty"`
	Receives      string `json:"receives,omitempty"`
	// Deferred lists the variables the child waits for (subagent_env_required); the child
	// starts once they are provided.
	Deferred []quiver.Variable `json:"deferred,omitempty"`
	// Message is the child's first message while it is deferred.
	Message string `json:"message,omitempty"`
	// Caller is the caller of the parent's run (see ThreadState.Caller): a child is entitled
	// as its parent's caller, for every agent of Path.
	Caller json.RawMessage `json:"caller,omitempty"`
}

// ReadState decodes a thread's state.
func ReadState(t *store.Thread) ThreadState {
	var st ThreadState
	if len(t.State) == 0 {
		return st
	}
	if json.Unmarshal(t.State, &st) != nil {
		return ThreadState{}
	}
	if st.Outcome != nil && st.Outcome.Status == "" {
		st.Outcome = nil // no run has ended on the thread yet
	}
	return st
}

// writeState encodes st into t.State, inside an UpdateThread function.
func writeState(t *store.Thread, st ThreadState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	t.State = b
	return nil
}

// CurrentAgent is the agent that has the thread: the one a handoff gave it to, the one it was
// spawned for, its own, or, for a thread created without one, the agent of its last run.
func CurrentAgent(t *store.Thread) string {
	st := ReadState(t)
	switch {
	case st.Agent != "":
		return st.Agent
	case st.Spawn != nil:
		return st.Spawn.Agent
	case t.AgentID != "":
		return t.AgentID
	}
	return st.RanBy
}

// ReservedTagPrefixes begin the tags the runtime sets on the threads it spawns, which find a
// call's child again after a crash: a thread created by anyone else must not carry them
// (servers refuse them), or it could stand in for a child.
var ReservedTagPrefixes = []string{"call:", "immediate:", "prompt:", "state:"}

// WaitingTag marks a thread whose last run paused for a person's decision or a client's
// result: listing the threads with it is the workspace's inbox of waiting calls.
const WaitingTag = "state:waiting"

// AuthorizationTag marks a thread whose last run paused for its person to connect a provider:
// listing the threads with it finds the runs to go on once they have.
const AuthorizationTag = "state:authorization"

// BudgetTag marks a thread whose last run paused for its caller's budget of model requests:
// listing the threads with it finds the runs to go on when an admin raises the limits.
const BudgetTag = "state:budget"

// FailedTag marks a thread whose last run failed for good: listing the threads with it (and
// idle) lists the failed ones. A later run's end takes it off.
const FailedTag = "state:failed"

// dropStateTags takes the tags of the last run's ending off t.
func dropStateTags(t *store.Thread) {
	t.Tags = slices.DeleteFunc(t.Tags, func(tag string) bool {
		return tag == WaitingTag || tag == FailedTag || tag == BudgetTag || tag == AuthorizationTag
	})
}

// ReservedTag reports whether tag is one of the runtime's.
func ReservedTag(tag string) bool {
	for _, p := range ReservedTagPrefixes {
		if strings.HasPrefix(tag, p) {
			return true
		}
	}
	return false
}
