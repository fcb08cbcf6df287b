// Package endtx carries, in a context, work to do inside the transaction that ends a run on
// its thread (store/postgres's AppendFinal): package jobs completes the run's River job there,
// so that the run's end and its job's completion commit together. It lives apart from both so
// that jobs needs no backend and the backend no River.
package endtx

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Work is what runs inside the transaction; an error rolls the whole transaction back.
type Work func(ctx context.Context, tx pgx.Tx) error

// With returns a context under which the transaction that ends threadID's run also does w.
// Only that thread's: a child's run inside this run's call inherits the context.
func With(ctx context.Context, threadID string, w Work) context.Context {
	return context.WithValue(ctx, key{}, scoped{threadID: threadID, work: w})
}

// For returns the work to do in the transaction that ends threadID's run, or nil.
func For(ctx context.Context, threadID string) Work {
	if s, ok := ctx.Value(key{}).(scoped); ok && s.threadID == threadID {
		return s.work
	}
	return nil
}

type key struct{}

type scoped struct {
	threadID string
	work     Work
}
