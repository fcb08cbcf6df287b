package runcode

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/sandbox"
)

func dispatcher(t *testing.T, tool *quiver.Tool) *quiver.Dispatcher {
	t.Helper()
	reg := &quiver.Registry{}
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	return &quiver.Dispatcher{Registry: reg}
}

func call(t *testing.T, d *quiver.Dispatcher, args string) (*quiver.Result, Meta) {
	t.Helper()
	r, err := d.Dispatch(context.Background(), quiver.Call{Name: Name, Args: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	var m Meta
	if len(r.Meta) > 0 {
		if err := json.Unmarshal(r.Meta, &m); err != nil {
			t.Fatalf("meta %s: %v", r.Meta, err)
		}
	}
	return r, m
}

// A run that succeeds is a success whose value is what the code returned (not a report of the
// run holding it: issue 35), its duration and console output in the metadata; the model,
// which reads no metadata, reads the console output after the value.
func TestRunCode(t *testing.T) {
	tests := []struct {
		name, args, value string
		logs              []string
		modelText         string
	}{
		{"args reach the default export", `{"code":"export default (a) => a.x * 2","args":{"x":21}}`, `42`, nil, `42`},
		{"no args", `{"code":"export default () => [1, 2].map(n => n + 1)"}`, `[2,3]`, nil, `[2,3]`},
		{"console is captured", `{"code":"console.log('hello', 1); export default () => 'ok'"}`, `"ok"`, []string{"hello 1"},
			"\"ok\"\n\nconsole output:\n[log] hello 1\n"},
		{"TypeScript", `{"code":"export default (a: {n: number}): number => a.n + 1","language":"ts","args":{"n":1}}`, `2`, nil, `2`},
		{"args of any JSON type", `{"code":"export default (a) => a.length","args":[1,2,3]}`, `3`, nil, `3`},
		{"sum and stringify", `{"code":"export default () => { let s = 0; for (let i = 1; i <= 1e5; i++) s += i; return JSON.stringify({s}) }"}`, `"{\"s\":5000050000}"`, nil,
			`"{\"s\":5000050000}"`},
		{"nothing returned", `{"code":"export default () => { console.warn('printed, not returned') }"}`, `null`, []string{"printed, not returned"},
			"null\n\nconsole output:\n[warn] printed, not returned\n"},
	}
	d := dispatcher(t, Tool)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, m := call(t, d, tt.args)
			if r.IsError() {
				t.Fatalf("error result: %s", r.Error)
			}
			if string(r.Value) != tt.value || m.Status != "" || m.DurationMS <= 0 {
				t.Errorf("value %s, meta %+v; want the value %s and the run's duration", r.Value, m, tt.value)
			}
			if got := r.ModelText(); got != tt.modelText {
				t.Errorf("the model reads %q, want %q", got, tt.modelText)
			}
			if len(m.Logs) != len(tt.logs) {
				t.Fatalf("logs %v, want %v", m.Logs, tt.logs)
			}
			for i, l := range tt.logs {
				if m.Logs[i].Text != l {
					t.Errorf("log %d = %q, want %q", i, m.Logs[i].Text, l)
				}
			}
		})
	}
}

// The result of run_code has the shape of every tool's: status, value and metadata at its top,
// as `quiver call`, the API and MCP's structured answers show it.
func TestRunCodeResultIsFlat(t *testing.T) {
	r, _ := call(t, dispatcher(t, Tool), `{"code":"export default () => 42"}`)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(top["meta"], &meta); err != nil {
		t.Fatalf("meta %s: %v", top["meta"], err)
	}
	if len(top) != 3 || string(top["status"]) != `"success"` || string(top["value"]) != "42" || len(meta) != 1 || meta["duration_ms"] == nil {
		t.Errorf("the result is %s, want {status: success, value: 42, meta: {duration_ms}}", b)
	}
}

