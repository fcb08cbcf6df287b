package memstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/internal/jsonptr"
	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// A thread's state (store.StateWrite) is kept as store/sqlstore keeps it: per object (the
// thread's own, instance "", made at its first write; a named instance's, made by
// AddInstances) the values written, by path. No written path is a prefix of another: a write
// below a written path goes into that path's value. So a write looks up a few paths whatever
// the state holds, and numbers keep the digits they were written with.

// stateObj is one object of a thread's state.
type stateObj struct {
	values map[string]json.RawMessage // compact JSON by escaped JSON Pointer
	size   int64                      // bytes of paths and values, which store.MaxStateBytes caps
}

// AppendState appends msgs as Append does and applies w to the thread's state in the same
// step: both are stored, or neither. A write the state refuses is a *store.StateError
// (wrapped); on success w.Written holds the paths written and msgs are filled in as Append
// fills them.
func (s *Store) AppendState(ctx context.Context, workspaceID, threadID string, w *store.StateWrite, msgs ...*store.Message) error {
	op := threadOp("append to " + threadID)
	if err := checkMessages(threadID, msgs); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(op, workspaceID, threadID)
	if err != nil {
		return err
	}
	tx := s.th.begin(ctx)
	if err := tx.add(rec, msgs, stamp.Now(ctx)); err != nil {
		return err
	}
	sw, err := rec.writeState(w)
	if err != nil {
		return op.fail(err)
	}
	tx.commit()
	sw.commit(rec)
	w.Written = sw.written
	return nil
}

// stateWrite is a write to one object in progress: what it changes is kept apart until the
// step it is part of is stored.
type stateWrite struct {
	obj      *stateObj
	instance string
	value    json.RawMessage // compact
	changed  map[string]json.RawMessage
	size     int64
	written  []string
}

// writeState works out w on the thread's state, or the *store.StateError refusing it.
func (r *threadRec) writeState(w *store.StateWrite) (*stateWrite, error) {
	if err := store.CheckStateWrite(w); err != nil {
		return nil, err
	}
	obj := r.states[w.Instance]
	if obj == nil && w.Instance != "" {
		has := "it has none (AddInstances gives it some)"
		if names := r.instances(); len(names) > 0 {
			has = "it has " + strings.Join(names, ", ")
		}
		return nil, &store.StateError{Instance: w.Instance, Err: store.ErrInvalid,
			Reason: fmt.Sprintf("the thread has no instance %q; %s", w.Instance, has)}
	}
	if obj == nil {
		obj = &stateObj{} // the thread's own, made at its first write
	}
	var value bytes.Buffer
	if err := json.Compact(&value, w.Value); err != nil {
		return nil, &store.StateError{Instance: w.Instance, Err: store.ErrInvalid, Reason: "the value is not JSON: " + err.Error()}
	}
	sw := &stateWrite{obj: obj, instance: w.Instance, value: value.Bytes(), changed: map[string]json.RawMessage{}, size: obj.size}
	if err := sw.writePaths(w.Paths, w.Any); err != nil {
		return nil, err
	}
	return sw, nil
}

// writePaths writes the value at paths: the first free one when anyFree ("||"), else every one.
func (sw *stateWrite) writePaths(paths []string, anyFree bool) error {
	var err error
	if anyFree {
		err = sw.writeFirstFree(paths)
	} else {
		err = sw.writeEach(paths)
	}
	if err != nil {
		return err
	}
	if sw.size > store.MaxStateBytes {
		return sw.fail(sw.written[0], store.ErrTooLarge, "the state would hold %d bytes of paths and values, over the limit of %d", sw.size, store.MaxStateBytes)
	}
	return nil
}

// writeEach writes at every path (a && b), each of which must be free.
func (sw *stateWrite) writeEach(paths []string) error {
	for _, p := range paths {
		segs, _ := jsonptr.Parse(p) // checked by CheckStateWrite
		taken, err := sw.write(segs)
		if err != nil {
			return err
		}
		if taken {
			return sw.fail(p, store.ErrStateConflict, "already written; a path is written once (use another path, or a || b to take the first free one)")
		}
		sw.written = append(sw.written, p)
	}
	return nil
}

