package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/genai"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// run is one run: the state a run needs, gathered once.
type run struct {
	r         *Runner
	th        *thread.Thread
	agent     *Agent
	agentName string
	spawn     *Spawn // how the thread was spawned; nil for a root thread
	// caller is who the run is entitled as (see ThreadState.Caller); savedCaller is the one
	// the thread's state holds, which markRunning replaces when they differ.
	caller, savedCaller json.RawMessage
	prompt              *Prompt
	d                   *quiver.Dispatcher
	policy              quiver.Policy
	model               model.Model
	tools               *schema.ToolSet // tool-calling mode
	composed            *schema.Schema  // composed {calls, output} mode
	system              string
	tracer              trace.Tracer // nil: no spans
	meters              *meters      // nil: no metrics
	// onRequest is told of each model request (CallerRules.Request); nil: no one is.
	onRequest func(ctx context.Context, model string, usage *model.Usage, took time.Duration, err error)
	// userTokens and unconnected are the caller's connections (CallerRules).
	userTokens  quiver.UserTokens
	unconnected func(ctx context.Context, t *quiver.Tool) (*Authorization, error)
	// onSpend is asked before each model request (CallerRules.Spend); nil: nothing is.
	onSpend func(ctx context.Context, model string) (func(context.Context, *model.Usage), *Budget)

	// The thread as this run knows it: read once when the run starts, then kept up to date
	// with what the run writes (a Runner runs a thread once at a time), so a step reads
	// nothing back. steps counts the thread's model turns.
	hist      []*store.Message
	pending   []quiver.Call
	decisions map[string]*store.Decision // read when a call first needs one
	steps     int
	// resumed counts, for each call pending when the run began, the executions of it that
	// may have started before this run (see attempts.go); the calls of this run's steps
	// have none.
	resumed map[string]int

	// side is who acts in a two-sided dual-AI agent (side_a or side_b); "" for any other.
	side string

	handoffTo *Agent         // set by a handoff call: the agent the next steps run with
	startSeq  int64          // the last message before this run: what the run added comes after
	lifecycle lifecycleTools // which of subagent_create and subagent_message are offered
	spawned   int            // the children this run has started (see MaxSpawnsPerRun)

	// heldAnswer says that the last message of hist is the model's answer, not yet stored:
	// it ends the run unless messages were queued meanwhile, and endWithAnswer stores it with
	// the run's end. endWritten says that it did, so that settle writes the end no more.
	heldAnswer, endWritten bool
}

type recorder struct{ rs *run }

// RecordResult persists the result and keeps the stored message in the run's history.
func (rec recorder) RecordResult(ctx context.Context, c *quiver.Call, r *quiver.Result) error {
	m, err := rec.rs.th.Record(ctx, c, r)
	if err != nil {
		return err
	}
	rec.rs.hist = append(rec.rs.hist, m)
	return nil
}

// Instances implements quiver.StateRecorder: the run's thread's instances.
func (rec recorder) Instances(ctx context.Context) ([]string, error) { return rec.rs.th.Instances(ctx) }

// RecordOutput implements quiver.StateRecorder: the result and the state write of its output
// in one transaction (thread.RecordWithOutput), the stored message kept in the run's history.
func (rec recorder) RecordOutput(ctx context.Context, c *quiver.Call, r *quiver.Result, out json.RawMessage) (*quiver.Result, error) {
	m, got, err := rec.rs.th.RecordWithOutput(ctx, c, r, out)
	if err != nil {
		return nil, err
	}
	rec.rs.hist = append(rec.rs.hist, m)
	return got, nil
}

// prepare gathers what a run needs; withModel opens the model too.
func (r *Runner) prepare(ctx context.Context, th *thread.Thread, a *Agent, withModel bool) (*run, error) {
	if r.Store == nil {
		return nil, errors.New("agent: Runner.Store is not set")
	}
	rs := &run{r: r, th: th, tracer: genai.Tracer(r.TracerProvider), meters: newMeters(r.MeterProvider)}
	info := th.Info()
	st := ReadState(&info)
	rs.spawn = st.Spawn
	rs.caller, rs.savedCaller = callerOf(ctx, &st), st.Caller
	if a.TwoSided() {
		rs.side = SideA
		if info.CurrentSide == SideB {
			rs.side = SideB
		}
	}
	return rs, r.prepareInto(ctx, rs, a, withModel)
}