// Every status but success is an error result, whose text tells the model what happened and
// whose metadata says how the run ended; it has no value.
func TestRunCodeFailures(t *testing.T) {
	// Memory bombs get time to fill their memory even under the race detector.
	const roomy = `,"timeout_ms":60000`
	tool, err := New(Limits{MaxTimeout: time.Minute, DefaultTimeout: 100 * time.Millisecond, MaxMemoryBytes: 8 << 20, DefaultMemoryBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, args string
		status     sandbox.Status
		has        []string
	}{
		{"thrown error with stack and logs", `{"code":"console.log('before'); export default () => { throw new TypeError('bad input') }"}`,
			sandbox.StatusError, []string{"status error: TypeError: bad input", "main.js:1", "console output:\n[log] before"}},
		{"memory bomb", `{"code":"export default () => { const a = []; for (;;) a.push({}) }"` + roomy + `}`,
			sandbox.StatusMemory, []string{"status memory", "memory limit of 4194304 bytes"}},
		{"memory capped by the operator", `{"code":"export default () => { const a = []; for (;;) a.push({}) }","memory_limit_bytes":1000000000` + roomy + `}`,
			sandbox.StatusMemory, []string{"memory limit of 8388608 bytes"}},
		{"missing module", `{"code":"import fs from 'fs'; export default 1"}`, sandbox.StatusLinkError, []string{"status link_error", `"fs"`}},
		{"infinite loop", `{"code":"export default () => { for (;;) {} }"}`, sandbox.StatusTerminated, []string{"timed out after 100ms"}},
		{"TypeScript syntax error", `{"code":"const x: = 1","language":"ts"}`, sandbox.StatusError, []string{"SyntaxError", "main.ts:1:"}},
	}
	d := dispatcher(t, tool)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, m := call(t, d, tt.args)
			if !r.IsError() || r.Code != quiver.CodeToolError || r.Value != nil {
				t.Fatalf("result %+v, want a tool error without a value", r)
			}
			if m.Status != tt.status || m.DurationMS <= 0 {
				t.Errorf("meta %+v, want status %s and the run's duration", m, tt.status)
			}
			for _, h := range tt.has {
				if !strings.Contains(r.Error, h) {
					t.Errorf("error %q does not contain %q", r.Error, h)
				}
			}
		})
	}
}

func TestTimeoutCapped(t *testing.T) {
	tool, err := New(Limits{MaxTimeout: 200 * time.Millisecond, DefaultTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r, m := call(t, dispatcher(t, tool), `{"code":"export default () => { for (;;) {} }","timeout_ms":600000}`)
	if m.Status != sandbox.StatusTerminated || !strings.Contains(r.Error, "timed out after 200ms") {
		t.Errorf("status %s, error %q; want terminated after the operator's 200ms", m.Status, r.Error)
	}
}

func TestRunCodeBadArguments(t *testing.T) {
	tool, err := New(Limits{MaxCodeBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, args, has string }{
		{"no code", `{}`, `code`},
		{"empty code", `{"code":""}`, "/code"},
		{"unknown language", `{"code":"1","language":"python"}`, "/language"},
		{"zero timeout", `{"code":"1","timeout_ms":0}`, "/timeout_ms"},
		{"tiny memory", `{"code":"1","memory_limit_bytes":1000}`, "/memory_limit_bytes"},
		{"unknown argument", `{"code":"1","cwd":"/"}`, `"cwd"`},
		{"code too long", `{"code":"` + strings.Repeat("1;", 60) + `"}`, "code is 120 bytes, over the limit of 100 bytes"},
	}
	d := dispatcher(t, tool)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := call(t, d, tt.args)
			if !r.IsError() || r.Code != quiver.CodeInvalidArguments {
				t.Fatalf("result %+v, want invalid arguments", r)
			}
			if !strings.Contains(r.Error, tt.has) {
				t.Errorf("error %q does not contain %q", r.Error, tt.has)
			}
		})
	}
}