// writeFirstFree writes at the first free one of paths (a || b).
func (sw *stateWrite) writeFirstFree(paths []string) error {
	var blocked error // the first path through a value that is not an object
	for _, p := range paths {
		segs, _ := jsonptr.Parse(p) // checked by CheckStateWrite
		taken, err := sw.write(segs)
		switch {
		case isInvalidState(err):
			// A path || cannot write is not free: the next may be.
			blocked = cmp.Or(blocked, err)
		case err != nil:
			return err
		case !taken:
			sw.written = append(sw.written, p)
			return nil
		}
	}
	if blocked != nil {
		return blocked
	}
	return sw.fail(paths[0], store.ErrStateConflict, "every path of %q is already written; a path is written once", strings.Join(paths, " || "))
}

func isInvalidState(err error) bool {
	se, ok := errors.AsType[*store.StateError](err)
	return ok && errors.Is(se, store.ErrInvalid)
}

func (sw *stateWrite) fail(path string, kind error, format string, args ...any) error {
	return &store.StateError{Path: path, Instance: sw.instance, Err: kind, Reason: fmt.Sprintf(format, args...)}
}

// get returns the value written at path, counting this write's changes.
func (sw *stateWrite) get(path string) (json.RawMessage, bool) {
	if v, ok := sw.changed[path]; ok {
		return v, true
	}
	v, ok := sw.obj.values[path]
	return v, ok
}

// below reports whether a path below path is written.
func (sw *stateWrite) below(path string) bool {
	for _, values := range []map[string]json.RawMessage{sw.changed, sw.obj.values} {
		for p := range values {
			if strings.HasPrefix(p, path+"/") {
				return true
			}
		}
	}
	return false
}

// write puts the value at segs unless something is there (taken). The path is taken when it is
// written, or a path below it is (it holds an object then); when a path above it is written,
// the value goes into that path's value, which must hold objects down to it.
func (sw *stateWrite) write(segs []string) (taken bool, err error) {
	for i := range segs {
		above := jsonptr.Format(segs[:i+1])
		v, ok := sw.get(above)
		switch {
		case ok && i == len(segs)-1:
			return true, nil
		case ok:
			return sw.writeInside(segs, above, i+1, v)
		}
	}
	path := jsonptr.Format(segs)
	if sw.below(path) {
		return true, nil
	}
	sw.changed[path] = sw.value
	sw.size += int64(len(path) + len(sw.value))
	return false, nil
}

