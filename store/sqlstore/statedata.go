package sqlstore

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver/internal/jsonptr"
	"github.com/quiverhq/quiver/store"
)

// A thread's state data (migration 0009, store.StateWrite): thread_states has a row per
// object (instance '' being the thread's own) with the bytes written into it, and
// thread_state_values a row per path written. Reading them and adding instances are
// ThreadState's methods below, the same on both databases. Writing is WriteState, which each
// backend's AppendState calls inside the transaction that appends the call's result, since
// appending is each backend's own.

// WriteState applies w to the state of thread threadID inside tx, the caller's write
// transaction, and returns the paths written; at is the time of the write. A write the state
// refuses is a *store.StateError, returned as it is, and the caller must roll tx back (a
// refused && may have written some of its paths already).
//
// The caller must have found the thread in its workspace and must hold what keeps the thread's
// other writers out until tx ends (SQLite's single writer; PostgreSQL's lock on the thread
// row, which its append takes): whether a path is free is read, then written, and a writer
// between the two could write it too.
func WriteState(ctx context.Context, d *Dialect, tx Querier, threadID string, w *store.StateWrite, at time.Time) ([]string, error) {
	if err := store.CheckStateWrite(w); err != nil {
		return nil, err
	}
	sw := stateWriter{d: d, tx: tx, op: "write the state of thread " + threadID, threadID: threadID, instance: w.Instance}
	size, err := sw.size(ctx, at)
	if err != nil {
		return nil, err
	}
	var value bytes.Buffer
	if err := json.Compact(&value, w.Value); err != nil {
		return nil, &store.StateError{Instance: w.Instance, Err: store.ErrInvalid, Reason: "the value is not JSON: " + err.Error()}
	}
	sw.value = value.Bytes()
	written, grew, err := sw.writePaths(ctx, w)
	if err != nil {
		return nil, err
	}
	if size += grew; size > store.MaxStateBytes {
		return nil, sw.fail(written[0], store.ErrTooLarge, "the state would hold %d bytes of paths and values, over the limit of %d", size, store.MaxStateBytes)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE thread_states SET size = $3, updated_at = $4 WHERE thread_id = $1 AND instance = $2`,
		threadID, w.Instance, size, d.Time(at)); err != nil {
		return nil, d.Err(sw.op, err)
	}
	return written, nil
}

// size is the size of the object written into. The thread's own object is made at its first
// write; an instance's must have been added.
func (sw *stateWriter) size(ctx context.Context, at time.Time) (int64, error) {
	var size int64
	err := sw.tx.QueryRowContext(ctx, `SELECT size FROM thread_states WHERE thread_id = $1 AND instance = $2`, sw.threadID, sw.instance).Scan(&size)
	switch {
	case errors.Is(err, sql.ErrNoRows) && sw.instance != "":
		return 0, sw.noInstance(ctx)
	case errors.Is(err, sql.ErrNoRows):
		_, err = sw.tx.ExecContext(ctx, `INSERT INTO thread_states (thread_id, instance, size, updated_at) VALUES ($1, '', 0, $2)`,
			sw.threadID, sw.d.Time(at))
	}
	if err != nil {
		return 0, sw.d.Err(sw.op, err)
	}
	return size, nil
}

// noInstance is the error for a write to an instance the thread does not have, naming those
// it has.
func (sw *stateWriter) noInstance(ctx context.Context) error {
	names, err := instances(ctx, sw.d, sw.tx, sw.op, sw.threadID)
	if err != nil {
		return err
	}
	has := "it has none (AddInstances gives it some)"
	if len(names) > 0 {
		has = "it has " + strings.Join(names, ", ")
	}
	return &store.StateError{Instance: sw.instance, Err: store.ErrInvalid,
		Reason: fmt.Sprintf("the thread has no instance %q; %s", sw.instance, has)}
}

// writePaths writes the value at w's paths, and returns the paths written and how many bytes
// the object grew by.
func (sw *stateWriter) writePaths(ctx context.Context, w *store.StateWrite) ([]string, int64, error) {
	if w.Any {
		return sw.writeFirstFree(ctx, w.Paths)
	}
	return sw.writeEach(ctx, w.Paths)
}

// writeEach writes at every path (a && b), each of which must be free.
func (sw *stateWriter) writeEach(ctx context.Context, paths []string) ([]string, int64, error) {
	var written []string
	var grew int64
	for _, p := range paths {
		taken, n, err := sw.writePath(ctx, p)
		if err != nil {
			return nil, 0, err
		}
		if taken {
			return nil, 0, sw.fail(p, store.ErrStateConflict, "already written; a path is written once (use another path, or a || b to take the first free one)")
		}
		grew += n
		written = append(written, p)
	}
	return written, grew, nil
}

// writeFirstFree writes at the first free one of paths (a || b).
func (sw *stateWriter) writeFirstFree(ctx context.Context, paths []string) ([]string, int64, error) {
	var blocked error // the first path through a value that is not an object
	for _, p := range paths {
		taken, n, err := sw.writePath(ctx, p)
		switch {
		case isInvalidState(err):
			// A path || cannot write is not free: the next may be.
			blocked = cmp.Or(blocked, err)
		case err != nil:
			return nil, 0, err
		case !taken:
			return []string{p}, n, nil
		}
	}
	if blocked != nil {
		return nil, 0, blocked
	}
	return nil, 0, sw.fail(paths[0], store.ErrStateConflict, "every path of %q is already written; a path is written once", strings.Join(paths, " || "))
}

func isInvalidState(err error) bool {
	se, ok := errors.AsType[*store.StateError](err)
	return ok && errors.Is(se, store.ErrInvalid)
}

func (sw *stateWriter) writePath(ctx context.Context, path string) (taken bool, grew int64, err error) {
	segs, _ := jsonptr.Parse(path) // checked by CheckStateWrite
	return sw.write(ctx, segs)
}

// stateWriter writes one value at paths of one object of a thread's state.
type stateWriter struct {
	d                  *Dialect
	tx                 Querier
	op                 string
	threadID, instance string
	value              []byte // compact JSON
}

func (sw *stateWriter) fail(path string, kind error, format string, args ...any) error {
	return &store.StateError{Path: path, Instance: sw.instance, Err: kind, Reason: fmt.Sprintf(format, args...)}
}

// write puts the value at segs unless something is there (taken), and returns how many bytes
// the object grew by (paths and values: the size store.MaxStateBytes caps). The path is taken when it is written, or a path below it is
// (it holds an object then); when a path above it is written, the value goes into that
// path's value, which must hold objects down to it.
func (sw *stateWriter) write(ctx context.Context, segs []string) (taken bool, grew int64, err error) {
	path := jsonptr.Format(segs)
	// The path and every path above it, in one lookup: no written path is a prefix of
	// another, so at most one of them is written.
	prefixes := make([]any, 0, len(segs)+2)
	prefixes = append(prefixes, sw.threadID, sw.instance)
	marks := make([]string, len(segs))
	for i := range segs {
		prefixes = append(prefixes, jsonptr.Format(segs[:i+1]))
		marks[i] = fmt.Sprintf("$%d", i+3)
	}
	var above string
	var aboveValue []byte
	err = sw.tx.QueryRowContext(ctx, `SELECT path, value FROM thread_state_values WHERE thread_id = $1 AND instance = $2
		AND path IN (`+strings.Join(marks, ", ")+`)`, prefixes...).Scan(&above, &aboveValue)
	switch {
	case err == nil && above == path:
		return true, 0, nil
	case err == nil:
		return sw.writeInside(ctx, segs, above, aboveValue)
	case !errors.Is(err, sql.ErrNoRows):
		return false, 0, sw.d.Err(sw.op, err)
	}
	// A path below it: from "<path>/" up to "<path>0", bytewise ('0' follows '/').
	var below int
	err = sw.tx.QueryRowContext(ctx, `SELECT 1 FROM thread_state_values WHERE thread_id = $1 AND instance = $2
		AND path >= $3 AND path < $4 LIMIT 1`, sw.threadID, sw.instance, path+"/", path+"0").Scan(&below)
	switch {
	case err == nil:
		return true, 0, nil
	case !errors.Is(err, sql.ErrNoRows):
		return false, 0, sw.d.Err(sw.op, err)
	}
	if _, err := sw.tx.ExecContext(ctx, `INSERT INTO thread_state_values (thread_id, instance, path, value) VALUES ($1, $2, $3, $4)`,
		sw.threadID, sw.instance, path, string(sw.value)); err != nil {
		return false, 0, sw.d.Err(sw.op, err)
	}
	return false, int64(len(path) + len(sw.value)), nil
}

// writeInside puts the value at segs inside the value written at the path above it.
func (sw *stateWriter) writeInside(ctx context.Context, segs []string, above string, aboveValue []byte) (taken bool, grew int64, err error) {
	full := jsonptr.Format(segs)
	depth := len(strings.Split(above, "/")) - 1 // the segments of the path above
	var doc any
	if err := decodeNumbers(aboveValue, &doc); err != nil {
		return false, 0, sw.d.Err(sw.op, fmt.Errorf("the stored value at %s: %w", above, err))
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return false, 0, sw.fail(full, store.ErrInvalid, "%s holds %s, not an object, so nothing can be written below it", above, jsonptr.Kind(doc))
	}
	rest := segs[depth:]
	found, err := jsonptr.Lookup(obj, rest)
	if pe, ok := errors.AsType[*jsonptr.PathError](err); ok {
		return false, 0, sw.fail(full, store.ErrInvalid, "%s%s holds %s, not an object, so nothing can be written below it", above, pe.At, pe.Kind)
	}
	if found {
		return true, 0, nil
	}
	var v any
	if err := decodeNumbers(sw.value, &v); err != nil {
		return false, 0, sw.fail(full, store.ErrInvalid, "the value is not JSON: %v", err)
	}
	if err := jsonptr.Set(obj, rest, v); err != nil {
		return false, 0, sw.fail(full, store.ErrInvalid, "%v", err)
	}
	// Encoded without HTML escaping, so that what was written keeps its bytes.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return false, 0, sw.fail(full, store.ErrInvalid, "%v", err)
	}
	out := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if _, err := sw.tx.ExecContext(ctx, `UPDATE thread_state_values SET value = $4 WHERE thread_id = $1 AND instance = $2 AND path = $3`,
		sw.threadID, sw.instance, above, string(out)); err != nil {
		return false, 0, sw.d.Err(sw.op, err)
	}
	return false, int64(len(out) - len(aboveValue)), nil
}

// decodeNumbers decodes JSON keeping numbers as written (json.Number), so that a value
// written into again keeps every digit of what was in it.
func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
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
// for a name no instance may have. The object is assembled from the paths written.
func (ts *ThreadState) State(ctx context.Context, workspaceID, threadID, instance string) (json.RawMessage, error) {
	op := "read the state of thread " + threadID
	if instance != "" {
		op = fmt.Sprintf("read the state of instance %q of thread %s", instance, threadID)
		if err := store.CheckInstance(instance); err != nil {
			return nil, ts.d.fail(op, err)
		}
	}
	// The thread's row joined with its object's and the object's values, in one statement
	// (one snapshot): no row is no thread in the workspace, a NULL instance no such object,
	// a NULL path an object without values.
	rows, err := ts.read.QueryContext(ctx, `SELECT s.instance, v.path, v.value FROM threads t
		LEFT JOIN thread_states s ON s.thread_id = t.id AND s.instance = $3
		LEFT JOIN thread_state_values v ON v.thread_id = s.thread_id AND v.instance = s.instance
		WHERE t.id = $1 AND t.workspace_id = $2`, threadID, workspaceID, instance)
	if err != nil {
		return nil, ts.d.Err(op, readErr(ctx, err))
	}
	entries, err := collect(&ts.d, rows, op, func(row scanner) (stateEntry, error) {
		var e stateEntry
		err := row.Scan(&e.instance, &e.path, &e.value)
		return e, err
	})
	if err != nil {
		return nil, readErr(ctx, err)
	}
	switch {
	case len(entries) == 0:
		return nil, ts.d.failf(op, store.ErrNotFound, "no thread %s in the workspace", threadID)
	case !entries[0].instance.Valid && instance != "":
		return nil, ts.d.failf(op, store.ErrNotFound, "the thread has no instance %q", instance)
	}
	out, err := assembleState(entries)
	if err != nil {
		return nil, ts.d.Err(op, err)
	}
	return out, nil
}

// stateEntry is a row of State's statement: the object's instance, and a path written and its
// value.
type stateEntry struct {
	instance, path, value sql.NullString
}

// assembleState puts the values of entries at their paths in one object.
func assembleState(entries []stateEntry) (json.RawMessage, error) {
	doc := map[string]any{}
	for _, e := range entries {
		if !e.path.Valid {
			continue
		}
		segs, err := jsonptr.Parse(e.path.String)
		if err != nil {
			return nil, fmt.Errorf("a stored path: %w", err)
		}
		if err := jsonptr.Set(doc, segs, json.RawMessage(e.value.String)); err != nil {
			return nil, fmt.Errorf("the stored paths overlap: %w", err)
		}
	}
	// Without HTML escaping: the values read back with the bytes they were written with.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
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
		return ts.addInstances(ctx, tx, op, workspaceID, threadID, want)
	})
}

// addInstances adds, inside tx, the instances of want the thread does not have yet.
func (ts *ThreadState) addInstances(ctx context.Context, tx Querier, op, workspaceID, threadID string, want []string) error {
	if err := ts.lockThread(ctx, tx, op, workspaceID, threadID); err != nil {
		return err
	}
	have, err := instances(ctx, &ts.d, tx, op, threadID)
	if err != nil {
		return err
	}
	added := slices.DeleteFunc(slices.Clone(want), func(name string) bool { return slices.Contains(have, name) })
	if len(added) == 0 {
		return nil
	}
	if n := len(have) + len(added); n > store.MaxInstances {
		return ts.d.failf(op, store.ErrTooLarge, "the thread would have %d instances, over the limit of %d (it has %d; adding %s)",
			n, store.MaxInstances, len(have), strings.Join(added, ", "))
	}
	return ts.insertInstances(ctx, tx, op, threadID, added)
}

// lockThread locks the thread's row as an append locks it: adders count the instances one
// after the other (two of them could otherwise each find room for their own), and a write to
// an instance sees it whole or not at all.
func (ts *ThreadState) lockThread(ctx context.Context, tx Querier, op, workspaceID, threadID string) error {
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE id = $1 AND workspace_id = $2`+ts.d.lock("FOR NO KEY UPDATE"),
		threadID, workspaceID).Scan(new(int))
	if errors.Is(err, sql.ErrNoRows) {
		return ts.d.failf(op, store.ErrNotFound, "no thread %s in the workspace", threadID)
	}
	if err != nil {
		return ts.d.Err(op, err)
	}
	return nil
}

// insertInstances makes an empty state object for each name.
func (ts *ThreadState) insertInstances(ctx context.Context, tx Querier, op, threadID string, names []string) error {
	at, err := ts.d.Now(ctx, tx)
	if err != nil {
		return ts.d.Err(op, err)
	}
	for _, name := range names {
		if _, err := tx.ExecContext(ctx, `INSERT INTO thread_states (thread_id, instance, size, updated_at) VALUES ($1, $2, 0, $3)`,
			threadID, name, ts.d.Time(at)); err != nil {
			return ts.d.Err(op, err)
		}
	}
	return nil
}
