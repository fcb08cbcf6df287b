package agent

import (
	"context"

	"github.com/quiverhq/quiver/internal/jsonvalue"
	"github.com/quiverhq/quiver/store"
)

// Attempt numbers. A call runs at least once: a process that dies while a tool runs, before
// the call's result is stored, leaves the call pending (no result), and the run that resumes
// the thread executes it again. Every execution tells its tool the call's id and the number of
// the attempt (quiver.Execution.CallID and Attempt), so that a tool with an external effect can
// make it once: attempt 1 promises that no earlier execution of the call can have started,
// and from 2 on the tool checks, by the call's id, whether its effect already happened.
//
// The numbers cost no write per call. A call of a step this run took is attempt 1: nothing
// could have run it before. Only a run that finds calls pending when it begins (a resume) has
// to count, and it does so in the write that marks the thread running, which every run makes
// anyway: for each pending call, the count kept in the thread's state (ThreadState.Attempts:
// how many executions of it may have started) becomes the attempt this run makes, and the count
// grows by one before any of them runs. A pending call with no count was left by a run that
// may have started it (it crashed, or handed the run on, in the middle of the turn): one
// execution may have started. A run that pauses (for a person's decision or a client's result)
// has started none of the calls still pending, so it puts back the counts they had before it
// began: 0 for the calls of its own steps. A call paused for confirmation and then approved is
// thus attempt 1. The counts are conservative: a run that dies after marking the thread
// running counts an attempt for every call it found pending, even those it never reached,
// which makes a tool check when it need not, never the other way round.
//
// The state keeps counts for pending calls only: each write that sets them (begin, and the end
// of a run that pauses or finishes) drops those of calls that have results, so the map is never
// larger than one turn's calls.

// attempt is the number of the execution of the call with id callID this run makes.
func (rs *run) attempt(callID string) int { return rs.resumed[callID] + 1 }

// markRunning marks the thread running as the run begins and, when the run resumes pending
// calls, counts their attempts in the same write (see above).
func (rs *run) markRunning(ctx context.Context) error {
	// As values: a caller read back from River's job args (jsonb) may be spaced and ordered
	// otherwise than the one the thread keeps.
	newCaller := !jsonvalue.Equal(rs.caller, rs.savedCaller)
	if len(rs.pending) == 0 && !newCaller {
		if info := rs.th.Info(); QueuedMark(&info) {
			return nil // marked in the transaction that queued the run, with its caller
		}
		_, err := rs.th.SetStatus(ctx, store.StatusRunning)
		return err
	}
	_, err := rs.th.Update(ctx, func(t *store.Thread) error {
		t.Status = store.StatusRunning
		st := ReadState(t)
		// Kept in the same write: a run resumed later is entitled as this one.
		st.Caller = rs.caller
		resumed := make(map[string]int, len(rs.pending))
		counts := make(map[string]int, len(rs.pending))
		for _, c := range rs.pending {
			n, ok := st.Attempts[c.ID]
			if !ok {
				n = 1 // left by a run that did not pause on it: that run may have started it
			}
			resumed[c.ID], counts[c.ID] = n, n+1
		}
		rs.resumed = resumed // set here, not outside: the store may call fn more than once
		st.Attempts = counts
		return writeState(t, st)
	})
	return err
}

// attemptsAtEnd is what the thread keeps of the attempt counts once the run ends with the
// outcome in st: for a run that paused, the counts the pending calls had before it began (it
// started none of them); for any other end, the counts as they are, of the calls still
// pending. Calls with results have none.
func (rs *run) attemptsAtEnd(st ThreadState) map[string]int {
	paused := st.Outcome != nil && st.Outcome.Status == RunPaused
	var out map[string]int
	for _, c := range rs.pending {
		n, ok := st.Attempts[c.ID]
		if paused {
			n, ok = rs.resumed[c.ID], true
		}
		if ok {
			if out == nil {
				out = make(map[string]int, len(rs.pending))
			}
			out[c.ID] = n
		}
	}
	return out
}
