package sandbox

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/quiverhq/quiver/internal/proctest"
)

// workerOf starts a run that logs once, waits for that log (or the run's end), and returns the
// run and the process ID of the worker that runs it (the one child that was not there before;
// 0 when the run went to an idle worker).
func workerOf(t *testing.T, w *Workers, o Options) (*Handle, int) {
	t.Helper()
	before := proctest.Children(t)
	h, err := w.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for len(h.Logs()) == 0 && h.Running() {
		time.Sleep(time.Millisecond)
	}
	var pid int
	for p := range proctest.Children(t) {
		if !before[p] {
			if pid != 0 {
				t.Fatalf("two new children, %d and %d, for one run", pid, p)
			}
			pid = p
		}
	}
	return h, pid
}

// The criterion this pool exists for (see workers.go): a terminated run's interpreter stops
// using CPU within killGrace, even inside a builtin call that no interrupt reaches, which in
// this process goes on to its end (a sort of 6e6 doubles: about 1.5 s, far longer under the
// race detector). The worker is killed and its process is gone when Stopped closes.
//
// The run is terminated once its worker has spent CPU time after its log line, not at the
// line: on a busy core the worker may not yet have reached the builtin call when the test
// sees the line, and a termination that lands before it stops the run cleanly (the
// interrupt reaches the call's entry). CPU time measures where the worker is whatever the
// machine's speed. A walk over holes is a loop of builtin calls, so its termination may land
// between two: there the criterion is that the worker stops using CPU, killed or idle.
func TestWorkersStopBuiltinsAtOnce(t *testing.T) {
	tests := []struct {
		name, src  string
		mustBeKill bool // the run is surely inside one builtin call when terminated
	}{
		// The data is made mostly by builtins: a loop of 6e6 steps takes a minute under the
		// race detector.
		{"a typed array sort", `const chunk = new Float64Array(65536), a = new Float64Array(6e6);
			for (let i = 0; i < chunk.length; i++) chunk[i] = (i * 7919) % 1000003;
			for (let i = 0; i + chunk.length <= a.length; i += chunk.length) a.set(chunk, i);
			export default () => { console.log("sorting"); a.sort(); return a[0] }`, true},
		{"a walk over holes", `export default () => { console.log("walking"); for (;;) new Array(4e6).includes(1) }`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkers(t, WorkerConfig{})
			h, pid := workerOf(t, w, Options{Source: tt.src, Timeout: time.Minute, MemoryLimit: 64 << 20})
			if pid == 0 {
				t.Fatal("no new worker process runs the run")
			}
			// 100 ms of CPU after the line: well inside a sort that needs over a second.
			logged, _ := proctest.CPUTime(pid)
			for used, alive := logged, true; alive && used-logged < 100*time.Millisecond && h.Running(); used, alive = proctest.CPUTime(pid) {
				time.Sleep(time.Millisecond)
			}
			terminated := time.Now()
			h.Terminate("stop now")
			<-h.Stopped()
			took := time.Since(terminated)
			t.Logf("the interpreter stopped %s after the run was terminated", took)
			wantFailure(t, h.Wait(), StatusTerminated, "stop now")
			if took > time.Second {
				t.Errorf("the interpreter stopped %s after the run was terminated, want about %s", took, killGrace)
			}
			switch {
			case !proctest.Exists(pid): // killed
			case tt.mustBeKill:
				t.Errorf("worker %d still exists after Stopped", pid)
			default:
				// Stopped cleanly between two builtin calls: it waits, idle, for the next run.
				first, _ := proctest.CPUTime(pid)
				time.Sleep(300 * time.Millisecond)
				if last, alive := proctest.CPUTime(pid); alive && last-first > 30*time.Millisecond {
					t.Errorf("worker %d used %s of CPU in the 300 ms after it stopped: it still runs the code", pid, last-first)
				}
			}
			wantValue(t, runIn(t, w, Options{Source: `export default () => "after"`}), `"after"`)
		})
	}
}

// A worker that ended its run cleanly serves the next; one that died, idle or during a run,
// is replaced, and the run it was running fails with a clear error.
func TestWorkersReuseAndReplace(t *testing.T) {
	w := newWorkers(t, WorkerConfig{})
	h, pid := workerOf(t, w, Options{Source: `console.log("hi"); export default () => 1`})
	if pid == 0 {
		t.Fatal("no new worker process runs the first run")
	}
	wantValue(t, h.Wait(), "1")
	<-h.Stopped()
	h, again := workerOf(t, w, Options{Source: `console.log("hi"); export default () => 2`})
	if again != 0 {
		t.Fatalf("the second run started worker %d instead of reusing %d", again, pid)
	}
	wantValue(t, h.Wait(), "2")
	<-h.Stopped()
	if !proctest.Exists(pid) {
		t.Fatalf("the idle worker %d has exited", pid)
	}

	w.mu.Lock()
	idle := w.idle[0]
	w.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-idle.exited
	h, replaced := workerOf(t, w, Options{Source: `console.log("hi"); export default () => 3`})
	if replaced == 0 {
		t.Fatal("the run went to the worker that was killed")
	}
	wantValue(t, h.Wait(), "3")
	<-h.Stopped()

	h, again = workerOf(t, w, Options{Source: `console.log("hi"); export default () => { for (;;) {} }`, Timeout: time.Minute})
	if again != 0 {
		t.Fatalf("the run started worker %d instead of reusing %d", again, replaced)
	}
	if err := syscall.Kill(replaced, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantFailure(t, h.Wait(), StatusError, "InternalError", "worker process ended during the run", "signal: killed")
	wantValue(t, runIn(t, w, Options{Source: `export default () => 4`}), "4")
}

// A worker gets none of this process's environment, where secrets often are.
func TestWorkerEnvironmentIsEmpty(t *testing.T) {
	t.Setenv("QUIVER_TEST_SECRET", "hunter2")
	w := newWorkers(t, WorkerConfig{})
	h, pid := workerOf(t, w, Options{Source: `console.log("hi"); export default () => { for (;;) {} }`, Timeout: time.Minute})
	defer func() { h.Terminate("done"); <-h.Stopped() }()
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	vars := bytes.Split(bytes.TrimRight(env, "\x00"), []byte{0})
	if len(vars) != 1 || string(vars[0]) != workerEnv+"="+workerProtocol {
		t.Errorf("the worker's environment is %q, want only %s=%s", vars, workerEnv, workerProtocol)
	}
}