// prepareInto sets what running a's prompt on rs's thread needs: the tools it may call (the
// registry's and the nested ones its definition names), their rendering, the model. A handoff
// prepares the same run again for the agent taking over.
func (r *Runner) prepareInto(ctx context.Context, rs *run, a *Agent, withModel bool) error {
	th := rs.th
	p := a.promptFor(rs.side)
	rs.agent, rs.agentName, rs.prompt = a, a.Name, p
	rs.tools, rs.composed, rs.model = nil, nil, nil
	// The prompt's variables (an optional sub-agent's flag) resolve on its own layer.
	ctx = quiver.WithPrompt(ctx, p.Name)
	reg, runtime, err := rs.promptTools(ctx)
	if err != nil {
		return err
	}
	if len(p.Instances) > 0 && withModel {
		if err := addInstances(ctx, th, p); err != nil {
			return err
		}
	}
	rs.policy = p.policy()
	rs.policy.Bound = append(slices.Clone(rs.policy.Bound), runtime...) // the prompt's list is shared by its runs
	if rs.spawn != nil && rs.spawn.Ceiling != nil {
		// A child calls only what its parent may too; the nested tools are governed by the
		// spawn rules (allowed targets, depth) instead, so that a sub-agent can have
		// sub-agents of its own.
		rs.policy = rs.policy.Within(openFor(*rs.spawn.Ceiling, runtime))
	}
	rs.d = rs.dispatcher(reg)
	rules := r.rules(ctx, rs)
	rs.d.Entitled, rs.d.Admit, rs.d.Observe = rules.Entitled, rules.Admit, rules.Observe
	rs.onRequest, rs.onSpend = rules.Request, rules.Spend
	rs.userTokens, rs.unconnected = rules.UserTokens, rules.Unconnected
	if !withModel {
		return nil
	}
	m, err := r.openModel(p)
	if err != nil {
		return err
	}
	rs.model = m
	return rs.renderTools(ctx, reg)
}

// promptTools are the tools the run's prompt may call: the workspace's and the nested ones its
// definition names (runtime lists those), each tool it names there. A tool missing from
// Registries' answer is looked for once more in the workspace's tools as stored now
// (FreshRegistry): a cache of them (the platform's) may not have seen a tool another node made
// a moment ago, and a prompt naming an unknown tool fails for good.
func (rs *run) promptTools(ctx context.Context) (reg *quiver.Registry, runtime []string, err error) {
	r := rs.r
	for fresh := false; ; fresh = true {
		look := ctx
		if fresh {
			look = context.WithValue(ctx, freshKey{}, true)
		}
		if reg, err = r.registryFor(look, rs.th.WorkspaceID()); err != nil {
			return nil, nil, err
		}
		if reg, runtime, err = rs.withNested(ctx, reg); err != nil {
			return nil, nil, err
		}
		err = rs.prompt.CheckTools(reg)
		if err == nil || fresh || r.Registries == nil || !errors.Is(err, ErrDefinition) {
			return reg, runtime, err
		}
	}
}

type freshKey struct{}

// FreshRegistry reports whether a call of Runner.Registries asks for the workspace's tools as
// stored now rather than as cached: a run asks so once before it fails for a tool its prompt
// names that the first answer did not have.
func FreshRegistry(ctx context.Context) bool {
	fresh, _ := ctx.Value(freshKey{}).(bool)
	return fresh
}

// registryFor returns the tools of the workspace: Registries' when set, else Registry, else
// quiver.Default.
func (r *Runner) registryFor(ctx context.Context, workspaceID string) (*quiver.Registry, error) {
	reg := r.Registry
	if r.Registries != nil {
		var err error
		if reg, err = r.Registries(ctx, workspaceID); err != nil {
			return nil, fmt.Errorf("agent: the tools of workspace %s: %w", workspaceID, err)
		}
	}
	if reg == nil {
		reg = quiver.Default
	}
	return reg, nil
}

// addInstances adds the instances p keeps state for that th lacks, so that they exist before
// its calls name them; those th has are only read (a run, not a look at what waits, adds
// them).
func addInstances(ctx context.Context, th *thread.Thread, p *Prompt) error {
	have, err := th.Instances(ctx)
	if err != nil {
		return fmt.Errorf("agent: prompt %s: the instances of thread %s: %w", p.Name, th.ID(), err)
	}
	if missing := slices.DeleteFunc(slices.Clone(p.Instances), func(n string) bool { return slices.Contains(have, n) }); len(missing) > 0 {
		if err := th.AddInstances(ctx, missing...); err != nil {
			return fmt.Errorf("agent: prompt %s: the instances of thread %s: %w", p.Name, th.ID(), err)
		}
	}
	return nil
}

