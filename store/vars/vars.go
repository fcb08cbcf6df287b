// Package vars resolves thread variables from a store, and keeps secret values
// encrypted at rest. It sits between the runtime and the store: the store (store.Variables,
// implemented by store/sqlite and store/postgres) keeps what it is given, and this package
// seals secret values before they reach it and opens them only while resolving, so both
// backends share one encryption scheme. A [Resolver] implements [quiver.VariableResolver]; give
// it to a quiver.Dispatcher as its Resolver.
//
// # Layers and order
//
// A value is set on one layer for one owner, within a workspace: a thread (its id), an agent
// (its id), a prompt (its name), a user (its id), or the instance (no owner). A variable
// resolves to the first value found in the order thread, agent, prompt, user, instance. The
// owners come from the call's [quiver.Scope]: ThreadID, AgentID, UserID and WorkspaceID; when
// the scope names a thread but no agent or user, the thread's own agent and user are used. The
// prompt is not part of quiver.Scope: the runtime names it with [WithPrompt].
//
// # Threads: inheritance and scoped variables
//
// The thread layer is not one thread but the thread's ancestry. A thread's own value comes
// first; after it, its parent's, then its grandparent's, up to the root: the nearest thread that
// has a value wins. How far up a variable may look depends on two flags:
//
//   - A declaration's Scoped (quiver.Variable.Scoped, set by the tool or prompt that declares
//     the variable) says the name is per instance: it is not inherited from the parent
//     thread's ordinary environment.
//   - A value's scoped flag (Value.Scoped, set by whoever provides the value on a thread: the
//     runtime copying immediate.scopedEnv into a child, the variables endpoint answering a
//     subagent_env_required bootstrap error, an operator) marks the thread where a scoped value
//     is provided. Only thread values can be scoped. [Resolver.CreateThread] sets it on every
//     value given for a variable its declarations mark scoped.
//
// The rule, for a variable declared with Scoped = s, resolved on thread T:
//
//  1. A value set on T itself always counts, scoped or not.
//  2. A value set on an ancestor A of T counts if the value is scoped (it flows down from A,
//     where it was provided, to the whole subtree under A) or if s is false (ordinary
//     inheritance). An ancestor's ordinary (non-scoped) value is skipped for a scoped
//     declaration, and the walk goes on to A's ancestors.
//  3. The nearest value that counts wins; with none, the other layers follow (agent, prompt,
//     user, instance): scoping is about the thread tree only.
//
// Examples, on the tree root R -> child C -> grandchild G, resolving on G:
//
//   - REGION (not scoped) set on R as an ordinary value: G sees R's value (inheritance). Set
//     it on C too and G sees C's (the nearest wins).
//   - REPO declared scoped; R has REPO=a as an ordinary value: G does not see it, nor does C
//     (scoped names are not inherited from the parent's environment). With no REPO on the
//     agent, prompt, user or instance either, REPO is missing, and creating C or G fails with
//     *quiver.MissingVariablesError naming it: the runtime asks for a per-instance value.
//   - REPO declared scoped; C was created with REPO=b provided as scoped (immediate.scopedEnv
//     copied into the child): C sees b, and so does G and everything under C (the value flows
//     down from where it was provided). A sibling C2 of C does not: its ancestry is C2, R.
//   - REPO declared scoped; R has REPO=a provided as scoped: all of R's subtree sees a, unless
//     a nearer thread provides its own value.
//   - REPO provided as scoped on C, and the tool that reads it declares REPO not scoped: G
//     sees C's value (a scoped value flows down to every declaration).
//   - REPO declared scoped, set on C as an ordinary value (not marked scoped): C sees it, G
//     does not (it is C's ordinary environment, which scoped names do not inherit).
//
// Resolution reads the store every time and nothing is copied into descendants, so a change to
// R's or C's value is seen at once by every active descendant: updates propagate.
//
// # Secrets
//
// A secret value is sealed with AES-256-GCM (package store/secret) under the keyring's current
// key before it is stored, bound to its place by the additional data
// "variable:<workspace>:<layer>:<owner>:<name>" (see [Where]): a sealed value copied into
// another row, owner, layer or workspace does not open. Listing never returns a secret's
// plaintext (nor its sealed form). A value stored as a secret resolves only for a declaration of
// type secret, so the dispatcher always knows to mask it; resolving it for a text declaration
// is an error.
//
// Keys come from QUIVER_SECRET_KEY or a key file ([LoadKeyring]); [RotateKeyFile] and
// [RotateKeyEnv] re-encrypt every secret under a new key (quiver secrets rotate-key).
package vars

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
)