// writeInside puts the value at segs inside aboveValue, the value written at above, the first
// depth segments of segs.
func (sw *stateWrite) writeInside(segs []string, above string, depth int, aboveValue json.RawMessage) (taken bool, err error) {
	full := jsonptr.Format(segs)
	var doc any
	if err := decodeNumbers(aboveValue, &doc); err != nil {
		return false, sw.fail(full, store.ErrInvalid, "the stored value at %s: %v", above, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return false, sw.fail(full, store.ErrInvalid, "%s holds %s, not an object, so nothing can be written below it", above, jsonptr.Kind(doc))
	}
	rest := segs[depth:]
	found, err := jsonptr.Lookup(obj, rest)
	if pe, ok := errors.AsType[*jsonptr.PathError](err); ok {
		return false, sw.fail(full, store.ErrInvalid, "%s%s holds %s, not an object, so nothing can be written below it", above, pe.At, pe.Kind)
	}
	if found {
		return true, nil
	}
	var v any
	if err := decodeNumbers(sw.value, &v); err != nil {
		return false, sw.fail(full, store.ErrInvalid, "the value is not JSON: %v", err)
	}
	if err := jsonptr.Set(obj, rest, v); err != nil {
		return false, sw.fail(full, store.ErrInvalid, "%v", err)
	}
	out, err := marshalRaw(obj)
	if err != nil {
		return false, sw.fail(full, store.ErrInvalid, "%v", err)
	}
	sw.changed[above] = out
	sw.size += int64(len(out) - len(aboveValue))
	return false, nil
}

// commit stores the write in the thread's state.
func (sw *stateWrite) commit(r *threadRec) {
	if sw.obj.values == nil {
		sw.obj.values = map[string]json.RawMessage{}
	}
	maps.Copy(sw.obj.values, sw.changed)
	sw.obj.size = sw.size
	if r.states == nil {
		r.states = map[string]*stateObj{}
	}
	r.states[sw.instance] = sw.obj
}

// decodeNumbers decodes JSON keeping numbers as written (json.Number), so that a value
// written into again keeps every digit of what was in it.
func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// marshalRaw encodes v as compact JSON without HTML escaping, so that what was written keeps
// its bytes.
func marshalRaw(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// instances returns the names of the thread's instances, sorted.
func (r *threadRec) instances() []string {
	names := []string{}
	for name := range r.states {
		if name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// State returns the thread's state object, "{}" before its first write, or with a non-empty
// instance that instance's: store.ErrNotFound when the thread does not have it,
// store.ErrInvalid for a name no instance may have. The object is assembled from the paths
// written.
func (s *Store) State(ctx context.Context, workspaceID, threadID, instance string) (json.RawMessage, error) {
	op := threadOp("read the state of thread " + threadID)
	if instance != "" {
		op = threadOp(fmt.Sprintf("read the state of instance %q of thread %s", instance, threadID))
		if err := store.CheckInstance(instance); err != nil {
			return nil, op.fail(err)
		}
	}
	doc, err := s.stateDoc(op, workspaceID, threadID, instance)
	if err != nil {
		return nil, err
	}
	out, err := marshalRaw(doc)
	if err != nil {
		return nil, op.fail(err)
	}
	return out, nil
}

// stateDoc assembles an object of the thread's state. Its values are the stored ones, which
// are never changed in place: it may be encoded once the store is unlocked.
func (s *Store) stateDoc(op threadOp, workspaceID, threadID, instance string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(op, workspaceID, threadID)
	if err != nil {
		return nil, err
	}
	obj := rec.states[instance]
	if obj == nil && instance != "" {
		return nil, op.failf(store.ErrNotFound, "the thread has no instance %q", instance)
	}
	doc := map[string]any{}
	if obj == nil {
		return doc, nil
	}
	for p, v := range obj.values {
		segs, err := jsonptr.Parse(p)
		if err == nil {
			err = jsonptr.Set(doc, segs, v)
		}
		if err != nil {
			return nil, op.fail(fmt.Errorf("a stored path: %w", err))
		}
	}
	return doc, nil
}

// Instances returns the names of the thread's instances, sorted (an empty slice for none).
func (s *Store) Instances(ctx context.Context, workspaceID, threadID string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(threadOp("list the instances of thread "+threadID), workspaceID, threadID)
	if err != nil {
		return nil, err
	}
	return rec.instances(), nil
}

// AddInstances gives the thread the instances it does not have yet, each with an empty state
// object: all of them, or none when a name is malformed (store.ErrInvalid) or the thread would
// have more than store.MaxInstances (store.ErrTooLarge).
func (s *Store) AddInstances(ctx context.Context, workspaceID, threadID string, names ...string) error {
	op := threadOp("add instances to thread " + threadID)
	for _, name := range names {
		if err := store.CheckInstance(name); err != nil {
			return op.fail(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.th.thread(op, workspaceID, threadID)
	if err != nil {
		return err
	}
	have := rec.instances()
	added := newNames(have, names)
	if len(added) == 0 {
		return nil
	}
	if n := len(have) + len(added); n > store.MaxInstances {
		return op.failf(store.ErrTooLarge, "the thread would have %d instances, over the limit of %d (it has %d; adding %s)",
			n, store.MaxInstances, len(have), strings.Join(added, ", "))
	}
	if rec.states == nil {
		rec.states = map[string]*stateObj{}
	}
	for _, name := range added {
		rec.states[name] = &stateObj{}
	}
	return nil
}

// newNames are the names not in have, each once, in order.
func newNames(have, names []string) []string {
	var added []string
	for _, name := range names {
		if !slices.Contains(have, name) && !slices.Contains(added, name) {
			added = append(added, name)
		}
	}
	return added
}
