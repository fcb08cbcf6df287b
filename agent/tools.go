package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// lifecycleTools says which of the lifecycle tools a run offers.
type lifecycleTools struct{ create, message bool }

// Names of the lifecycle tools the runtime offers a prompt with resumable sub-agents.
const (
	ToolSubagentCreate  = "subagent_create"
	ToolSubagentMessage = "subagent_message"
	// ToolSubagentTerminate ends a resumable sub-agent for good, which frees its place under
	// maxInstances: Quiver's addition to the two lifecycle tools, create and message.
	ToolSubagentTerminate = "subagent_terminate"
)

// nestedSet is what a prompt can call besides the registry's tools: its prompt tools,
// handoffs and sub-agents, and the lifecycle tools of its resumable sub-agents. It is built
// once per prompt and kept by the runner; a run picks what applies.
type nestedSet struct {
	direct    []nestedTool // prompt, handoff and non-resumable sub-agent tools
	resumable []Subagent   // the configurations subagent_create may start
	create    *quiver.Tool
	message   *quiver.Tool
	terminate *quiver.Tool
}

type nestedTool struct {
	tool     *quiver.Tool
	optional string // the variable that enables it, if any
}

// nestedCache keeps each prompt's nestedSet.
type nestedCache struct {
	mu   sync.Mutex
	sets map[*Prompt]*nestedSet
}

// nested returns the prompt's nested tools, building them the first time.
func (r *Runner) nested(p *Prompt) (*nestedSet, error) {
	r.nestedTools.mu.Lock()
	defer r.nestedTools.mu.Unlock()
	if ns, ok := r.nestedTools.sets[p]; ok {
		return ns, nil
	}
	ns, err := r.buildNested(p)
	if err != nil {
		return nil, err
	}
	if r.nestedTools.sets == nil {
		r.nestedTools.sets = map[*Prompt]*nestedSet{}
	}
	r.nestedTools.sets[p] = ns
	return ns, nil
}

func (c *Catalog) agentNames() []string {
	if c == nil {
		return nil
	}
	return keys(c.Agents)
}

// promptTool is a prompt offered as a tool.
func (r *Runner) promptTool(cfg Subprompt) (*quiver.Tool, error) {
	p, ok := r.catalog().Prompts[cfg.Name]
	if !ok {
		return nil, fmt.Errorf("subprompt %s is not a prompt of the catalog", cfg.Name)
	}
	in := withProperty(argsOf(p), cfg.InitAttachmentsProperty, attachmentsProperty())
	t := target{agent: &Agent{Name: p.Name, Description: p.Description, Prompt: p}, prompt: true, shaping: cfg}
	return quiver.NewTool(quiver.Spec{Name: p.Name, Description: toolDescription("prompt", p.Name, p.Description), InputSchema: in,
		Timeout: childTimeout, Source: quiver.SourcePrompt + ":" + p.Name}, func(ctx context.Context, args json.RawMessage) (any, error) {
		return r.runNested(ctx, t, args)
	})
}

// agentTool is an agent offered as a tool: a handoff for a human-facing agent, a
// sub-agent for a dual-AI one.
func (r *Runner) agentTool(a *Agent, cfg Subagent) (*quiver.Tool, error) {
	if a.Type != DualAI {
		in := &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{
			"message": {Type: "string", Description: "A word for the agent taking over: what the person needs."}}}
		return quiver.NewTool(quiver.Spec{Name: a.Name, Description: toolDescription("agent", a.Name, a.Description) +
			" Calling it hands this conversation over to that agent.", InputSchema: in, Source: quiver.SourcePrompt + ":" + a.Name},
			func(ctx context.Context, args json.RawMessage) (any, error) { return r.handoff(ctx, a, args) })
	}
	in := withProperty(argsOf(a.Prompt), cfg.InitAttachmentsProperty, attachmentsProperty())
	in = withProperty(in, cfg.InitAgentNameProperty, &schema.Schema{Type: "string", MaxLength: ptr(store.MaxNameLen), Description: "A name for this sub-agent."})
	t := target{agent: a, sub: cfg}
	return quiver.NewTool(quiver.Spec{Name: a.Name, Description: toolDescription("agent", a.Name, a.Description), InputSchema: in,
		Timeout: childTimeout, Source: quiver.SourcePrompt + ":" + a.Name}, func(ctx context.Context, args json.RawMessage) (any, error) {
		return r.runNested(ctx, t, args)
	})
}