// MaxValueBytes is the largest value, secret or not, in bytes (before sealing).
const MaxValueBytes = 64 << 10

// Resolver resolves and sets variables in a store. Its fields are set once; it is safe for
// concurrent use.
type Resolver struct {
	// Threads reads a thread's agent and user when a scope names a thread but not them, and
	// creates threads for CreateThread. It may be nil if neither is needed.
	Threads store.Store
	// Values holds the values.
	Values store.Variables
	// Keys seals and opens secret values. Without it, setting or resolving a secret fails.
	Keys *secret.Keyring
}

var _ quiver.VariableResolver = (*Resolver)(nil)

// New returns a resolver over a store that keeps threads and values (both backends do) and a
// keyring.
func New(s interface {
	store.Store
	store.Variables
}, keys *secret.Keyring) *Resolver {
	return &Resolver{Threads: s, Values: s, Keys: keys}
}

// Value is a value to set (see quiver.VariableValue).
type Value = quiver.VariableValue

// Entry is a value as listed: a secret's Value is always empty.
type Entry struct {
	// Name is the variable's name.
	Name string `json:"name"`
	// Value is the value of a text variable; empty for a secret.
	Value string `json:"value,omitempty"`
	// Secret and Scoped are the flags the value was set with.
	Secret bool `json:"secret"`
	Scoped bool `json:"scoped"`
	// UpdatedAt is when the value was last set.
	UpdatedAt time.Time `json:"updated_at"`
}

// Where returns the place a secret value is bound to, the additional data it is sealed with:
// "variable:<workspace>:<layer>:<owner>:<name>". A ':' or '%' inside a part is written %3A or
// %25, so that two places never share a binding.
func Where(workspaceID string, layer store.VariableLayer, ownerID, name string) string {
	return "variable:" + escape(workspaceID) + ":" + escape(string(layer)) + ":" + escape(ownerID) + ":" + escape(name)
}

func escape(s string) string {
	if !strings.ContainsAny(s, ":%") {
		return s
	}
	return strings.NewReplacer("%", "%25", ":", "%3A").Replace(s)
}

// Set stores values for the owner (ownerID "" for the instance layer), in one transaction:
// all or none. Secret values are sealed first; the store never sees their plaintext. A
// thread must exist in the workspace (store.ErrNotFound); a bad name, a scoped value on another
// layer than thread, a value larger than MaxValueBytes or a name given twice is
// store.ErrInvalid.
func (r *Resolver) Set(ctx context.Context, workspaceID string, layer quiver.Layer, ownerID string, values ...Value) error {
	sealed, err := r.seal(workspaceID, store.VariableLayer(layer), ownerID, values)
	if err != nil {
		return err
	}
	return r.Values.SetVariables(ctx, sealed)
}

// seal checks values and turns them into store records, secrets sealed.
func (r *Resolver) seal(workspaceID string, layer store.VariableLayer, ownerID string, values []Value) ([]*store.Variable, error) {
	out := make([]*store.Variable, 0, len(values))
	seen := make(map[string]bool, len(values))
	for _, v := range values {
		sv := &store.Variable{WorkspaceID: workspaceID, Layer: layer, OwnerID: ownerID, Name: v.Name, Value: v.Value,
			Secret: v.Secret, Scoped: v.Scoped}
		if err := checkValue(sv, seen); err != nil {
			return nil, err
		}
		seen[v.Name] = true
		if v.Secret {
			if err := r.sealValue(sv); err != nil {
				return nil, err
			}
		}
		out = append(out, sv)
	}
	return out, nil
}

// checkValue checks a value about to be stored; seen are the names given before it.
func checkValue(sv *store.Variable, seen map[string]bool) error {
	if err := store.CheckVariable(sv); err != nil {
		return fmt.Errorf("vars: %w", err)
	}
	switch {
	case len(sv.Value) > MaxValueBytes:
		return fmt.Errorf("vars: variable %s: the value is %d bytes, more than the %d allowed: %w", sv.Name, len(sv.Value), MaxValueBytes, store.ErrInvalid)
	case sv.Scoped && sv.Layer != store.LayerThread:
		return fmt.Errorf("vars: variable %s: only thread values can be scoped, not %s values: %w", sv.Name, sv.Layer, store.ErrInvalid)
	case seen[sv.Name]:
		return fmt.Errorf("vars: variable %s is given twice: %w", sv.Name, store.ErrInvalid)
	}
	return nil
}

