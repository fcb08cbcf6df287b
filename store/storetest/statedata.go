package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// The thread's state data: AppendState, State, Instances and AddInstances.

// callState appends an assistant message asking for callID, then AppendState with its result
// and w, returning AppendState's error and the result message.
func callState(t *testing.T, s store.Store, threadID, callID string, w *store.StateWrite) (*store.Message, error) {
	t.Helper()
	mustAppend(t, s, threadID, assistant(callID))
	res := result(callID, "out of "+callID)
	return res, s.AppendState(ctx, ws, threadID, w, res)
}

func mustState(t *testing.T, s store.Store, threadID, instance string) json.RawMessage {
	t.Helper()
	st, err := s.State(ctx, ws, threadID, instance)
	if err != nil {
		t.Fatalf("State(%q): %v", instance, err)
	}
	return st
}

// valueAt returns the JSON at pointer path (no escapes) in doc, as stored, and whether there
// is one.
func valueAt(t *testing.T, doc json.RawMessage, path string) (json.RawMessage, bool) {
	t.Helper()
	cur := doc
	for seg := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(cur, &obj); err != nil || obj == nil {
			return nil, false
		}
		v, ok := obj[strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)]
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, true
}

// answered reports whether the thread's history holds a result for callID, and checks that
// PendingCalls says the opposite.
func answered(t *testing.T, s store.Store, threadID, callID string) bool {
	t.Helper()
	stored := slices.ContainsFunc(all(t, s, ws, threadID), func(m *store.Message) bool { return m.ToolCallID == callID })
	pending, err := s.PendingCalls(ctx, ws, threadID)
	if err != nil {
		t.Fatalf("PendingCalls: %v", err)
	}
	if listed := slices.ContainsFunc(pending, func(c store.ToolCall) bool { return c.ID == callID }); listed == stored {
		t.Fatalf("call %s: result stored %v, but pending %v", callID, stored, listed)
	}
	return stored
}

// testStateWriteAndRead: a write lands at its path, its message is stored as Append stores
// it, and numbers keep every digit through later writes.
func testStateWriteAndRead(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	if st := mustState(t, s, th.ID, ""); !jsonEqual(st, json.RawMessage(`{}`)) {
		t.Fatalf("the state of a new thread is %s, want {}", st)
	}
	if names, err := s.Instances(ctx, ws, th.ID); err != nil || len(names) != 0 {
		t.Fatalf("Instances of a new thread = %v, %v; want none", names, err)
	}

	w := &store.StateWrite{Paths: []string{"/plan/steps"}, Value: json.RawMessage(`["look", "leap"]`)}
	res, err := callState(t, s, th.ID, "c1", w)
	if err != nil {
		t.Fatalf("AppendState: %v", err)
	}
	if !slices.Equal(w.Written, []string{"/plan/steps"}) {
		t.Fatalf("Written = %v", w.Written)
	}
	msgs := all(t, s, ws, th.ID)
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want the call and its result", len(msgs))
	}
	got := msgs[1]
	if res.ID == "" || res.ID != got.ID || res.Seq != 2 || res.Seq != got.Seq || res.ThreadID != th.ID ||
		res.CreatedAt.IsZero() || !res.CreatedAt.Equal(got.CreatedAt) || got.Result == nil || got.Result.Text != "out of c1" {
		t.Fatalf("AppendState filled in %+v; stored %+v", res, got)
	}
	if v, ok := valueAt(t, mustState(t, s, th.ID, ""), "/plan/steps"); !ok || !jsonEqual(v, w.Value) {
		t.Fatalf("/plan/steps = %s (%v), want %s", v, ok, w.Value)
	}

	// A call and its result in one batch, and a value whose numbers JSON's float64 would round.
	numbers := json.RawMessage(`{"big":12345678901234567890,"price":1.50,"tiny":1e-400}`)
	w = &store.StateWrite{Paths: []string{"/numbers"}, Value: numbers}
	if err := s.AppendState(ctx, ws, th.ID, w, assistant("c2"), result("c2", "n")); err != nil {
		t.Fatalf("AppendState of a call and its result: %v", err)
	}
	if _, err := callState(t, s, th.ID, "c3", &store.StateWrite{Paths: []string{"/later"}, Value: json.RawMessage(`true`)}); err != nil {
		t.Fatalf("a later write: %v", err)
	}
	st := mustState(t, s, th.ID, "")
	for _, digits := range []string{"12345678901234567890", "1.50", "1e-400"} {
		if !strings.Contains(string(st), digits) {
			t.Errorf("the state lost %s after a later write: %s", digits, st)
		}
	}
	if v, ok := valueAt(t, st, "/plan/steps"); !ok || !jsonEqual(v, json.RawMessage(`["look","leap"]`)) {
		t.Errorf("a later write changed /plan/steps: %s", st)
	}
	if len(all(t, s, ws, th.ID)) != 6 {
		t.Errorf("%d messages, want 6", len(all(t, s, ws, th.ID)))
	}
}

