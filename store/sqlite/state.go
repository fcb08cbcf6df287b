package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlstore"
)

// State, Instances and AddInstances are sqlstore's (see dialect.go and sqlstore.WriteState).

// AppendState appends msgs as Append does and applies w to the thread's state in the same
// write transaction: both are stored, or neither. A write the state refuses is a
// *store.StateError (wrapped); on success w.Written holds the paths written and msgs are
// filled in as Append fills them.
func (s *Store) AppendState(ctx context.Context, workspaceID, threadID string, w *store.StateWrite, msgs ...*store.Message) error {
	rows := make([]row, len(msgs))
	for i, m := range msgs {
		if err := encodeMessage(ctx, threadID, m, &rows[i]); err != nil {
			return fmt.Errorf("sqlite: append to %s: message %d: %w", threadID, i, err)
		}
	}
	now := stamp.Now(ctx).Round(0)
	var (
		first   int64
		written []string
	)
	// Append's steps (AppendBatch's for one op), then the state: the writer connection's
	// transaction keeps every other writer out from the read of the state to its write.
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		last, _, err := s.lastSeq(ctx, workspaceID, threadID)
		if err != nil {
			return fmt.Errorf("sqlite: append to %s: %w", threadID, err)
		}
		if err := s.appendRows(ctx, tx, threadID, rows, last+1, now); err != nil {
			return err
		}
		if written, err = sqlstore.WriteState(ctx, &dialect, tx, threadID, w, now); err != nil {
			if se, ok := errors.AsType[*store.StateError](err); ok { // the database's errors say where already
				return fmt.Errorf("sqlite: append to %s: %w", threadID, se)
			}
			return err
		}
		first = last + 1
		return nil
	})
	if err != nil {
		return err
	}
	for i, m := range msgs {
		m.ID, m.ThreadID, m.Seq, m.CreatedAt = rows[i].id, threadID, first+int64(i), now
	}
	w.Written = written
	return nil
}
