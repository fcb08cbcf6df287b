package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// A child whose required variables do not resolve waits, deferred, for someone to provide
// them: subagent_create answers with the error subagent_env_required naming a request, which
// is the child's own thread id, and where the values are shown and taken. The child's first
// message waits in its spawn record until then.

// whereToProvide says where the variables of request (a deferred child of parent) are
// provided: the request and, when the runner knows one, the place that takes them.
func (r *Runner) whereToProvide(parentID, requestID string) (endpoint, words string) {
	if r.VariablesRequestURL == nil {
		return "", "request " + requestID
	}
	endpoint = r.VariablesRequestURL(parentID, requestID)
	return endpoint, "GET or POST " + endpoint + ", request " + requestID
}

// missingFor lists the required variables a's prompt declares that do not resolve on child.
func (r *Runner) missingFor(ctx context.Context, child *thread.Thread, a *Agent) ([]quiver.Variable, error) {
	var decls []quiver.Variable
	for _, v := range variablesOf(a.Prompt) {
		if v.Required {
			decls = append(decls, v)
		}
	}
	if len(decls) == 0 {
		return nil, nil
	}
	if r.Resolver == nil {
		return decls, nil
	}
	_, err := quiver.ResolveVariables(quiver.WithPrompt(ctx, a.Prompt.Name), r.Resolver, child.Scope(), decls)
	var missing *quiver.MissingVariablesError
	if errors.As(err, &missing) {
		return missing.Missing, nil
	}
	return nil, err
}

// deferChild records that child waits for variables and returns the subagent_env_required
// result.
func (r *Runner) deferChild(ctx context.Context, parent, child *thread.Thread, missing []quiver.Variable, message string, paths []string) (any, error) {
	text, err := handOver(ctx, parent, child, message, paths)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return quiver.Errorf(quiver.CodeInvalidArguments, "attachments: %v", err), nil
		}
		return nil, err
	}
	if _, err := child.Update(ctx, func(t *store.Thread) error {
		st := ReadState(t)
		if st.Spawn == nil {
			return fmt.Errorf("thread %s is not a sub-agent: %w", t.ID, store.ErrInvalid)
		}
		st.Spawn.Deferred, st.Spawn.Message = missing, text
		return writeState(t, st)
	}); err != nil {
		return nil, err
	}
	endpoint, where := r.whereToProvide(parent.ID(), child.ID())
	value := map[string]any{"request_id": child.ID(), "missing": varNames(missing)}
	if endpoint != "" {
		value["endpoint"] = endpoint
	}
	v, _ := json.Marshal(value)
	return &quiver.Result{Status: quiver.StatusError, Code: CodeSubagentEnvRequired, Value: v,
		Error: fmt.Sprintf("sub-agent %s (%s) cannot start: required variables %s are not set. Ask the person to provide them "+
			"(%s); it starts as soon as they are.", child.Info().AgentID, child.ID(), strings.Join(varNames(missing), ", "), where)}, nil
}

// DeferredChild is a child waiting for variables, as the variables endpoint shows it.
type DeferredChild struct {
	RequestID string            `json:"request_id"`
	ParentID  string            `json:"parent_id"`
	Agent     string            `json:"agent"`
	Name      string            `json:"name,omitempty"`
	Missing   []quiver.Variable `json:"missing"`
	// Started is true once the variables were provided and the child started.
	Started bool `json:"started"`
}

// ErrNotDeferred: the request names no child of the thread that waited for variables.
var ErrNotDeferred = errors.New("agent: no such variables request on this thread")

// Deferred returns the variables request of parent's child requestID.
func (r *Runner) Deferred(ctx context.Context, parent *thread.Thread, requestID string) (*DeferredChild, error) {
	child, err := parent.Child(ctx, requestID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotDeferred, requestID)
	}
	if err != nil {
		return nil, err
	}
	info := child.Info()
	st := ReadState(&info)
	if st.Spawn == nil || (len(st.Spawn.Deferred) == 0 && !slices.Contains(info.Tags, deferredTag)) {
		return nil, fmt.Errorf("%w: %s", ErrNotDeferred, requestID)
	}
	return &DeferredChild{RequestID: child.ID(), ParentID: parent.ID(), Agent: st.Spawn.Agent, Name: info.Name(),
		Missing: st.Spawn.Deferred, Started: len(st.Spawn.Deferred) == 0}, nil
}