// testStateWriteRules: what a write may do to a state holding {"a": 1, "s": "text", "o":
// {"x": 1}}, and that a refused write stores nothing, neither in the state nor in the history.
func testStateWriteRules(t *testing.T, s store.Store) {
	tests := []struct {
		name    string
		paths   []string
		any     bool
		value   string
		wantErr error    // nil: written
		written []string // the paths written, when it is
	}{
		{"a new path", []string{"/b"}, false, `"new"`, nil, []string{"/b"}},
		{"objects on the way are created", []string{"/p/q/r"}, false, `{"deep":true}`, nil, []string{"/p/q/r"}},
		{"into an existing object", []string{"/o/y"}, false, `2`, nil, []string{"/o/y"}},
		{"a written path", []string{"/a"}, false, `2`, store.ErrStateConflict, nil},
		{"a written object", []string{"/o"}, false, `{}`, store.ErrStateConflict, nil},
		{"a written path below", []string{"/o/x"}, false, `2`, store.ErrStateConflict, nil},
		{"|| takes the first free path", []string{"/a", "/s", "/c", "/d"}, true, `"c"`, nil, []string{"/c"}},
		{"|| with every path written", []string{"/a", "/s"}, true, `"c"`, store.ErrStateConflict, nil},
		{"&& writes every path", []string{"/e", "/f/g"}, false, `[1]`, nil, []string{"/e", "/f/g"}},
		{"&& with one path written writes none", []string{"/e", "/a"}, false, `[1]`, store.ErrStateConflict, nil},
		{"through a string", []string{"/s/x"}, false, `1`, store.ErrInvalid, nil},
		{"through a number", []string{"/a/x/y"}, false, `1`, store.ErrInvalid, nil},
		{"|| past a path through a string", []string{"/s/x", "/free"}, true, `1`, nil, []string{"/free"}},
		{"|| only through a string", []string{"/s/x", "/a/y"}, true, `1`, store.ErrInvalid, nil},
		{"|| with paths written and one through a string", []string{"/a", "/s/x"}, true, `1`, store.ErrInvalid, nil},
		{"overlapping paths", []string{"/q", "/q/r"}, false, `1`, store.ErrInvalid, nil},
		{"the same path twice", []string{"/q", "/q"}, true, `1`, store.ErrInvalid, nil},
		{"a malformed pointer", []string{"b"}, false, `1`, store.ErrInvalid, nil},
		{"the whole state", []string{""}, false, `{}`, store.ErrInvalid, nil},
		{"no path", nil, false, `1`, store.ErrInvalid, nil},
		{"too many paths", []string{"/1", "/2", "/3", "/4", "/5", "/6", "/7", "/8", "/9"}, false, `1`, store.ErrInvalid, nil},
		{"a value that is not JSON", []string{"/b"}, false, `{`, store.ErrInvalid, nil},
		{"an object made by a write below it", []string{"/i"}, false, `{}`, store.ErrStateConflict, nil},
		{"beside a path written below", []string{"/i/k"}, false, `3`, nil, []string{"/i/k"}},
		{"below a path written below", []string{"/i/j/k"}, false, `3`, store.ErrInvalid, nil},
		{"&& a path written and one free writes none", []string{"/n/m", "/i/j"}, false, `{}`, store.ErrStateConflict, nil},
		{"a key with / and ~ in it", []string{"/o/a~1b~0c"}, false, `true`, nil, []string{"/o/a~1b~0c"}},
		{"a state over the limit", []string{"/big"}, false, `"` + strings.Repeat("x", store.MaxStateBytes) + `"`, store.ErrTooLarge, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := newThread(t, s, ws)
			for i, seed := range []struct{ path, value string }{{"/a", `1`}, {"/s", `"text"`}, {"/o", `{"x":1}`}, {"/i/j", `1`}} {
				w := &store.StateWrite{Paths: []string{seed.path}, Value: json.RawMessage(seed.value)}
				if _, err := callState(t, s, th.ID, fmt.Sprintf("seed%d", i), w); err != nil {
					t.Fatalf("seeding %s: %v", seed.path, err)
				}
			}
			before := mustState(t, s, th.ID, "")
			w := &store.StateWrite{Paths: tt.paths, Any: tt.any, Value: json.RawMessage(tt.value)}
			res, err := callState(t, s, th.ID, "c1", w)
			after := mustState(t, s, th.ID, "")
			if tt.wantErr != nil {
				var se *store.StateError
				if !errors.Is(err, tt.wantErr) || !errors.As(err, &se) {
					t.Fatalf("AppendState: %v, want a *store.StateError that is %v", err, tt.wantErr)
				}
				if string(after) != string(before) {
					t.Errorf("a refused write changed the state from %s to %s", before, after)
				}
				if answered(t, s, th.ID, "c1") {
					t.Error("a refused write's result was stored")
				}
				if res.ID != "" || res.Seq != 0 || w.Written != nil {
					t.Errorf("a refused write filled in id %q, seq %d, written %v", res.ID, res.Seq, w.Written)
				}
				return
			}
			if err != nil {
				t.Fatalf("AppendState: %v", err)
			}
			if !slices.Equal(w.Written, tt.written) {
				t.Errorf("Written = %v, want %v", w.Written, tt.written)
			}
			for _, p := range tt.paths {
				v, ok := valueAt(t, after, p)
				if wrote := slices.Contains(tt.written, p); wrote && (!ok || !jsonEqual(v, w.Value)) {
					t.Errorf("%s = %s (%v), want %s", p, v, ok, w.Value)
				} else if old, _ := valueAt(t, before, p); !wrote && string(v) != string(old) {
					t.Errorf("%s, not written, changed from %s to %s", p, old, v)
				}
			}
			for _, p := range []string{"/a", "/s", "/o/x"} {
				if v, _ := valueAt(t, after, p); !jsonEqual(v, must(valueAt(t, before, p))) {
					t.Errorf("%s changed to %s", p, v)
				}
			}
			if !answered(t, s, th.ID, "c1") {
				t.Error("the write was stored and its result was not")
			}
		})
	}
}

