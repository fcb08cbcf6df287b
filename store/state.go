package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/quiverhq/quiver/internal/jsonptr"
)

// A thread's state (SPEC M2, M3) is a JSON object that calls write their outputs into with
// _outputPath, each path written once. A thread may also have named instances, each with an
// object of its own, which calls naming _instance read and write instead. It is kept apart
// from Thread.State, the runtime's record of the run, and read only when asked for: a run
// updates its thread at every step and need not carry the state each time.

// Limits on a thread's state, for every writer.
const (
	// MaxStateBytes caps one state object (the thread's own, or one instance's), encoded.
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
	// wins); otherwise Value goes to every path ("a && b"), all of which must be free.
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
	for _, p := range w.Paths {
		if _, err := jsonptr.Parse(p); err != nil {
			return &StateError{Path: p, Instance: w.Instance, Err: ErrInvalid, Reason: err.Error()}
		}
	}
	return nil
}

// ApplyStateWrite returns doc (a state object; empty means {}) with w applied and the paths
// written, or a *StateError and nothing written. The backends call it inside the transaction
// that appends the call's result.
func ApplyStateWrite(doc json.RawMessage, w *StateWrite) (json.RawMessage, []string, error) {
	if err := CheckStateWrite(w); err != nil {
		return nil, nil, err
	}
	fail := func(path string, kind error, format string, args ...any) error {
		return &StateError{Path: path, Instance: w.Instance, Err: kind, Reason: fmt.Sprintf(format, args...)}
	}
	state := map[string]any{}
	if len(bytes.TrimSpace(doc)) > 0 {
		if err := decodeNumbers(doc, &state); err != nil {
			return nil, nil, fail("", ErrInvalid, "the stored state is not a JSON object: %v", err)
		}
	}
	var value any
	if err := decodeNumbers(w.Value, &value); err != nil {
		return nil, nil, fail("", ErrInvalid, "the value is not JSON: %v", err)
	}
	var written []string
	for _, p := range w.Paths {
		segs, _ := jsonptr.Parse(p) // checked by CheckStateWrite
		taken, err := jsonptr.Lookup(state, segs)
		if pe, ok := errors.AsType[*jsonptr.PathError](err); ok {
			return nil, nil, fail(p, ErrInvalid, "%s holds %s, not an object, so nothing can be written below it", pe.At, pe.Kind)
		}
		if taken {
			if w.Any {
				continue
			}
			return nil, nil, fail(p, ErrStateConflict, "already written; a path is written once (use another path, or a || b to take the first free one)")
		}
		if slices.Contains(written, p) {
			continue // a && a
		}
		if err := jsonptr.Set(state, segs, value); err != nil {
			return nil, nil, fail(p, ErrInvalid, "%v", err)
		}
		written = append(written, p)
		if w.Any {
			break
		}
	}
	if len(written) == 0 {
		return nil, nil, fail(w.Paths[0], ErrStateConflict, "every path of %q is already written; a path is written once", joinPaths(w.Paths, " || "))
	}
	out, err := json.Marshal(state)
	if err != nil {
		return nil, nil, fail("", ErrInvalid, "%v", err)
	}
	if len(out) > MaxStateBytes {
		return nil, nil, fail(written[0], ErrTooLarge, "the state would be %d bytes, over the limit of %d", len(out), MaxStateBytes)
	}
	return out, written, nil
}

func joinPaths(paths []string, sep string) string {
	var b bytes.Buffer
	for i, p := range paths {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(p)
	}
	return b.String()
}

// decodeNumbers decodes JSON keeping numbers as written (json.Number), so that a state
// written again keeps every digit of what was in it.
func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}
