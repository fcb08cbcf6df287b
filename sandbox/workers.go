package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Why runs can go to worker processes.
//
// In this process a terminated run is answered on time, but an interpreter that is inside one
// builtin call which allocates nothing as it loops (a sort of a large typed array, a walk over
// millions of holes: see interrupt.go) cannot be stopped before that call ends, up to seconds
// at 64 MiB: Go cannot stop a goroutine from outside. A worker process can be killed. Workers
// runs each run in a worker process, asks it to stop at the deadline like an interpreter in
// this process, and kills it when it has not stopped killGrace later: its CPU use ends then,
// whatever the code was doing.
//
// A worker also keeps the code away from this process: its interpreter's memory is in another
// address space, and it starts with an empty environment, so the variables this process was
// given (provider keys, database passwords) are not in it to be found.
//
// The worker is this program started again (os.Executable, unless WorkerConfig.Command says
// otherwise) with workerEnv set: WorkerMain, called first in main, serves runs instead of
// running the program. Runs are framed as JSON values on the worker's standard input and
// output, one run at a time per worker; a worker that ended its run cleanly serves the next.
// A run's call of a host function (Options.Host) is an event too: the caller runs the function
// and answers with a request, while the worker's interpreter waits.

// workerEnv is set in a worker's environment to the protocol version it must speak.
const (
	workerEnv      = "QUIVER_SANDBOX_WORKER"
	workerProtocol = "2"
)

// Bounds of the pool.
const (
	// DefaultMaxWorkers is how many worker processes run at once unless WorkerConfig says
	// otherwise: run_code's default number of runs at once, plus room for JavaScript tools.
	DefaultMaxWorkers = 32
	// DefaultMaxIdleWorkers is how many finished workers wait for the next run.
	DefaultMaxIdleWorkers = 4
	// DefaultWorkerIdleTimeout is how long a finished worker waits before it exits.
	DefaultWorkerIdleTimeout = time.Minute
	// killGrace is how long a worker has to stop a terminated run before it is killed. A run
	// stops within a few milliseconds of its interrupt, unless it is inside a builtin call.
	killGrace = 50 * time.Millisecond
	// workerStartTimeout bounds how long a new worker may take to say it is ready.
	workerStartTimeout = 10 * time.Second
)

// WorkerConfig configures a pool of worker processes. The zero value runs this program as the
// worker, which must call WorkerMain first in main.
type WorkerConfig struct {
	// Command is the worker program and its arguments; empty means this program
	// (os.Executable) with no arguments. The program must call WorkerMain before anything
	// else.
	Command []string
	// MaxWorkers caps the worker processes, and so the runs, at once; 0 means
	// DefaultMaxWorkers. A run started while all are busy waits for one (its timeout runs).
	MaxWorkers int
	// MaxIdle caps the finished workers kept for later runs; 0 means DefaultMaxIdleWorkers,
	// negative keeps none.
	MaxIdle int
	// IdleTimeout is how long a finished worker is kept; 0 means DefaultWorkerIdleTimeout.
	IdleTimeout time.Duration
}

// Workers runs code in worker processes (see WorkerMain). Its methods are safe for concurrent
// use.
type Workers struct {
	path        string
	args        []string
	maxIdle     int
	idleTimeout time.Duration
	slots       chan struct{} // one token per worker process that may run

	mu     sync.Mutex
	idle   []*worker
	closed bool
}

// NewWorkers returns a pool of worker processes. No process starts before the first run.
func NewWorkers(cfg WorkerConfig) (*Workers, error) {
	w := &Workers{maxIdle: cfg.MaxIdle, idleTimeout: cfg.IdleTimeout}
	if len(cfg.Command) > 0 {
		w.path, w.args = cfg.Command[0], cfg.Command[1:]
	} else {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("sandbox: workers: finding this program to start it as a worker: %w; set WorkerConfig.Command", err)
		}
		w.path = exe
	}
	if cfg.MaxWorkers < 0 {
		return nil, fmt.Errorf("sandbox: workers: MaxWorkers %d is negative; use a positive number, or 0 for %d", cfg.MaxWorkers, DefaultMaxWorkers)
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("sandbox: workers: IdleTimeout %s is negative; use a positive duration, or 0 for %s", cfg.IdleTimeout, DefaultWorkerIdleTimeout)
	}
	maxWorkers := cfg.MaxWorkers
	if maxWorkers == 0 {
		maxWorkers = DefaultMaxWorkers
	}
	w.slots = make(chan struct{}, maxWorkers)
	switch {
	case w.maxIdle == 0:
		w.maxIdle = DefaultMaxIdleWorkers
	case w.maxIdle < 0:
		w.maxIdle = 0
	}
	if w.idleTimeout == 0 {
		w.idleTimeout = DefaultWorkerIdleTimeout
	}
	return w, nil
}