func must(v json.RawMessage, ok bool) json.RawMessage {
	if !ok {
		return nil
	}
	return v
}

// testStateInstances: each instance has an object of its own, apart from the thread's; adding
// instances is idempotent, limited, and all or nothing.
func testStateInstances(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	err := s.AppendState(ctx, ws, th.ID, &store.StateWrite{Instance: "alpha", Paths: []string{"/x"}, Value: json.RawMessage(`1`)})
	var se *store.StateError
	if !errors.Is(err, store.ErrInvalid) || !errors.As(err, &se) || se.Instance != "alpha" || !strings.Contains(se.Reason, "none") {
		t.Fatalf("a write to an instance of a thread without any: %v, want a *store.StateError (ErrInvalid) saying it has none", err)
	}

	if err := s.AddInstances(ctx, ws, th.ID, "beta", "alpha", "beta"); err != nil {
		t.Fatalf("AddInstances: %v", err)
	}
	instancesAre(t, s, th.ID, "alpha", "beta")
	if st := mustState(t, s, th.ID, "alpha"); !jsonEqual(st, json.RawMessage(`{}`)) {
		t.Fatalf("a new instance's state is %s, want {}", st)
	}
	if _, err := s.State(ctx, ws, th.ID, "gamma"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("State of an instance the thread lacks: %v, want ErrNotFound", err)
	}
	if _, err := s.State(ctx, ws, th.ID, "no spaces"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("State of a malformed instance name: %v, want ErrInvalid", err)
	}

	w := &store.StateWrite{Instance: "alpha", Paths: []string{"/x"}, Value: json.RawMessage(`"in alpha"`)}
	if _, err := callState(t, s, th.ID, "c1", w); err != nil {
		t.Fatalf("a write to an instance: %v", err)
	}
	if v, ok := valueAt(t, mustState(t, s, th.ID, "alpha"), "/x"); !ok || string(v) != `"in alpha"` {
		t.Fatalf("alpha's /x = %s (%v)", v, ok)
	}
	for _, other := range []string{"", "beta"} {
		if st := mustState(t, s, th.ID, other); !jsonEqual(st, json.RawMessage(`{}`)) {
			t.Fatalf("a write to alpha changed the state of %q: %s", other, st)
		}
	}
	// The same path in another object is free, and in the same one written.
	if _, err := callState(t, s, th.ID, "c2", &store.StateWrite{Paths: []string{"/x"}, Value: json.RawMessage(`"root"`)}); err != nil {
		t.Fatalf("the thread's /x: %v", err)
	}
	w = &store.StateWrite{Instance: "alpha", Paths: []string{"/x"}, Value: json.RawMessage(`2`)}
	if _, err := callState(t, s, th.ID, "c3", w); !errors.Is(err, store.ErrStateConflict) || !errors.As(err, &se) || se.Instance != "alpha" {
		t.Fatalf("alpha's /x again: %v, want ErrStateConflict naming alpha", err)
	}

	res, err := callState(t, s, th.ID, "c4", &store.StateWrite{Instance: "gamma", Paths: []string{"/x"}, Value: json.RawMessage(`1`)})
	if !errors.Is(err, store.ErrInvalid) || !errors.As(err, &se) || se.Instance != "gamma" ||
		!strings.Contains(se.Reason, "alpha") || !strings.Contains(se.Reason, "beta") {
		t.Fatalf("a write to an unknown instance: %v, want a *store.StateError (ErrInvalid) listing alpha and beta", err)
	}
	if answered(t, s, th.ID, "c4") || res.ID != "" {
		t.Fatal("a write to an unknown instance stored its result")
	}

	// The names an instance may have, and all or nothing.
	for _, bad := range [][]string{{""}, {"has space"}, {"dots.no"}, {strings.Repeat("n", 65)}, {"fine", "not/fine"}} {
		if err := s.AddInstances(ctx, ws, th.ID, bad...); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AddInstances(%q): %v, want ErrInvalid", bad, err)
		}
	}
	instancesAre(t, s, th.ID, "alpha", "beta")

	// Up to the limit, counting the instances the thread has once.
	var names []string
	for i := range store.MaxInstances - 3 {
		names = append(names, fmt.Sprintf("i%02d", i))
	}
	if err := s.AddInstances(ctx, ws, th.ID, append(names, "alpha")...); err != nil {
		t.Fatalf("AddInstances up to one under the limit: %v", err)
	}
	if err := s.AddInstances(ctx, ws, th.ID, "z1", "z2"); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("two instances over the limit: %v, want ErrTooLarge", err)
	}
	want := append([]string{"alpha", "beta"}, names...)
	instancesAre(t, s, th.ID, want...)
	if err := s.AddInstances(ctx, ws, th.ID, "A-last_1"); err != nil {
		t.Fatalf("the last instance: %v", err)
	}
	if err := s.AddInstances(ctx, ws, th.ID, "alpha", "A-last_1"); err != nil {
		t.Fatalf("AddInstances of instances the thread has, at the limit: %v", err)
	}
	if err := s.AddInstances(ctx, ws, th.ID, "alpha", "one_more"); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("one instance over the limit: %v, want ErrTooLarge", err)
	}
	want = append([]string{"A-last_1"}, want...) // bytewise: upper case first
	instancesAre(t, s, th.ID, want...)
	if v, _ := valueAt(t, mustState(t, s, th.ID, "alpha"), "/x"); string(v) != `"in alpha"` {
		t.Fatalf("adding alpha again changed its state: /x = %s", v)
	}
	if err := s.AddInstances(ctx, ws, th.ID); err != nil {
		t.Fatalf("AddInstances of none: %v", err)
	}
}

