package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"
)

func start(t *testing.T, ctx context.Context, o Options) *Handle {
	t.Helper()
	o.MemoryLimit = testMemory
	h, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// waitLogs waits until the run has logged n entries, and returns them.
func waitLogs(t *testing.T, h *Handle, n int) []LogEntry {
	t.Helper()
	for {
		if logs := h.Logs(); len(logs) >= n {
			return logs
		}
		select {
		case <-h.Done():
			t.Fatalf("run ended before logging %d entries: %s", n, h.Wait().Err())
		case <-time.After(time.Millisecond):
		}
	}
}

func TestTerminate(t *testing.T) {
	const loop = `console.log("started"); export default () => { for (;;) {} }`
	tests := []struct {
		name string
		stop func(h *Handle, cancel context.CancelCauseFunc)
		want string
	}{
		{"by the caller", func(h *Handle, _ context.CancelCauseFunc) { h.Terminate("user pressed stop") }, "user pressed stop"},
		{"without a reason", func(h *Handle, _ context.CancelCauseFunc) { h.Terminate("") }, "terminated by the caller"},
		{"first reason wins", func(h *Handle, _ context.CancelCauseFunc) { h.Terminate("first"); h.Terminate("second") }, "first"},
		{"by the context", func(_ *Handle, cancel context.CancelCauseFunc) { cancel(errors.New("run aborted")) }, "cancelled: run aborted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			h := start(t, ctx, Options{Source: loop, Timeout: time.Minute})
			waitLogs(t, h, 1)
			if !h.Running() {
				t.Fatal("Running is false during the loop")
			}
			tt.stop(h, cancel)
			r := h.Wait()
			wantFailure(t, r, StatusTerminated, tt.want)
			if h.Running() {
				t.Error("Running is true after the run ended")
			}
			if len(r.Logs) != 1 || r.Logs[0].Text != "started" {
				t.Errorf("logs %q, want the one before termination", r.Logs)
			}
		})
	}
}

func TestTerminateEdges(t *testing.T) {
	t.Run("before the code starts", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		wantFailure(t, start(t, ctx, Options{Source: `export default 1`}).Wait(), StatusTerminated, "cancelled")
	})
	t.Run("after the run ended keeps its result", func(t *testing.T) {
		h := start(t, context.Background(), Options{Source: `export default 1`})
		r := h.Wait()
		h.Terminate("too late")
		wantValue(t, r, `1`)
		wantValue(t, h.Wait(), `1`)
	})
	t.Run("while waiting on a promise", func(t *testing.T) {
		h := start(t, context.Background(), Options{Source: `console.log("x"); export default async () => { for (;;) await null }`})
		waitLogs(t, h, 1)
		h.Terminate("stop")
		wantFailure(t, h.Wait(), StatusTerminated, "stop")
	})
}

// Logs is a live view: a long run's output can be read while it runs.
func TestLiveLogs(t *testing.T) {
	h := start(t, context.Background(), Options{Timeout: time.Minute, Source: `
		export default () => { for (let i = 0; ; i++) { if (i % 100000 === 0) console.log("tick " + i / 100000) } }`})
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
}
