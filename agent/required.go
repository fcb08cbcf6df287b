package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// Creating a thread whose required variables are missing fails.
// What a thread for an agent requires is more than its prompt's declarations: the tools the
// agent may call declare theirs, and the immediate sub-agents its first run starts declare
// theirs (their prompts' and their tools'). All of them are checked, after merging what every
// layer holds (the thread's own values, its ancestors', the agent's, the prompt's, the user's and
// the instance's), and a refusal names every missing variable with what requires it.
//
// One kind of declaration is not required of the thread itself: a tool's variable that one of
// the agent's sub-agents declares scoped. A scoped variable is per instance: each child gets
// its own value (immediate.scopedEnv, or the variables request of a deferred sub-agent),
// and the agent binds such a tool so that its sub-agents may call it (a child calls only
// what its parent may), not to call it itself. The immediate ones' children are checked
// all the same, on the child each would start.
//
// The check is in the runner, not in each door, so that none can leave it out: CreateThread
// makes it before anything is written (the API, quiver run and programs use it), and Run and
// Resume make it again on a thread's first run, whatever created the thread (thread.Create
// included), before the run writes anything.

// Declaration is a variable that a run of an agent declares, and what declares it.
type Declaration struct {
	quiver.Variable
	// By is what declares it: "prompt NAME", "tool NAME", or "sub-agent NAME" for an immediate
	// sub-agent's prompt and tools.
	By string `json:"by"`
	// Subagent is the immediate sub-agent on whose thread it resolves; "" for the agent's own
	// thread.
	Subagent string `json:"subagent,omitempty"`

	tool  bool   // declared by a tool
	runAs string // the user the tool runs as (quiver.Spec.RunAs), whose values count; "" for the thread's
}

// immediateDecls are an immediate sub-agent's declarations, with its configuration.
type immediateDecls struct {
	cfg   Subagent
	agent *Agent
	decls []Declaration
}

// declSet is what a run of an agent declares: on its own thread, and on the children its
// immediate sub-agents start.
type declSet struct {
	own  []Declaration
	subs []immediateDecls
	// perChild names the variables the agent's sub-agents declare scoped, which its tools
	// do not require of its own thread (see the top of this file).
	perChild map[string]bool
}

// Declarations returns the variables a run of a in the workspace declares: its prompt's, those
// of the tools of the workspace its policy lets it call, and those of its immediate
// sub-agents (their prompts' and the tools each may call), in that order. Whether an optional
// or grouped immediate sub-agent starts depends on values; it is listed all the same.
func (r *Runner) Declarations(ctx context.Context, workspaceID string, a *Agent) ([]Declaration, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	ds, err := r.declarations(ctx, workspaceID, a)
	if err != nil {
		return nil, err
	}
	out := ds.own
	for _, s := range ds.subs {
		out = append(out, s.decls...)
	}
	return out, nil
}

func (r *Runner) declarations(ctx context.Context, workspaceID string, a *Agent) (declSet, error) {
	reg, err := r.registryFor(ctx, workspaceID)
	if err != nil {
		return declSet{}, err
	}
	var ds declSet
	for _, p := range a.Prompts() { // both sides of a two-sided agent run on its thread
		ds.own = append(ds.own, declared(p, p.policy(), reg, "")...)
	}
	if r.catalog() == nil {
		return ds, nil
	}
	subagent := func(name string) {
		child, ok := r.catalog().Agents[name]
		if !ok || child.Prompt == nil {
			return // a definition error, which the run reports
		}
		for _, v := range child.Prompt.Variables {
			if v.Scoped {
				if ds.perChild == nil {
					ds.perChild = map[string]bool{}
				}
				ds.perChild[v.Name] = true
			}
		}
	}
	for _, p := range a.Prompts() {
		ds.subs = append(ds.subs, r.immediateOf(p, reg, subagent)...)
	}
	return ds, nil
}

