package platform

import (
	"context"
	"encoding/json"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/platform/usage"
	"github.com/quiverhq/quiver/store"
)

// What a workspace's callers use is metered at every call and model request, whichever door
// or run they came through (the workspace dispatcher's Observe, the runner's CallerRules),
// by the platform's usage.Meter, which adds it to the store every few seconds; Usage reads it
// back on any node. A store that keeps no usage (store.Usage) meters nothing.

// unknownTool is the tool a call of a name the workspace has no tool of is counted under: the
// names callers make up must not each become a row.
const unknownTool = "(unknown)"

// newUsage is the platform's usage meter, started; nil when the store keeps no usage.
func newUsage(st store.Backend, cfg *Config) *usage.Meter {
	us, ok := st.(store.Usage)
	if !ok {
		return nil
	}
	m := &usage.Meter{Store: us, Every: cfg.UsageEvery, Now: cfg.Now, Logger: cfg.Logger}
	m.Start()
	return m
}

// refusals are the codes of calls refused before they ran.
var refusals = map[quiver.Code]bool{quiver.CodeNotEntitled: true, quiver.CodeRateLimited: true, quiver.CodeQuotaExhausted: true,
	quiver.CodePolicyDenied: true}

// outcome is how usage counts a call that ended with r: a pause for a decision or a client's
// result is not an error.
func outcome(r *quiver.Result) usage.Outcome {
	switch {
	case !r.IsError() || r.Code == quiver.CodeConfirmationRequired || r.Code == quiver.CodeClientTool:
		return usage.OK
	case refusals[r.Code]:
		return usage.Refused
	}
	return usage.Error
}

// dims are the dimensions a call or request by ctx's actor is counted by.
func dims(ctx context.Context) usage.Dims {
	a, ok := ActorFrom(ctx)
	if !ok {
		return usage.Dims{}
	}
	d := usage.Dims{Key: a.KeyID, User: a.UserID}
	if n := len(a.Agents); n > 0 {
		d.Agent = a.Agents[n-1]
	}
	return d
}

// observe is every workspace dispatcher's Observe: the call counted for its actor.
func (w *Workspace) observe(ctx context.Context, c *quiver.Call, r *quiver.Result, took time.Duration) {
	d := dims(ctx)
	d.Tool = w.toolName(c)
	w.p.usage.Call(w.id, d, outcome(r), took)
}

// toolName is the name a call is counted under: its tool's, or unknownTool for a name the
// workspace has no tool of.
func (w *Workspace) toolName(c *quiver.Call) string {
	if c.Tool() != nil {
		return c.Name
	}
	if _, ok := w.registry.Lookup(c.Name); ok {
		return c.Name // a tool the caller may not call, refused before lookup
	}
	return unknownTool
}

// request counts a model request of a run by ctx's actor, priced by the workspace's table.
func (w *Workspace) request(ctx context.Context, modelName string, u *model.Usage, _ time.Duration, err error) {
	d := dims(ctx)
	d.Model = modelName
	var in, out int64
	if u != nil && err == nil {
		in, out = u.InputTokens, u.OutputTokens
	}
	w.p.usage.Request(w.id, d, in, out, w.limitsOf().CostMicros(modelName, in, out))
}

// runRules are the runner's Rules: a run's caller, decoded once per run, as the agents of its
// chain (see runEntitlements). Its calls and model requests are limited and metered as its
// caller's; a run no door started, as its workspace's operator's (the workspace's own limits
// still hold), and so is one whose caller does not decode.
func (p *Platform) runRules(ctx context.Context, workspaceID string, raw json.RawMessage, agents []string) agent.CallerRules {
	a, known, err := p.runActor(workspaceID, raw, agents)
	if err != nil || !known {
		a = Operator(workspaceID, "")
		a.Agents = agents
	}
	w := p.Workspace(ctx, workspaceID)
	rules := agent.CallerRules{
		Entitled: p.runEntitlements(ctx, workspaceID, raw, agents),
		Admit: func(ctx context.Context, t *quiver.Tool) (func(), *quiver.Result) {
			return w.admit(WithActor(ctx, a), t)
		},
		Spend: func(ctx context.Context, name string) (func(context.Context, *model.Usage), *agent.Budget) {
			return w.spend(WithActor(ctx, a), name)
		},
	}
	if a.UserID != "" {
		rules.UserTokens, rules.Unconnected = w.tokensOf(a.UserID), w.unconnected(a.UserID)
	}
	if p.usage == nil {
		return rules
	}
	rules.Observe = func(ctx context.Context, c *quiver.Call, r *quiver.Result, took time.Duration) {
		w.observe(WithActor(ctx, a), c, r, took)
	}
	rules.Request = func(ctx context.Context, name string, u *model.Usage, took time.Duration, err error) {
		w.request(WithActor(ctx, a), name, u, took, err)
	}
	return rules
}

// now is the platform's clock (Config.Now).
func (p *Platform) now() time.Time {
	if p.cfg.Now != nil {
		return p.cfg.Now()
	}
	return time.Now()
}

// Usage answers q over the actor's workspace (admins only: it shows every caller's use).
// What this process counted is written first, so that a node answers with its own calls so
// far; other nodes' arrive within their meter's period (usage.DefaultEvery).
func (p *Platform) Usage(ctx context.Context, a Actor, q usage.Query) (*usage.Answer, error) {
	if err := a.mayAdminister("call tools, not read every caller's usage"); err != nil {
		return nil, err
	}
	if p.usage == nil {
		return nil, &Error{Kind: Unavailable, Message: "this server's store keeps no usage"}
	}
	if err := p.usage.Flush(ctx); err != nil {
		p.logger.WarnContext(ctx, "platform: this node's latest usage could not be written before a usage query", "err", err)
	}
	q.WorkspaceID = a.WorkspaceID
	ans, err := usage.Read(ctx, p.usage.Store, q, p.now())
	if qe, ok := err.(*usage.QueryError); ok {
		return nil, invalid(qe.Field, qe.Message)
	}
	if err != nil {
		return nil, storeError(err, "usage", "")
	}
	return ans, nil
}
