package platform

import (
	"context"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// Status is a thread's status as every door shows it. The stored status says only whether a
// run is going on; a door shows more: a thread whose last run paused on a call is waiting, one
// whose last run failed is failed, until a later run ends otherwise.
type Status string

// The statuses of a thread.
const (
	StatusIdle       Status = "idle"       // no run going on, the last one (if any) finished
	StatusRunning    Status = "running"    // a run is going on
	StatusWaiting    Status = "waiting"    // the last run paused on a call: a decision or a client's result
	StatusFailed     Status = "failed"     // the last run could not start or go on (its outcome says why)
	StatusTerminated Status = "terminated" // the thread takes no more runs
)

// Valid reports whether s is one of the statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusIdle, StatusRunning, StatusWaiting, StatusFailed, StatusTerminated:
		return true
	}
	return false
}

// ThreadState is what a thread is doing, as every door shows it.
type ThreadState struct {
	Status Status
	// Run is how the thread's last run ended; nil before any has.
	Run *agent.Outcome
	// Pending is the call a waiting thread waits on now; nil when its decision or result is in
	// and the run is about to go on, or when this process runs no agents.
	Pending *agent.Pending
}

// StatusOf returns th's status and how its last run ended, read from the thread alone: what a
// list of threads shows without a read per thread.
func StatusOf(th *store.Thread) (Status, *agent.Outcome) {
	run := agent.ReadState(th).Outcome
	switch {
	case th.Status == store.StatusRunning:
		return StatusRunning, run
	case th.Status == store.StatusTerminated:
		return StatusTerminated, run
	case run != nil && run.Status == agent.RunFailed:
		return StatusFailed, run
	case run != nil && run.Status == agent.RunPaused:
		return StatusWaiting, run
	}
	return StatusIdle, run
}

// ThreadState returns the state of th, a thread of workspace ws: its status, how its last
// run ended and, when it waits, the call it waits on now.
func (p *Platform) ThreadState(ctx context.Context, ws string, th *store.Thread) *ThreadState {
	st := &ThreadState{}
	st.Status, st.Run = StatusOf(th)
	if st.Status != StatusWaiting || p.Jobs() == nil || agent.CurrentAgent(th) == "" {
		return st
	}
	// A decision or a result may have come since the run paused: ask what it waits on now.
	ag, err := p.Agent(ctx, agent.CurrentAgent(th))
	if err != nil {
		return st
	}
	t, err := thread.Open(ctx, p.cfg.Store, ws, th.ID)
	if err != nil {
		return st
	}
	st.Pending, _ = p.Runner().Waiting(ctx, t, ag)
	return st
}

// Same reports whether a client that was shown other learns nothing from st.
func (st *ThreadState) Same(other *ThreadState) bool {
	a, b := st, other
	if a.Status != b.Status || (a.Run == nil) != (b.Run == nil) || (a.Pending == nil) != (b.Pending == nil) {
		return false
	}
	if a.Run != nil && (a.Run.Status != b.Run.Status || a.Run.Reason != b.Run.Reason || a.Run.Steps != b.Run.Steps) {
		return false
	}
	return a.Pending == nil || (a.Pending.Call.ID == b.Pending.Call.ID && a.Pending.Reason == b.Pending.Reason)
}

// threadFilter is f with a door's status in place of the stored one: waiting and failed are
// idle threads with the runtime's tag of that ending.
func threadFilter(f store.ThreadFilter, status Status) (store.ThreadFilter, error) {
	switch status {
	case "":
		return f, nil
	case StatusWaiting, StatusFailed:
		f.Status = store.StatusIdle
		f.AlsoTag = agent.WaitingTag
		if status == StatusFailed {
			f.AlsoTag = agent.FailedTag
		}
	case StatusIdle, StatusRunning, StatusTerminated:
		f.Status = store.ThreadStatus(status)
	default:
		return f, invalid("status", "is "+quoteShort(string(status))+": want idle, running, waiting, failed or terminated")
	}
	return f, nil
}
