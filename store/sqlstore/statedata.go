package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver/store"
)

// A thread's state data (migration 0009, store.StateWrite): the rows of thread_states, one per
// object, instance '' being the thread's own. Reading them and adding instances are
// ThreadState's methods below, the same on both databases. Writing is WriteState, which each
// backend's AppendState calls inside the transaction that appends the call's result, since
// appending is each backend's own.

// WriteState applies w to the state of thread threadID inside tx, the caller's write
// transaction, and returns the paths written; at is the time of the write. A write the state
// refuses is a *store.StateError, returned as it is, and the caller must roll tx back.
//
// The caller must have found the thread in its workspace and must hold what keeps the thread's
// other writers out until tx ends (SQLite's single writer; PostgreSQL's lock on the thread
// row, which its append takes): the state is read, changed in Go and written back, and a
// writer between the read and the write would be lost.
func WriteState(ctx context.Context, d *Dialect, tx Querier, threadID string, w *store.StateWrite, at time.Time) ([]string, error) {
	if err := store.CheckStateWrite(w); err != nil {
		return nil, err
	}
	op := "write the state of thread " + threadID
	var doc []byte
	err := tx.QueryRowContext(ctx, `SELECT data FROM thread_states WHERE thread_id = $1 AND instance = $2`,
		threadID, w.Instance).Scan(&doc)
	switch {
	case errors.Is(err, sql.ErrNoRows) && w.Instance != "":
		names, err := instances(ctx, d, tx, op, threadID)
		if err != nil {
			return nil, err
		}
		has := "it has none (AddInstances gives it some)"
		if len(names) > 0 {
			has = "it has " + strings.Join(names, ", ")
		}
		return nil, &store.StateError{Instance: w.Instance, Err: store.ErrInvalid,
			Reason: fmt.Sprintf("the thread has no instance %q; %s", w.Instance, has)}
	case errors.Is(err, sql.ErrNoRows):
		doc = nil // the thread's own state is created at its first write
	case err != nil:
		return nil, d.Err(op, err)
	}
	out, written, err := store.ApplyStateWrite(doc, w)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO thread_states (thread_id, instance, data, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (thread_id, instance) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`,
		threadID, w.Instance, string(out), d.Time(at)); err != nil {
		return nil, d.Err(op, err)
	}
	return written, nil
}

// instances returns the names of the thread's instances, sorted, read through q.
func instances(ctx context.Context, d *Dialect, q Querier, op, threadID string) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT instance FROM thread_states WHERE thread_id = $1 AND instance <> ''
		ORDER BY instance`+d.Bytewise, threadID)
	if err != nil {
		return nil, d.Err(op, err)
	}
	names, err := collect(d, rows, op, func(row scanner) (string, error) {
		var name string
		err := row.Scan(&name)
		return name, err
	})
	if err != nil {
		return nil, err
	}
	if names == nil {
		names = []string{}
	}
	return names, nil
}

// State returns the thread's state object, "{}" before its first write, or with a non-empty
// instance that instance's: store.ErrNotFound when the thread does not have it, store.ErrInvalid
// for a name no instance may have.
func (ts *ThreadState) State(ctx context.Context, workspaceID, threadID, instance string) (json.RawMessage, error) {
	op := "read the state of thread " + threadID
	if instance != "" {
		op = fmt.Sprintf("read the state of instance %q of thread %s", instance, threadID)
		if err := store.CheckInstance(instance); err != nil {
			return nil, ts.d.fail(op, err)
		}
	}
	// The thread's row joined with its state's: no row is no thread in the workspace, a NULL
	// data no state yet. One statement, so that both are read in one snapshot.
	var data sql.NullString
	err := ts.read.QueryRowContext(ctx, `SELECT s.data FROM threads t
		LEFT JOIN thread_states s ON s.thread_id = t.id AND s.instance = $3
		WHERE t.id = $1 AND t.workspace_id = $2`, threadID, workspaceID, instance).Scan(&data)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, ts.d.failf(op, store.ErrNotFound, "no thread %s in the workspace", threadID)
	case err != nil:
		return nil, ts.d.Err(op, readErr(ctx, err))
	case !data.Valid && instance != "":
		return nil, ts.d.failf(op, store.ErrNotFound, "the thread has no instance %q", instance)
	case !data.Valid:
		return json.RawMessage(`{}`), nil
	}
	return json.RawMessage(data.String), nil
}

