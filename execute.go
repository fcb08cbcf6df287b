package quiver

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/quiverhq/quiver/schema"
)

// execute runs the tool's code, or returns the model's output for a latent tool.
func (d *Dispatcher) execute(ctx context.Context, c *Call) *Result {
	t := c.tool
	if t.spec.Target == TargetClient {
		return Errorf(CodeClientTool, "tool %s runs in the client; the run waits for the client to post its result", c.Name)
	}
	if ctx.Err() != nil {
		// Cancelled while waiting for confirmation or variables: do not start the work.
		return notStarted(ctx, c)
	}
	if c.delegation != nil {
		return d.Delegator.Delegate(ctx, c, c.delegation)
	}
	fn, err := d.registry().activity(t)
	if err != nil {
		return Errorf(CodeToolError, "tool %s cannot run: %v", c.Name, err)
	}
	if fn == nil {
		return latentResult(c)
	}
	timeout := t.spec.Timeout
	if timeout == 0 {
		timeout = d.Timeout
	}
	if timeout == 0 && ctx.Done() == nil {
		// Nothing can cancel this call: run it on the caller's goroutine.
		return d.run(ctx, c, fn)
	}
	return d.runGuarded(ctx, c, fn, timeout)
}

func latentResult(c *Call) *Result {
	if len(c.Output) == 0 || string(c.Output) == "null" {
		return Errorf(CodeInvalidArguments, "tool %s has no code: you execute it yourself by putting its result in %s", c.Name, schema.OutputField)
	}
	if c.tool.declaresOutput() {
		out, err := c.tool.outputSchema()
		var v any
		if err == nil {
			v, err = schema.Decode(c.Output)
		}
		if err == nil {
			err = out.Validate(v)
		}
		if err != nil {
			return Errorf(CodeInvalidOutput, "%s of %s does not match the tool's output schema: %v", schema.OutputField, c.Name, err)
		}
	}
	c.outputChecked = true
	return &Result{Status: StatusSuccess, Value: c.Output}
}

// run calls fn, turning a panic into an error result whose stack stays out of the model's text.
func (d *Dispatcher) run(ctx context.Context, c *Call, fn ToolFunc) (r *Result) {
	defer func() {
		if p := recover(); p != nil {
			r = &Result{Status: StatusError, Code: CodePanic,
				Error: fmt.Sprintf("tool %s failed with an internal error (panic: %v)", c.Name, p),
				Stack: string(debug.Stack())}
		}
	}()
	return normalize(fn(ctx, c.Args))
}

// runGuarded runs fn on its own goroutine so that a timeout or cancellation can end the call
// even if the handler ignores its context. After Grace the handler is abandoned: its goroutine
// runs on until it returns (Go cannot stop it) but its result is discarded.
func (d *Dispatcher) runGuarded(parent context.Context, c *Call, fn ToolFunc, timeout time.Duration) *Result {
	ctx, cancel := parent, context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(parent, timeout)
	}
	defer cancel()
	done := make(chan *Result, 1)
	go func() { done <- d.run(ctx, c, fn) }()
	select {
	case r := <-done:
		return settle(parent, ctx, c, r, timeout)
	case <-ctx.Done():
	}
	grace := d.Grace
	if grace <= 0 {
		grace = defaultGrace
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case r := <-done:
		return settle(parent, ctx, c, r, timeout)
	case <-timer.C:
		r := stopped(parent, c, timeout)
		r.Error += fmt.Sprintf("; it did not stop within %s and was abandoned", grace)
		return r
	}
}

// settle decides the result of a handler that returned. If its context had ended and it
// failed, the failure is reported as the timeout or cancellation it most likely is; a success
// stands, since the work was done.
func settle(parent, ctx context.Context, c *Call, r *Result, timeout time.Duration) *Result {
	if ctx.Err() == nil || !r.IsError() {
		return r
	}
	return stopped(parent, c, timeout)
}

// notStarted is the result of a call whose context ended before its tool started; the call
// is not recorded (see Dispatch).
func notStarted(ctx context.Context, c *Call) *Result {
	c.notStarted = true
	return stopped(ctx, c, 0)
}

// stopped is the result of a call whose context ended: the caller's cancellation or deadline,
// or the tool's own timeout.
func stopped(parent context.Context, c *Call, timeout time.Duration) *Result {
	switch {
	case errors.Is(parent.Err(), context.Canceled):
		return Errorf(CodeCancelled, "tool %s was cancelled", c.Name)
	case parent.Err() != nil:
		return Errorf(CodeTimeout, "tool %s ran past the caller's deadline", c.Name)
	default:
		return Errorf(CodeTimeout, "tool %s timed out after %s", c.Name, timeout)
	}
}
