package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// A call naming _delegate runs as an isolated request: a saved prompt of the
// catalog, or an anonymous one the call describes (system text, model, tools), in a child
// thread of the caller that starts from the call's arguments alone and never sees the
// caller's messages. Its final output is the call's output; when the tool declares an output
// schema the request is asked for output in it, and the dispatcher checks the output against
// it. The child is a blocking prompt flow like a prompt tool's (found again by its call tag
// after a crash), with the caller's policy as its ceiling: delegating never widens what may
// be called.

// delegator is the run's quiver.Delegator.
type delegator struct{ rs *run }

// delegatePrefix names the agent of a delegated request's child thread, apart from the
// catalog's agents: a resumed child must run the request rebuilt from its call, not a
// catalog entry of the same name.
const delegatePrefix = "delegate:"

// Delegate implements quiver.Delegator.
func (dl delegator) Delegate(ctx context.Context, call *quiver.Call, d *quiver.Delegation) *quiver.Result {
	rs := dl.rs
	p, res := rs.delegatePrompt(ctx, call, d)
	if res != nil {
		return res
	}
	a := &Agent{Name: delegatePrefix + p.Name, Description: p.Description, Type: DualAI, Prompt: p}
	res, err := rs.r.delegate(ctx, rs, call, a)
	if err != nil {
		if errors.Is(err, ErrBusy) {
			return quiver.Errorf(quiver.CodeRejected, "the delegated request of %s is busy with another run; try the call again later", call.Name)
		}
		if ctx.Err() != nil {
			return quiver.Errorf(quiver.CodeCancelled, "the delegated request of %s was cancelled: %v", call.Name, ctx.Err())
		}
		return quiver.Errorf(quiver.CodeToolError, "the delegated request of %s failed: %v", call.Name, err)
	}
	return res
}

// delegatePrompt is the prompt a delegation runs, or an error result the model can act on: an
// unknown saved prompt, or an anonymous request naming a model or tools the caller may not
// use.
func (rs *run) delegatePrompt(ctx context.Context, call *quiver.Call, d *quiver.Delegation) (*Prompt, *quiver.Result) {
	var p Prompt
	if d.Prompt != "" {
		saved, ok := rs.r.catalog().prompt(d.Prompt)
		if !ok {
			return nil, quiver.Errorf(quiver.CodeInvalidArguments, "%s of %s names unknown prompt %q; the saved prompts are: %s",
				schema.DelegateField, call.Name, truncateText(d.Prompt, 64), listOrNone(rs.r.catalog().promptNames()))
		}
		p = *saved
	} else {
		anon, res := rs.anonymousPrompt(ctx, call, d)
		if res != nil {
			return nil, res
		}
		p = anon
	}
	if out := call.Tool().Spec().OutputSchema; out != nil {
		p.Output = out // the call's output must fit the tool's contract
	}
	p.ExposeAsTool, p.Subagents, p.Subprompts = false, nil, nil
	p.MetaFields, p.Instances = nil, nil // the request's calls write no state of the caller's
	// A model must not shed the caller's guard on tool output by delegating.
	p.UntrustedToolOutput = p.UntrustedToolOutput || rs.prompt.UntrustedToolOutput
	return &p, nil
}

// anonymousPrompt is the prompt of a request that names none: its system prompt, with tools
// the caller may use and a model some prompt here uses.
func (rs *run) anonymousPrompt(ctx context.Context, call *quiver.Call, d *quiver.Delegation) (Prompt, *quiver.Result) {
	if res := rs.checkDelegatedTools(ctx, call, d.Tools); res != nil {
		return Prompt{}, res
	}
	model := rs.prompt.Model
	if d.Model != "" && d.Model != model {
		allowed := rs.r.catalog().models(model)
		if !slices.Contains(allowed, d.Model) {
			return Prompt{}, quiver.Errorf(quiver.CodeInvalidArguments, "%s of %s names model %q, which no prompt here uses; use one of: %s, or leave model out",
				schema.DelegateField, call.Name, truncateText(d.Model, 64), listOrNone(allowed))
		}
		model = d.Model
	}
	p := Prompt{Name: "anonymous", System: d.System, Model: model, Tools: slices.Clone(d.Tools)}
	if len(p.Tools) == 0 {
		p.Tools = []string{} // none bound, not "all"
	}
	return p, nil
}

// checkDelegatedTools refuses a tool a request names that is not among the caller's: those its
// dispatcher permits and its entitlements give it (the refusal lists no other).
func (rs *run) checkDelegatedTools(ctx context.Context, call *quiver.Call, tools []string) *quiver.Result {
	mine := rs.d.ToolsFor(ctx)
	names := make([]string, len(mine))
	for i, t := range mine {
		names[i] = t.Name()
	}
	for _, name := range tools {
		if !slices.Contains(names, name) {
			return quiver.Errorf(quiver.CodeInvalidArguments, "%s of %s names tool %q, which is not among yours (%s); a delegated request "+
				"may use only tools you may", schema.DelegateField, call.Name, truncateText(name, 64), listOrNone(names))
		}
	}
	return nil
}

