package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/quiverhq/quiver/internal/jsonptr"
)

// A thread's state is a JSON object that calls write their outputs into with
// _outputPath, each path written once. A thread may also have named instances, each with an
// object of its own, which calls naming _instance read and write instead. It is kept apart
// from Thread.State, the runtime's record of the run, and read only when asked for: a run
// updates its thread at every step and need not carry the state each time. The backends keep
// it as the values written, by path, so that a write costs the same however much the state
// holds (see store/sqlstore's WriteState).

// Limits on a thread's state, for every writer.
const (
	// MaxStateBytes caps the bytes of the paths and values written into one state object
	// (the thread's own, or one instance's).
	MaxStateBytes = 1 << 20
	// MaxInstances caps the instances of a thread.
	MaxInstances = 16
	// MaxStatePaths caps the paths one write names.
	MaxStatePaths = 8
)

// ErrStateConflict: the state already holds a value where a write wants to put one. Paths
// are written once.
var ErrStateConflict = errors.New("store: the state path is already written")

// StateWrite is a call's output written into its thread's state, by AppendState in the
// transaction that stores the call's result: both are stored, or neither.
type StateWrite struct {
	// Instance names the instance whose object the paths are in; "" is the thread's own.
	Instance string
	// Paths are JSON Pointers (RFC 6901), each naming a member (see jsonptr.Parse); objects on
	// the way that do not exist are created.
	Paths []string
	// Any writes Value to the first of Paths that is free ("a || b": the first success
	// wins; a path through a value that is not an object is not free); otherwise Value goes
	// to every path ("a && b"), all of which must be free. Paths may not overlap (one inside
	// another, or the same twice).
	Any bool
	// Value is the JSON value written.
	Value json.RawMessage
	// Written is set by AppendState to the paths it wrote.
	Written []string
}

// StateError is a write AppendState refused; nothing of the write or of its messages is
// stored. Err is ErrStateConflict (the path is written), ErrInvalid (a malformed pointer, a
// path through a value that is not an object, an unknown instance) or ErrTooLarge.
type StateError struct {
	Path     string // the pointer refused ("" when no path is to blame)
	Instance string
	Err      error
	Reason   string
}

func (e *StateError) Error() string {
	where := "the thread's state"
	if e.Instance != "" {
		where = fmt.Sprintf("the state of instance %q", e.Instance)
	}
	if e.Path != "" {
		return fmt.Sprintf("%s: %s: %s", where, e.Path, e.Reason)
	}
	return where + ": " + e.Reason
}

// Unwrap returns Err, for errors.Is.
func (e *StateError) Unwrap() error { return e.Err }

// instanceName is what an instance may be called: a name a model can write in _instance.
var instanceName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// CheckInstance reports, wrapping ErrInvalid, a name no instance may have.
func CheckInstance(name string) error {
	if !instanceName.MatchString(name) {
		return fmt.Errorf("instance name %q: use 1 to 64 characters of [A-Za-z0-9_-]: %w", truncateName(name), ErrInvalid)
	}
	return nil
}

func truncateName(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// CheckStateWrite reports, as a *StateError, a write that is malformed whatever the state.
func CheckStateWrite(w *StateWrite) error {
	switch {
	case w == nil || len(w.Paths) == 0:
		return &StateError{Err: ErrInvalid, Reason: "a state write names no path"}
	case len(w.Paths) > MaxStatePaths:
		return &StateError{Instance: w.Instance, Err: ErrInvalid, Reason: fmt.Sprintf("%d paths, over the limit of %d", len(w.Paths), MaxStatePaths)}
	case !json.Valid(w.Value):
		return &StateError{Instance: w.Instance, Err: ErrInvalid, Reason: "the value is not JSON"}
	}
	if w.Instance != "" {
		if err := CheckInstance(w.Instance); err != nil {
			return &StateError{Instance: w.Instance, Err: ErrInvalid, Reason: err.Error()}
		}
	}
	segs := make([][]string, len(w.Paths))
	for i, p := range w.Paths {
		var err error
		if segs[i], err = jsonptr.Parse(p); err != nil {
			return &StateError{Path: p, Instance: w.Instance, Err: ErrInvalid, Reason: err.Error()}
		}
		for j := range i {
			if jsonptr.Overlap(segs[i], segs[j]) {
				return &StateError{Path: p, Instance: w.Instance, Err: ErrInvalid,
					Reason: fmt.Sprintf("it overlaps %s: the paths of one write name separate places", w.Paths[j])}
			}
		}
	}
	return nil
}
