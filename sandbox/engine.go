package sandbox

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"modernc.org/quickjs"
)

//go:embed prelude.js
var prelude string

// preludeCode is the prelude compiled once per process: loading bytecode into each fresh
// interpreter costs a fraction of parsing the source again.
var preludeCode = sync.OnceValues(func() ([]byte, error) {
	vm, err := quickjs.NewVM()
	if err != nil {
		return nil, err
	}
	defer vm.Close()
	return vm.Compile(prelude, quickjs.EvalGlobal)
})

// reportHeadroom is the memory a run that hit its limit gets to report what happened.
const reportHeadroom = 1 << 20

// memoryProbe allocates a little: if that fails, the run's memory is full.
const memoryProbe = "new Uint8Array(65536).length"

// outcome is what the prelude reported through settle.
type outcome struct {
	kind                 string // "ok", "error", "link"; "" when nothing was reported
	json                 string
	name, message, stack string
}

// execute runs c to its end on the calling goroutine, which alone touches the interpreter.
func (h *Handle) execute(c *config) *Result {
	start := time.Now()
	r := h.runVM(c)
	r.Duration = time.Since(start)
	h.mu.Lock()
	r.Logs, r.LogsTruncated = h.logs, h.truncated
	h.mu.Unlock()
	return r
}

// vmRun is what the interpreter's callbacks record during one run.
type vmRun struct {
	out     outcome
	linkErr string // the first failure to load or resolve a module
}

func (h *Handle) runVM(c *config) *Result {
	if c.language == TypeScript {
		if r := transpileAll(c); r != nil {
			return r
		}
	}
	vm, err := quickjs.NewVM()
	if err != nil {
		return setupError("create an interpreter", err)
	}
	defer func() {
		h.detach()
		vm.Close()
	}()
	var run vmRun
	if r := h.prepareVM(vm, c, &run); r != nil {
		return r
	}
	return h.runPrelude(vm, c, &run)
}

// prepareVM limits the interpreter's memory, connects it to the run and attaches it to h.
func (h *Handle) prepareVM(vm *quickjs.VM, c *config, run *vmRun) *Result {
	vm.SetMemoryLimit(uintptr(c.memoryLimit))
	if err := h.hookVM(vm, c, run); err != nil {
		return setupError("set up the interpreter", err)
	}
	if !h.attach(vm) {
		return h.terminatedResult()
	}
	return nil
}

// runPrelude runs the prelude, which calls the entry function, and waits for its outcome.
func (h *Handle) runPrelude(vm *quickjs.VM, c *config, run *vmRun) *Result {
	code, err := preludeCode()
	if err != nil {
		return setupError("compile its prelude", err)
	}
	setup, err := vm.EvalBytecodeValue(code)
	if err != nil {
		return h.failure(c, err)
	}
	defer setup.Free()
	finish, err := setup.CallValue(quickjs.UndefinedValue, c.preludeInput)
	if err != nil {
		return h.failure(c, err)
	}
	defer finish.Free()
	return h.runResult(c, run, h.await(vm, finish, c, run))
}

// setupError is the result of a run the sandbox could not set up.
func setupError(what string, err error) *Result {
	return &Result{Status: StatusError, ErrorName: "InternalError", ErrorMessage: "the sandbox could not " + what + ": " + err.Error()}
}

// runResult is what the run comes to: what the prelude reported (but a failure after a host
// function the termination cut short: the termination), its termination, running out of
// memory (exhausted), or a promise that never settled.
func (h *Handle) runResult(c *config, run *vmRun, exhausted bool) *Result {
	switch {
	case run.out.kind != "" && (run.out.kind == "ok" || !h.hostCut.Load()):
		return classify(c, run.out, run.linkErr)
	case h.terminated() != "":
		return h.terminatedResult()
	case exhausted:
		return classify(c, outcome{kind: "error", name: "InternalError", message: "out of memory"}, "")
	}
	return &Result{Status: StatusError, ErrorName: "Error",
		ErrorMessage: "the entry function returned a promise that never settled (nothing is left that could resolve it)"}
}

// hookVM connects the interpreter to the run: modules load through c, and the prelude logs
// and reports its outcome into run.
func (h *Handle) hookVM(vm *quickjs.VM, c *config, run *vmRun) error {
	vm.SetModuleLoader(func(_ *quickjs.VM, name string) (string, error) {
		src, err := c.load(name)
		if err != nil && run.linkErr == "" {
			run.linkErr = err.Error()
		}
		return src, err
	}, func(_ *quickjs.VM, base, name string) (string, error) {
		key, err := c.resolve(base, name)
		if err != nil && run.linkErr == "" {
			run.linkErr = err.Error()
		}
		return key, err
	})
	var hostErr error
	if len(c.hostNames) > 0 {
		hostErr = vm.RegisterHostFunc("__quiver_host", func(a []any) (any, error) {
			name, _ := a[0].(string)
			arg, _ := a[1].(string)
			free := c.memoryLimit - memoryUsed(vm)
			if c.remoteHost != nil {
				return c.remoteHost(h, name, arg, free), nil
			}
			return h.callHost(c, name, arg, free), nil
		})
	}
	return errors.Join(hostErr,
		vm.RegisterHostFunc("__quiver_log", func(a []any) (any, error) {
			level, _ := a[0].(string)
			text, _ := a[1].(string)
			return h.addLog(c, LogEntry{Level: level, Text: text}), nil
		}),
		vm.RegisterHostFunc("__quiver_settle", func(a []any) (any, error) {
			if run.out.kind == "" {
				run.out = settled(a)
			}
			return nil, nil
		}))
}

