//go:build unix

package jobs

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/quiverhq/quiver/internal/crashtest"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
)

// BenchmarkFailoverPostgres measures how soon a run whose node was killed runs again on
// another node of the same database, with the production orphan check (orphanGrace,
// orphanCheck) and River's own polling: each round starts node A (a child process) whose run
// blocks in a call, then node B on the same database, kills A with SIGKILL, and times from
// the kill until the call runs again on B. It reports failover-p50-ms and failover-max-ms.
// Run it with -benchtime 5x (each round starts a process).
func BenchmarkFailoverPostgres(b *testing.B) {
	dsn := pgtest.DSN(b)
	schemaName := pgtest.Schema(b, dsn)
	st, pool, err := openPostgres(dsn, schemaName)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	tl, reg := newTools(b)
	close(tl.release)
	var took []time.Duration
	for b.Loop() {
		child := crashtest.Start(b, "TestCrashChild", "JOBS_CRASH_PG="+dsn, "JOBS_CRASH_SCHEMA="+schemaName)
		waitMidRun(b, child) // B starts once A runs the run, so that the run is A's
		cfg := config(st, reg, &stepModel{turns: []string{"work", "wait"}})
		cfg.pollInterval = 0
		j, err := StartPostgres(context.Background(), pool, cfg)
		if err != nil {
			b.Fatal(err)
		}
		kill(b, child)
		killed := time.Now()
		select {
		case <-tl.started:
			took = append(took, time.Since(killed))
		case <-time.After(time.Minute):
			b.Fatal("the killed node's run did not run again on the other node within a minute")
		}
		j.Stop(context.Background())
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "failover-p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "failover-max-ms")
}
