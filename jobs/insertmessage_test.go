package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river"
)

// A run refused because the thread has one queued leaves no trace of its message: on
// PostgreSQL the message and the job are written in one transaction (insertWithMessage),
// rolled back with the insert River refuses. (TestStartRecordsTheMessage has a run taken.)
func TestRefusedRunLeavesNoMessage(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			_, reg := newTools(t)
			j := b.start(t, config(b.st, reg, &stepModel{}))
			th := newThread(t, b.st)
			ctx := context.Background()
			// A run queued for later: the thread's lease is free, and River refuses another.
			later, err := j.client.Insert(ctx, RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper"},
				&river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = j.Start(ctx, RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", Message: "refused"})
			if !errors.Is(err, ErrRunQueued) {
				t.Fatalf("a run while one is queued: %v, want ErrRunQueued", err)
			}
			if got := history(t, th); len(got) != 0 {
				t.Errorf("the refused run left %q in the history, want nothing", got)
			}
			if row, err := j.client.JobGet(ctx, later.Job.ID); err != nil || row.State != "scheduled" {
				t.Errorf("the queued run: %v %v, want it scheduled still", row, err)
			}
		})
	}
}
