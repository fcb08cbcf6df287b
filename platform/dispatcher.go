package platform

import (
	"context"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/store"
)

// Every door (the API, MCP over HTTP or stdio, the CLI's quiver call) calls a workspace's tools
// through the one dispatcher the platform keeps for that workspace, so that policy,
// confirmation, variables, the caller's role, result limits and recording are the same
// whichever door a call takes. A door adds what is its own through the call's context: who
// calls (WithActor), where the call is recorded (CallThread, quiver.WithScope), who is asked to
// confirm a call (WithConfirm; over MCP, the client's user: mcp.Confirm reads the request).

// Dispatcher is the workspace's dispatcher, made on first use with the platform's settings:
// its tools (Registry), Config.Policy and Config.MaxResultBytes, the platform's variables, and
// its Recorder (through the journal, after OpenJournal). A call that needs confirmation is put
// to the door's Confirmer (WithConfirm), else, when it came over MCP, to the client's user
// (mcp.Confirm), else it pauses. A call whose context carries an actor who may only read is
// refused (WithActor). _delegate runs its request as a run would when the background runs were
// started before the dispatcher was made, and is refused otherwise.
func (w *Workspace) Dispatcher() *quiver.Dispatcher {
	w.dispatcherOnce.Do(func() { w.dispatcher = w.p.newDispatcher(w) })
	return w.dispatcher
}

// newDispatcher builds a workspace's dispatcher (see Workspace.Dispatcher).
func (p *Platform) newDispatcher(w *Workspace) *quiver.Dispatcher {
	p.dispatching.Store(true)
	d := &quiver.Dispatcher{
		Registry: w.registry,
		Policy:   p.cfg.Policy,
		Resolver: p.VariableResolver(),
		Confirm:  confirm,
		// What a tool returns is cut to this before it is answered or stored.
		MaxResultBytes: p.cfg.MaxResultBytes,
		Recorder:       &Recorder{Store: p.cfg.Store, Journal: p.journal.Load()},
		Middleware:     []quiver.Middleware{actorMayCall, w.withUserTokens},
		Entitled:       w.entitled,
		Admit:          w.admit,
	}
	if p.usage != nil {
		d.Observe = w.observe
	}
	if p.Jobs() != nil {
		// A call naming _delegate runs its request with the catalog's prompts and models,
		// under this dispatcher's policy.
		d.Delegator = callerDelegator{inner: p.runner.DoorDelegator(d), w: w}
	}
	return d
}

// callerDelegator runs a door's delegated request as its caller: the request, and the tools it
// names, are entitled as a run the caller started (agent.WithCaller) rather than as no one.
type callerDelegator struct {
	inner quiver.Delegator
	w     *Workspace
}

// Delegate implements quiver.Delegator.
func (c callerDelegator) Delegate(ctx context.Context, call *quiver.Call, d *quiver.Delegation) *quiver.Result {
	if a, ok := ActorFrom(ctx); ok && !a.unrestricted() {
		ctx = agent.WithCaller(ctx, a.runCaller(c.w))
	}
	return c.inner.Delegate(ctx, call, d)
}

type confirmKey struct{}

// WithConfirm returns ctx carrying the Confirmer a door asks about its call to a tool that
// requires confirmation (a person at a terminal, say), in place of the workspace dispatcher's
// own, without another dispatcher: the rules stay the workspace's.
func WithConfirm(ctx context.Context, c quiver.Confirmer) context.Context {
	return context.WithValue(ctx, confirmKey{}, c)
}

// mcpConfirm puts a call that came over MCP to the client's user, and pauses any other.
var mcpConfirm = mcp.Confirm(nil)

// confirm is every workspace dispatcher's Confirm: the door's Confirmer (WithConfirm), else
// mcpConfirm.
func confirm(ctx context.Context, c *quiver.Call) (quiver.Decision, error) {
	if door, _ := ctx.Value(confirmKey{}).(quiver.Confirmer); door != nil {
		return door(ctx, c)
	}
	return mcpConfirm(ctx, c)
}

type actorKey struct{}

// WithActor returns ctx carrying the actor a door's call is made for: a workspace's
// dispatcher refuses the call when the actor may only read, and the MCP door reads threads'
// files and makes a session's thread as the actor.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor ctx carries (see WithActor).
func ActorFrom(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// actorMayCall refuses a call whose actor may only read (a viewer's key): the dispatcher's
// error result says so, and nothing runs. A call without an actor is a door's that
// authenticates no one (the CLI on its own database, MCP over stdio).
func actorMayCall(next quiver.Handler) quiver.Handler {
	return func(ctx context.Context, c *quiver.Call) *quiver.Result {
		if a, ok := ActorFrom(ctx); ok && !a.Role.Allows(store.KeyRoleMember) {
			return quiver.Errorf(quiver.CodePolicyDenied, "%s is a viewer's: it may list the tools but not call them", a.who())
		}
		return next(ctx, c)
	}
}

// CallThread is where a call the actor makes at a door is recorded: on threadID, a thread of
// the actor's workspace, or, when it is "", on a new thread of the actor's user tagged with
// tags (the door's: "api", "cli", "mcp"), so that every call is in a thread's history
// whichever door it came through. It checks no role: the API refuses a viewer's call before
// making its thread (CallScope), while a viewer's MCP session gets its thread as any other.
func (p *Platform) CallThread(ctx context.Context, a Actor, threadID string, tags ...string) (quiver.Scope, error) {
	scope := quiver.Scope{WorkspaceID: a.WorkspaceID, UserID: a.UserID, ThreadID: threadID}
	if threadID != "" {
		if _, err := p.cfg.Store.Thread(ctx, a.WorkspaceID, threadID); err != nil {
			return quiver.Scope{}, storeError(err, "thread "+threadID, "")
		}
		return scope, nil
	}
	th := &store.Thread{WorkspaceID: a.WorkspaceID, UserID: a.UserID, Tags: tags}
	if err := p.cfg.Store.CreateThread(ctx, th); err != nil {
		return quiver.Scope{}, storeError(err, "a thread for the call", "")
	}
	scope.ThreadID = th.ID
	return scope, nil
}
