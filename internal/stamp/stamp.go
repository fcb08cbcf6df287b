// Package stamp gives records their times and ids. Both come from the context when a caller
// put a source there (a test that replays a run to identical records) and from the system
// clock and random ids otherwise. The public way in is quiver.WithClock and quiver.WithIDs.
package stamp

import (
	"context"
	"crypto/sha256"
	"time"

	"github.com/quiverhq/quiver/internal/ids"
)

type clockKey struct{}

type idsKey struct{}

// WithClock returns a context whose records are stamped with now's times.
func WithClock(ctx context.Context, now func() time.Time) context.Context {
	return context.WithValue(ctx, clockKey{}, now)
}

// WithIDs returns a context whose records are given newID's ids.
func WithIDs(ctx context.Context, newID func(prefix string) string) context.Context {
	return context.WithValue(ctx, idsKey{}, newID)
}

// Now is the time to stamp on a record made under ctx, in UTC.
func Now(ctx context.Context) time.Time {
	if now, ok := ctx.Value(clockKey{}).(func() time.Time); ok {
		return now().UTC()
	}
	return time.Now().UTC()
}

// ID is a new id with prefix for a record made under ctx.
func ID(ctx context.Context, prefix string) string {
	if newID, ok := ctx.Value(idsKey{}).(func(string) string); ok {
		return newID(prefix)
	}
	return ids.New(prefix)
}

// Random is n random bytes in the ids' encoding for a name made under ctx (an attachment's):
// derived from the context's ids when it has a source of them, so that a replayed run names
// alike.
func Random(ctx context.Context, n int) string {
	newID, ok := ctx.Value(idsKey{}).(func(string) string)
	if !ok {
		return ids.Random(n)
	}
	sum := sha256.Sum256([]byte(newID("rnd")))
	return ids.Encode(sum[:min(n, len(sum))])
}

// Carry returns to with from's sources, so work that outlives from (a background write, a
// detached run) stamps its records the same way.
func Carry(to, from context.Context) context.Context {
	if now, ok := from.Value(clockKey{}).(func() time.Time); ok {
		to = WithClock(to, now)
	}
	if newID, ok := from.Value(idsKey{}).(func(string) string); ok {
		to = WithIDs(to, newID)
	}
	return to
}