// immediateOf notes the sub-agents p may start (subagent) and returns the declarations of
// those it starts at once.
func (r *Runner) immediateOf(p *Prompt, reg *quiver.Registry, subagent func(name string)) []immediateDecls {
	policy := p.policy()
	for _, name := range p.Tools {
		if child, ok := r.catalog().Agents[name]; ok && child.ExposeAsTool {
			subagent(name)
		}
	}
	var subs []immediateDecls
	for _, sa := range p.Subagents {
		subagent(sa.Name)
		if sa.Immediate == nil || !sa.Immediate.Enabled || sa.Resumable != nil {
			continue
		}
		child, ok := r.catalog().Agents[sa.Name]
		if !ok || child.Prompt == nil {
			continue
		}
		// A child calls only what its parent may too: its tools are those both permit.
		decls := declared(child.Prompt, child.Prompt.policy().Within(policy), reg, sa.Name)
		subs = append(subs, immediateDecls{cfg: sa, agent: child, decls: decls})
	}
	return subs
}

// declared lists p's declarations and those of the tools of reg that policy permits; sub names
// the immediate sub-agent p runs, if it does.
func declared(p *Prompt, policy quiver.Policy, reg *quiver.Registry, sub string) []Declaration {
	by := func(what string) string {
		if sub != "" {
			return "sub-agent " + sub
		}
		return what
	}
	var out []Declaration
	for _, v := range p.Variables {
		out = append(out, Declaration{Variable: v, By: by("prompt " + p.Name), Subagent: sub})
	}
	for _, t := range policy.Effective(reg) {
		sp := t.Spec()
		what := "tool " + t.Name()
		if sp.RunAs != "" {
			what += " (it runs as user " + sp.RunAs + ")"
		}
		for _, v := range sp.Variables {
			out = append(out, Declaration{Variable: v, By: by(what), Subagent: sub, tool: true, runAs: sp.RunAs})
		}
	}
	return out
}

// place is where a thread's variables resolve: a thread that exists, or one to be created.
type place struct {
	// scope names the workspace and the user, and as ThreadID the thread when it exists, else
	// the parent it is to be created under ("" for a root).
	scope quiver.Scope
	// plan is the thread to be created; nil when it exists.
	plan *quiver.PlannedThread
}

// chain is what resolving on the place's thread, or on a child of it (child not nil), plans.
func (pl place) chain(child *quiver.PlannedThread) []quiver.PlannedThread {
	var out []quiver.PlannedThread
	if child != nil {
		out = append(out, *child)
	}
	if pl.plan != nil {
		out = append(out, *pl.plan)
	}
	return out
}

// planner is the runner's resolver as a quiver.PlanResolver: itself when it is one (a
// *vars.Resolver is), else one that resolves planned values before the resolver's, without
// the thread tree's rules (a fixed set of values has no thread tree).
func (r *Runner) planner() quiver.PlanResolver {
	if p, ok := r.Resolver.(quiver.PlanResolver); ok {
		return p
	}
	return flatPlanner{r.Resolver}
}

type flatPlanner struct{ r quiver.VariableResolver }

func (f flatPlanner) ResolveVariable(ctx context.Context, scope quiver.Scope, v quiver.Variable) (string, bool, error) {
	if f.r == nil {
		return "", false, nil
	}
	return f.r.ResolveVariable(ctx, scope, v)
}

func (f flatPlanner) ResolvePlanned(ctx context.Context, scope quiver.Scope, plan []quiver.PlannedThread, decls []quiver.Variable) (map[string]string, error) {
	given := quiver.Vars{}
	for i := len(plan) - 1; i >= 0; i-- { // the nearest thread's value wins
		for _, v := range plan[i].Values {
			given[v.Name] = v.Value
		}
	}
	if len(plan) > 0 {
		scope.AgentID = plan[0].AgentID
	}
	return quiver.ResolveVariables(ctx, planned{given, f}, scope, decls)
}

// planned resolves the values given for planned threads first, then on the resolver.
type planned struct {
	given quiver.Vars
	next  quiver.VariableResolver
}

func (p planned) ResolveVariable(ctx context.Context, scope quiver.Scope, v quiver.Variable) (string, bool, error) {
	if val, ok := p.given[v.Name]; ok {
		return val, true, nil
	}
	return p.next.ResolveVariable(ctx, scope, v)
}