func TestNewRejectsBadLimits(t *testing.T) {
	tests := []struct {
		name string
		l    Limits
		has  string
	}{
		{"default over max timeout", Limits{DefaultTimeout: time.Minute, MaxTimeout: time.Second}, "must not exceed"},
		{"default over max memory", Limits{DefaultMemoryBytes: 64 << 20, MaxMemoryBytes: 32 << 20}, "must not exceed"},
		{"memory below the sandbox minimum", Limits{DefaultMemoryBytes: 1000, MaxMemoryBytes: 2000}, "at least 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.l)
			if err == nil || !strings.Contains(err.Error(), tt.has) {
				t.Errorf("error %v, want one containing %q", err, tt.has)
			}
		})
	}
}

// A call waits for a free sandbox, and gives up shortly before its context ends, with an
// error result that names the limit that held it up (the dispatcher would replace an error
// returned after the deadline by its own, which names none).
func TestConcurrencyLimit(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		holder string // the thread of the call that holds the slot
		has    []string
	}{
		{"all sandboxes busy", Limits{MaxConcurrent: 1}, "other",
			[]string{"waited", "all 1 sandboxes were busy", "MaxConcurrent and MaxConcurrentPerOwner", "at most 1 programs at once, 1 per caller"}},
		{"the caller at its own limit", Limits{MaxConcurrent: 4, MaxConcurrentPerOwner: 1}, "me",
			[]string{"this caller (thread me) already had 1 programs running, its limit", "at most 4 programs at once, 1 per caller"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, r, err := build(tt.limits)
			if err != nil {
				t.Fatal(err)
			}
			d := dispatcher(t, tool)
			held := make(chan *quiver.Result, 1)
			go func() {
				ctx := quiver.WithScope(context.Background(), quiver.Scope{ThreadID: tt.holder})
				res, _ := d.Dispatch(ctx, quiver.Call{Name: Name, Args: json.RawMessage(`{"code":"export default () => { for (;;) {} }","timeout_ms":1000}`)})
				held <- res
			}()
			for running, _, _, _ := r.slots.state(""); running == 0; running, _, _, _ = r.slots.state("") {
				time.Sleep(time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(quiver.WithScope(context.Background(), quiver.Scope{ThreadID: "me"}), 600*time.Millisecond)
			defer cancel()
			res, err := d.Dispatch(ctx, quiver.Call{Name: Name, Args: json.RawMessage(`{"code":"export default 1"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError() || res.Code != quiver.CodeTimeout {
				t.Fatalf("result %+v, want a timeout", res)
			}
			for _, h := range tt.has {
				if !strings.Contains(res.Error, h) {
					t.Errorf("error %q does not contain %q", res.Error, h)
				}
			}
			if res := <-held; !res.IsError() || !strings.Contains(res.Error, "timed out after 1s") {
				t.Errorf("the holder's result %+v, want its own timeout", res)
			}
			// The holder's slot is given back once its interpreter has stopped, which may be
			// just after its answer (see TestSlotHeldUntilTheInterpreterStops).
			deadline := time.Now().Add(5 * time.Second)
			for running, waiting, _, _ := r.slots.state(""); running != 0 || waiting != 0; running, waiting, _, _ = r.slots.state("") {
				if time.Now().After(deadline) {
					t.Fatalf("%d running and %d waiting 5s after both calls ended", running, waiting)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}

// One owner flooding run_code with long runs delays another owner's call by about one run, not
// by its whole queue: with 2 slots, 20 runs of 500 ms from thread A would keep a call that
// waits its turn in arrival order for 5 s. The bound is generous, for a loaded machine.
func TestFairShareUnderFlood(t *testing.T) {
	tool, r, err := build(Limits{MaxConcurrent: 2, MaxConcurrentPerOwner: 2})
	if err != nil {
		t.Fatal(err)
	}
	d := dispatcher(t, tool)
	flood := quiver.WithScope(context.Background(), quiver.Scope{ThreadID: "A"})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			res, err := d.Dispatch(flood, quiver.Call{Name: Name, Args: json.RawMessage(`{"code":"export default () => { for (;;) {} }","timeout_ms":500}`)})
			if err != nil || !strings.Contains(res.Error, "timed out after 500ms") {
				t.Errorf("a flooding call: %v %+v", err, res)
			}
		})
	}
	defer wg.Wait()
	for _, _, running, waiting := r.slots.state("thread A"); running+waiting < 20; _, _, running, waiting = r.slots.state("thread A") {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	res, err := d.Dispatch(quiver.WithScope(context.Background(), quiver.Scope{ThreadID: "B"}),
		quiver.Call{Name: Name, Args: json.RawMessage(`{"code":"export default 1"}`)})
	took := time.Since(start)
	if err != nil || res.IsError() {
		t.Fatalf("B's call: %v %+v", err, res)
	}
	if _, _, _, waiting := r.slots.state("thread A"); waiting == 0 {
		t.Error("A's queue had drained before B's call ran: the test proves nothing")
	}
	if took > 2*time.Second {
		t.Errorf("B's call took %s behind A's 20 runs of 500 ms", took)
	}
}

// A call the dispatcher gives up on frees its sandbox at once, even when its code catches its
// own stack overflows (which used to hold the slot for seconds after the call was gone).
func TestFairSlotFreedByAbandonedCall(t *testing.T) {
	tool, err := New(Limits{MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := dispatcher(t, tool)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	const attack = `{"code":"export default () => { const f = n => { try { return f(n + 1) } catch (e) { return f(n + 1) } }; return f(0) }","timeout_ms":10000}`
	if res, err := d.Dispatch(ctx, quiver.Call{Name: Name, Args: json.RawMessage(attack)}); err != nil || !res.IsError() {
		t.Fatalf("the abandoned call: %v %+v", err, res)
	}
	start := time.Now()
	if res, _ := call(t, d, `{"code":"export default 1"}`); res.IsError() {
		t.Fatalf("the next call: %s", res.Error)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the next call waited %s for the abandoned one's sandbox", took)
	}
}

func TestNegativeConcurrencyRejected(t *testing.T) {
	for _, l := range []Limits{{MaxConcurrent: -1}, {MaxConcurrentPerOwner: -1}} {
		if _, err := New(l); err == nil || !strings.Contains(err.Error(), "must not be negative") {
			t.Errorf("New(%+v): %v, want an error", l, err)
		}
	}
}

// Registration at import: the tool is in quiver.Default.
func TestRegistered(t *testing.T) {
	if got, ok := quiver.Default.Lookup(Name); !ok || got != Tool {
		t.Fatalf("run_code is not registered in quiver.Default")
	}
}

// A terminated run is answered at its deadline even while its interpreter finishes one builtin
// call (see sandbox.Handle.Stopped); its slot stays taken until the interpreter has stopped, so
// that abandoned runs cannot add up to more than MaxConcurrent at once.
func TestSlotHeldUntilTheInterpreterStops(t *testing.T) {
	tool, r, err := build(Limits{MaxConcurrent: 1, MaxMemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	d := dispatcher(t, tool)
	// A walk over four million holes allocates nothing and takes about 250 ms (far longer
	// under the race detector), so it runs on past its interrupt.
	res, _ := call(t, d, `{"code":"export default () => new Array(4e6).includes(1)","timeout_ms":100,"memory_limit_bytes":67108864}`)
	if !res.IsError() || !strings.Contains(res.Error, "timed out after 100ms") {
		t.Fatalf("result %+v, want a timeout", res)
	}
	if running, _, _, _ := r.slots.state(""); running != 1 {
		t.Fatalf("%d runs hold a slot right after the answer, want the one still stopping", running)
	}
	deadline := time.Now().Add(time.Minute)
	for running, _, _, _ := r.slots.state(""); running != 0; running, _, _, _ = r.slots.state("") {
		if time.Now().After(deadline) {
			t.Fatal("the slot was not given back a minute after the answer")
		}
		time.Sleep(time.Millisecond)
	}
}