// deferredTag marks a child that was deferred, so its request stays readable after it started.
const deferredTag = "deferred"

// StartDeferred starts parent's deferred child requestID once its variables resolve (the caller
// has stored them: the server, from the values posted to the endpoint). It returns the
// variables still missing, without starting anything, when some are.
func (r *Runner) StartDeferred(ctx context.Context, parent *thread.Thread, requestID string) ([]quiver.Variable, error) {
	d, err := r.Deferred(ctx, parent, requestID)
	if err != nil {
		return nil, err
	}
	a, ok := r.catalog().Lookup(d.Agent)
	if !ok {
		return nil, fmt.Errorf("agent: deferred child %s runs agent %q, which the catalog does not have", requestID, d.Agent)
	}
	child, err := parent.Child(ctx, requestID)
	if err != nil {
		return nil, err
	}
	info := child.Info()
	st := ReadState(&info)
	if d.Started {
		// Started once: if no run of it has ended and none is going on (a process that died
		// between starting it and queueing its run), start its run again; a run queued or
		// done already makes this one end at once.
		if st.Outcome == nil && info.Status == store.StatusIdle {
			return nil, r.runInBackground(ctx, child, a)
		}
		return nil, nil
	}
	missing, err := r.missingFor(ctx, child, a)
	if err != nil || len(missing) > 0 {
		return missing, err
	}
	// The first message goes in before the request is marked started, so that a process that
	// dies in between leaves a request that starts it again, never a child without it.
	if err := appendFirst(ctx, child, st.Spawn.Message); err != nil {
		return nil, err
	}
	if _, err := child.Update(ctx, markStarted); err != nil {
		return nil, err
	}
	return nil, r.runInBackground(ctx, child, a)
}

// markStarted marks a deferred child's request started, unless it was meanwhile.
func markStarted(t *store.Thread) error {
	st := ReadState(t)
	if st.Spawn == nil || len(st.Spawn.Deferred) == 0 {
		return nil // started meanwhile
	}
	st.Spawn.Deferred, st.Spawn.Message = nil, ""
	if !slices.Contains(t.Tags, deferredTag) {
		t.Tags = append(t.Tags, deferredTag)
	}
	return writeState(t, st)
}

// appendFirst gives a child its first message unless it has one.
func appendFirst(ctx context.Context, child *thread.Thread, message string) error {
	page, err := child.Messages(ctx, store.Page{Limit: 1})
	if err != nil || len(page) > 0 {
		return err
	}
	_, err = child.AppendUser(ctx, message)
	return err
}

// startImmediate starts the prompt's immediate sub-agents that the thread does not have yet,
// before the run's first model step: one per group of environment values for the object
// form. A blocking one runs to its end here and its result is queued for the step; a
// non-blocking one runs in the background and reports when it finishes.
func (rs *run) startImmediate(ctx context.Context) error {
	var cfgs []Subagent
	for _, sa := range rs.prompt.Subagents {
		if sa.Immediate != nil && sa.Immediate.Enabled && sa.Resumable == nil && rs.enabled(ctx, sa.Optional) {
			cfgs = append(cfgs, sa)
		}
	}
	if len(cfgs) == 0 {
		return nil
	}
	kids, err := rs.th.Store().Children(ctx, rs.th.WorkspaceID(), rs.th.ID())
	if err != nil {
		return err
	}
	for _, cfg := range cfgs {
		if err := rs.startImmediateOf(ctx, cfg, kids); err != nil {
			return err
		}
	}
	return nil
}

