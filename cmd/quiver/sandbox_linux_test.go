package main

import (
	"context"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/internal/proctest"
)

// sortCode sorts 6e6 doubles in one builtin call. The data is made mostly by builtins, so
// that the run spends its time in the sort, not in making the data.
const sortCode = `const chunk = new Float64Array(65536), a = new Float64Array(6e6);
	for (let i = 0; i < chunk.length; i++) chunk[i] = (i * 7919) % 1000003;
	for (let i = 0; i + chunk.length <= a.length; i += chunk.length) a.set(chunk, i);
	export default () => { a.sort(); return a[0] }`

// quiver serve runs run_code in a worker process, and an overrunning run stops using CPU moments
// after its answer whatever it was doing, here a sort of 6e6 doubles in one builtin call (about
// 1.5 s, far longer under the race detector), which no interrupt reaches: its worker is killed.
// (Where the timeout lands depends on the machine: in the sort the worker is killed, in the
// code that makes the data it stops cleanly and waits for the next run. Either way it uses no
// more CPU, which is what is checked.)
func TestServeKillsOverrunningCode(t *testing.T) {
	endpoint, _, _ := startServe(t)
	cs := connectServe(t, endpoint)
	// The workers are this process's children (serve runs in the test): the one that ran the
	// code was there before the call (an idle one, kept from an earlier run) or appears while
	// it runs. They are watched throughout the call, since a killed worker may be gone by the
	// time a slow machine has delivered the answer.
	workers := proctest.Children(t)
	watch := proctest.Watch()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{
		"code":       sortCode,
		"timeout_ms": 1000, "memory_limit_bytes": 64 << 20}})
	answered := time.Now()
	for pid := range watch() {
		workers[pid] = true
	}
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*sdk.TextContent).Text; !res.IsError || !strings.Contains(text, "timed out after 1s") {
		t.Fatalf("the sort was answered with %.300s", text)
	}
	if len(workers) == 0 {
		t.Fatal("no worker process: run_code ran inside the server")
	}
	// Killed 50 ms after the timeout, gone moments later: from 200 ms after the answer, no
	// worker uses CPU (the one that ran the code is gone, or idle).
	time.Sleep(200*time.Millisecond - time.Since(answered))
	first := map[int]time.Duration{}
	for pid := range workers {
		first[pid], _ = proctest.CPUTime(pid)
	}
	time.Sleep(300 * time.Millisecond)
	for pid := range workers {
		if last, alive := proctest.CPUTime(pid); alive && last-first[pid] > 30*time.Millisecond {
			t.Errorf("worker %d used %s of CPU in the 300 ms from 200 ms after the answer: it still runs the code", pid, last-first[pid])
		}
	}

	res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": `export default () => 6 * 7`}})
	if err != nil || res.IsError {
		t.Fatalf("the next call: %v %+v", err, res)
	}
}
