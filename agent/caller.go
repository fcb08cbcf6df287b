package agent

import (
	"context"
	"encoding/json"

	"github.com/quiverhq/quiver"
)

// A run is entitled as its caller: whoever started it at a door (a key, a token's user), as
// the platform encodes them, which this package keeps and passes on without reading. The
// caller comes with the run's context (WithCaller) when a door starts it, else from the
// thread (ThreadState.Caller: a run resumed after a decision or a restart continues its
// caller's run), else, for a child, from its parent (Spawn.Caller). Runner.Entitlements says
// what the caller may call, for every agent of the run's chain: a sub-agent is limited to its
// parent's entitlements too.

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

// entitled is the run's dispatcher's Entitled (see quiver.Dispatcher.Entitled): what the run's
// caller may call as the agents of its chain; nil when the runner has no Entitlements.
func (r *Runner) entitled(ctx context.Context, rs *run) func(context.Context) func(*quiver.Tool) bool {
	if r.Entitlements == nil {
		return nil
	}
	chain, _ := rs.spawnInfo()
	return r.Entitlements(ctx, rs.th.WorkspaceID(), rs.caller, chain)
}

// admit is the run's dispatcher's Admit (see quiver.Dispatcher.Admit): the run's calls counted
// against its workspace's limits for its caller, as the agents of its chain; nil when the
// runner has no Limits.
func (r *Runner) admit(ctx context.Context, rs *run) func(context.Context, *quiver.Tool) (func(), *quiver.Result) {
	if r.Limits == nil {
		return nil
	}
	chain, _ := rs.spawnInfo()
	return r.Limits(ctx, rs.th.WorkspaceID(), rs.caller, chain)
}
