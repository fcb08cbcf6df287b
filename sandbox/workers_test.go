package sandbox

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain lets this test binary serve as the workers' program, as a program using Workers
// does in its main.
func TestMain(m *testing.M) {
	WorkerMain()
	os.Exit(m.Run())
}

func newWorkers(t *testing.T, cfg WorkerConfig) *Workers {
	t.Helper()
	w, err := NewWorkers(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func runIn(t *testing.T, w *Workers, o Options) *Result {
	t.Helper()
	if o.MemoryLimit == 0 {
		o.MemoryLimit = testMemory
	}
	r, err := w.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return r
}

// A run in a worker ends as the same run in this process: value, error, stack and logs.
func TestWorkersMatchInProcess(t *testing.T) {
	w := newWorkers(t, WorkerConfig{})
	tests := []struct {
		name string
		o    Options
	}{
		{"a value", Options{Source: `export default (a) => ({sum: a.x + a.y, s: "é\u2028"})`, Execute: Execute{Args: []any{map[string]any{"x": 1, "y": 2}}}}},
		{"a named entry", Options{Source: `export function f(a, b) { return [b, a] }`, Execute: Execute{Fn: "f", Args: []any{"a", 2}}}},
		{"logs", Options{Source: `export default () => { console.log("one", 1); console.warn({a: 1}); console.error("three"); return 0 }`}},
		{"logs past the limit", Options{Source: `export default () => { for (let i = 0; i < 100; i++) console.log("x".repeat(100)); return 1 }`, MaxLogBytes: 1000}},
		{"a throw", Options{Source: `export default () => { console.log("before"); throw new TypeError("bad " + 42) }`}},
		{"a syntax error", Options{Source: `export default () => {`}},
		{"a link error", Options{Source: `import x from "./missing.js"; export default () => x`}},
		{"modules", Options{Source: `import { twice } from "./lib/util.js"; export default () => twice(21)`,
			Modules: map[string]string{"./lib/util.js": `export const twice = n => n * 2`}}},
		{"TypeScript", Options{Language: TypeScript, Source: `export default (n: number): string => "n=" + n`, Execute: Execute{Args: []any{7}}}},
		{"imports and globals keep large integers", Options{Source: `import cfg, { id } from "config"; export default () => [cfg.id, id, big, String(big)]`,
			Imports: map[string]any{"config": map[string]any{"id": int64(9007199254740993)}}, Globals: map[string]any{"big": int64(1) << 60}}},
		{"the frozen clock", Options{Source: `export default () => [Date.now(), new Date().toISOString()]`, Now: time.Date(2026, 11, 24, 10, 0, 0, 5e6, time.UTC)}},
		{"out of memory", Options{Source: `export default () => { const a = []; for (;;) a.push("x".repeat(1000) + a.length) }`}},
		{"output over the limit", Options{Source: `export default () => "x".repeat(5000)`, MaxOutputBytes: 1000}},
		{"a promise that never settles", Options{Source: `export default () => new Promise(() => {})`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := run(t, tt.o)
			got := runIn(t, w, tt.o)
			if got.Status != want.Status || got.ErrorName != want.ErrorName || got.ErrorMessage != want.ErrorMessage ||
				got.Stack != want.Stack || got.LogsTruncated != want.LogsTruncated || !slices.Equal(got.Logs, want.Logs) {
				t.Errorf("in a worker:\n%+v\nin this process:\n%+v", got, want)
			}
			if string(got.Value) != string(want.Value) {
				t.Errorf("value %s in a worker, %s in this process", got.Value, want.Value)
			}
		})
	}
}

// Options are checked before any worker starts, with the same errors as in this process.
func TestWorkersCheckOptions(t *testing.T) {
	w := newWorkers(t, WorkerConfig{Command: []string{"/nonexistent/worker"}})
	_, err := w.Start(context.Background(), Options{Source: "export default () => 1", Timeout: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "timeout -1s is negative") {
		t.Fatalf("err = %v, want the negative timeout refused", err)
	}
}

// Logs are a live view in a worker too, and Terminate and a cancelled context end the run
// with their reason.
func TestWorkersTerminate(t *testing.T) {
	w := newWorkers(t, WorkerConfig{})
	loop := `export default () => { for (let i = 0; ; i++) { if (i % 100000 === 0) console.log("tick " + i / 100000) } }`
	t.Run("Terminate", func(t *testing.T) {
		h, err := w.Start(context.Background(), Options{Source: loop, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		logs := waitLogs(t, h, 3)
		if logs[0].Text != "tick 0" || logs[2].Text != "tick 2" {
			t.Errorf("live logs %q", logs)
		}
		h.Terminate("seen enough")
		r := h.Wait()
		wantFailure(t, r, StatusTerminated, "seen enough")
		if len(r.Logs) < 3 {
			t.Errorf("result has %d logs, the live view had 3", len(r.Logs))
		}
		<-h.Stopped()
	})
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		h, err := w.Start(ctx, Options{Source: loop, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		waitLogs(t, h, 1)
		cancel()
		wantFailure(t, h.Wait(), StatusTerminated, "cancelled: context canceled")
		<-h.Stopped()
	})
	t.Run("timeout", func(t *testing.T) {
		r := runIn(t, w, Options{Source: loop, Timeout: 100 * time.Millisecond})
		wantFailure(t, r, StatusTerminated, "timed out after 100ms")
	})
	t.Run("cancelled before the start", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r, err := w.Run(ctx, Options{Source: `console.log("ran"); export default () => 1`})
		if err != nil {
			t.Fatal(err)
		}
		wantFailure(t, r, StatusTerminated, "cancelled")
		if len(r.Logs) != 0 {
			t.Errorf("the code ran for a caller that had gone: %q", r.Logs)
		}
	})
}

// MaxWorkers caps the runs at once; a run that waits for a worker past its timeout ends
// terminated, and the pool serves again once a worker is free.
func TestWorkersCap(t *testing.T) {
	w := newWorkers(t, WorkerConfig{MaxWorkers: 1})
	busy, err := w.Start(context.Background(), Options{Source: `console.log("busy"); export default () => { for (;;) {} }`, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	waitLogs(t, busy, 1)
	r := runIn(t, w, Options{Source: `export default () => 1`, Timeout: 200 * time.Millisecond})
	wantFailure(t, r, StatusTerminated, "timed out after 200ms")
	busy.Terminate("done")
	<-busy.Stopped()
	wantValue(t, runIn(t, w, Options{Source: `export default () => 2`}), "2")
}

// A program that is not a worker is refused with an error that says what to do.
func TestWorkersNotAWorker(t *testing.T) {
	tests := []struct {
		name    string
		command []string
		says    string
	}{
		{"exits at once", []string{"/bin/true"}, "call sandbox.WorkerMain first in main"},
		{"another protocol", []string{"/bin/sh", "-c", `echo '{"ready":"0"}'; sleep 10`}, `it spoke protocol "0"`},
		{"no such program", []string{"/nonexistent/worker"}, "starting the worker process /nonexistent/worker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkers(t, WorkerConfig{Command: tt.command})
			r := runIn(t, w, Options{Source: `export default () => 1`})
			wantFailure(t, r, StatusError, "InternalError", tt.says)
		})
	}
}

func TestNewWorkersRefusesBadConfig(t *testing.T) {
	for _, cfg := range []WorkerConfig{{MaxWorkers: -1}, {IdleTimeout: -time.Second}} {
		if _, err := NewWorkers(cfg); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("NewWorkers(%+v) = %v, want a refusal that says the value is negative", cfg, err)
		}
	}
}

// UseWorkers sends the package's Start and Run, and so every tool, to the pool.
func TestUseWorkers(t *testing.T) {
	w := newWorkers(t, WorkerConfig{})
	UseWorkers(w)
	defer UseWorkers(nil)
	h, err := Start(context.Background(), Options{Source: `export default () => 1`})
	if err != nil {
		t.Fatal(err)
	}
	wantValue(t, h.Wait(), "1")
	<-h.Stopped() // the worker is back in the pool
	w.mu.Lock()
	idle := len(w.idle)
	w.mu.Unlock()
	if idle != 1 {
		t.Errorf("%d idle workers after a run through Start, want 1: the run did not go to the pool", idle)
	}
}