func instancesAre(t *testing.T, s store.Store, threadID string, want ...string) {
	t.Helper()
	got, err := s.Instances(ctx, ws, threadID)
	if err != nil {
		t.Fatalf("Instances: %v", err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Instances = %q, want %q", got, want)
	}
}

// testStateIsolation: a thread of another workspace, or none, is not found by any of the
// state's methods, and nothing is written to it.
func testStateIsolation(t *testing.T, s store.Store) {
	mine := newThread(t, s, ws)
	mustAppend(t, s, mine.ID, assistant("c1"))
	if err := s.AddInstances(ctx, ws, mine.ID, "alpha"); err != nil {
		t.Fatal(err)
	}
	const other = "wsp_other"
	for _, thread := range []struct{ workspace, id string }{{other, mine.ID}, {ws, "thr_missing"}} {
		what := fmt.Sprintf("thread %s from workspace %s", thread.id, thread.workspace)
		w := &store.StateWrite{Paths: []string{"/x"}, Value: json.RawMessage(`1`)}
		if err := s.AppendState(ctx, thread.workspace, thread.id, w, result("c1", "hijack")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("AppendState to %s: %v, want ErrNotFound", what, err)
		}
		for _, instance := range []string{"", "alpha"} {
			if _, err := s.State(ctx, thread.workspace, thread.id, instance); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("State(%q) of %s: %v, want ErrNotFound", instance, what, err)
			}
		}
		if _, err := s.Instances(ctx, thread.workspace, thread.id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Instances of %s: %v, want ErrNotFound", what, err)
		}
		if err := s.AddInstances(ctx, thread.workspace, thread.id, "beta"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("AddInstances to %s: %v, want ErrNotFound", what, err)
		}
	}
	if answered(t, s, mine.ID, "c1") {
		t.Error("another workspace answered the call")
	}
	if st := mustState(t, s, mine.ID, ""); !jsonEqual(st, json.RawMessage(`{}`)) {
		t.Errorf("another workspace wrote the state: %s", st)
	}
	instancesAre(t, s, mine.ID, "alpha")
}

