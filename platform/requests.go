package platform

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/vars"
	"github.com/quiverhq/quiver/thread"
)

// MaxRequestValues bounds the values one ProvideVariables takes.
const MaxRequestValues = 100

// VariablesRequest returns what a deferred sub-agent of threadID (request is its thread id)
// waits for: the variables that do not resolve on its thread yet.
func (p *Platform) VariablesRequest(ctx context.Context, a Actor, threadID, request string) (*agent.DeferredChild, error) {
	parent, err := p.requestParent(ctx, a, threadID)
	if err != nil {
		return nil, err
	}
	d, err := p.runner.Deferred(ctx, parent, request)
	if err != nil {
		return nil, requestError(err, request)
	}
	// The request lists what subagent_create found missing; a value provided since (by a
	// partial ProvideVariables) is no longer outstanding.
	if d, err = p.outstanding(ctx, parent, d); err != nil {
		return nil, storeError(err, "variables request "+request, "")
	}
	return d, nil
}

// ProvideVariables stores values (by name) for the variables a deferred sub-agent of threadID
// waits for, on its thread as scoped values, secrets sealed, and starts it. Values stored but
// not enough yet are a MissingVariables refusal naming what is still missing.
func (p *Platform) ProvideVariables(ctx context.Context, a Actor, threadID, request string, values map[string]string) (*agent.DeferredChild, error) {
	if err := a.mayChange("read threads but not provide variables"); err != nil {
		return nil, err
	}
	parent, err := p.requestParent(ctx, a, threadID)
	if err != nil {
		return nil, err
	}
	d, err := p.runner.Deferred(ctx, parent, request)
	if err != nil {
		return nil, requestError(err, request)
	}
	if d.Started {
		// Started already; if a process died before its run was queued, this queues it.
		if _, err := p.runner.StartDeferred(ctx, parent, request); err != nil {
			return nil, storeError(err, "sub-agent "+request, "")
		}
		return nil, &Error{Kind: Conflict, Message: fmt.Sprintf("sub-agent %s has started already", d.RequestID)}
	}
	if err := p.storeRequested(ctx, parent, d, values); err != nil {
		return nil, err
	}
	missing, err := p.runner.StartDeferred(ctx, parent, request)
	if err != nil {
		return nil, storeError(err, "starting sub-agent "+request, "")
	}
	if len(missing) > 0 {
		names := variableNames(missing)
		return nil, &Error{Kind: MissingVariables, Field: "values", Message: "provide " + names,
			Detail: "the values given are stored, but the sub-agent still needs " + names}
	}
	if d, err = p.runner.Deferred(ctx, parent, request); err != nil {
		return nil, storeError(err, "sub-agent "+request, "")
	}
	return d, nil
}

// requestParent opens the thread of the actor's workspace whose deferred sub-agents are asked
// about.
func (p *Platform) requestParent(ctx context.Context, a Actor, threadID string) (*thread.Thread, error) {
	if p.Jobs() == nil {
		return nil, &Error{Kind: Unavailable, Message: "this server runs no agents"}
	}
	info, err := p.Thread(ctx, a, threadID)
	if err != nil {
		return nil, err
	}
	return thread.Open(ctx, p.cfg.Store, info.WorkspaceID, info.ID)
}

func requestError(err error, request string) error {
	if errors.Is(err, agent.ErrNotDeferred) {
		msg := "a request id a subagent_env_required result gave"
		return &Error{Kind: NotFound, Field: "name", Message: msg, Detail: "no variables request " + request + " on this thread", Cause: err}
	}
	return storeError(err, "variables request "+request, "")
}

// outstanding narrows a deferred child's request to the variables that do not resolve on its
// thread yet, as StartDeferred checks them; ProvideVariables still takes any name of the
// request.
func (p *Platform) outstanding(ctx context.Context, parent *thread.Thread, d *agent.DeferredChild) (*agent.DeferredChild, error) {
	a, ok := p.Catalog().Lookup(d.Agent)
	if d.Started || len(d.Missing) == 0 || p.cfg.Resolver == nil || !ok {
		return d, nil
	}
	child, err := parent.Child(ctx, d.RequestID)
	if err != nil {
		return nil, err
	}
	_, err = quiver.ResolveVariables(quiver.WithPrompt(ctx, a.Prompt.Name), p.cfg.Resolver, child.Scope(), d.Missing)
	var missing *quiver.MissingVariablesError
	out := *d
	switch {
	case errors.As(err, &missing):
		out.Missing = missing.Missing
	case err != nil:
		return nil, err
	default:
		out.Missing = nil
	}
	return &out, nil
}

// storeRequested stores the values given for a deferred child's missing variables on the
// child's thread; a name the request does not ask for is refused before anything is stored.
func (p *Platform) storeRequested(ctx context.Context, parent *thread.Thread, d *agent.DeferredChild, values map[string]string) error {
	if len(values) == 0 || len(values) > MaxRequestValues {
		return invalid("values", fmt.Sprintf("give 1 to %d values, by name", MaxRequestValues))
	}
	r := &vars.Resolver{Threads: p.cfg.Store, Values: p.cfg.Store}
	if p.cfg.Resolver != nil {
		r.Keys = p.cfg.Resolver.Keys
	}
	out := make([]vars.Value, 0, len(values))
	for _, n := range slices.Sorted(maps.Keys(values)) {
		i := slices.IndexFunc(d.Missing, func(v quiver.Variable) bool { return v.Name == n })
		if i < 0 {
			return invalid("values."+n, "not a variable this request asks for: "+variableNames(d.Missing))
		}
		secret := d.Missing[i].Type == quiver.VarSecret
		if secret && r.Keys == nil {
			return &Error{Kind: Unavailable, Message: "this server has no key to encrypt secrets with; nothing was stored"}
		}
		out = append(out, vars.Value{Name: n, Value: values[n], Secret: secret, Scoped: true})
	}
	if err := r.Set(ctx, parent.WorkspaceID(), quiver.LayerThread, d.RequestID, out...); err != nil {
		if errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrTooLarge) {
			return &Error{Kind: Invalid, Field: "values", Message: "text values within the size limit", Detail: err.Error(), Cause: err}
		}
		return storeError(err, "the variables of sub-agent "+d.RequestID, "")
	}
	return nil
}

// variableNames lists vs's names, comma-separated.
func variableNames(vs []quiver.Variable) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
	}
	return strings.Join(names, ", ")
}
