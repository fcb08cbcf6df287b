package quiver_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/quiverhq/quiver"
)

// Every execution of a call carries the call's id and its attempt number (the idempotency key
// of the call's effect). At a door, where Quiver never executes a call again, that is the
// call's id and attempt 1, with the rest of a run's execution state kept; a run that executes a
// call again names the call and the attempt in the context, and the handler sees that attempt;
// a call made from inside a handler shares the attempt of the call that made it.
func TestHandlersSeeTheCallsIdempotencyKey(t *testing.T) {
	var seen []quiver.Execution
	var d *quiver.Dispatcher
	reg := newRegistry(t,
		quiver.Func("effect", "Has an effect.", func(ctx context.Context, _ struct{}) (string, error) {
			e, ok := quiver.ExecutionFrom(ctx)
			if !ok {
				t.Error("ExecutionFrom reports no execution inside a call")
			}
			seen = append(seen, e)
			return "done", nil
		}),
		quiver.Func("outer", "Calls effect from its code.", func(ctx context.Context, in struct {
			Inner string `json:"inner"`
		}) (string, error) {
			e, _ := quiver.ExecutionFrom(ctx)
			seen = append(seen, e)
			r, err := d.Dispatch(ctx, quiver.Call{ID: in.Inner, Name: "effect"})
			if err != nil {
				return "", err
			}
			return r.Text, nil
		}))
	d = &quiver.Dispatcher{Registry: reg}
	run := quiver.Execution{StepCount: 3, Side: "side_a"}
	cases := []struct {
		name string
		ctx  context.Context
		call quiver.Call
		want []quiver.Execution
	}{
		{"a door's call: its id, attempt 1", context.Background(), quiver.Call{ID: "call_door", Name: "effect"},
			[]quiver.Execution{{CallID: "call_door", Attempt: 1}}},
		{"a run's state is kept, the call's id and attempt added", quiver.WithExecution(context.Background(), run),
			quiver.Call{ID: "call_run", Name: "effect"},
			[]quiver.Execution{{StepCount: 3, Side: "side_a", CallID: "call_run", Attempt: 1}}},
		{"a run executing the call again names its attempt",
			quiver.WithExecution(context.Background(), quiver.Execution{StepCount: 3, CallID: "call_again", Attempt: 4}),
			quiver.Call{ID: "call_again", Name: "effect"},
			[]quiver.Execution{{StepCount: 3, CallID: "call_again", Attempt: 4}}},
		{"an attempt named for another call is not this call's",
			quiver.WithExecution(context.Background(), quiver.Execution{CallID: "call_other", Attempt: 4}),
			quiver.Call{ID: "call_mine", Name: "effect"},
			[]quiver.Execution{{CallID: "call_mine", Attempt: 1}}},
		{"a call made by a first attempt's code is a first attempt", context.Background(),
			quiver.Call{ID: "call_outer", Name: "outer", Args: json.RawMessage(`{"inner":"call_inner"}`)},
			[]quiver.Execution{{CallID: "call_outer", Attempt: 1}, {CallID: "call_inner", Attempt: 1}}},
		{"a call made by a second attempt's code may have been made by the first",
			quiver.WithExecution(context.Background(), quiver.Execution{CallID: "call_outer2", Attempt: 2}),
			quiver.Call{ID: "call_outer2", Name: "outer", Args: json.RawMessage(`{"inner":"call_inner2"}`)},
			[]quiver.Execution{{CallID: "call_outer2", Attempt: 2}, {CallID: "call_inner2", Attempt: 2}}},
	}
	for _, c := range cases {
		seen = nil
		wantSuccess(t, dispatchCall(t, c.ctx, d, c.call))
		if len(seen) != len(c.want) {
			t.Fatalf("%s: handlers saw %+v, want %+v", c.name, seen, c.want)
		}
		for i := range seen {
			if seen[i] != c.want[i] {
				t.Errorf("%s: handler %d saw %+v, want %+v", c.name, i, seen[i], c.want[i])
			}
		}
	}
	// The caller's context is not changed by the call.
	if _, ok := quiver.ExecutionFrom(context.Background()); ok {
		t.Error("ExecutionFrom(background) reports an execution")
	}
}
