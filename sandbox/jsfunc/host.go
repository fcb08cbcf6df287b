package jsfunc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/sandbox"
	"github.com/quiverhq/quiver/thread"
)

// What state reaches in the host: the sandbox's host functions (sandbox.Options.Host), which
// the entry wraps into state's methods. Each gets the call's context (its values: the call,
// its thread, the runtime's parent notifier) with the run's deadline.

// callInfo is what the entry builds state.execution and state.threadId from.
func callInfo(ctx context.Context) map[string]any {
	e, _ := quiver.ExecutionFrom(ctx)
	callID := e.CallID
	if callID == "" {
		if c := quiver.CallFrom(ctx); c != nil {
			callID = c.ID
		}
	}
	orNull := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	return map[string]any{"stepCount": e.StepCount, "currentSide": orNull(e.Side), "callId": orNull(callID),
		"attempt": e.Attempt, "threadId": orNull(quiver.ScopeFrom(ctx).ThreadID)}
}

// aborted is state.execution.aborted: whether the call's run was stopped. The sandbox ends
// the host context only once the run is terminated.
func aborted(ctx context.Context, _ sandbox.HostCall) (any, error) {
	return ctx.Err() != nil, nil
}

// notifyParent is state.notifyParent(text), through the runtime's thread.ParentNotifier.
func notifyParent(ctx context.Context, c sandbox.HostCall) (any, error) {
	var text string
	if json.Unmarshal(c.Arg, &text) != nil {
		return nil, fmt.Errorf("state.notifyParent takes a text (a string), got %s", kind(c.Arg))
	}
	if err := thread.NotifyParent(ctx, text); err != nil {
		return nil, fmt.Errorf("state.notifyParent: %w", err)
	}
	return nil, nil
}

// readState is state.readState(): the state the call reads, as thread.CallState gives a Go
// tool.
func readState(ctx context.Context, _ sandbox.HostCall) (any, error) {
	st, err := thread.CallState(ctx)
	if err != nil {
		return nil, fmt.Errorf("state.readState: %w", err)
	}
	return st, nil
}

// runCodeOptions are state.runCode's options.
type runCodeOptions struct {
	Language         sandbox.Language           `json:"language"`
	Args             json.RawMessage            `json:"args"`
	Entry            string                     `json:"entry"`
	Modules          map[string]string          `json:"modules"`
	Imports          map[string]json.RawMessage `json:"imports"`
	Globals          map[string]json.RawMessage `json:"globals"`
	TimeoutMS        int64                      `json:"timeoutMs"`
	MemoryLimitBytes int64                      `json:"memoryLimitBytes"`
}

const runCodeOptionNames = "language, args, entry, modules, imports, globals, timeoutMs, memoryLimitBytes"

// runCodeResult is what state.runCode resolves to: the nested run's sandbox.Result.
type runCodeResult struct {
	Status        sandbox.Status     `json:"status"`
	Value         json.RawMessage    `json:"value,omitempty"`
	ErrorName     string             `json:"errorName,omitempty"`
	ErrorMessage  string             `json:"errorMessage,omitempty"`
	Stack         string             `json:"stack,omitempty"`
	Logs          []sandbox.LogEntry `json:"logs"`
	LogsTruncated bool               `json:"logsTruncated"`
	DurationMS    float64            `json:"durationMs"`
}

// minNestedTime is the least time left that a nested run is started with.
const minNestedTime = 10 * time.Millisecond

// runCode is state.runCode(code, options): the code runs in a fresh sandbox of its own, with
// no state (so no runCode of its own: runs nest one deep), within what the call has left: its
// deadline at the latest, and the memory its interpreter leaves free (so the two interpreters
// together stay within the tool's limit).
func (f *function) runCode(ctx context.Context, c sandbox.HostCall) (any, error) {
	var in struct {
		Code    *string         `json:"code"`
		Options json.RawMessage `json:"options"`
	}
	if err := json.Unmarshal(c.Arg, &in); err != nil || in.Code == nil {
		return nil, errors.New("state.runCode(code, options): code must be a string (an ES module)")
	}
	var o runCodeOptions
	if len(in.Options) > 0 && string(in.Options) != "null" {
		dec := json.NewDecoder(bytes.NewReader(in.Options))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return nil, fmt.Errorf("state.runCode: options: %v (the options are %s)", err, runCodeOptionNames)
		}
	}
	deadline, _ := ctx.Deadline()
	left := time.Until(deadline)
	if deadline.IsZero() || left < minNestedTime {
		// The call is about to be stopped: wait for it, so that it ends as every call past
		// its time limit does, whatever the code would make of an error.
		select {
		case <-ctx.Done():
		case <-time.After(max(left, 0) + time.Second):
		}
		return nil, fmt.Errorf("state.runCode: the call has no time left for another run (its limit is %s)", f.limits.Timeout)
	}
	timeout := left
	if o.TimeoutMS < 0 || o.MemoryLimitBytes < 0 {
		return nil, errors.New("state.runCode: timeoutMs and memoryLimitBytes must not be negative")
	}
	if o.TimeoutMS > 0 {
		timeout = min(timeout, time.Duration(o.TimeoutMS)*time.Millisecond)
	}
	memory := c.MemoryFree
	if o.MemoryLimitBytes > 0 {
		memory = min(memory, o.MemoryLimitBytes)
	}
	if memory < sandbox.MinMemoryLimit {
		return nil, fmt.Errorf("state.runCode: %d bytes are left of the tool's memory limit of %d bytes; a run needs at least %d",
			c.MemoryFree, f.limits.MemoryLimit, sandbox.MinMemoryLimit)
	}
	opts := sandbox.Options{
		Source: *in.Code, Language: o.Language, Modules: o.Modules,
		Execute: sandbox.Execute{Fn: o.Entry},
		Timeout: timeout, MemoryLimit: memory,
		MaxOutputBytes: f.limits.MaxOutputBytes, MaxLogBytes: f.limits.MaxLogBytes,
		Now: time.Now(),
	}
	if len(o.Args) > 0 {
		opts.Execute.Args = []any{o.Args}
	}
	if len(o.Imports) > 0 {
		opts.Imports = make(map[string]any, len(o.Imports))
		for k, v := range o.Imports {
			opts.Imports[k] = v
		}
	}
	if len(o.Globals) > 0 {
		opts.Globals = make(map[string]any, len(o.Globals))
		for k, v := range o.Globals {
			opts.Globals[k] = v
		}
	}
	res, err := sandbox.Run(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("state.runCode: %w", err)
	}
	logs := res.Logs
	if logs == nil {
		logs = []sandbox.LogEntry{}
	}
	return runCodeResult{Status: res.Status, Value: res.Value, ErrorName: res.ErrorName, ErrorMessage: res.ErrorMessage,
		Stack: res.Stack, Logs: logs, LogsTruncated: res.LogsTruncated,
		DurationMS: float64(res.Duration.Microseconds()) / 1000}, nil
}
