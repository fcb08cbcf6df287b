package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/quiverhq/quiver/store"
)

// The retention purge: a periodic job that deletes for good the soft-deleted tools
// whose retention has passed, in every workspace, and logs each one it removed. River runs it
// at start and then every Config.PurgeEvery; on PostgreSQL only the elected leader among the
// nodes schedules it, so it runs once per period however many nodes there are.

// DefaultPurgeEvery is how often the purge runs unless Config.PurgeEvery says otherwise.
const DefaultPurgeEvery = time.Hour

const purgeQueue = "maintenance"

// PurgeArgs asks for one purge of expired tools.
type PurgeArgs struct{}

// Kind is the job's kind in River's tables.
func (PurgeArgs) Kind() string { return "quiver.purge" }

// InsertOpts puts the purge in its own queue, so that it never waits behind runs, and keeps a
// single one queued at a time.
func (PurgeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: purgeQueue, UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: time.Minute}}
}

type purgeWorker struct {
	river.WorkerDefaults[PurgeArgs]
	cfg *Config
}

// Work removes what is due now and logs each tool removed, with its workspace and when it was
// deleted, so that an operator can tell what went.
func (w *purgeWorker) Work(ctx context.Context, _ *river.Job[PurgeArgs]) error {
	gone, err := w.cfg.Entities.PurgeExpired(ctx, w.cfg.now())
	if err != nil {
		return err // River tries again
	}
	for _, t := range gone {
		w.cfg.Logger.InfoContext(ctx, "jobs: purged a deleted tool whose retention passed",
			"tool", t.ID, "name", t.Name, "workspace", t.WorkspaceID, "deleted_at", t.DeletedAt, "retention_tier", t.RetentionTier)
	}
	if len(gone) > 0 {
		w.cfg.Logger.InfoContext(ctx, "jobs: purge done", "removed", len(gone))
	}
	// The limits' counts that no longer count: a limit per key or per tool leaves a few rows
	// for every key or tool that stops calling.
	if lp, ok := w.cfg.Entities.(store.LimitPurger); ok {
		n, err := lp.PurgeLimits(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			w.cfg.Logger.InfoContext(ctx, "jobs: purged the limits' counts that no longer count", "rows", n)
		}
	}
	return w.purgeUsage(ctx)
}

// purgeUsage deletes the usage past its retention.
func (w *purgeWorker) purgeUsage(ctx context.Context) error {
	us, ok := w.cfg.Entities.(store.Usage)
	if !ok || w.cfg.UsageRetention <= 0 {
		return nil
	}
	now := w.cfg.now()
	n, err := us.PurgeUsage(ctx, now.Add(-store.UsageMinuteRetention), now.Add(-w.cfg.UsageRetention))
	if err != nil {
		return err
	}
	if n > 0 {
		w.cfg.Logger.InfoContext(ctx, "jobs: purged usage past its retention", "rows", n)
	}
	return nil
}

// purgeJob is the periodic job of cfg, or nil when there is nothing to purge from.
func (c *Config) purgeJob() *river.PeriodicJob {
	if c.Entities == nil {
		return nil
	}
	return river.NewPeriodicJob(river.PeriodicInterval(c.PurgeEvery),
		func() (river.JobArgs, *river.InsertOpts) { return PurgeArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true})
}