// handoff gives the thread to a: the thread records it, and the run goes on with a's
// prompt, tools and policy from its next step.
func (r *Runner) handoff(ctx context.Context, a *Agent, args json.RawMessage) (any, error) {
	rs, th := runFrom(ctx), threadFrom(ctx)
	if rs == nil || th == nil {
		return nil, quiver.Fail(quiver.CodeRejected, "handing over to %s works only inside an agent run on a thread", a.Name)
	}
	var in struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(args, &in)
	if _, err := th.Update(ctx, func(t *store.Thread) error {
		st := ReadState(t)
		st.Agent = a.Name
		return writeState(t, st)
	}); err != nil {
		return nil, err
	}
	rs.handoffTo = a
	r.events.emit(Event{Type: EventHandoff, ThreadID: th.ID(), Text: a.Name})
	text := fmt.Sprintf("The conversation is handed over to %s, who continues from here.", a.Name)
	if in.Message != "" {
		text += " Note: " + in.Message
	}
	return text, nil
}

// lifecycleTools are subagent_create, subagent_message and subagent_terminate for a prompt's
// resumable sub-agents.
func (r *Runner) lifecycleTools(cfgs []Subagent) (create, message, terminate *quiver.Tool, err error) {
	names := make([]any, len(cfgs))
	argSchemas := map[string]*schema.Compiled{} // compiled once, not per call
	for i, c := range cfgs {
		names[i] = c.Name
		if a, ok := r.catalog().Agents[c.Name]; ok && a.Prompt.Args != nil {
			if argSchemas[c.Name], err = schema.Compile(a.Prompt.Args); err != nil {
				return nil, nil, nil, fmt.Errorf("subagent %s: args: %v", c.Name, err)
			}
		}
	}
	cin := &schema.Schema{Type: "object", Required: []string{"agent", "name", "message"}, Properties: map[string]*schema.Schema{
		"agent":       {Type: "string", Enum: names, Description: "The sub-agent to start."},
		"name":        {Type: "string", MinLength: ptr(1), MaxLength: ptr(store.MaxNameLen), Description: "A name for this instance, to tell it from others."},
		"message":     {Type: "string", MaxLength: ptr(maxMessageChars), Description: "Its first message: everything it needs to know."},
		"attachments": attachmentsProperty(),
		"arguments":   {Type: "object", Description: "Arguments, when the sub-agent declares an argument schema."},
	}}
	create, err = quiver.NewTool(quiver.Spec{Name: ToolSubagentCreate, Description: "Starts a sub-agent that keeps its own thread: " +
		"later, send it more with subagent_message and the reference this returns.", InputSchema: cin, Timeout: childTimeout},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			return r.subagentCreate(ctx, cfgs, argSchemas, args)
		})
	if err != nil {
		return nil, nil, nil, err
	}
	min := &schema.Schema{Type: "object", Required: []string{"ref", "message"}, Properties: map[string]*schema.Schema{
		"ref":         {Type: "string", Description: "The sub-agent's reference (or its name), as subagent_create returned it."},
		"message":     {Type: "string", MaxLength: ptr(maxMessageChars), Description: "What to send it."},
		"attachments": attachmentsProperty(),
	}}
	message, err = quiver.NewTool(quiver.Spec{Name: ToolSubagentMessage, Description: "Sends a message to a running or idle sub-agent " +
		"started with subagent_create; it answers as it did when started.", InputSchema: min, Timeout: childTimeout},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			return r.subagentMessage(ctx, cfgs, args)
		})
	if err != nil {
		return nil, nil, nil, err
	}
	tin := &schema.Schema{Type: "object", Required: []string{"ref"}, Properties: map[string]*schema.Schema{
		"ref": {Type: "string", Description: "The sub-agent's reference (or its name)."},
	}}
	terminate, err = quiver.NewTool(quiver.Spec{Name: ToolSubagentTerminate, Description: "Ends a sub-agent started with " +
		"subagent_create for good, when its work is done: it takes no more messages, and frees its place for a new one.", InputSchema: tin},
		func(ctx context.Context, args json.RawMessage) (any, error) { return r.subagentTerminate(ctx, args) })
	return create, message, terminate, err
}