// missingSet gathers the missing variables of several resolutions, each once, with what
// requires it.
type missingSet struct {
	vars []quiver.Variable
	by   map[string][]string
}

// add takes the outcome of resolving decls: the variables it reports missing, with the
// declarations that require them; any other error is returned.
func (m *missingSet) add(err error, decls []Declaration) error {
	var missing *quiver.MissingVariablesError
	if err == nil {
		return nil
	}
	if !errors.As(err, &missing) {
		return err
	}
	for _, v := range missing.Missing {
		if !slices.ContainsFunc(m.vars, func(have quiver.Variable) bool { return have.Name == v.Name }) {
			m.vars = append(m.vars, v)
		}
		if m.by == nil {
			m.by = map[string][]string{}
		}
		for _, d := range decls {
			if d.Variable == v && !slices.Contains(m.by[v.Name], d.By) {
				m.by[v.Name] = append(m.by[v.Name], d.By)
			}
		}
	}
	return nil
}

func (m *missingSet) err() error {
	if len(m.vars) == 0 {
		return nil
	}
	return &quiver.MissingVariablesError{Missing: m.vars, RequiredBy: m.by}
}

func required(decls []Declaration) []quiver.Variable {
	var out []quiver.Variable
	for _, d := range decls {
		if d.Required {
			out = append(out, d.Variable)
		}
	}
	return out
}

// resolve resolves the required declarations of decls on scope and chain, and adds what is
// missing: those of tools that run as another user (quiver.Spec.RunAs) for that user, as the
// dispatcher resolves them, the others for scope's. always resolves scope's even with no
// declarations (to check the values of a planned thread).
func (m *missingSet) resolve(ctx context.Context, res quiver.PlanResolver, scope quiver.Scope, chain []quiver.PlannedThread, decls []Declaration, always bool) error {
	users := []string{""}
	for _, d := range decls {
		if d.Required && !slices.Contains(users, d.runAs) {
			users = append(users, d.runAs)
		}
	}
	for _, u := range users {
		group := slices.DeleteFunc(slices.Clone(decls), func(d Declaration) bool { return d.runAs != u })
		vs := required(group)
		if len(vs) == 0 && (u != "" || !always) {
			continue
		}
		sc := scope
		if u != "" {
			sc.UserID = u
		}
		_, err := res.ResolvePlanned(ctx, sc, chain, vs)
		if err := m.add(err, group); err != nil {
			return err
		}
	}
	return nil
}

// check resolves every required declaration on pl, for a thread of a: its own, then each
// immediate sub-agent's on the child the first run would start (withImmediate), with the
// values that child would get. The error is a *quiver.MissingVariablesError naming all that
// are missing, or what kept the check from telling.
func (r *Runner) check(ctx context.Context, pl place, a *Agent, ds declSet, withImmediate bool) error {
	res := r.planner()
	var m missingSet
	own := slices.DeleteFunc(slices.Clone(ds.own), func(d Declaration) bool { return d.tool && ds.perChild[d.Name] })
	// Values given for a new thread are checked here too (a name or a size that creating
	// would refuse), so that a refusal leaves nothing behind.
	if err := m.resolve(quiver.WithPrompt(ctx, a.Prompt.Name), res, pl.scope, pl.chain(nil), own, pl.plan != nil && len(pl.plan.Values) > 0); err != nil {
		return err
	}
	if !withImmediate {
		return m.err()
	}
	for _, s := range ds.subs {
		decls := required(s.decls)
		if len(decls) == 0 {
			continue
		}
		children, err := r.immediateChildren(ctx, res, pl, a, s)
		if err != nil {
			return err
		}
		for _, child := range children {
			if err := m.resolve(quiver.WithPrompt(ctx, s.agent.Prompt.Name), res, pl.scope, pl.chain(&child), s.decls, false); err != nil {
				return err
			}
		}
	}
	return m.err()
}

