package main

import (
	"context"
	"os"
	"strconv"
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

// quiver serve runs run_code in a worker process, and kills the worker of a run that overran
// its timeout inside a builtin call no interrupt reaches (a sort of 6e6 doubles, about 1.5 s,
// far longer under the race detector): the call is answered at its timeout, and the process
// that ran it is gone moments later instead of sorting on.
func TestServeKillsOverrunningCode(t *testing.T) {
	endpoint, _, _ := startServe(t)
	cs := connectServe(t, endpoint)
	before := proctest.Children(t)
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{
		"code":       sortCode,
		"timeout_ms": 1000, "memory_limit_bytes": 64 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	if text := res.Content[0].(*sdk.TextContent).Text; !res.IsError || !strings.Contains(text, "timed out after 1s") {
		t.Fatalf("the sort was answered with %.300s", text)
	}
	var workers []int
	for pid := range proctest.Children(t) {
		if !before[pid] {
			workers = append(workers, pid)
		}
	}
	if len(workers) != 1 {
		t.Fatalf("%d new child processes during the call, want the one worker that ran the code", len(workers))
	}
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(workers[0])); os.IsNotExist(err) {
			break
		}
		if time.Since(answered) > 5*time.Second {
			status, _ := os.ReadFile("/proc/" + strconv.Itoa(workers[0]) + "/status")
			cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(workers[0]) + "/cmdline")
			t.Fatalf("the worker that ran the overrunning code still exists 5s after the answer: %q\n%.300s", cmdline, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the worker was gone %s after the answer", time.Since(answered))

	res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": `export default () => 6 * 7`}})
	if err != nil || res.IsError {
		t.Fatalf("the next call: %v %+v", err, res)
	}
}