// sealValue replaces a secret's plaintext with it sealed.
func (r *Resolver) sealValue(sv *store.Variable) error {
	if r.Keys == nil {
		return fmt.Errorf("vars: variable %s is a secret and the resolver has no keyring", sv.Name)
	}
	s, err := r.Keys.Seal([]byte(sv.Value), Where(sv.WorkspaceID, sv.Layer, sv.OwnerID, sv.Name))
	if err != nil {
		return fmt.Errorf("vars: sealing %s: %w", sv.Name, err)
	}
	sv.Value = s
	return nil
}

// Delete removes a value; store.ErrNotFound when the owner has none of that name.
func (r *Resolver) Delete(ctx context.Context, workspaceID string, layer quiver.Layer, ownerID, name string) error {
	return r.Values.DeleteVariable(ctx, workspaceID, store.VariableLayer(layer), ownerID, name)
}

// List returns the owner's values by name; secrets are listed without their value.
func (r *Resolver) List(ctx context.Context, workspaceID string, layer quiver.Layer, ownerID string) ([]Entry, error) {
	vs, err := r.Values.Variables(ctx, workspaceID, store.VariableLayer(layer), ownerID)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(vs))
	for i, v := range vs {
		out[i] = Entry{Name: v.Name, Secret: v.Secret, Scoped: v.Scoped, UpdatedAt: v.UpdatedAt}
		if !v.Secret {
			out[i].Value = v.Value
		}
	}
	return out, nil
}

// ResolveVariable implements quiver.VariableResolver: the value of v for the scope, found
// through the layers and the thread's ancestry as the package documentation describes. A
// secret is opened here and nowhere else.
func (r *Resolver) ResolveVariable(ctx context.Context, scope quiver.Scope, v quiver.Variable) (string, bool, error) {
	values, err := r.Resolve(ctx, scope, []quiver.Variable{v})
	var missing *quiver.MissingVariablesError
	if err != nil && !errors.As(err, &missing) {
		return "", false, err
	}
	val, ok := values[v.Name]
	return val, ok, nil
}

// Resolve resolves every declaration with one read of the store. It returns the values found
// and, when required ones are missing, a *quiver.MissingVariablesError naming all of them (as
// quiver.ResolveVariables does).
func (r *Resolver) Resolve(ctx context.Context, scope quiver.Scope, decls []quiver.Variable) (map[string]string, error) {
	if len(decls) == 0 {
		return map[string]string{}, nil
	}
	q, err := r.query(ctx, scope)
	if err != nil {
		return nil, err
	}
	return r.resolve(ctx, scope.WorkspaceID, q, decls)
}

// CheckRequired returns a *quiver.MissingVariablesError naming every required declaration
// that does not resolve for the scope, nil when all do, or the error that kept it from
// telling (a store failure, a secret that does not open).
func (r *Resolver) CheckRequired(ctx context.Context, scope quiver.Scope, decls []quiver.Variable) error {
	_, err := r.Resolve(ctx, scope, decls)
	return err
}

