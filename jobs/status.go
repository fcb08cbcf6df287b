package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// RunStatus is how a run's job stands, in Quiver's words: a door reads these, never River's
// job states.
type RunStatus string

// The statuses of a run's job.
const (
	// RunWaiting: queued, not taken by any process yet.
	RunWaiting RunStatus = "waiting"
	// RunGoing: a process runs it, or it failed and is to be tried again.
	RunGoing RunStatus = "going"
	// RunDone: it ran to its end; the thread says how (answered, paused, terminated).
	RunDone RunStatus = "done"
	// RunGivenUp: it failed for good, at once or after its retries (the thread's outcome,
	// status failed, says why), or was cancelled.
	RunGivenUp RunStatus = "given up"
)

// RunStatus returns the status of job id, which must be a run of thread threadID of workspace
// ws: a job of another kind, thread or workspace is ErrRunNotFound, as one that does not exist
// is, so that a caller cannot learn of another tenant's jobs by their numbers.
func (j *Jobs) RunStatus(ctx context.Context, ws, threadID string, id int64) (RunStatus, error) {
	row, err := j.client.JobGet(ctx, id)
	if errors.Is(err, river.ErrNotFound) {
		return "", ErrRunNotFound
	}
	if err != nil {
		return "", fmt.Errorf("jobs: reading run %d: %w", id, err)
	}
	var args RunArgs
	if row.Kind != args.Kind() || json.Unmarshal(row.EncodedArgs, &args) != nil || args.WorkspaceID != ws || args.ThreadID != threadID {
		return "", ErrRunNotFound
	}
	return runStatus(row.State), nil
}

func runStatus(s rivertype.JobState) RunStatus {
	switch s {
	case rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStatePending:
		return RunWaiting
	case rivertype.JobStateCompleted:
		return RunDone
	case rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
		return RunGivenUp
	default: // running, retryable
		return RunGoing
	}
}
