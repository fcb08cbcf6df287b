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
	// Spend is asked before each model request of the run: nil lets it go, and charge is
	// called once it has ended with what it used (nil when it failed); a Budget stops the run
	// before the request, paused with ReasonBudgetExhausted until the budget has room again
	// (Budget.RetryAt, when the runner's Background can run a thread later), or until the
	// thread is resumed.
	Spend func(ctx context.Context, model string) (charge func(context.Context, *model.Usage), exhausted *Budget)
	// UserTokens gives the run's calls its caller's tokens at providers (quiver.UserToken).
	UserTokens quiver.UserTokens
	// Unconnected says, for a call of a tool that acts as its caller at providers
	// (Spec.Connections), the first connection the caller has not made: the run pauses
	// (ReasonAuthorization) until they make it. nil: every one is made.
	Unconnected func(ctx context.Context, t *quiver.Tool) (*Authorization, error)
}

// Authorization is a connection a paused call waits for its person to make (Pending).
type Authorization struct {
	Provider string   `json:"provider" doc:"The provider to connect."`
	Scopes   []string `json:"scopes,omitempty" doc:"The scopes the call needs."`
	// URL is where the person connects it.
	URL string `json:"url,omitempty" doc:"Where the person connects it: the console's connections page."`
}

// Budget is a bound on the model requests of a run's caller that is reached: the run stops
// before its next request (Outcome.Budget).
type Budget struct {
	// Limit names the bound.
	Limit string `json:"limit" doc:"The limit whose bound is reached."`
	// Message says which bound and when it has room again, in words safe to show.
	Message string `json:"message" doc:"Which bound is reached and when it has room again."`
	// RetryAt is when the bound has room again: the run goes on then.
	RetryAt time.Time `json:"retry_at" doc:"When the bound has room again: the run goes on by itself then, or when an admin raises the limit."`
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
