package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/quickjs"
)

// interruptEvery is how often a terminated run is interrupted again until it stops: the
// interpreter clears a pending interrupt each time the host calls into it, so one request
// sent between two such calls would be lost.
const interruptEvery = time.Millisecond

// stopGrace is how long a terminated run's caller waits for the interpreter to stop before it
// gets its answer anyway. A run stops within a few milliseconds of its interrupt, except inside
// a single builtin call that allocates nothing as it loops (see interrupt.go): that one goes on
// to the call's end, which the run's memory bounds, and its caller should not wait for it.
const stopGrace = 20 * time.Millisecond

// Handle is a run in progress. Its methods are safe for concurrent use.
type Handle struct {
	start   time.Time
	done    chan struct{} // closed once result is set
	stopped chan struct{} // closed once the interpreter has returned and closed
	stop    chan struct{} // closed by the first Terminate
	answer  sync.Once
	result  *Result
	// hostCtx is what the run's host functions get (Options.Host; see hostContext), nil
	// without them. hostCut records that a host call returned after the run was terminated:
	// what the code made of its answer is not the run's outcome.
	hostCtx    context.Context
	cancelHost context.CancelFunc
	hostCut    atomic.Bool

	mu sync.Mutex
	// vm is the run's interpreter while it is open; only Interrupt is called on it from
	// outside. countdown and limit are its interrupt countdown and memory limit (see
	// interrupt.go), nil with it.
	vm        *quickjs.VM
	countdown *int32
	limit     *uintptr
	reason    string // why the run was terminated, "" while it was not
	logs      []LogEntry
	logBytes  int
	truncated bool
}

// Start checks opts and starts the run on its own goroutine: in this process, or in a worker
// process when UseWorkers has set a pool. An error means the options are wrong (the code's own
// failures are in the Result). Cancelling ctx terminates the run.
func Start(ctx context.Context, opts Options) (*Handle, error) {
	if w := defaultWorkers.Load(); w != nil {
		return w.Start(ctx, opts)
	}
	c, err := opts.check()
	if err != nil {
		return nil, err
	}
	return begin(ctx, c, func(h *Handle) {
		go h.interruptWhenStopped()
		h.finish(h.execute(c))
	}), nil
}

// begin makes the Handle of a run of c, terminates it at c's timeout or when ctx ends, and
// calls execute on a goroutine of its own. execute must set the run's result (finish) and
// return only once the interpreter has stopped.
func begin(ctx context.Context, c *config, execute func(*Handle)) *Handle {
	h := &Handle{start: time.Now(), done: make(chan struct{}), stopped: make(chan struct{}), stop: make(chan struct{})}
	if c.host != nil {
		h.hostCtx, h.cancelHost = newHostContext(ctx, h.start.Add(c.timeout))
	}
	if ctx.Err() != nil {
		// Decided before the run starts, so that no code runs for a caller that has gone.
		h.Terminate("cancelled: " + context.Cause(ctx).Error())
	}
	timer := time.AfterFunc(c.timeout, func() { h.Terminate("timed out after " + c.timeout.String()) })
	unwatch := context.AfterFunc(ctx, func() { h.Terminate("cancelled: " + context.Cause(ctx).Error()) })
	go func() {
		execute(h)
		timer.Stop()
		unwatch()
		if h.cancelHost != nil {
			h.cancelHost()
		}
		close(h.stopped)
	}()
	return h
}

// Run starts a run and waits for its result.
func Run(ctx context.Context, opts Options) (*Result, error) {
	h, err := Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return h.Wait(), nil
}

// Wait waits for the run to end and returns its result. A terminated run ends within
// stopGrace of its termination, whatever its code is doing.
func (h *Handle) Wait() *Result {
	<-h.done
	return h.result
}

// Done is closed when the run has ended and its result is known.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Stopped is closed when the run's interpreter has returned and closed: from then on the run
// uses no CPU and no memory. It closes with Done or, for a terminated run that was inside one
// long builtin call (see interrupt.go), when that call ends. A caller that shares interpreters
// out (a pool of slots) should count a run as busy until Stopped.
func (h *Handle) Stopped() <-chan struct{} { return h.stopped }

// finish sets the run's result, once: the interpreter's own, or the terminated answer when the
// interpreter has not stopped within stopGrace.
func (h *Handle) finish(r *Result) {
	h.answer.Do(func() {
		h.result = r
		close(h.done)
	})
}

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
	if h.cancelHost != nil {
		h.cancelHost() // a host function the code is waiting for stops too
	}
}

// hostContext is the context of a run's host functions: the caller's values, the run's
// deadline (the caller's when it is sooner), and an end that comes only from Terminate, after
// the run's termination reason is set. So a host function that returns because its context
// ended always finds the run terminated, never makes it look as if the code had failed.
type hostContext struct {
	context.Context
	deadline time.Time
}

func newHostContext(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &hostContext{Context: base, deadline: deadline}, cancel
}

func (c *hostContext) Deadline() (time.Time, bool) { return c.deadline, true }

// callHost runs the host function name for the run's code and encodes its answer for the
// prelude: "v" and the answer's JSON, or "e" and an error message. A panic is an error: it
// must not take the program down with the run.
func (h *Handle) callHost(c *config, name, arg string, free int64) (answer string) {
	f := c.host[name]
	if f == nil || h.hostCtx == nil {
		return "ehost function " + name + " does not exist"
	}
	if arg == "" {
		arg = "null"
	}
	if !json.Valid([]byte(arg)) {
		return "ethe argument of host function " + name + " is not JSON"
	}
	defer func() {
		if p := recover(); p != nil {
			answer = fmt.Sprintf("ehost function %s failed: %v", name, p)
		}
	}()
	v, err := f(h.hostCtx, HostCall{Arg: json.RawMessage(arg), MemoryFree: max(free, 0)})
	if h.terminated() != "" {
		h.hostCut.Store(true)
	}
	if err != nil {
		return "e" + err.Error()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "ethe answer of host function " + name + " cannot be encoded as JSON: " + err.Error()
	}
	return "v" + string(b)
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
	countdown, limit := interruptCountdown(vm), memoryLimitOf(vm)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.vm, h.countdown, h.limit = vm, countdown, limit
	return h.reason == ""
}

// detach withdraws the interpreter before it closes: the countdown is in memory Close frees,
// and interruptWhenStopped writes it only under h.mu while it is attached.
func (h *Handle) detach() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.vm, h.countdown, h.limit = nil, nil, nil
}

func (h *Handle) interruptWhenStopped() {
	select {
	case <-h.stopped:
		return
	case <-h.stop:
	}
	tick := time.NewTicker(interruptEvery)
	defer tick.Stop()
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	for {
		h.mu.Lock()
		if h.vm != nil {
			// The flag first, so that the handler the countdown brings on finds it.
			h.vm.Interrupt()
			if h.countdown != nil {
				pollNow(h.countdown)
			}
			if h.limit != nil {
				starve(h.limit)
			}
		}
		h.mu.Unlock()
		select {
		case <-h.stopped:
			return
		case <-grace.C:
			h.finish(h.abandonedResult())
		case <-tick.C:
		}
	}
}

// abandonedResult is the answer for a terminated run whose interpreter is still inside a
// builtin call: what it logged so far, and why it was stopped.
func (h *Handle) abandonedResult() *Result {
	r := h.terminatedResult()
	r.Duration = time.Since(h.start)
	h.mu.Lock()
	r.Logs, r.LogsTruncated = slices.Clone(h.logs), h.truncated
	h.mu.Unlock()
	return r
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