// testStateResultExists: a second result for a call is refused as Append refuses it, and its
// write with it.
func testStateResultExists(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	if _, err := callState(t, s, th.ID, "c1", &store.StateWrite{Paths: []string{"/first"}, Value: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	before := mustState(t, s, th.ID, "")
	w := &store.StateWrite{Paths: []string{"/second"}, Value: json.RawMessage(`2`)}
	err := s.AppendState(ctx, ws, th.ID, w, result("c1", "again"))
	if !errors.Is(err, store.ErrResultExists) {
		t.Fatalf("a second result: %v, want ErrResultExists", err)
	}
	if after := mustState(t, s, th.ID, ""); string(after) != string(before) || w.Written != nil {
		t.Fatalf("a refused result wrote the state: %s, written %v", after, w.Written)
	}
	// And a message Append refuses, with a write the state would take.
	err = s.AppendState(ctx, ws, th.ID, w, result("c_unknown", "?"))
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a result for no call: %v, want ErrInvalid", err)
	}
	if after := mustState(t, s, th.ID, ""); string(after) != string(before) {
		t.Fatalf("a refused result wrote the state: %s", after)
	}
	if n := len(all(t, s, ws, th.ID)); n != 2 {
		t.Fatalf("%d messages, want 2", n)
	}
}

// testStateConcurrentWrites races writers, each storing its own call's result, for the same
// paths: each path is written once, by one of them, and only the winners' results are stored.
func testStateConcurrentWrites(t *testing.T, s store.Store) {
	const writers = 8
	for _, paths := range [][]string{{"/a", "/b"}, {"/only"}} {
		t.Run(fmt.Sprintf("%d paths", len(paths)), func(t *testing.T) {
			th := newThread(t, s, ws)
			var calls []string
			for i := range writers {
				calls = append(calls, fmt.Sprintf("c%d", i))
			}
			mustAppend(t, s, th.ID, assistant(calls...))
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				winners = map[string]string{} // path: call
				losers  []string
			)
			for _, call := range calls {
				wg.Go(func() {
					w := &store.StateWrite{Paths: paths, Any: true, Value: json.RawMessage(`"` + call + `"`)}
					err := s.AppendState(ctx, ws, th.ID, w, result(call, "raced"))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil && len(w.Written) == 1 && winners[w.Written[0]] == "":
						winners[w.Written[0]] = call
					case errors.Is(err, store.ErrStateConflict):
						losers = append(losers, call)
					default:
						t.Errorf("%s: %v, written %v (winners %v)", call, err, w.Written, winners)
					}
				})
			}
			wg.Wait()
			if len(winners) != len(paths) || len(losers) != writers-len(paths) {
				t.Fatalf("winners %v and %d losers, want one per path of %v and %d", winners, len(losers), paths, writers-len(paths))
			}
			st := mustState(t, s, th.ID, "")
			for _, p := range paths {
				if v, ok := valueAt(t, st, p); !ok || string(v) != `"`+winners[p]+`"` {
					t.Errorf("%s = %s, want the winner's %q", p, v, winners[p])
				}
				if !answered(t, s, th.ID, winners[p]) {
					t.Errorf("the winner of %s, %s, has no result stored", p, winners[p])
				}
			}
			for _, call := range losers {
				if answered(t, s, th.ID, call) {
					t.Errorf("%s lost the race and its result was stored", call)
				}
			}
			if n := len(all(t, s, ws, th.ID)); n != 1+len(paths) {
				t.Errorf("%d messages, want the calls and %d results", n, len(paths))
			}
		})
	}
}