// subagentTerminate ends an idle resumable child of the thread.
func (r *Runner) subagentTerminate(ctx context.Context, args json.RawMessage) (any, error) {
	parent := threadFrom(ctx)
	if parent == nil {
		return nil, quiver.Fail(quiver.CodeRejected, "subagent_terminate works only inside an agent run on a thread")
	}
	var in struct {
		Ref string `json:"ref"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return quiver.Errorf(quiver.CodeInvalidArguments, "%v", err), nil
	}
	_, found, res, err := resumableChild(ctx, parent, in.Ref)
	if err != nil || res != nil {
		return res, err
	}
	if found.Status == store.StatusTerminated {
		return fmt.Sprintf("Sub-agent %s (%q) was terminated already.", found.Ref, found.Name), nil
	}
	child, err := parent.Child(ctx, found.Ref)
	if err != nil {
		return nil, err
	}
	var busy bool
	if _, err := child.Update(ctx, func(t *store.Thread) error {
		if busy = t.Status == store.StatusRunning; busy {
			return nil
		}
		t.Status = store.StatusTerminated
		return nil
	}); err != nil {
		return nil, err
	}
	if busy {
		return quiver.Errorf(quiver.CodeRejected, "sub-agent %s (%q) is running; terminate it once it has answered", found.Ref, found.Name), nil
	}
	return fmt.Sprintf("Sub-agent %s (%q) is terminated.", found.Ref, found.Name), nil
}

// liveChildren describes the resumable children that are not terminated, for error results.
func liveChildren(kids []thread.Child) []string {
	var live []string
	for _, k := range kids {
		if k.Resumable && k.Status != store.StatusTerminated {
			live = append(live, fmt.Sprintf("%s (%q, %s)", k.Ref, k.Name, k.Status))
		}
	}
	return live
}

// resumableChild finds parent's resumable child ref names (see findResumable), with the
// children read.
func resumableChild(ctx context.Context, parent *thread.Thread, ref string) ([]thread.Child, *thread.Child, *quiver.Result, error) {
	kids, err := parent.Children(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	found, res := findResumable(kids, ref)
	return kids, found, res, nil
}

// findResumable finds the resumable child ref names (its id, or the name of one live child),
// or the error result that says why none.
func findResumable(kids []thread.Child, ref string) (*thread.Child, *quiver.Result) {
	live := liveChildren(kids)
	var named []*thread.Child
	for i, k := range kids {
		if !k.Resumable {
			continue
		}
		if k.Ref == ref {
			return &kids[i], nil
		}
		if k.Status != store.StatusTerminated && k.Name == ref {
			named = append(named, &kids[i])
		}
	}
	switch len(named) {
	case 1:
		return named[0], nil
	case 0:
		return nil, quiver.Errorf(CodeUnknownChild, "no sub-agent %q on this thread; live ones: %v", ref, live)
	}
	return nil, quiver.Errorf(CodeUnknownChild, "%d live sub-agents are named %q: give the ref of one; live ones: %v", len(named), ref, live)
}

func (r *Runner) subagentCreate(ctx context.Context, cfgs []Subagent, argSchemas map[string]*schema.Compiled, args json.RawMessage) (any, error) {
	rs, parent := runFrom(ctx), threadFrom(ctx)
	if rs == nil || parent == nil {
		return nil, quiver.Fail(quiver.CodeRejected, "subagent_create works only inside an agent run on a thread")
	}
	var in struct {
		Agent       string          `json:"agent"`
		Name        string          `json:"name"`
		Message     string          `json:"message"`
		Attachments []string        `json:"attachments"`
		Arguments   json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return quiver.Errorf(quiver.CodeInvalidArguments, "%v", err), nil
	}
	i := slices.IndexFunc(cfgs, func(c Subagent) bool { return c.Name == in.Agent })
	if i < 0 || !rs.enabled(ctx, cfgs[i].Optional) {
		return spawnError("agent %q cannot be started here; the sub-agents this prompt may start: %v", in.Agent, rs.startable(ctx, cfgs)), nil
	}
	cfg := cfgs[i]
	name := strings.TrimSpace(in.Name)
	if name == "" || name != in.Name {
		return quiver.Errorf(quiver.CodeInvalidArguments, "name %q: give the sub-agent a non-empty name without surrounding spaces", in.Name), nil
	}
	if err := checkAttachments(ctx, parent, in.Attachments); err != nil {
		return quiver.Errorf(quiver.CodeInvalidArguments, "%v", err), nil
	}
	a, ok := r.catalog().Agents[cfg.Name]
	if !ok {
		return spawnError("agent %q is not defined", cfg.Name), nil
	}
	message, refused := argumentsMessage(a, argSchemas[a.Name], in.Message, in.Arguments)
	if refused != nil {
		return refused, nil
	}
	call := quiver.CallFrom(ctx)
	child, err := childFor(ctx, parent, call.ID)
	if err != nil {
		return nil, err
	}
	if child == nil {
		child, refused, err = rs.newResumable(ctx, parent, a, cfg, call.ID, name)
		switch {
		case err != nil:
			return nil, err
		case refused != nil:
			return refused, nil
		}
	}
	if missing, err := r.missingFor(ctx, child, a); err != nil {
		return nil, err
	} else if len(missing) > 0 {
		return r.deferChild(ctx, parent, child, missing, message, in.Attachments)
	}
	if err := startChild(ctx, parent, child, message, in.Attachments, false); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return quiver.Errorf(quiver.CodeInvalidArguments, "attachments: %v", err), nil
		}
		return nil, err
	}
	return r.runResumable(ctx, parent, child, a, cfg, name)
}

// argumentsMessage is the first message of a sub-agent started with arguments: the message,
// then the arguments, checked against the agent's argument schema c; a refusal otherwise.
func argumentsMessage(a *Agent, c *schema.Compiled, message string, args json.RawMessage) (string, *quiver.Result) {
	if len(args) == 0 || string(args) == "null" {
		return message, nil
	}
	if a.Prompt.Args == nil {
		return "", quiver.Errorf(quiver.CodeInvalidArguments, "arguments: %s declares no argument schema; put everything in message", a.Name)
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return "", quiver.Errorf(quiver.CodeInvalidArguments, "arguments: %v", err)
	}
	if err := c.Validate(v); err != nil {
		return "", quiver.Errorf(quiver.CodeInvalidArguments, "arguments do not fit %s's schema: %v", a.Name, err)
	}
	return message + "\n\nArguments: " + string(args), nil
}

// newResumable spawns a resumable sub-agent's thread for the call callID, unless the agent
// has its maximum of live instances or the run its maximum of spawns: then a refusal for the
// model, and no thread.
func (rs *run) newResumable(ctx context.Context, parent *thread.Thread, a *Agent, cfg Subagent, callID, name string) (*thread.Thread, *quiver.Result, error) {
	kids, err := parent.Children(ctx)
	if err != nil {
		return nil, nil, err
	}
	live := 0
	for _, k := range kids {
		if k.AgentID == cfg.Name && k.Resumable && k.Status != store.StatusTerminated {
			live++
		}
	}
	if max := cfg.Resumable.maxInstances(); live >= max {
		return nil, spawnError("%s already has %d live instances, its cap (maxInstances %d): message one of them with subagent_message instead",
			cfg.Name, live, max), nil
	}
	if res := rs.checkSpawn(cfg.Name); res != nil {
		return nil, res, nil
	}
	child, _, err := rs.spawnChild(ctx, parent, target{agent: a, sub: cfg, resumable: cfg.Resumable}, callID, name)
	return child, nil, err
}

// runResumable runs a resumable child after a message: to its end when blocking, in the
// background otherwise.
func (r *Runner) runResumable(ctx context.Context, parent, child *thread.Thread, a *Agent, cfg Subagent, name string) (any, error) {
	if !cfg.blocking() {
		if err := r.runInBackground(ctx, child, a); err != nil {
			return nil, err
		}
		return reference(child, a.Name, name, "running"), nil
	}
	res, err := r.runBlocking(ctx, parent, child, target{agent: a, sub: cfg, resumable: cfg.Resumable})
	if err != nil || res.IsError() {
		return res, err
	}
	res.Text = fmt.Sprintf("[%s %q, ref %s]\n%s", a.Name, name, child.ID(), res.Text)
	return res, nil
}

func (r *Runner) subagentMessage(ctx context.Context, cfgs []Subagent, args json.RawMessage) (any, error) {
	rs, parent := runFrom(ctx), threadFrom(ctx)
	if rs == nil || parent == nil {
		return nil, quiver.Fail(quiver.CodeRejected, "subagent_message works only inside an agent run on a thread")
	}
	var in struct {
		Ref         string   `json:"ref"`
		Message     string   `json:"message"`
		Attachments []string `json:"attachments"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return quiver.Errorf(quiver.CodeInvalidArguments, "%v", err), nil
	}
	if err := checkAttachments(ctx, parent, in.Attachments); err != nil {
		return quiver.Errorf(quiver.CodeInvalidArguments, "%v", err), nil
	}
	kids, found, res, err := resumableChild(ctx, parent, in.Ref)
	if err != nil || res != nil {
		return res, err
	}
	if found.Status == store.StatusTerminated {
		return quiver.Errorf(CodeUnknownChild, "sub-agent %s (%q) is terminated and takes no more messages; live ones: %v",
			found.Ref, found.Name, liveChildren(kids)), nil
	}
	i := slices.IndexFunc(cfgs, func(c Subagent) bool { return c.Name == found.AgentID })
	a, ok := r.catalog().Agents[found.AgentID]
	if i < 0 || !ok {
		return quiver.Errorf(CodeUnknownChild, "sub-agent %s runs %s, which this prompt does not manage", found.Ref, found.AgentID), nil
	}
	child, err := parent.Child(ctx, found.Ref)
	if err != nil {
		return nil, err
	}
	st := ReadState(ptr(child.Info()))
	if st.Spawn != nil && len(st.Spawn.Deferred) > 0 {
		_, where := r.whereToProvide(parent.ID(), child.ID())
		return quiver.Errorf(CodeSubagentEnvRequired, "sub-agent %s waits for variables %v; provide them (%s)", child.ID(),
			varNames(st.Spawn.Deferred), where), nil
	}
	text, err := handOver(ctx, parent, child, in.Message, in.Attachments)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return quiver.Errorf(quiver.CodeInvalidArguments, "attachments: %v", err), nil
		}
		return nil, err
	}
	role := store.RoleUser
	if st.Spawn != nil && st.Spawn.Receives == SideB {
		role = store.RoleAssistant
	}
	msg := &store.Message{Role: role, Content: text}
	// The message is queued, idle child or running: a run takes queued messages as input that
	// calls for a step. Appended to an idle child's history instead, a side_b message (role
	// assistant) looked like the child's own last answer, so its run ended without asking its
	// model and the call returned the parent's own message as the child's answer. The id,
	// derived from this call, makes a call dispatched again after a crash (its result not
	// recorded) find the message queued or taken (ErrIDTaken) instead of sending it twice;
	// the child's run then answers from its history without a new step.
	if call := quiver.CallFrom(ctx); call != nil && call.ID != "" {
		msg.ID = fmt.Sprintf("msg_sam_%s_%s", strings.TrimPrefix(parent.ID(), "thr_"), call.ID)
	}
	if err := child.Queue(ctx, msg); err != nil && !errors.Is(err, store.ErrIDTaken) {
		return nil, err
	}
	if found.Status == store.StatusRunning {
		// Its run takes the message at its next step, unless that step was its last: a wake
		// runs it again once that run ends, if the message is still queued.
		r.wake(ctx, child)
		return reference(child, a.Name, found.Name, "running"), nil
	}
	return r.runResumable(ctx, parent, child, a, cfgs[i], found.Name)
}