// await runs the interpreter's pending jobs until the run reports or is stopped, and reports
// whether it ran out of memory.
func (h *Handle) await(vm *quickjs.VM, finish quickjs.Value, c *config, run *vmRun) (exhausted bool) {
	for run.out.kind == "" && h.terminated() == "" {
		n, err := vm.ExecutePendingJobs()
		if n == 0 || (err != nil && isInterrupt(err)) {
			break
		}
	}
	if run.out.kind == "" && h.terminated() == "" {
		// Nothing reported: either the entry's promise never settled, or the run ran out of
		// memory before it could report (memory a module still holds stays full). Probe, then
		// report again with a little room.
		_, err := vm.Eval(memoryProbe, quickjs.EvalGlobal)
		exhausted = err != nil && !isInterrupt(err)
		vm.SetMemoryLimit(uintptr(c.memoryLimit + reportHeadroom))
		_, _ = finish.Call(quickjs.UndefinedValue)
	}
	return exhausted
}

func settled(a []any) outcome {
	s := func(i int) string {
		if i < len(a) {
			v, _ := a[i].(string)
			return v
		}
		return ""
	}
	if s(0) == "ok" {
		return outcome{kind: "ok", json: s(1)}
	}
	return outcome{kind: s(0), name: s(1), message: s(2), stack: s(3)}
}

// classify turns what the prelude reported into a Result.
func classify(c *config, out outcome, linkErr string) *Result {
	switch out.kind {
	case "ok":
		return okResult(c, out.json)
	case "link":
		return &Result{Status: StatusLinkError, ErrorName: "LinkError", ErrorMessage: out.message}
	}
	r := &Result{Status: StatusError, ErrorName: out.name, ErrorMessage: out.message, Stack: cleanStack(out.stack)}
	switch {
	case outOfMemory(out.name, out.message):
		what := out.message
		if what == thrownNull {
			what = "out of memory"
		}
		r.Status, r.ErrorName = StatusMemory, "InternalError"
		r.ErrorMessage = fmt.Sprintf("%s: the code went over its memory limit of %d bytes", what, c.memoryLimit)
	case linkErr != "" && isLinkFailure(out.message):
		r.Status, r.ErrorName, r.ErrorMessage = StatusLinkError, "LinkError", linkErr
	case out.name == "SyntaxError" && strings.HasPrefix(out.message, "Could not find export"):
		r.Status = StatusLinkError
	}
	return r
}

// okResult is the result of a run that returned value (its JSON), within the output's limit.
func okResult(c *config, value string) *Result {
	if len(value) > c.maxOutput {
		return &Result{Status: StatusError, ErrorName: "OutputLimitError", ErrorMessage: fmt.Sprintf(
			"the result is %d bytes of JSON, over the limit of %d bytes; return less (a summary or a slice) instead", len(value), c.maxOutput)}
	}
	if !json.Valid([]byte(value)) {
		return &Result{Status: StatusError, ErrorName: "TypeError", ErrorMessage: "the result did not convert to valid JSON"}
	}
	return &Result{Status: StatusSuccess, Value: json.RawMessage(value)}
}

// isLinkFailure reports whether the engine's message says a module failed to load or resolve.
func isLinkFailure(message string) bool {
	return strings.Contains(message, "module load failed") || strings.Contains(message, "module normalization failed")
}

// outOfMemory reports whether an error is the engine's: out of memory, or a string past the
// longest the engine can hold (what doubling a string ends with, well inside the limit, since
// concatenation shares storage). When there is not even the memory to build the error object,
// the engine throws null instead: a run that ends by throwing null is taken to have run out of
// memory (code rarely throws null on purpose).
func outOfMemory(name, message string) bool {
	return name == "InternalError" && (message == "out of memory" || message == "string too long") ||
		name == "Error" && message == thrownNull
}

// failure is the result of an error from the host's own calls into the interpreter (setting up
// the run), which only the run's limits can cause.
func (h *Handle) failure(c *config, err error) *Result {
	if h.terminated() != "" {
		return h.terminatedResult()
	}
	var e *quickjs.Error
	if errors.As(err, &e) {
		return classify(c, outcome{kind: "error", name: e.Name, message: e.Message, stack: e.Stack}, "")
	}
	return &Result{Status: StatusError, ErrorName: "InternalError", ErrorMessage: err.Error()}
}

func (h *Handle) terminatedResult() *Result {
	return &Result{Status: StatusTerminated, ErrorName: "TerminatedError", ErrorMessage: h.terminated()}
}

// thrownNull is the message the prelude reports for an exception whose value is null.
const thrownNull = "uncaught exception: null"

func isInterrupt(err error) bool {
	var e *quickjs.Error
	return errors.As(err, &e) && e.Name == "InternalError" && e.Message == "interrupted"
}

// Stack traces are cut to what helps: the run's own frames, not the prelude's.
const (
	maxStackLines = 40
	maxStackBytes = 4 << 10
)

func cleanStack(stack string) string {
	var kept []string
	lines := strings.Split(strings.TrimRight(stack, "\n"), "\n")
	for i, l := range lines {
		if preludeFrame(lines, i) {
			continue
		}
		if len(kept) == maxStackLines {
			kept = append(kept, fmt.Sprintf("    ... %d more frames", len(lines)-maxStackLines))
			break
		}
		kept = append(kept, l)
	}
	s := strings.Join(kept, "\n")
	if len(s) <= maxStackBytes {
		return s
	}
	cut := maxStackBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "\n    ..."
}

// preludeFrame reports whether the i-th line of a stack is a prelude frame, or the native call
// a prelude guard makes to the builtin it guards (or empty).
func preludeFrame(lines []string, i int) bool {
	l := lines[i]
	return l == "" || strings.Contains(l, "<eval>") ||
		strings.HasSuffix(l, "(native)") && i+1 < len(lines) && strings.Contains(lines[i+1], "<eval>")
}
