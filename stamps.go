package quiver

import (
	"context"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
)

// WithClock returns a context under which the records Quiver makes (threads, messages, logs,
// files, variables) are stamped with now's times instead of the system clock's. With WithIDs
// it lets a test replay a scripted run to identical records. Only records' times follow it:
// timeouts, leases and measured durations keep real time. The PostgreSQL store stamps with
// the database's clock whatever the context says, so that every node agrees.
func WithClock(ctx context.Context, now func() time.Time) context.Context {
	return stamp.WithClock(ctx, now)
}

// WithIDs returns a context under which the records and calls Quiver makes get their ids from
// newID (given the record's prefix: "thr", "msg", "call", ...) instead of random ones. The ids
// must be unique, as random ones are.
func WithIDs(ctx context.Context, newID func(prefix string) string) context.Context {
	return stamp.WithIDs(ctx, newID)
}