// startImmediateOf starts the instances of one immediate sub-agent the thread's children kids
// do not hold yet.
func (rs *run) startImmediateOf(ctx context.Context, cfg Subagent, kids []*store.Thread) error {
	a, ok := rs.r.catalog().Agents[cfg.Name]
	if !ok {
		return fmt.Errorf("%w: immediate subagent %s is not an agent of the catalog", ErrDefinition, cfg.Name)
	}
	groups, err := rs.groups(ctx, cfg.Immediate, a)
	if err != nil {
		return err
	}
	for i, g := range groups {
		child, start, err := rs.immediateChild(ctx, cfg, a, g, fmt.Sprintf("immediate:%s:%d", cfg.Name, i), kids)
		if err != nil {
			return err
		}
		if !start {
			continue
		}
		if err := rs.startInstance(ctx, child, a, cfg, g); err != nil {
			return err
		}
	}
	return nil
}

// immediateChild is the thread of the immediate instance tagged tag, and whether to start it:
// the child spawned before, unless it has run (or waits for a person), or a new one when it
// may be spawned.
func (rs *run) immediateChild(ctx context.Context, cfg Subagent, a *Agent, g group, tag string, kids []*store.Thread) (*thread.Thread, bool, error) {
	if k := slices.IndexFunc(kids, func(k *store.Thread) bool { return slices.Contains(k.Tags, tag) }); k >= 0 {
		if ReadState(kids[k]).Outcome != nil {
			return nil, false, nil // it has run (or waits for a person): started once and for all
		}
		// Spawned, but a process died or a run failed before its run ended: set it up again
		// (each step is idempotent) and start it.
		child, err := thread.Open(ctx, rs.th.Store(), rs.th.WorkspaceID(), kids[k].ID)
		return child, err == nil, err
	}
	if res := rs.checkSpawn(cfg.Name); res != nil {
		rs.r.logger().Warn("agent: an immediate sub-agent was not started", "thread", rs.th.ID(), "agent", cfg.Name, "why", res.Error)
		return nil, false, nil
	}
	child, _, err := rs.spawnChild(ctx, rs.th, target{agent: a, sub: cfg}, "", g.name, tag)
	return child, err == nil, err
}

// group is one immediate instance's values: its name and description (which the model may
// see) and its scoped values (which only its tools may).
type group struct {
	name, description string
	scoped            []quiver.VariableValue
}

// groups resolves an immediate configuration's variables on the thread into instances: a value
// that is a JSON array of strings gives one instance per element, any other value is the same
// for every instance.
func (rs *run) groups(ctx context.Context, im *Immediate, child *Agent) ([]group, error) {
	if !im.grouped() {
		return []group{{}}, nil
	}
	if rs.r.Resolver == nil {
		return nil, fmt.Errorf("agent: immediate sub-agents with environment groups need the runner's Resolver")
	}
	names, err := rs.envList(ctx, child, im.NameEnv)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, nil // nothing to start: no instances named
	}
	if len(names) > maxImmediateInstances {
		return nil, fmt.Errorf("agent: %s (nameEnv of an immediate sub-agent) names %d instances, over the limit of %d", im.NameEnv, len(names), maxImmediateInstances)
	}
	descs, err := rs.envList(ctx, child, im.DescriptionEnv)
	if err != nil {
		return nil, err
	}
	scoped := make(map[string][]string, len(im.ScopedEnv))
	for _, n := range im.ScopedEnv {
		if scoped[n], err = rs.envList(ctx, child, n); err != nil {
			return nil, err
		}
	}
	out := make([]group, len(names))
	for i, n := range names {
		out[i] = group{name: n, description: instanceValue(descs, i), scoped: scopedValues(child, i, im.ScopedEnv, scoped)}
	}
	return out, nil
}

// envList is the value on the thread of child's variable name as a list (see asList); none
// without a name or a value.
func (rs *run) envList(ctx context.Context, child *Agent, name string) ([]string, error) {
	if name == "" {
		return nil, nil
	}
	v, ok, err := rs.r.Resolver.ResolveVariable(ctx, rs.th.Scope(), declaration(child, name))
	if err != nil || !ok {
		return nil, err
	}
	return asList(v), nil
}

