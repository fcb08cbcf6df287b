package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quiverhq/quiver/internal/endtx"
	"github.com/quiverhq/quiver/store"
)

var _ store.FinalAppender = (*Store)(nil)

// AppendFinal appends msgs and, when the thread has no queued messages once they are stored,
// applies fn to the thread, in one transaction (see store.FinalAppender). The queue is as the
// append's statement saw it, as AppendPeek reports it: a message queued after that look is
// the next run's, which the wake that follows every Queue starts once this one has ended.
// When ctx carries work for the thread's end (internal/endtx: package jobs completes the run's
// job there), that work runs in the transaction too, after the update.
func (s *Store) AppendFinal(ctx context.Context, workspaceID, threadID string, fn func(*store.Thread) error, msgs ...*store.Message) (*store.Thread, bool, error) {
	op := "append to thread " + threadID
	if len(msgs) == 0 {
		return nil, false, fmt.Errorf("postgres: %s: no messages to end with: %w", op, store.ErrInvalid)
	}
	b, err := newBatch(ctx, threadID, msgs)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: %s: %w", op, err)
	}
	wctx, cancel, err := writeContext(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: %s: %w", op, err)
	}
	defer cancel()
	var (
		base   int64
		at     time.Time
		queued bool
		out    *store.Thread
	)
	err = pgx.BeginFunc(wctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(wctx, appendSQL, b.args(threadID, workspaceID, nil)...).Scan(&base, &at, &queued); err != nil {
			return dialect.Err(op, err)
		}
		if queued {
			return nil
		}
		var err error
		if out, err = updateThread(wctx, tx, workspaceID, threadID, fn); err != nil {
			return err
		}
		if work := endtx.For(ctx, threadID); work != nil {
			return work(wctx, tx)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	b.fill(msgs, threadID, base, at)
	return out, queued, nil
}