// CreateThread creates th with the given values set on it, after checking that every required
// declaration resolves for it: its own values, then its ancestors' (th.ParentID), then its
// agent's, the prompt's (WithPrompt), its user's and the instance's. When some do not, nothing
// is created and the error is a *quiver.MissingVariablesError naming all of them. The
// store sets th.ID when empty, CreatedAt and UpdatedAt. A value given for a variable that decls
// declare scoped is stored as scoped (Value.Scoped): it is provided where the variable is
// declared, so it flows down to the new thread's descendants.
//
// The thread and its values are two writes: should the second fail (the store went down in
// between), the thread exists without its values and the error says so.
func (r *Resolver) CreateThread(ctx context.Context, th *store.Thread, decls []quiver.Variable, values ...Value) error {
	if th == nil || th.WorkspaceID == "" {
		return fmt.Errorf("vars: create thread: no workspace id: %w", store.ErrInvalid)
	}
	if r.Threads == nil {
		return errors.New("vars: create thread: the resolver has no thread store")
	}
	if th.ID == "" {
		th.ID = stamp.ID(ctx, store.PrefixThread) // the sealed values are bound to it
	}
	sealed, err := r.seal(th.WorkspaceID, store.LayerThread, th.ID, scopedAsDeclared(values, decls))
	if err != nil {
		return err
	}
	q := store.VariableQuery{ThreadID: th.ParentID, AgentID: th.AgentID, PromptName: quiver.PromptFrom(ctx), UserID: th.UserID}
	if _, err := r.resolve(ctx, th.WorkspaceID, q, decls, pending{id: th.ID, values: sealed}); err != nil {
		return err
	}
	if err := r.Threads.CreateThread(ctx, th); err != nil {
		return err
	}
	if len(sealed) == 0 {
		return nil
	}
	if err := r.Values.SetVariables(ctx, sealed); err != nil {
		return fmt.Errorf("vars: thread %s was created but its variables were not stored: %w", th.ID, err)
	}
	return nil
}

// scopedAsDeclared is values with those of a variable decls declare scoped made scoped: a
// value provided where its variable is declared scoped flows down.
func scopedAsDeclared(values []Value, decls []quiver.Variable) []Value {
	values = slices.Clone(values)
	for i := range values {
		if slices.ContainsFunc(decls, func(d quiver.Variable) bool { return d.Name == values[i].Name && d.Scoped }) {
			values[i].Scoped = true
		}
	}
	return values
}

// pending is a thread about to be created, with its values: the first of the ancestry, or
// one of the first (ResolvePlanned).
type pending struct {
	id     string
	values []*store.Variable
}

var _ quiver.PlanResolver = (*Resolver)(nil)

// ResolvePlanned implements quiver.PlanResolver: decls resolve as they will once the threads of
// plan exist, with their values, under scope.ThreadID, by the rules of the package
// documentation (a planned ancestor's ordinary value is not inherited by a scoped declaration,
// as an existing one's is not). Nothing is written. Values are checked as Set checks them,
// secrets sealed and opened again, so that a value creation would refuse is refused here too.
func (r *Resolver) ResolvePlanned(ctx context.Context, scope quiver.Scope, plan []quiver.PlannedThread, decls []quiver.Variable) (map[string]string, error) {
	if len(plan) == 0 {
		return r.Resolve(ctx, scope, decls)
	}
	if scope.WorkspaceID == "" {
		return nil, errors.New("vars: the scope names no workspace, where variables live")
	}
	chain := make([]pending, len(plan))
	for i, p := range plan {
		// An id no stored thread has (ids have no colon): the values are bound to it while
		// they are checked, and never stored.
		id := fmt.Sprintf("planned:%d", i)
		sealed, err := r.seal(scope.WorkspaceID, store.LayerThread, id, p.Values)
		if err != nil {
			return nil, err
		}
		chain[i] = pending{id: id, values: sealed}
	}
	if len(decls) == 0 {
		return map[string]string{}, nil
	}
	q := store.VariableQuery{ThreadID: scope.ThreadID, AgentID: plan[0].AgentID, PromptName: quiver.PromptFrom(ctx), UserID: scope.UserID}
	return r.resolve(ctx, scope.WorkspaceID, q, decls, chain...)
}

// query says whose values resolving for scope reads.
func (r *Resolver) query(ctx context.Context, scope quiver.Scope) (store.VariableQuery, error) {
	q := store.VariableQuery{ThreadID: scope.ThreadID, AgentID: scope.AgentID, PromptName: quiver.PromptFrom(ctx), UserID: scope.UserID}
	if scope.WorkspaceID == "" {
		return q, errors.New("vars: the scope names no workspace, where variables live")
	}
	if q.ThreadID != "" && (q.AgentID == "" || q.UserID == "") && r.Threads != nil {
		th, err := r.Threads.Thread(ctx, scope.WorkspaceID, q.ThreadID)
		if err != nil {
			return q, err
		}
		if q.AgentID == "" {
			q.AgentID = th.AgentID
		}
		if q.UserID == "" {
			q.UserID = th.UserID
		}
	}
	return q, nil
}

type ownerName struct {
	layer       store.VariableLayer
	owner, name string
}

