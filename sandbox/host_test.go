package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hostRunner runs options in this process or in a worker, so that each host test runs both
// ways: a worker's call crosses the process boundary and must behave the same.
type hostRunner struct {
	name  string
	start func(ctx context.Context, o Options) (*Handle, error)
}

func hostRunners(t *testing.T) []hostRunner {
	w := newWorkers(t, WorkerConfig{})
	return []hostRunner{{"in this process", Start}, {"in a worker", w.Start}}
}

// The entry function gets the host's functions after its arguments: each takes a JSON value,
// returns the function's answer, and throws its error; a panic is an error too, and the
// functions are nowhere else (not globals).
func TestHostFunctions(t *testing.T) {
	var seen atomic.Value
	host := map[string]HostFunc{
		"echo": func(ctx context.Context, c HostCall) (any, error) {
			seen.Store(c)
			var v any
			if err := json.Unmarshal(c.Arg, &v); err != nil {
				return nil, err
			}
			return map[string]any{"got": v}, nil
		},
		"fail":  func(context.Context, HostCall) (any, error) { return nil, errors.New("no such city") },
		"panic": func(context.Context, HostCall) (any, error) { panic("boom") },
		"deadline": func(ctx context.Context, _ HostCall) (any, error) {
			d, ok := ctx.Deadline()
			return ok && time.Until(d) > 0 && time.Until(d) <= time.Minute, nil
		},
	}
	code := `export default (a, h) => {
		const out = {arg: a, echo: h.echo({x: [1, "é"]}), none: h.echo(), frozen: Object.isFrozen(h),
			global: typeof __quiver_host, deadline: h.deadline()};
		for (const f of ["fail", "panic"]) {
			try { h[f](1); out[f] = "no error" } catch (e) { out[f] = e instanceof Error ? e.message : "not an Error" }
		}
		return out
	}`
	for _, r := range hostRunners(t) {
		t.Run(r.name, func(t *testing.T) {
			h, err := r.start(context.Background(), Options{Source: code, Execute: Execute{Args: []any{7}}, Host: host,
				MemoryLimit: testMemory, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			wantValue(t, h.Wait(), `{"arg":7,"echo":{"got":{"x":[1,"é"]}},"none":{"got":null},"frozen":true,
				"global":"undefined","deadline":true,"fail":"no such city","panic":"host function panic failed: boom"}`)
			c := seen.Load().(HostCall)
			if c.MemoryFree <= 0 || c.MemoryFree >= testMemory {
				t.Errorf("MemoryFree %d, want between 0 and the limit %d", c.MemoryFree, testMemory)
			}
		})
	}
}

// A run terminated while its code waits for a host function ends at once: the function's
// context ends, and the run's answer does not wait for the function to notice.
func TestHostFunctionTerminated(t *testing.T) {
	for _, r := range hostRunners(t) {
		t.Run(r.name, func(t *testing.T) {
			started := make(chan struct{})
			ended := make(chan error, 1)
			host := map[string]HostFunc{"wait": func(ctx context.Context, _ HostCall) (any, error) {
				close(started)
				<-ctx.Done()
				ended <- ctx.Err()
				return nil, ctx.Err()
			}}
			h, err := r.start(context.Background(), Options{Source: `export default (h) => h.wait()`, Host: host,
				MemoryLimit: testMemory, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			<-started
			h.Terminate("enough")
			wantFailure(t, h.Wait(), StatusTerminated, "enough")
			if err := <-ended; !errors.Is(err, context.Canceled) {
				t.Errorf("the host function's context ended with %v, want canceled", err)
			}
			<-h.Stopped()
		})
		t.Run(r.name+", by its timeout", func(t *testing.T) {
			host := map[string]HostFunc{"wait": func(ctx context.Context, _ HostCall) (any, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}}
			h, err := r.start(context.Background(), Options{Source: `export default (h) => { for (;;) h.wait() }`, Host: host,
				MemoryLimit: testMemory, Timeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			wantFailure(t, h.Wait(), StatusTerminated, "timed out after 100ms")
			<-h.Stopped()
		})
	}
}

// A worker that served a run whose host function answered late serves the next run with the
// right answers: the late one is not taken for another call's.
func TestHostLateAnswerIsDropped(t *testing.T) {
	w := newWorkers(t, WorkerConfig{MaxWorkers: 1, MaxIdle: 1})
	release := make(chan struct{})
	slow := map[string]HostFunc{"slow": func(ctx context.Context, _ HostCall) (any, error) {
		<-release
		return "late", nil
	}}
	h, err := w.Start(context.Background(), Options{Source: `export default (h) => h.slow()`, Host: slow,
		MemoryLimit: testMemory, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wantFailure(t, h.Wait(), StatusTerminated, "timed out")
	<-h.Stopped()
	close(release) // its answer reaches the worker now, as the next run starts
	n := 0
	fast := map[string]HostFunc{"next": func(context.Context, HostCall) (any, error) { n++; return n, nil }}
	r, err := w.Run(context.Background(), Options{Source: `export default (h) => [h.next(), h.next(), h.next()]`, Host: fast,
		MemoryLimit: testMemory, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	wantValue(t, r, `[1,2,3]`)
}

func TestHostOptionsChecked(t *testing.T) {
	for _, name := range []string{"", "1x", "a-b"} {
		_, err := Run(context.Background(), Options{Source: `export default () => 1`,
			Host: map[string]HostFunc{name: func(context.Context, HostCall) (any, error) { return nil, nil }}})
		if err == nil || !strings.Contains(err.Error(), "JavaScript identifier") {
			t.Errorf("host %q: err = %v", name, err)
		}
	}
	_, err := Run(context.Background(), Options{Source: `export default () => 1`, Host: map[string]HostFunc{"f": nil}})
	if err == nil {
		t.Error("a nil host function was accepted")
	}
}