func varNames(vs []quiver.Variable) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return out
}

// startable lists the resumable sub-agents a prompt may start now.
func (rs *run) startable(ctx context.Context, cfgs []Subagent) []string {
	var out []string
	for _, c := range cfgs {
		if rs.enabled(ctx, c.Optional) {
			out = append(out, c.Name)
		}
	}
	return out
}

// enabled says whether an optional relationship is on: its variable resolves to true, 1 or
// yes, in any case. A relationship without a flag is always on.
func (rs *run) enabled(ctx context.Context, flag string) bool {
	if flag == "" {
		return true
	}
	if rs.r.Resolver == nil {
		return false
	}
	v, ok, err := rs.r.Resolver.ResolveVariable(ctx, rs.th.Scope(), quiver.Variable{Name: flag, Type: quiver.VarText})
	if err != nil || !ok {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes":
		return true
	}
	return false
}

// withNested returns the registry a run of rs.prompt dispatches through: reg, plus the nested
// tools its definition names that apply now (optional ones whose flag is on; the lifecycle tools
// while they can act), and the names of those nested tools.
func (rs *run) withNested(ctx context.Context, reg *quiver.Registry) (*quiver.Registry, []string, error) {
	p := rs.prompt
	if len(p.Subprompts) == 0 && len(p.Subagents) == 0 && rs.r.catalog() == nil {
		return reg, nil, nil
	}
	ns, err := rs.r.nested(p)
	if err != nil {
		return nil, nil, err
	}
	var tools []*quiver.Tool
	for _, nt := range ns.direct {
		if _, taken := reg.Lookup(nt.tool.Name()); taken {
			continue // the registry's tool of that name wins
		}
		if rs.enabled(ctx, nt.optional) {
			tools = append(tools, nt.tool)
		}
	}
	rs.lifecycle = lifecycleTools{}
	if ns.create != nil {
		canCreate, canMessage, err := rs.lifecycleNow(ctx, ns.resumable)
		if err != nil {
			return nil, nil, err
		}
		if canCreate {
			tools = append(tools, ns.create)
		}
		if canMessage {
			tools = append(tools, ns.message, ns.terminate)
		}
		rs.lifecycle = lifecycleTools{create: canCreate, message: canMessage}
	}
	if len(tools) == 0 {
		return reg, nil, nil
	}
	over := &quiver.Registry{Base: reg}
	// The prompt's own tools are governed as the workspace's are.
	over.SetGovernance(reg.Governance())
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name()
	}
	if err := over.Register(tools...); err != nil {
		return nil, nil, err
	}
	return over, names, nil
}