// defaultWorkers is the pool Start and Run use, nil to run in this process.
var defaultWorkers atomic.Pointer[Workers]

// UseWorkers makes Start and Run (and so every tool built on them) run code in w from now on;
// nil runs it in this process again. A program that serves untrusted code should call it at
// start-up, after WorkerMain.
func UseWorkers(w *Workers) { defaultWorkers.Store(w) }

// Start checks opts and starts the run in a worker process. It behaves as the package's Start:
// an error means the options are wrong, and cancelling ctx terminates the run. Besides, a
// terminated run's worker is killed when it has not stopped within killGrace, so Stopped
// closes within about that of the termination, whatever the code was doing.
func (w *Workers) Start(ctx context.Context, opts Options) (*Handle, error) {
	c, err := opts.check()
	if err != nil {
		return nil, err
	}
	return begin(ctx, c, func(h *Handle) { w.execute(h, c) }), nil
}

// Run starts a run in a worker process and waits for its result.
func (w *Workers) Run(ctx context.Context, opts Options) (*Result, error) {
	h, err := w.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return h.Wait(), nil
}

// Close ends the idle workers and those that finish from now on; runs in progress go on to
// their end. Runs started after Close fail.
func (w *Workers) Close() error {
	w.mu.Lock()
	idle := w.idle
	w.idle, w.closed = nil, true
	w.mu.Unlock()
	for _, wk := range idle {
		wk.close()
	}
	return nil
}

// execute runs c in a worker, forwarding its logs and result to h, and returns once the
// worker's interpreter has stopped or the worker has been killed.
func (w *Workers) execute(h *Handle, c *config) {
	if h.terminated() != "" {
		h.finish(h.abandonedResult()) // no code runs for a caller that has gone
		return
	}
	wk, err := w.acquire(h)
	if err != nil {
		h.finish(lostResult(h, err.Error()))
		return
	}
	defer func() { <-w.slots }()
	if err := wk.send(request{Run: wireOf(c)}); err != nil {
		wk.kill()
		<-wk.exited
		h.finish(internalError(h, "the sandbox could not start the run in its worker process: "+wk.failure(err)))
		return
	}
	w.follow(h, c, wk)
}

// follow hands the worker's events of the run to h, and h's termination to the worker (killed
// when it does not stop in time), until the run ends.
func (w *Workers) follow(h *Handle, c *config, wk *worker) {
	stop := h.stop
	var kill <-chan time.Time
	for {
		select {
		case ev, ok := <-wk.events:
			if !ok {
				// The worker's output ended: it was killed, or it died.
				<-wk.exited
				h.finish(lostResult(h, "the sandbox's worker process ended during the run: "+wk.failure(nil)))
				return
			}
			if w.handle(h, c, wk, ev) {
				return
			}
		case <-stop:
			stop = nil
			_ = wk.send(request{Terminate: h.terminated()}) // a dead worker ends its output, seen above
			kill = time.After(killGrace)
		case <-kill:
			kill = nil
			wk.kill()
		}
	}
}

// handle takes one event of the worker's run; true once the worker stopped, released.
func (w *Workers) handle(h *Handle, c *config, wk *worker, ev event) bool {
	switch {
	case ev.Host != nil:
		// On a goroutine of its own: the run's termination and its worker's kill must not
		// wait for the function (which ends with the run's host context).
		go func(call hostCall) {
			answer := h.callHost(c, call.Name, call.Arg, call.MemoryFree)
			_ = wk.send(request{HostReply: &hostReply{Seq: call.Seq, Answer: answer}})
		}(*ev.Host)
	case ev.Log != nil:
		h.addLog(c, *ev.Log)
	case ev.Result != nil:
		h.finish(workerResult(h, ev.Result))
	case ev.Stopped:
		h.finish(internalError(h, "the sandbox's worker process stopped without a result"))
		w.release(wk)
		return true
	}
	return false
}