// asList reads an immediate configuration's value: a JSON array of strings gives its
// elements, any other value is one.
func asList(v string) []string {
	var list []string
	if json.Unmarshal([]byte(v), &list) == nil {
		return list
	}
	return []string{v}
}

// scopedValues are the scoped values the i-th instance of sub gets, of the scopedEnv variables
// whose values (as lists) are scoped.
func scopedValues(sub *Agent, i int, scopedEnv []string, scoped map[string][]string) []quiver.VariableValue {
	var out []quiver.VariableValue
	for _, n := range scopedEnv {
		if v := instanceValue(scoped[n], i); v != "" {
			secret := declaration(sub, n).Type == quiver.VarSecret
			out = append(out, quiver.VariableValue{Name: n, Value: v, Scoped: true, Secret: secret})
		}
	}
	return out
}

// startInstance spawns one immediate child: its scoped values are stored on it before it runs,
// and its first message is built from its name and description only.
func (rs *run) startInstance(ctx context.Context, child *thread.Thread, a *Agent, cfg Subagent, g group) error {
	if len(g.scoped) > 0 {
		if err := rs.storeScoped(ctx, child, cfg, g.scoped); err != nil {
			return err
		}
	}
	if err := appendFirst(ctx, child, rs.instanceMessage(g)); err != nil {
		return err
	}
	if !cfg.blocking() {
		return rs.r.runInBackground(ctx, child, a)
	}
	_, _, err := rs.r.runThread(ctx, child, a, "", true)
	return err
}

// storeScoped stores an immediate child's scoped values on it. As Runner.Variables documents:
// nil means the Resolver when it can store values (a *vars.Resolver can). Without this
// fallback a runner given only a *vars.Resolver failed every run of a prompt with an
// immediate scopedEnv sub-agent.
func (rs *run) storeScoped(ctx context.Context, child *thread.Thread, cfg Subagent, scoped []quiver.VariableValue) error {
	w := rs.r.Variables
	if w == nil {
		w, _ = rs.r.Resolver.(VariableWriter)
	}
	if w == nil {
		return fmt.Errorf("agent: immediate sub-agent %s has scopedEnv values but the runner has no Variables to store them", cfg.Name)
	}
	return w.Set(ctx, child.WorkspaceID(), quiver.LayerThread, child.ID(), scoped...)
}

// instanceMessage is an immediate child's first message: its name and description, before
// the thread's first user message.
func (rs *run) instanceMessage(g group) string {
	message := rs.firstUserMessage()
	if g.name != "" {
		message = "You are " + g.name + "."
		if g.description != "" {
			message += " " + g.description
		}
		if first := rs.firstUserMessage(); first != "" {
			message += "\n\n" + first
		}
	}
	if message == "" {
		message = "Begin."
	}
	return message
}

// firstUserMessage is the thread's first user message: what an immediate child starts from.
func (rs *run) firstUserMessage() string {
	for _, m := range rs.hist {
		if m.Role == store.RoleUser {
			return m.Content
		}
	}
	return ""
}

// maxImmediateInstances bounds the children one immediate configuration starts.
const maxImmediateInstances = 100

// declaration is how the child declares a variable its parent's environment hands it: as the
// child's prompt declares it (a secret stays a secret: read as one, stored sealed), else text.
func declaration(child *Agent, name string) quiver.Variable {
	for _, v := range child.Prompt.Variables {
		if v.Name == name {
			return quiver.Variable{Name: name, Type: v.Type, Scoped: v.Scoped}
		}
	}
	return quiver.Variable{Name: name, Type: quiver.VarText}
}

// instanceValue is the i-th instance's value of a list: a list of one gives its value to every
// instance.
func instanceValue(vals []string, i int) string {
	switch {
	case len(vals) == 1:
		return vals[0]
	case i < len(vals):
		return vals[i]
	}
	return ""
}