// dispatcher is the run's dispatcher of reg's tools, under the run's policy.
func (rs *run) dispatcher(reg *quiver.Registry) *quiver.Dispatcher {
	r, p := rs.r, rs.prompt
	return &quiver.Dispatcher{Registry: reg, Policy: rs.policy, Resolver: r.Resolver, Hooks: r.Hooks,
		Middleware: r.Middleware, Recorder: recorder{rs}, Timeout: r.Timeout, Grace: r.Grace,
		MetaFields: p.MetaFields, Delegator: delegator{rs},
		TracerProvider: r.TracerProvider, TraceContent: r.TraceContent, MeterProvider: r.MeterProvider,
		// A call reaches the confirmation gate only with a persisted decision (see mustWait).
		Confirm: func(ctx context.Context, c *quiver.Call) (quiver.Decision, error) {
			if rs := runFrom(ctx); rs != nil {
				if dec := rs.decisions[c.ID]; dec != nil {
					return quiver.Decision{Action: quiver.DecisionAction(dec.Action), Args: dec.Args, Message: dec.Message,
						UserID: dec.UserID, KeyID: dec.KeyID, AccessToken: dec.AccessToken, DecidedAt: dec.DecidedAt}, nil
				}
			}
			return quiver.Decision{Action: quiver.Pause}, nil
		}}
}

// renderTools sets the system prompt and how the model sees the tools of reg the run may
// call: as tool definitions in the model's dialect or, when the prompt asks for an output, as
// one composed response schema.
func (rs *run) renderTools(ctx context.Context, reg *quiver.Registry) error {
	p := rs.prompt
	tools := rs.d.ToolsFor(ctx)
	// Both modes offer the same fields: the meta-fields the prompt enables, and
	// _reasoningForCall only where it asks for it (reasoning_for_call).
	schemas := quiver.ToolSchemas(reg, tools)
	for i := range schemas {
		schemas[i].Reasoning = p.ReasoningForCall
		schemas[i].MetaFields = quiver.MergeMetaFields(schemas[i].MetaFields, p.MetaFields)
	}
	if err := rs.offer(schemas); err != nil {
		return err
	}
	rs.system = rs.systemPrompt(tools)
	return nil
}

// offer renders the tools' schemas as the model is offered them: tool definitions in its
// dialect, or, when the prompt asks for an output, one composed response schema.
func (rs *run) offer(schemas []schema.ToolSchema) error {
	p, m := rs.prompt, rs.model
	var err error
	if p.Output != nil {
		if rs.composed, err = schema.Compose(schemas, p.Output); err != nil {
			return fmt.Errorf("agent: prompt %s: composing the output schema: %w", p.Name, err)
		}
		return nil
	}
	dialect := m.Dialect()
	if p.Strict && dialect == schema.OpenAI {
		dialect = schema.OpenAIStrict
	}
	if rs.tools, err = schema.Render(dialect, schemas); err != nil {
		return fmt.Errorf("agent: prompt %s: rendering tools for %s: %w", p.Name, m.Name(), err)
	}
	return nil
}

// systemPrompt is the prompt's system prompt with what it must say of the tools: their
// examples, how to take their output, how to answer in composed mode.
func (rs *run) systemPrompt(tools []*quiver.Tool) string {
	p := rs.prompt
	system := p.System
	// Examples name each tool as the model is offered it (mapped where the provider rejects
	// the registered name; the composed schema's _tool takes registered names).
	if ex := quiver.RenderExamplesFor(rs.tools, tools); ex != "" {
		system += "\n\n" + ex
	}
	if p.UntrustedToolOutput {
		system += "\n\n" + untrustedInstructions
	}
	if p.Output != nil {
		system += "\n\n" + composedInstructions
	}
	return system
}

const composedInstructions = `Answer with one JSON document as the response schema describes: "calls" lists the tools ` +
	`to call now (each with "_tool" naming it), and "output" is your final answer, or null while you still need ` +
	`results. Results of calls come back in the next message.`

func (r *Runner) openModel(p *Prompt) (model.Model, error) {
	if p.Model == "" {
		if r.Model == nil {
			return nil, fmt.Errorf("%w: prompt %s names no model and the runner has none; set model: in the definition "+
				"(for example model: openai:gpt-4.1-mini) or pass --model", ErrNoModel, p.Name)
		}
		return r.Model, nil
	}
	if r.Model != nil && r.Model.Name() == p.Model {
		return r.Model, nil
	}
	open := r.OpenModel
	if open == nil {
		open = model.Open
	}
	m, err := open(p.Model)
	if err != nil {
		return nil, &modelSetupError{fmt.Errorf("agent: prompt %s: model %s: %w", p.Name, p.Model, err)}
	}
	return m, nil
}
