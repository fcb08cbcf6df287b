package quiver

import "context"

// Idempotency keys. Quiver executes a call at least once: a process that dies while a tool
// runs, before the call's result is stored, leaves the call without a result, and the run
// that resumes the thread executes it again. A tool whose effect must happen once (a payment,
// an email, an append) makes that safe by keying the effect on the call: every execution sees
// the call's stable id and its attempt number in [ExecutionFrom] (Execution.CallID and
// Execution.Attempt), and a remote MCP tool in its request's _meta. Attempt 1 promises that no
// earlier execution of the call can have started, so a tool checks whether its effect already
// happened only from attempt 2 on.
//
// Who numbers the attempts: a run of the agent package, which alone executes a call again (it
// passes the call's id and attempt in the context, see callExecution). Every other call is
// executed once by Quiver: a door's (the /v1 API, MCP tools/call, quiver call, a Go program)
// is attempt 1, since a client that tries again makes a new call with a new id.

// callContext is the context a call's handler runs in: the caller's, with the call (CallFrom)
// and the call's execution state (ExecutionFrom) answered from the call itself. One value
// instead of two context.WithValue layers: the execution costs a call no allocation unless a
// handler asks for it.
type callContext struct {
	context.Context
	call *Call
}

// Value answers CallFrom and ExecutionFrom for the call; every other key is the caller's.
func (x *callContext) Value(key any) any {
	switch key.(type) {
	case callKey:
		return x.call
	case executionKey:
		return x.call.exec
	}
	return x.Context.Value(key)
}

// callExecution is the execution state the handler of c sees: the run's (step count, side)
// from ctx, and c's own id and attempt number. The attempt is the one ctx names for c when it
// names c (a resumed run executing a call again says which attempt this is); a call made from
// inside another call's handler has that call's attempt (each attempt of the outer call makes
// it again, so an earlier one may have made it too); any other call is attempt 1.
func callExecution(ctx context.Context, c *Call) Execution {
	e, _ := ExecutionFrom(ctx)
	if c.ID != "" && e.CallID == c.ID && e.Attempt > 0 {
		return e
	}
	e.CallID, e.Attempt = c.ID, 1
	if outer := CallFrom(ctx); outer != nil && outer.exec.Attempt > 1 {
		e.Attempt = outer.exec.Attempt
	}
	return e
}