// lifecycleNow says whether subagent_create (an enabled resumable sub-agent under its cap) and
// subagent_message (a live resumable child) apply on the thread now.
func (rs *run) lifecycleNow(ctx context.Context, cfgs []Subagent) (canCreate, canMessage bool, err error) {
	kids, err := rs.th.Children(ctx)
	if err != nil {
		return false, false, err
	}
	live := map[string]int{}
	for _, k := range kids {
		if k.Resumable && k.Status != store.StatusTerminated {
			live[k.AgentID]++
			canMessage = true
		}
	}
	for _, c := range cfgs {
		if live[c.Name] < c.Resumable.maxInstances() && rs.enabled(ctx, c.Optional) {
			canCreate = true
		}
	}
	return canCreate, canMessage, nil
}

// openFor returns ceiling with the run's nested tools let through: they are governed by the
// spawn rules, not by the parent's function tools.
func openFor(ceiling quiver.Policy, names []string) quiver.Policy {
	if len(names) == 0 {
		return ceiling
	}
	if ceiling.Bound != nil {
		ceiling.Bound = append(slices.Clone(ceiling.Bound), names...)
	}
	if len(ceiling.Allow) > 0 {
		ceiling.Allow = append(slices.Clone(ceiling.Allow), names...)
	}
	parents := make([]quiver.Policy, len(ceiling.Parents))
	for i, p := range ceiling.Parents {
		parents[i] = openFor(p, names)
	}
	ceiling.Parents = parents
	return ceiling
}
