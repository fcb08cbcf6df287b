package quiver

import (
	"context"
	"errors"
)

// Scope identifies who a call runs for.
type Scope struct {
	AgentID     string `json:"agent_id,omitempty"`
	UserID      string `json:"user_id,omitempty"`
	WorkspaceID string `json:"workspace_id,omitempty"`
	ThreadID    string `json:"thread_id,omitempty"`
}

// Execution is the state of the run a call belongs to.
type Execution struct {
	// StepCount is the number of model steps taken so far in the run.
	StepCount int `json:"step_count"`
	// Side is the participant whose turn it is in a dual-AI agent (side_a or side_b).
	Side string `json:"side,omitempty"`
	// CallID is the id of the call being executed: stable across every attempt at it, so a
	// tool with external side effects can use it as an idempotency key.
	CallID string `json:"call_id,omitempty"`
	// Attempt counts the executions of the call, from 1. Attempt 1 means no earlier
	// execution of it can have started; a higher number means one may have (a process died
	// while the call ran, before its result was stored), so the tool should check, by
	// CallID, whether its effect already happened.
	Attempt int `json:"attempt,omitempty"`
}

type (
	scopeKey     struct{}
	executionKey struct{}
	callKey      struct{}
	doorKey      struct{}
)

// Door is the way a call comes in, as metrics name it (WithDoor).
type Door string

// The doors of Quiver's own; a program may name others.
const (
	DoorCode  Door = "code" // a Go program calling the dispatcher: the default
	DoorAgent Door = "agent"
	DoorMCP   Door = "mcp"
	DoorCLI   Door = "cli"
	DoorHTTP  Door = "http"
)

// WithDoor returns a context whose calls are counted as coming in by door in the
// dispatcher's metrics.
func WithDoor(ctx context.Context, door Door) context.Context {
	return context.WithValue(ctx, doorKey{}, door)
}

// DoorFrom returns the door in ctx, DoorCode if none.
func DoorFrom(ctx context.Context) Door {
	if d, ok := ctx.Value(doorKey{}).(Door); ok {
		return d
	}
	return DoorCode
}

// WithScope returns a context carrying scope, which the dispatcher hands to handlers and uses
// to resolve variables.
func WithScope(ctx context.Context, s Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, s)
}

// ScopeFrom returns the scope in ctx (the zero Scope if none).
func ScopeFrom(ctx context.Context) Scope {
	s, _ := ctx.Value(scopeKey{}).(Scope)
	return s
}

// WithExecution returns a context carrying the execution state of the run.
func WithExecution(ctx context.Context, e Execution) context.Context {
	return context.WithValue(ctx, executionKey{}, e)
}

// ExecutionFrom returns the execution state in ctx, and false outside a run.
func ExecutionFrom(ctx context.Context) (Execution, bool) {
	e, ok := ctx.Value(executionKey{}).(Execution)
	return e, ok
}

type handBackKey struct{}

// WithHandBack marks ctx as a run's whose end, when it comes by cancellation, hands the run to
// another process rather than ending it: a node shutting down, or losing the run's lease. A
// call whose context ends that way is not recorded as cancelled: its record would end it for
// good, where the run, resumed elsewhere, must run it again (as after a crash).
func WithHandBack(ctx context.Context) context.Context {
	return context.WithValue(ctx, handBackKey{}, true)
}

// handedBack reports whether ctx is a run's that was cancelled to hand it on (see
// WithHandBack).
func handedBack(ctx context.Context) bool {
	hb, _ := ctx.Value(handBackKey{}).(bool)
	return hb && errors.Is(ctx.Err(), context.Canceled)
}

// CallFrom returns the call a handler is executing, or nil outside the dispatcher.
func CallFrom(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// Var returns the value of one of the running tool's declared variables. Only variables the
// tool declares are visible to it, secrets included (they are masked in what it returns).
func Var(ctx context.Context, name string) (string, bool) {
	c := CallFrom(ctx)
	if c == nil {
		return "", false
	}
	v, ok := c.vars[name]
	return v, ok
}