// resolve reads the values of decls for q (plus the threads about to be created under
// q.ThreadID, nearest first) and picks each.
func (r *Resolver) resolve(ctx context.Context, workspaceID string, q store.VariableQuery, decls []quiver.Variable, planned ...pending) (map[string]string, error) {
	q.Names = declaredNames(q.Names, decls)
	lookup, err := r.Values.LookupVariables(ctx, workspaceID, q)
	if err != nil {
		return nil, err
	}
	found := newFound(lookup, planned)
	values := make(map[string]string, len(decls))
	var missing []quiver.Variable
	for _, d := range decls {
		v := found.pick(q, d)
		if v == nil {
			if d.Required {
				missing = append(missing, d)
			}
			continue
		}
		val, err := r.open(v, d)
		if err != nil {
			return nil, err
		}
		values[d.Name] = val
	}
	if missing != nil {
		return values, &quiver.MissingVariablesError{Missing: missing}
	}
	return values, nil
}

// declaredNames adds the names of decls to names; no declarations read no values.
func declaredNames(names []string, decls []quiver.Variable) []string {
	for _, d := range decls {
		if !slices.Contains(names, d.Name) {
			names = append(names, d.Name)
		}
	}
	if names == nil {
		return []string{}
	}
	return names
}

// found are the values a resolution read, by layer, owner and name, and the thread chain
// they are picked along, nearest first.
type found struct {
	index map[ownerName]*store.Variable
	chain []string
}

// newFound indexes what a lookup read, and the values of the threads about to be created,
// which come first in the chain.
func newFound(lookup *store.VariableLookup, planned []pending) found {
	f := found{index: make(map[ownerName]*store.Variable, len(lookup.Values)), chain: lookup.Threads}
	for _, v := range lookup.Values {
		f.index[ownerName{v.Layer, v.OwnerID, v.Name}] = v
	}
	if len(planned) == 0 {
		return f
	}
	ids := make([]string, len(planned), len(planned)+len(f.chain))
	for i, p := range planned {
		ids[i] = p.id
		for _, v := range p.values {
			f.index[ownerName{store.LayerThread, p.id, v.Name}] = v
		}
	}
	f.chain = append(ids, f.chain...)
	return f
}

// pick applies the resolution order and the thread rules of the package documentation.
func (f found) pick(q store.VariableQuery, d quiver.Variable) *store.Variable {
	if v := f.pickThread(d); v != nil {
		return v
	}
	for _, o := range []struct {
		layer store.VariableLayer
		owner string
	}{{store.LayerAgent, q.AgentID}, {store.LayerPrompt, q.PromptName}, {store.LayerUser, q.UserID}, {store.LayerInstance, ""}} {
		if o.owner == "" && o.layer != store.LayerInstance {
			continue
		}
		if v := f.index[ownerName{o.layer, o.owner, d.Name}]; v != nil {
			return v
		}
	}
	return nil
}

// pickThread is the value of d along the thread chain: the thread's own, else an ancestor's;
// an ancestor's ordinary value is not inherited by a scoped declaration, which looks further
// up for a value provided as scoped.
func (f found) pickThread(d quiver.Variable) *store.Variable {
	for depth, id := range f.chain {
		v := f.index[ownerName{store.LayerThread, id, d.Name}]
		if v != nil && (depth == 0 || v.Scoped || !d.Scoped) {
			return v
		}
	}
	return nil
}

// open returns a stored value's plaintext.
func (r *Resolver) open(v *store.Variable, d quiver.Variable) (string, error) {
	if !v.Secret {
		return v.Value, nil
	}
	if d.Type != quiver.VarSecret {
		return "", fmt.Errorf("vars: variable %s is stored as a secret (%s %s) but declared as %q: declare it type secret, so that its value is masked",
			d.Name, v.Layer, ownerLabel(v), d.Type)
	}
	if r.Keys == nil {
		return "", fmt.Errorf("vars: variable %s is a secret and the resolver has no keyring", d.Name)
	}
	plain, err := r.Keys.Open(v.Value, Where(v.WorkspaceID, v.Layer, v.OwnerID, v.Name))
	if err != nil {
		return "", fmt.Errorf("vars: secret %s (%s %s): %w", d.Name, v.Layer, ownerLabel(v), err)
	}
	return string(plain), nil
}

func ownerLabel(v *store.Variable) string {
	if v.OwnerID == "" {
		return "value"
	}
	return v.OwnerID
}
