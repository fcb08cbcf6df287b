package jobs

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/thread"
)

// Stopping the runs of a node with a deadline does not wait past it for a run that goes on:
// the run is cancelled (its call sees its context end) and Stop returns with the deadline's
// error once the run has given its lease back.
func TestStopCancelsRunsAtItsDeadline(t *testing.T) {
	if os.Getenv(pgtest.EnvDSN) == "" && os.Getenv("CI") != "true" {
		t.Skipf("PostgreSQL not tested: %s is not set", pgtest.EnvDSN)
	}
	dsn := pgtest.DSN(t)
	st, pool, err := openPostgres(dsn, pgtest.Schema(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	tl, reg := newTools(t) // "wait" waits until released (never, here) or cancelled
	j, err := StartPostgres(context.Background(), pool, config(st, reg, &stepModel{turns: []string{"wait"}}))
	if err != nil {
		t.Fatal(err)
	}
	th, err := thread.Create(context.Background(), st, thread.Options{WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Start(context.Background(), RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", MessageID: "msg_stop", Message: "go"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tl.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the run's call did not start within 30s")
	}
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		stopped <- j.Stop(ctx)
	}()
	select {
	case err := <-stopped:
		if err == nil {
			t.Error("Stop returned no error though a run outlived its deadline")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Stop waited for the run past its deadline (30s and counting)")
	}
}