// workerResult is the result a worker sent for h. A host function the termination ended
// answered the worker before the termination reached it, and the code failed on that answer:
// the run was terminated, as a run in this process says (see Handle.execute).
func workerResult(h *Handle, r *Result) *Result {
	if r.Status != StatusSuccess && h.hostCut.Load() && h.terminated() != "" {
		return h.abandonedResult()
	}
	return r
}

// internalError is the result of a run the sandbox failed, saying why.
func internalError(h *Handle, msg string) *Result {
	return &Result{Status: StatusError, ErrorName: "InternalError", ErrorMessage: msg, Duration: time.Since(h.start)}
}

// lostResult is the result of a run its worker could not finish: an internal error, unless
// the run was terminated.
func lostResult(h *Handle, msg string) *Result {
	if h.terminated() != "" {
		return h.abandonedResult()
	}
	return internalError(h, msg)
}

// acquire takes a worker for one run: an idle one, or a new one. It waits while MaxWorkers are
// busy, until h is terminated.
func (w *Workers) acquire(h *Handle) (*worker, error) {
	select {
	case w.slots <- struct{}{}:
	case <-h.stop:
		return nil, errors.New("terminated while waiting for a worker process")
	}
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			<-w.slots
			return nil, errors.New("the sandbox's worker pool is closed")
		}
		n := len(w.idle)
		if n == 0 {
			w.mu.Unlock()
			break
		}
		wk := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		wk.idleTimer.Stop()
		select {
		case <-wk.exited: // died while idle (killed from outside): try the next
			continue
		default:
			return wk, nil
		}
	}
	wk, err := w.spawn()
	if err != nil {
		<-w.slots
		return nil, err
	}
	return wk, nil
}

// release keeps a worker that ended its run cleanly for the next run, or ends it.
func (w *Workers) release(wk *worker) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || len(w.idle) >= w.maxIdle {
		wk.close()
		return
	}
	w.idle = append(w.idle, wk)
	wk.idleTimer = time.AfterFunc(w.idleTimeout, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for i, x := range w.idle {
			if x == wk {
				w.idle = append(w.idle[:i], w.idle[i+1:]...)
				wk.close()
				return
			}
		}
	})
}

// worker is one worker process.
type worker struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	sendMu    sync.Mutex // enc: a host function's answer is sent from a goroutine of its own
	enc       *json.Encoder
	events    chan event    // closed when the worker's output ends
	exited    chan struct{} // closed once the process has exited and been waited for
	stderr    *tailWriter
	idleTimer *time.Timer // set while idle, under Workers.mu
}

func (w *Workers) spawn() (*worker, error) {
	cmd := exec.Command(w.path, w.args...)
	// Nothing of this process's environment: it may hold secrets.
	cmd.Env = []string{workerEnv + "=" + workerProtocol}
	cmd.SysProcAttr = workerProcAttr()
	wk := &worker{cmd: cmd, events: make(chan event, 64), exited: make(chan struct{}), stderr: &tailWriter{max: 4 << 10}}
	cmd.Stderr = wk.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: starting a worker process: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: starting a worker process: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: starting the worker process %s: %w", w.path, err)
	}
	wk.stdin, wk.enc = stdin, json.NewEncoder(stdin)
	go wk.read(stdout)
	notWorker := fmt.Sprintf("%s did not start as a sandbox worker: a program that runs code in workers must call sandbox.WorkerMain first in main", w.path)
	select {
	case ev, ok := <-wk.events:
		if ok && ev.Ready == workerProtocol {
			return wk, nil
		}
		wk.kill()
		<-wk.exited
		if !ok {
			return nil, fmt.Errorf("sandbox: %s (%s)", notWorker, wk.failure(nil))
		}
		return nil, fmt.Errorf("sandbox: %s (it spoke protocol %q, this program %q)", notWorker, ev.Ready, workerProtocol)
	case <-time.After(workerStartTimeout):
		wk.kill()
		<-wk.exited
		return nil, fmt.Errorf("sandbox: %s (no answer within %s)", notWorker, workerStartTimeout)
	}
}

