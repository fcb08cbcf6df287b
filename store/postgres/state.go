package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlstore"
)

// State, Instances and AddInstances are sqlstore's (see dialect.go and sqlstore.WriteState).

// AppendState appends msgs as Append does and applies w to the thread's state in the same
// transaction: both are stored, or neither. A write the state refuses is a *store.StateError
// (wrapped); on success w.Written holds the paths written and msgs are filled in as Append
// fills them.
//
// It runs Append's statement first, whose UPDATE of the thread row locks it until the
// transaction ends: the thread's appends and state writes take turns, and the state read next
// is the one the previous writer committed. The transaction is database/sql's, on the store's
// pool, so that the state's SQL is the one sqlstore shares with SQLite.
func (s *Store) AppendState(ctx context.Context, workspaceID, threadID string, w *store.StateWrite, msgs ...*store.Message) error {
	op := "append to thread " + threadID
	b, err := newBatch(ctx, threadID, msgs)
	if err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	wctx, cancel, err := writeContext(ctx)
	if err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	defer cancel()
	var (
		base    int64
		at      time.Time
		written []string
	)
	// With no message the statement still finds and locks the thread: the write alone is
	// stored as a call's would be.
	err = sqlstore.Transactions(s.db)(wctx, func(ctx context.Context, tx sqlstore.Querier) error {
		if err := tx.QueryRowContext(ctx, appendSQL, b.args(threadID, workspaceID, nil)...).Scan(&base, &at, new(bool)); err != nil {
			return dialect.Err(op, err)
		}
		var err error
		if written, err = sqlstore.WriteState(ctx, &dialect, tx, threadID, w, at); err != nil {
			if se, ok := errors.AsType[*store.StateError](err); ok { // the database's errors say where already
				return fmt.Errorf("postgres: %s: %w", op, se)
			}
			return err
		}
		return nil
	})
	if _, ok := errors.AsType[*store.StateError](err); ok {
		return err // said where already, in words dialect.Err does not know
	}
	if err != nil {
		return dialect.Err(op, err) // the commit's
	}
	b.fill(msgs, threadID, base, at)
	w.Written = written
	return nil
}
