package sandbox

import (
	"context"
	"slices"
	"sync"
	"time"

	"modernc.org/quickjs"
)

// interruptEvery is how often a terminated run is interrupted again until it stops: the
// interpreter clears a pending interrupt each time the host calls into it, so one request
// sent between two such calls would be lost.
const interruptEvery = time.Millisecond

// Handle is a run in progress. Its methods are safe for concurrent use.
type Handle struct {
	done   chan struct{}
	stop   chan struct{} // closed by the first Terminate
	result *Result       // set before done is closed

	mu sync.Mutex
	// vm is the run's interpreter while it is open; only Interrupt is called on it from
	// outside. countdown is its interrupt countdown (see interruptCountdown), nil with it.
	vm        *quickjs.VM
	countdown *int32
	reason    string // why the run was terminated, "" while it was not
	logs      []LogEntry
	logBytes  int
	truncated bool
}

// Start checks opts and starts the run on its own goroutine. An error means the options are
// wrong (the code's own failures are in the Result). Cancelling ctx terminates the run.
func Start(ctx context.Context, opts Options) (*Handle, error) {
	c, err := opts.check()
	if err != nil {
		return nil, err
	}
	h := &Handle{done: make(chan struct{}), stop: make(chan struct{})}
	if ctx.Err() != nil {
		// Decided before the run starts, so that no code runs for a caller that has gone.
		h.Terminate("cancelled: " + context.Cause(ctx).Error())
	}
	timer := time.AfterFunc(c.timeout, func() { h.Terminate("timed out after " + c.timeout.String()) })
	unwatch := context.AfterFunc(ctx, func() { h.Terminate("cancelled: " + context.Cause(ctx).Error()) })
	go h.interruptWhenStopped()
	go func() {
		r := h.execute(c)
		timer.Stop()
		unwatch()
		h.result = r
		close(h.done)
	}()
	return h, nil
}

// Run starts a run and waits for its result.
func Run(ctx context.Context, opts Options) (*Result, error) {
	h, err := Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return h.Wait(), nil
}

// Wait waits for the run to end and returns its result.
func (h *Handle) Wait() *Result {
	<-h.done
	return h.result
}

// Done is closed when the run has ended.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Running reports whether the run has not ended yet.
func (h *Handle) Running() bool {
	select {
	case <-h.done:
		return false
	default:
		return true
	}
}

// Terminate stops the run, which ends with StatusTerminated and reason as its error message,
// unless it already produced its result. Only the first reason counts; terminating a run
// that ended does nothing.
func (h *Handle) Terminate(reason string) {
	if reason == "" {
		reason = "terminated by the caller"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reason != "" || !h.Running() {
		return
	}
	h.reason = reason
	close(h.stop)
}

// Logs returns the console output so far: a live view of a running run.
func (h *Handle) Logs() []LogEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.logs)
}

func (h *Handle) terminated() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reason
}

// attach publishes the run's interpreter so that Terminate can interrupt it, and reports
// whether the run may go on.
func (h *Handle) attach(vm *quickjs.VM) bool {
	countdown := interruptCountdown(vm)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.vm, h.countdown = vm, countdown
	return h.reason == ""
}

// detach withdraws the interpreter before it closes: the countdown is in memory Close frees,
// and interruptWhenStopped writes it only under h.mu while it is attached.
func (h *Handle) detach() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.vm, h.countdown = nil, nil
}

func (h *Handle) interruptWhenStopped() {
	select {
	case <-h.done:
		return
	case <-h.stop:
	}
	tick := time.NewTicker(interruptEvery)
	defer tick.Stop()
	for {
		h.mu.Lock()
		if h.vm != nil {
			// The flag first, so that the handler the countdown brings on finds it.
			h.vm.Interrupt()
			if h.countdown != nil {
				pollNow(h.countdown)
			}
		}
		h.mu.Unlock()
		select {
		case <-h.done:
			return
		case <-tick.C:
		}
	}
}

// addLog records one console call and reports whether there is room for more.
func (h *Handle) addLog(c *config, e LogEntry) bool {
	h.mu.Lock()
	if h.truncated {
		h.mu.Unlock()
		return false
	}
	if h.logBytes+len(e.Text) > c.maxLogBytes {
		h.truncated = true
		h.mu.Unlock()
		return false
	}
	h.logBytes += len(e.Text)
	h.logs = append(h.logs, e)
	h.mu.Unlock()
	if c.onLog != nil {
		c.onLog(e)
	}
	return true
}