// immediateChildren are the children an immediate sub-agent's configuration starts on the
// place's thread, as startImmediate and groups decide: none when its optional flag is off or,
// in the object form, when nameEnv names no instance; else one per instance, with the scopedEnv
// values it gets. Instances that get values for the same names resolve alike, so one of each
// kind is returned.
func (r *Runner) immediateChildren(ctx context.Context, res quiver.PlanResolver, pl place, a *Agent, s immediateDecls) ([]quiver.PlannedThread, error) {
	lk := planLookup{ctx: quiver.WithPrompt(ctx, a.Prompt.Name), res: res, pl: pl, sub: s.agent} // read on the parent, as its run reads them
	on, err := lk.flag(s.cfg.Optional)
	if err != nil || !on {
		return nil, err
	}
	im := s.cfg.Immediate
	if !im.grouped() {
		return []quiver.PlannedThread{{AgentID: s.agent.Name}}, nil
	}
	names, err := lk.list(im.NameEnv)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	scoped := make(map[string][]string, len(im.ScopedEnv))
	for _, n := range im.ScopedEnv {
		if scoped[n], err = lk.list(n); err != nil {
			return nil, err
		}
	}
	var out []quiver.PlannedThread
	seen := map[string]bool{}
	for i := range min(len(names), maxImmediateInstances) {
		child, kind := plannedInstance(s.agent, i, im.ScopedEnv, scoped)
		if !seen[kind] {
			seen[kind] = true
			out = append(out, child)
		}
	}
	return out, nil
}

// planLookup reads the values of the variables an immediate sub-agent's configuration names,
// for its place.
type planLookup struct {
	ctx context.Context
	res quiver.PlanResolver
	pl  place
	sub *Agent
}

func (lk planLookup) value(v quiver.Variable) (string, bool, error) {
	values, err := lk.res.ResolvePlanned(lk.ctx, lk.pl.scope, lk.pl.chain(nil), []quiver.Variable{v})
	if err != nil {
		return "", false, err
	}
	val, ok := values[v.Name]
	return val, ok, nil
}

// flag is whether the optional flag named name is on; true without a flag.
func (lk planLookup) flag(name string) (bool, error) {
	if name == "" {
		return true, nil
	}
	v, ok, err := lk.value(quiver.Variable{Name: name, Type: quiver.VarText})
	return ok && flagOn(v), err
}

// list is the value of the variable named name as a list (see asList); none without a name or
// a value.
func (lk planLookup) list(name string) ([]string, error) {
	if name == "" {
		return nil, nil
	}
	v, ok, err := lk.value(declaration(lk.sub, name))
	if err != nil || !ok {
		return nil, err
	}
	return asList(v), nil
}

// plannedInstance is the child of the i-th instance, with the scoped values it gets, and its
// kind: the names of those values.
func plannedInstance(sub *Agent, i int, scopedEnv []string, scoped map[string][]string) (quiver.PlannedThread, string) {
	values := scopedValues(sub, i, scopedEnv, scoped)
	kind := make([]string, len(values))
	for j, v := range values {
		kind[j] = v.Name
	}
	return quiver.PlannedThread{AgentID: sub.Name, Values: values}, strings.Join(kind, "\x00")
}

// flagOn is how an optional sub-agent's flag reads: true, 1 or yes, in any case.
func flagOn(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes":
		return true
	}
	return false
}

