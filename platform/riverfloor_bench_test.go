package platform_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/quiverhq/quiver/store/postgres/pgtest"
)

// noopArgs is a job that does nothing: the least River writes for a job.
type noopArgs struct {
	N int `json:"n,omitempty"`
}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct{ river.WorkerDefaults[noopArgs] }

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// benchRiverJobWrites counts the write transactions of a bare River job on PostgreSQL (a
// worker that does nothing, River as configured by default), from its insert until River
// records it completed, with BenchmarkRunWriteTxns's tracer: the floor that River's own
// transactions set under any run (its insert, fetch and completion).
func benchRiverJobWrites(b *testing.B) {
	ctx := context.Background()
	dsn := pgtest.DSN(b)
	schema := pgtest.Schema(b, dsn)
	counter := newWriteCounter()
	pool, err := pgxpool.NewWithConfig(ctx, tracedPool(b, dsn, schema, counter))
	benchMust(b, err)
	b.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	benchMust(b, err)
	drv := riverpgxv5.New(pool)
	m, err := rivermigrate.New(drv, nil)
	benchMust(b, err)
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	benchMust(b, err)
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	client, err := river.NewClient(drv, &river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers: workers, Logger: slog.New(slog.DiscardHandler)})
	benchMust(b, err)
	benchMust(b, client.Start(ctx))
	b.Cleanup(func() { _ = client.Stop(context.Background()) })
	benchMust(b, noopToEnd(ctx, client, counter)) // River's first leader election and the jobs it queues at its start
	time.Sleep(100 * time.Millisecond)
	var job, notify, background int
	xids := serverXIDs(b, dsn)
	// No tagless switch in this loop: go1.26.8's compiler crashes on one inside a b.Loop body
	// (escape analysis, "invalid memory address"), whatever the cases call.
	for b.Loop() {
		counter.take()
		if err := noopToEnd(ctx, client, counter); err != nil {
			b.Fatal(err)
		}
		for _, txn := range counter.take() {
			if txn.background() {
				background++
				continue
			}
			job++
			if txn.notifyOnly() {
				notify++
			}
		}
	}
	time.Sleep(2 * time.Second) // see BenchmarkRunWriteTxns
	b.ReportMetric(float64(serverXIDs(b, dsn)-xids)/float64(b.N), "server-xids/run")
	b.ReportMetric(float64(job)/float64(b.N), "write-txns/run")
	b.ReportMetric(float64(notify)/float64(b.N), "notify-txns/run")
	b.ReportMetric(float64(background)/float64(b.N), "river-upkeep-txns/run")
}

// noopToEnd queues a noop job and waits until River has recorded it completed.
func noopToEnd(ctx context.Context, client *river.Client[pgx.Tx], counter *writeCounter) error {
	res, err := client.Insert(ctx, noopArgs{}, nil)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		j, err := client.JobGet(ctx, res.Job.ID)
		if err != nil {
			return err
		}
		if j.State == rivertype.JobStateCompleted {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %d is %s after a minute", j.ID, j.State)
		}
		time.Sleep(2 * time.Millisecond)
	}
	counter.waitFor("-- name: JobSetStateIfRunningMany ")
	return nil
}
