package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/model"
)

// A run is entitled as its caller: whoever started it at a door (a key, a token's user), as
// the platform encodes them, which this package keeps and passes on without reading. The
// caller comes with the run's context (WithCaller) when a door starts it, else from the
// thread (ThreadState.Caller: a run resumed after a decision or a restart continues its
// caller's run), else, for a child, from its parent (Spawn.Caller). Runner.Rules says what the
// caller may call and how often, for every agent of the run's chain (a sub-agent is limited to
// its parent's entitlements too), and meters what the run uses.

// CallerRules are what a platform decides for a run's caller (Runner.Rules). Each may be nil.
type CallerRules struct {
	// Entitled is the run's dispatcher's Entitled (see quiver.Dispatcher.Entitled): what the
	// run's caller may call as the agents of its chain. The model is offered only what it
	// allows, and a call of anything else is refused as not_entitled.
	Entitled func(context.Context) func(*quiver.Tool) bool
	// Admit is the run's dispatcher's Admit (see quiver.Dispatcher.Admit): the run's calls
	// counted against its workspace's limits. A call over a limit is answered with its
	// refusal, which the model reads.
	Admit func(context.Context, *quiver.Tool) (func(), *quiver.Result)
	// Observe is the run's dispatcher's Observe (see quiver.Dispatcher.Observe): the run's
	// calls metered as its caller's.
	Observe func(context.Context, *quiver.Call, *quiver.Result, time.Duration)
	// Request is told of each model request of the run once it has ended: the model's name
	// ("provider:model"), what it used (nil when it failed), how long it took and its error.
	Request func(ctx context.Context, model string, usage *model.Usage, took time.Duration, err error)
}

type callerKey struct{}

// WithCaller returns ctx carrying the caller a run started at a door is entitled as.
func WithCaller(ctx context.Context, caller json.RawMessage) context.Context {
	if len(caller) == 0 {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, caller)
}

// CallerFrom returns the caller ctx carries (see WithCaller); nil when none.
func CallerFrom(ctx context.Context) json.RawMessage {
	c, _ := ctx.Value(callerKey{}).(json.RawMessage)
	return c
}

// callerOf is the caller a run on a thread in state st is entitled as.
func callerOf(ctx context.Context, st *ThreadState) json.RawMessage {
	if c := CallerFrom(ctx); c != nil {
		return c
	}
	if st.Caller != nil {
		return st.Caller
	}
	if st.Spawn != nil {
		return st.Spawn.Caller
	}
	return nil
}

// rules are what the runner's Rules decide for the run's caller; none without Rules.
func (r *Runner) rules(ctx context.Context, rs *run) CallerRules {
	if r.Rules == nil {
		return CallerRules{}
	}
	chain, _ := rs.spawnInfo()
	return r.Rules(ctx, rs.th.WorkspaceID(), rs.caller, chain)
}