// read decodes the worker's output into events until it ends, then waits for the process.
func (wk *worker) read(stdout io.Reader) {
	dec := json.NewDecoder(stdout)
	for {
		var ev event
		if err := dec.Decode(&ev); err != nil {
			break
		}
		wk.events <- ev
	}
	close(wk.events)
	_ = wk.cmd.Wait()
	close(wk.exited)
}

func (wk *worker) send(r request) error {
	wk.sendMu.Lock()
	defer wk.sendMu.Unlock()
	return wk.enc.Encode(r)
}

// close ends an idle worker: it exits when its input ends.
func (wk *worker) close() { _ = wk.stdin.Close() }

func (wk *worker) kill() { killWorker(wk.cmd) }

// failure describes how the worker failed, for an error message: err if any, how the process
// ended if it has, and the end of what it wrote to standard error.
func (wk *worker) failure(err error) string {
	var parts []string
	if err != nil {
		parts = append(parts, err.Error())
	}
	select {
	case <-wk.exited:
		parts = append(parts, wk.cmd.ProcessState.String())
	default:
	}
	if tail := strings.TrimSpace(wk.stderr.String()); tail != "" {
		parts = append(parts, "it wrote: "+tail)
	}
	return strings.Join(parts, "; ")
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// request is a message to a worker: a run, the termination of the run in progress, or the
// answer of a host function the run called.
type request struct {
	Run       *wireConfig `json:"run,omitempty"`
	Terminate string      `json:"terminate,omitempty"`
	HostReply *hostReply  `json:"host_reply,omitempty"`
}

// event is a message from a worker: that it is ready, a console call of the run, a call of a
// host function, the run's result, and that its interpreter has stopped (the worker takes the
// next run).
type event struct {
	Ready   string    `json:"ready,omitempty"`
	Log     *LogEntry `json:"log,omitempty"`
	Host    *hostCall `json:"host,omitempty"`
	Result  *Result   `json:"result,omitempty"`
	Stopped bool      `json:"stopped,omitempty"`
}

// hostCall is a run's call of a host function; Seq numbers the worker's calls, so that an
// answer that comes after its run gave up waiting (terminated) is not taken for the next's.
type hostCall struct {
	Seq        int64  `json:"seq"`
	Name       string `json:"name"`
	Arg        string `json:"arg"`
	MemoryFree int64  `json:"memory_free"`
}

// hostReply is the answer to a hostCall, encoded as Handle.callHost encodes it.
type hostReply struct {
	Seq    int64  `json:"seq"`
	Answer string `json:"answer"`
}

// wireConfig is a config as a worker receives it: checked and encoded by the caller, so that
// the worker only runs it.
type wireConfig struct {
	Main         string            `json:"main"`
	Sources      map[string]string `json:"sources"`
	Imports      map[string]string `json:"imports"`
	Language     Language          `json:"language"`
	MemoryLimit  int64             `json:"memory_limit"`
	Timeout      time.Duration     `json:"timeout"`
	MaxOutput    int               `json:"max_output"`
	MaxLogBytes  int               `json:"max_log_bytes"`
	PreludeInput string            `json:"prelude_input"`
	Host         []string          `json:"host,omitempty"`
}

func wireOf(c *config) *wireConfig {
	return &wireConfig{Main: c.main, Sources: c.sources, Imports: c.imports, Language: c.language,
		MemoryLimit: c.memoryLimit, Timeout: c.timeout, MaxOutput: c.maxOutput, MaxLogBytes: c.maxLogBytes,
		PreludeInput: c.preludeInput, Host: c.hostNames}
}

func (wc *wireConfig) config() *config {
	return &config{main: wc.Main, sources: wc.Sources, imports: wc.Imports, language: wc.Language,
		memoryLimit: wc.MemoryLimit, timeout: wc.Timeout, maxOutput: wc.MaxOutput, maxLogBytes: wc.MaxLogBytes,
		preludeInput: wc.PreludeInput, hostNames: wc.Host}
}

// WorkerMain makes this process a sandbox worker when a Workers pool started it: it serves
// runs until its input ends, then exits. Otherwise it returns at once. A program that uses
// Workers must call it first in main, before it parses flags or opens anything.
func WorkerMain() {
	if os.Getenv(workerEnv) == "" {
		return
	}
	if err := serveWorker(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveWorker runs what in asks, one run at a time, and writes its events to out. It returns
// when in ends, even during a run: the caller has gone.
func serveWorker(in io.Reader, out io.Writer) error {
	if v := os.Getenv(workerEnv); v != workerProtocol {
		return fmt.Errorf("asked for protocol %q, this program speaks %q", v, workerProtocol)
	}
	s := &workerServer{enc: json.NewEncoder(out), requests: make(chan request), replies: make(chan hostReply, 1)}
	// A result's value goes back byte for byte, as a run in this process would return it.
	s.enc.SetEscapeHTML(false)
	go s.read(in)
	// Compiled before the first run asks for it, so that the first run of a new worker costs
	// what the others do.
	if _, err := preludeCode(); err != nil {
		return fmt.Errorf("compiling the prelude: %w", err)
	}
	s.send(event{Ready: workerProtocol})
	for r := range s.requests {
		if r.Run == nil {
			continue // the termination of a run that has ended, or a late answer
		}
		if !s.run(r.Run.config()) {
			return nil
		}
	}
	return nil
}

// workerServer is the worker's side of the protocol: the requests it reads, the events it
// writes, and the host function call that waits for its answer.
type workerServer struct {
	mu       sync.Mutex // one event written at a time
	enc      *json.Encoder
	requests chan request
	// A host function's call waits for the answer numbered like it (awaiting), which run
	// hands over through replies.
	seq      int64
	awaiting atomic.Int64
	replies  chan hostReply
}

// read reads the requests of in until it ends.
func (s *workerServer) read(in io.Reader) {
	defer close(s.requests)
	dec := json.NewDecoder(in)
	for {
		var r request
		if dec.Decode(&r) != nil {
			return
		}
		s.requests <- r
	}
}

func (s *workerServer) send(ev event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.enc.Encode(ev) // a closed output means the caller has gone; in ends next
}

// run runs c, taking the requests that come meanwhile (a termination, the answer of a host
// function), until it stops; false when the requests ended first.
func (s *workerServer) run(c *config) bool {
	c.onLog = func(e LogEntry) { s.send(event{Log: &e}) }
	c.remoteHost = s.callHost
	h := begin(context.Background(), c, func(h *Handle) {
		go h.interruptWhenStopped()
		h.finish(h.execute(c))
	})
	done := h.Done()
	for {
		select {
		case r, ok := <-s.requests:
			if !ok {
				return false
			}
			s.take(h, r)
		case <-done:
			done = nil
			s.send(event{Result: h.Wait()})
		case <-h.Stopped():
			if done != nil {
				s.send(event{Result: h.Wait()})
			}
			s.send(event{Stopped: true})
			return true
		}
	}
}

// take takes a request that came during the run of h: a termination, or the answer the host
// function's call waits for.
func (s *workerServer) take(h *Handle, r request) {
	if r.Terminate != "" {
		h.Terminate(r.Terminate)
	}
	if rep := r.HostReply; rep != nil && rep.Seq == s.awaiting.Load() {
		select {
		case s.replies <- *rep:
		default:
		}
	}
}

// callHost has the caller run a host function, and waits for its answer.
func (s *workerServer) callHost(h *Handle, name, arg string, free int64) string {
	s.seq++
	select { // an answer that came as an earlier call gave up
	case <-s.replies:
	default:
	}
	s.awaiting.Store(s.seq) // from here on, only this call's answer is handed over
	defer s.awaiting.Store(0)
	s.send(event{Host: &hostCall{Seq: s.seq, Name: name, Arg: arg, MemoryFree: free}})
	for {
		select {
		case rep := <-s.replies:
			if rep.Seq != s.seq {
				continue
			}
			if h.terminated() != "" {
				h.hostCut.Store(true)
			}
			return rep.Answer
		case <-h.stop:
			h.hostCut.Store(true)
			return "e" + h.terminated()
		}
	}
}