// CreateThread creates a thread for runs of a, with values set on it as thread values, once
// every variable a run of a requires resolves for it: its prompt's, its tools' and its
// immediate sub-agents' (see Declarations), through the thread's values (values, and its
// ancestors' when o.ParentID names a parent), the agent's, the prompt's, the user's and the
// instance's. When some do not, nothing is written and the error is a
// *quiver.MissingVariablesError naming every one of them, with what requires each.
//
// o.AgentID defaults to a's name. A value given for a variable a declaration marks secret is
// stored as a secret (sealed), and one a declaration of the thread's own marks scoped is
// provided as scoped, as store/vars' CreateThread does. Values need the runner's Variables (or
// a Resolver that can store them). The thread and its values are two writes: should the second
// fail, the thread exists without its values and the error says so.
//
// The check cannot be forgotten, only made early: Run and Resume make it again on a thread's
// first run, whatever created the thread (thread.Create, which knows no agent, included), so a
// thread whose variables are missing never runs. CreateThread refuses before the thread exists,
// which is what every door wants: a refusal that leaves nothing behind.
func (r *Runner) CreateThread(ctx context.Context, o thread.Options, a *Agent, values ...quiver.VariableValue) (*thread.Thread, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	if r.Store == nil {
		return nil, errors.New("agent: Runner.Store is not set")
	}
	if o.AgentID == "" {
		o.AgentID = a.Name
	}
	ds, err := r.declarations(ctx, o.WorkspaceID, a)
	if err != nil {
		return nil, err
	}
	values = markValues(values, ds)
	w := r.writer()
	if len(values) > 0 && w == nil {
		return nil, errors.New("agent: values for a new thread need the runner's Variables, or a Resolver that stores values")
	}
	pl := place{scope: quiver.Scope{WorkspaceID: o.WorkspaceID, UserID: o.UserID, ThreadID: o.ParentID},
		plan: &quiver.PlannedThread{AgentID: o.AgentID, Values: values}}
	if err := r.check(ctx, pl, a, ds, true); err != nil {
		return nil, err
	}
	th, err := thread.Create(ctx, r.Store, o)
	if err != nil {
		return nil, err
	}
	if len(values) > 0 {
		if err := w.Set(ctx, o.WorkspaceID, quiver.LayerThread, th.ID(), values...); err != nil {
			return nil, fmt.Errorf("agent: thread %s was created but its variables were not stored: %w", th.ID(), err)
		}
	}
	return th, nil
}

// markValues marks the values given for a new thread as its declarations say: secret when any
// declares the name secret (so that no value meant for a secret is stored in clear), scoped
// when one of the thread's own declares it scoped.
func markValues(values []quiver.VariableValue, ds declSet) []quiver.VariableValue {
	values = slices.Clone(values)
	all := slices.Clone(ds.own)
	for _, s := range ds.subs {
		all = append(all, s.decls...)
	}
	for i := range values {
		for _, d := range all {
			if d.Name != values[i].Name {
				continue
			}
			if d.Type == quiver.VarSecret {
				values[i].Secret = true
			}
			if d.Scoped && d.Subagent == "" {
				values[i].Scoped = true
			}
		}
	}
	return values
}

// writer is what stores variable values: Variables, else the Resolver when it can.
func (r *Runner) writer() VariableWriter {
	if r.Variables != nil {
		return r.Variables
	}
	w, _ := r.Resolver.(VariableWriter)
	return w
}

// CheckVariables reports, as a *quiver.MissingVariablesError naming all of them with what
// requires each, the required variables of a run of a on th that do not resolve: its prompt's
// and its tools', and, while th has not run yet, those of the immediate sub-agents its first
// run starts (once it has run, they have started). nil when every one resolves.
func (r *Runner) CheckVariables(ctx context.Context, th *thread.Thread, a *Agent) error {
	if err := a.Check(); err != nil {
		return err
	}
	info := th.Info()
	return r.checkThread(ctx, th, &info, a)
}

// checkThread is CheckVariables on the thread as info says it is.
func (r *Runner) checkThread(ctx context.Context, th *thread.Thread, info *store.Thread, a *Agent) error {
	ds, err := r.declarations(ctx, th.WorkspaceID(), a)
	if err != nil {
		return err
	}
	return r.check(ctx, place{scope: th.Scope()}, a, ds, !hasRun(info))
}

// hasRun reports whether a run of the thread has taken a step or ended: its first run's check
// is behind it. A run that failed before its first step did not get past it: the next one
// checks again (its variables may be what it failed on).
func hasRun(info *store.Thread) bool {
	out := ReadState(info).Outcome
	return info.StepCount > 0 || (out != nil && out.Status != RunFailed)
}

// FirstRun reports whether the next run of the thread is its first run as a root thread, the
// run that checks the thread's variables (see Run): a door that queues runs checks then too,
// to refuse at once what the run would.
func FirstRun(info *store.Thread) bool {
	return ReadState(info).Spawn == nil && !hasRun(info)
}
