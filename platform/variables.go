package platform

import (
	"context"
	"errors"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/vars"
)

// The values of variables set on a layer's owner: a thread of the workspace, an agent the
// platform runs, or a member. Any key of the workspace reads them (secrets without their
// value); members set and remove them; a user's values are the user's own keys' or an admin's.

// Owner is whose values an operation reads or writes: the thread (store.LayerThread, its
// id), the agent (store.LayerAgent, its name) or the member (store.LayerUser, the user's id).
type Owner struct {
	Layer store.VariableLayer
	ID    string
}

// NewValue is a value to set.
type NewValue struct {
	Name   string
	Value  string
	Secret bool // sealed at rest, never shown again
	Scoped bool // flows down to the thread's descendants (a thread's values only)
}

// owner checks that o is there for the actor to verb (read, set, remove), and says how to
// name it in refusals.
func (p *Platform) owner(ctx context.Context, a Actor, o Owner, verb string) (string, error) {
	switch o.Layer {
	case store.LayerThread:
		if err := checkID("id", store.PrefixThread, o.ID); err != nil {
			return "", err
		}
		if _, err := p.cfg.Store.Thread(ctx, a.WorkspaceID, o.ID); err != nil {
			return "", storeError(err, "thread "+o.ID, "")
		}
		return "thread " + o.ID, nil
	case store.LayerAgent:
		if !p.HasAgents() && p.Jobs() == nil {
			return "", &Error{Kind: Unavailable, Message: "this server runs no agents (quiver serve --agents DIR)"}
		}
		if _, err := p.Agent(ctx, o.ID); err != nil {
			// The catalog's words list its agents; the refusal names only the one asked for.
			return "", fail(NotFound, "agent", "this server runs no agent "+quoteShort(o.ID))
		}
		return "agent " + o.ID, nil
	case store.LayerUser:
		return "user " + o.ID, p.checkUserOwner(ctx, a, o.ID, verb)
	}
	return "", &Error{Kind: Invalid, Message: "no variables are set on layer " + quoteShort(string(o.Layer))}
}

// checkUserOwner checks a member whose values the actor reads or changes: its own user, or any
// member for an admin. Whether the user exists is said only to an actor that may act on it.
func (p *Platform) checkUserOwner(ctx context.Context, a Actor, id, verb string) error {
	if err := checkID("id", store.PrefixUser, id); err != nil {
		return err
	}
	if a.UserID != id {
		if err := a.mayAdminister(verb + " its own user's variables, not another member's"); err != nil {
			return err
		}
	}
	if _, err := p.cfg.Store.Member(ctx, a.WorkspaceID, id); errors.Is(err, store.ErrNotFound) {
		return fail(NotFound, "id", "user "+id+" is not a member of this workspace")
	} else if err != nil {
		return storeError(err, "member "+id, "")
	}
	return nil
}

// Variables lists the values set on the owner (not those it inherits), secrets sealed.
func (p *Platform) Variables(ctx context.Context, a Actor, o Owner) ([]*store.Variable, error) {
	what, err := p.owner(ctx, a, o, "read")
	if err != nil {
		return nil, err
	}
	stored, err := p.cfg.Store.Variables(ctx, a.WorkspaceID, o.Layer, o.ID)
	if err != nil {
		return nil, storeError(err, "the variables of "+what, "")
	}
	return stored, nil
}

// SetVariable sets a value on the owner (a member's or admin's); a secret is sealed with the
// resolver's keys. It returns the value as stored.
func (p *Platform) SetVariable(ctx context.Context, a Actor, o Owner, v NewValue) (*store.Variable, error) {
	if err := a.mayChange("read variables but not set them"); err != nil {
		return nil, err
	}
	what, err := p.owner(ctx, a, o, "set")
	if err != nil {
		return nil, err
	}
	if v.Scoped && o.Layer != store.LayerThread {
		return nil, invalid("scoped", "only a thread's values can be scoped: leave it out (or false)")
	}
	r := &vars.Resolver{Threads: p.cfg.Store, Values: p.cfg.Store}
	if p.cfg.Resolver != nil {
		r.Keys = p.cfg.Resolver.Keys
	}
	if v.Secret && r.Keys == nil {
		return nil, &Error{Kind: Unavailable, Message: "this server has no key to encrypt secrets with (quiver serve has one); the secret was not stored"}
	}
	value := vars.Value{Name: v.Name, Value: v.Value, Secret: v.Secret, Scoped: v.Scoped}
	if err := r.Set(ctx, a.WorkspaceID, quiver.Layer(o.Layer), o.ID, value); err != nil {
		return nil, storeError(err, "variable "+v.Name+" of "+what, "")
	}
	stored, err := p.cfg.Store.Variables(ctx, a.WorkspaceID, o.Layer, o.ID)
	if err != nil {
		return nil, storeError(err, "the variables of "+what, "")
	}
	for _, s := range stored {
		if s.Name == v.Name {
			return s, nil
		}
	}
	// Removed by another request between the two; what was set is still the answer.
	return &store.Variable{Name: v.Name, Value: v.Value, Secret: v.Secret, Scoped: v.Scoped, UpdatedAt: stamp.Now(ctx)}, nil
}

// DeleteVariable removes a value from the owner (a member's or admin's).
func (p *Platform) DeleteVariable(ctx context.Context, a Actor, o Owner, name string) error {
	if err := a.mayChange("read variables but not remove them"); err != nil {
		return err
	}
	what, err := p.owner(ctx, a, o, "remove")
	if err != nil {
		return err
	}
	err = p.cfg.Store.DeleteVariable(ctx, a.WorkspaceID, o.Layer, o.ID, name)
	if errors.Is(err, store.ErrNotFound) {
		return fail(NotFound, "name", what+" has no variable "+name)
	}
	if err != nil {
		return storeError(err, "variable "+name+" of "+what, "")
	}
	return nil
}