// Instances returns the names of the thread's instances, sorted (an empty slice for none).
func (ts *ThreadState) Instances(ctx context.Context, workspaceID, threadID string) ([]string, error) {
	op := "list the instances of thread " + threadID
	// The thread's row joined with its instances': no row is no thread in the workspace, one
	// row of NULL a thread without instances.
	rows, err := ts.read.QueryContext(ctx, `SELECT s.instance FROM threads t
		LEFT JOIN thread_states s ON s.thread_id = t.id AND s.instance <> ''
		WHERE t.id = $1 AND t.workspace_id = $2 ORDER BY s.instance`+ts.d.Bytewise, threadID, workspaceID)
	if err != nil {
		return nil, ts.d.Err(op, readErr(ctx, err))
	}
	names, err := collect(&ts.d, rows, op, func(row scanner) (sql.NullString, error) {
		var name sql.NullString
		err := row.Scan(&name)
		return name, err
	})
	if err != nil {
		return nil, readErr(ctx, err)
	}
	if len(names) == 0 {
		return nil, ts.d.failf(op, store.ErrNotFound, "no thread %s in the workspace", threadID)
	}
	out := []string{}
	for _, n := range names {
		if n.Valid {
			out = append(out, n.String)
		}
	}
	return out, nil
}

// AddInstances gives the thread the instances it does not have yet, each with an empty state
// object, in one write transaction: all of them, or none when a name is malformed
// (store.ErrInvalid) or the thread would have more than store.MaxInstances (store.ErrTooLarge).
func (ts *ThreadState) AddInstances(ctx context.Context, workspaceID, threadID string, names ...string) error {
	op := "add instances to thread " + threadID
	var want []string
	for _, name := range names {
		if err := store.CheckInstance(name); err != nil {
			return ts.d.fail(op, err)
		}
		if !slices.Contains(want, name) {
			want = append(want, name)
		}
	}
	return ts.write(ctx, func(ctx context.Context, tx Querier) error {
		// The thread's row locked as an append locks it: adders count the instances one after
		// the other (two of them could otherwise each find room for their own), and a write to
		// an instance sees it whole or not at all.
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE id = $1 AND workspace_id = $2`+ts.d.lock("FOR NO KEY UPDATE"),
			threadID, workspaceID).Scan(new(int))
		if errors.Is(err, sql.ErrNoRows) {
			return ts.d.failf(op, store.ErrNotFound, "no thread %s in the workspace", threadID)
		}
		if err != nil {
			return ts.d.Err(op, err)
		}
		have, err := instances(ctx, &ts.d, tx, op, threadID)
		if err != nil {
			return err
		}
		var added []string
		for _, name := range want {
			if !slices.Contains(have, name) {
				added = append(added, name)
			}
		}
		if len(added) == 0 {
			return nil
		}
		if n := len(have) + len(added); n > store.MaxInstances {
			return ts.d.failf(op, store.ErrTooLarge, "the thread would have %d instances, over the limit of %d (it has %d; adding %s)",
				n, store.MaxInstances, len(have), strings.Join(added, ", "))
		}
		at, err := ts.d.Now(ctx, tx)
		if err != nil {
			return ts.d.Err(op, err)
		}
		for _, name := range added {
			if _, err := tx.ExecContext(ctx, `INSERT INTO thread_states (thread_id, instance, data, updated_at) VALUES ($1, $2, '{}', $3)`,
				threadID, name, ts.d.Time(at)); err != nil {
				return ts.d.Err(op, err)
			}
		}
		return nil
	})
}
