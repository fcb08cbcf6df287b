package memstore

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// varOwner is where variable values are set: a layer's owner in a workspace.
type varOwner struct {
	workspaceID string
	layer       store.VariableLayer
	ownerID     string
}

func (o varOwner) compare(p varOwner) int {
	return cmp.Or(strings.Compare(o.workspaceID, p.workspaceID), strings.Compare(string(o.layer), string(p.layer)),
		strings.Compare(o.ownerID, p.ownerID))
}

// SetVariable creates or replaces the value of name for the owner. A thread value needs a
// thread of the workspace (store.ErrNotFound otherwise); values breaking store.CheckVariable
// are store.ErrInvalid.
func (s *Store) SetVariable(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID, name, value string, secret, scoped bool) error {
	return s.SetVariables(ctx, []*store.Variable{{WorkspaceID: workspaceID, Layer: layer, OwnerID: ownerID,
		Name: name, Value: value, Secret: secret, Scoped: scoped}})
}

// SetVariables sets several values in one step: all are stored or none. It sets CreatedAt (for
// a new value; a replaced one keeps its own) and UpdatedAt of each.
func (s *Store) SetVariables(ctx context.Context, values []*store.Variable) error {
	for _, v := range values {
		if err := store.CheckVariable(v); err != nil {
			return threadOp("set variable").fail(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if v.Layer == store.LayerThread {
			op := threadOp("set variable " + v.Name + " of thread " + v.OwnerID)
			if _, err := s.th.thread(op, v.WorkspaceID, v.OwnerID); err != nil {
				return err
			}
		}
	}
	now := stamp.Now(ctx)
	for _, v := range values {
		o := varOwner{v.WorkspaceID, v.Layer, v.OwnerID}
		c := *v
		c.CreatedAt, c.UpdatedAt = now, now
		if old := s.th.vars[o][v.Name]; old != nil {
			c.CreatedAt, c.UpdatedAt = old.CreatedAt, notEarlier(now, old.UpdatedAt)
		}
		if s.th.vars[o] == nil {
			s.th.vars[o] = map[string]*store.Variable{}
		}
		s.th.vars[o][v.Name] = &c
		v.CreatedAt, v.UpdatedAt = c.CreatedAt, c.UpdatedAt
	}
	return nil
}

// DeleteVariable removes a value; store.ErrNotFound when the owner has none of that name.
func (s *Store) DeleteVariable(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := varOwner{workspaceID, layer, ownerID}
	if s.th.vars[o][name] == nil {
		return threadOp("delete variable " + name).fail(store.ErrNotFound)
	}
	delete(s.th.vars[o], name)
	if len(s.th.vars[o]) == 0 {
		delete(s.th.vars, o)
	}
	return nil
}

// Variables lists the owner's values by name (byte order), secret ones as stored (sealed).
func (s *Store) Variables(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID string) ([]*store.Variable, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.th.ownerValues(varOwner{workspaceID, layer, ownerID}, nil), nil
}

// ownerValues returns copies of the owner's values of names (nil: every name), by name.
func (d *threadData) ownerValues(o varOwner, names []string) []*store.Variable {
	out := []*store.Variable{}
	for name, v := range d.vars[o] {
		if names == nil || slices.Contains(names, name) {
			c := *v
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *store.Variable) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// LookupVariables reads, in one consistent read, every value resolution may need for a thread
// (see store.VariableQuery); store.ErrNotFound when the query names a thread the workspace does
// not have.
func (s *Store) LookupVariables(ctx context.Context, workspaceID string, q store.VariableQuery) (*store.VariableLookup, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &store.VariableLookup{}
	if q.ThreadID != "" {
		rec, err := s.th.thread("look up variables", workspaceID, q.ThreadID)
		if err != nil {
			return nil, err
		}
		// Every parent is a thread of the same workspace, created before its child: the chain
		// ends.
		for ; rec != nil; rec = s.th.threads[rec.t.ParentID] {
			out.Threads = append(out.Threads, rec.t.ID)
		}
	}
	owners := make([]varOwner, 0, len(out.Threads)+4)
	for _, id := range out.Threads {
		owners = append(owners, varOwner{workspaceID, store.LayerThread, id})
	}
	for _, o := range []varOwner{{workspaceID, store.LayerAgent, q.AgentID}, {workspaceID, store.LayerPrompt, q.PromptName},
		{workspaceID, store.LayerUser, q.UserID}} {
		if o.ownerID != "" {
			owners = append(owners, o)
		}
	}
	owners = append(owners, varOwner{workspaceID, store.LayerInstance, ""})
	if q.Names != nil && len(q.Names) == 0 {
		return out, nil // no name asked for: no value
	}
	for _, o := range owners {
		out.Values = append(out.Values, s.th.ownerValues(o, q.Names)...)
	}
	return out, nil
}

// RewriteSecrets replaces every secret value with what fn returns, in one step that keeps every
// other writer out meanwhile. An error from fn, or a value store.CheckVariable refuses, leaves
// everything as it was. fn runs while the store is locked: it must not use the store.
func (s *Store) RewriteSecrets(ctx context.Context, fn func(v *store.Variable) (string, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rewriteSecrets(fn)
}

// rewriteSecrets is RewriteSecrets with s.mu held.
func (s *Store) rewriteSecrets(fn func(v *store.Variable) (string, error)) error {
	var secrets []*store.Variable
	for _, values := range s.th.vars {
		for _, v := range values {
			if v.Secret {
				secrets = append(secrets, v)
			}
		}
	}
	// In the order the SQL backends read them: by workspace, layer, owner and name.
	slices.SortFunc(secrets, func(a, b *store.Variable) int {
		return cmp.Or(varOwner{a.WorkspaceID, a.Layer, a.OwnerID}.compare(varOwner{b.WorkspaceID, b.Layer, b.OwnerID}),
			strings.Compare(a.Name, b.Name))
	})
	rewritten := make([]store.Variable, len(secrets))
	for i, v := range secrets {
		c := *v
		value, err := fn(&c)
		if err != nil {
			return err
		}
		rewritten[i] = *v
		rewritten[i].Value = value
		if err := store.CheckVariable(&rewritten[i]); err != nil {
			return threadOp("rewrite secrets").fail(err)
		}
	}
	for i, v := range secrets {
		s.th.vars[varOwner{v.WorkspaceID, v.Layer, v.OwnerID}][v.Name] = &rewritten[i]
	}
	return nil
}
