package quiver_test

import (
	"context"
	"testing"

	"github.com/quiverhq/quiver"
)

// A call cut short by its run's cancellation is recorded as cancelled, unless the run is handed
// to another process (WithHandBack): then nothing is recorded, and the resumed run runs it
// again. A call that finished before the cancellation is recorded either way.
func TestHandedBackRunsLeaveTheirCutCallsUnrecorded(t *testing.T) {
	for _, c := range []struct {
		name     string
		handBack bool
		finishes bool
		recorded bool
	}{
		{"a cancelled run", false, false, true},
		{"a run handed back", true, false, false},
		{"a run handed back after the call finished", true, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			started := make(chan struct{})
			reg := &quiver.Registry{}
			mustRegister(t, reg, quiver.Func("wait", "Waits for its context to end.", func(ctx context.Context, _ struct{}) (string, error) {
				close(started)
				if c.finishes {
					return "done", nil
				}
				<-ctx.Done()
				return "", ctx.Err()
			}))
			rec := &memRecorder{}
			d := &quiver.Dispatcher{Registry: reg, Recorder: rec}
			ctx, cancel := context.WithCancel(context.Background())
			if c.handBack {
				ctx = quiver.WithHandBack(ctx)
			}
			done := make(chan *quiver.Result, 1)
			go func() {
				r, err := d.Dispatch(ctx, quiver.Call{ID: "c1", Name: "wait", Args: []byte(`{}`)})
				if err != nil {
					t.Error(err)
				}
				done <- r
			}()
			<-started
			if c.finishes {
				r := <-done
				cancel()
				if r.IsError() {
					t.Fatalf("result %+v", r)
				}
			} else {
				cancel()
				if r := <-done; r.Code != quiver.CodeCancelled {
					t.Fatalf("result %+v, want cancelled", r)
				}
			}
			if got := len(rec.all()); (got == 1) != c.recorded {
				t.Fatalf("%d records, want recorded=%v", got, c.recorded)
			}
		})
	}
}