// delegate runs the request in the call's child thread (the one a crash left, or a new one)
// and makes the call's result of its final output.
func (r *Runner) delegate(ctx context.Context, rs *run, call *quiver.Call, a *Agent) (*quiver.Result, error) {
	parent := rs.th
	child, err := childFor(ctx, parent, call.ID)
	if err != nil {
		return nil, err
	}
	fresh := child == nil
	if fresh {
		if res := rs.checkSpawn(a.Name); res != nil {
			return res, nil
		}
		if child, _, err = rs.spawnChild(ctx, parent, target{agent: a, prompt: true}, call.ID, "", delegatePrefix+call.Name); err != nil {
			return nil, err
		}
	}
	if err := startChild(ctx, parent, child, delegateMessage(call), nil, fresh); err != nil {
		return nil, err
	}
	out, err := r.delegatedOutcome(ctx, child, a)
	if err != nil {
		return nil, err
	}
	return delegatedResult(call, child, out), nil
}

// delegatedOutcome runs the delegated request in child; one that finished before a crash kept
// its result from being recorded keeps its answer.
func (r *Runner) delegatedOutcome(ctx context.Context, child *thread.Thread, a *Agent) (*Outcome, error) {
	info, err := child.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	if info.Status == store.StatusTerminated {
		return ReadState(&info).Outcome, nil
	}
	out, _, err := r.runChild(ctx, child, a)
	return out, err
}

// delegatedResult is the call's result of a delegated request's outcome.
func delegatedResult(call *quiver.Call, child *thread.Thread, out *Outcome) *quiver.Result {
	switch {
	case out == nil:
		return quiver.Errorf(quiver.CodeToolError, "the delegated request of %s (%s) ended without an answer", call.Name, child.ID())
	case out.Budget != nil:
		return quiver.Errorf(quiver.CodeBudgetExhausted, "the delegated request of %s (%s) stopped before its next model request: %s; "+
			"a delegated request cannot wait, so the call has no output", call.Name, child.ID(), out.Budget.Message)
	case out.Status == RunPaused:
		return quiver.Errorf(quiver.CodeToolError, "the delegated request of %s (%s) stopped waiting for %s on its call to %s; a delegated "+
			"request cannot wait, so the call has no output", call.Name, child.ID(), pauseWhat(out.Pending), out.Pending.Call.Name)
	case len(out.Output) > 0:
		return &quiver.Result{Status: quiver.StatusSuccess, Value: out.Output}
	}
	return quiver.Text(out.Text)
}

// delegateMessage is a delegated request's first message: the tool's task and the call's
// arguments, which are all it is given.
func delegateMessage(call *quiver.Call) string {
	t := call.Tool()
	args := thread.HistoryArgs(call.Args)
	return fmt.Sprintf("Do this task and answer with its result.\n\nTask: %s: %s\n\nArguments: %s", t.Name(), t.Description(), args)
}

// prompt returns the catalog's prompt called name, or the prompt of its agent called name.
func (c *Catalog) prompt(name string) (*Prompt, bool) {
	if c == nil {
		return nil, false
	}
	if p, ok := c.Prompts[name]; ok {
		return p, true
	}
	return nil, false
}

// promptNames lists the catalog's prompts, sorted, at most 50.
func (c *Catalog) promptNames() []string {
	if c == nil {
		return nil
	}
	var names []string
	for name := range c.Prompts {
		names = append(names, name)
	}
	slices.Sort(names)
	if len(names) > 50 {
		names = append(names[:50], "...")
	}
	return names
}

// models lists the models an anonymous request may name: the caller's and those the
// catalog's prompts use. A model is spending: a request may not pick one nobody configured.
func (c *Catalog) models(callers string) []string {
	var out []string
	if callers != "" {
		out = append(out, callers)
	}
	if c != nil {
		for _, p := range c.Prompts {
			if p.Model != "" && !slices.Contains(out, p.Model) {
				out = append(out, p.Model)
			}
		}
	}
	slices.Sort(out)
	return out
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func truncateText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

var _ quiver.Delegator = delegator{}

// DoorDelegator returns the quiver.Delegator for a door's dispatcher d (the server's API and
// MCP endpoints): a call naming _delegate there runs its request in a child thread of the
// thread the call is recorded on, under d's policy as the ceiling of what it may call, as a
// call in a run does under the run's. An anonymous request may name d's tools and the models
// the catalog's prompts use.
func (r *Runner) DoorDelegator(d *quiver.Dispatcher) quiver.Delegator {
	return doorDelegator{r: r, d: d}
}

type doorDelegator struct {
	r *Runner
	d *quiver.Dispatcher
}

// Delegate implements quiver.Delegator.
func (dd doorDelegator) Delegate(ctx context.Context, call *quiver.Call, d *quiver.Delegation) *quiver.Result {
	scope := quiver.ScopeFrom(ctx)
	if scope.ThreadID == "" || dd.r.Store == nil {
		return quiver.Errorf(quiver.CodeInvalidArguments, "%s: %s needs the call to run on a thread, for the request's own thread to hang under",
			call.Name, schema.DelegateField)
	}
	th, err := thread.Open(ctx, dd.r.Store, scope.WorkspaceID, scope.ThreadID)
	if err != nil {
		return quiver.Errorf(quiver.CodeToolError, "the delegated request of %s: the call's thread: %v", call.Name, err)
	}
	// The request is entitled as the door's caller (WithCaller), as a run that caller started.
	rs := &run{r: dd.r, th: th, agentName: DoorAgent, prompt: &Prompt{Name: DoorAgent}, d: dd.d, policy: dd.d.Policy, caller: CallerFrom(ctx)}
	return delegator{rs}.Delegate(ctx, call, d)
}

// DoorAgent is the name a delegated request started at a door (not in a run) records as its
// parent's agent.
const DoorAgent = "door"
