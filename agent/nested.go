package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// AgentType says who an agent talks to, which decides what calling it as a tool does.
type AgentType string

// Agent types: called as a tool, a human-facing agent takes the thread over (a handoff) and a
// dual-AI one runs as a sub-agent.
const (
	// HumanFacing agents talk to a person. Called as a tool, one takes over the calling thread
	// (a handoff): the next steps run with its prompt, tools and policy.
	HumanFacing AgentType = "ai_human"
	// DualAI agents talk to another AI. Called as a tool, one works in a child thread of the
	// caller (a sub-agent).
	DualAI AgentType = "dual_ai"
)

// Subprompt configures a prompt that another prompt calls as a tool.
// Naming an exposed prompt in Prompt.Tools is the same as a Subprompt with every default.
type Subprompt struct {
	// Name is the prompt's name, which is also the tool's.
	Name string `json:"name"`
	// IncludeTextResponse, IncludeToolCalls and IncludeErrors shape the result (all default
	// on): the nested flow's final text, a summary of the tool calls it made, and its failed
	// calls, which make the result an error that lists them.
	IncludeTextResponse *bool `json:"include_text_response,omitempty"`
	IncludeToolCalls    *bool `json:"include_tool_calls,omitempty"`
	IncludeErrors       *bool `json:"include_errors,omitempty"`
	// InitUserMessageProperty is the argument that becomes the flow's first user message;
	// empty means "message" for the default argument schema and the arguments as JSON for a
	// prompt with its own Args.
	InitUserMessageProperty string `json:"init_user_message_property,omitempty"`
	// InitAttachmentsProperty is the argument holding paths of the caller's files (under
	// /attachments/) to hand to the flow.
	InitAttachmentsProperty string `json:"init_attachments_property,omitempty"`
}

// Subagent configures a dual-AI agent that a prompt calls as a tool.
// Naming an exposed dual-AI agent in Prompt.Tools is the same as a Subagent with every default:
// blocking, not resumable.
type Subagent struct {
	// Name is the agent's name, which is also the tool's (for a resumable sub-agent, the
	// agent subagent_create names).
	Name string `json:"name"`
	// Blocking (the default) waits for the child's run and returns its result; false returns
	// a reference at once and delivers the result later as a queued message.
	Blocking *bool `json:"blocking,omitempty"`
	// InitUserMessageProperty and InitAttachmentsProperty: as for Subprompt.
	InitUserMessageProperty string `json:"init_user_message_property,omitempty"`
	InitAttachmentsProperty string `json:"init_attachments_property,omitempty"`
	// InitAgentNameProperty is the argument that names the child (its name:<value> tag).
	InitAgentNameProperty string `json:"init_agent_name_property,omitempty"`
	// Immediate starts the child when the prompt becomes active, before its first model step.
	Immediate *Immediate `json:"immediate,omitempty"`
	// Optional names a variable: the sub-agent is available only when it resolves to true, 1
	// or yes (in any case).
	Optional string `json:"optional,omitempty"`
	// Resumable keeps the child's thread to be messaged again, through the lifecycle tools
	// subagent_create and subagent_message; nil means not resumable. A definition says so
	// with false (or by leaving it out), and asks for every default with true.
	Resumable *Resumable `json:"resumable,omitempty"`
}

// Immediate is the immediate form of a sub-agent: true (Enabled only), or one instance per
// group of environment values.
type Immediate struct {
	Enabled bool `json:"-"`
	// NameEnv and DescriptionEnv name the variables whose values name and describe each
	// instance: the only per-instance values that may reach a model.
	NameEnv        string `json:"nameEnv,omitempty"`
	DescriptionEnv string `json:"descriptionEnv,omitempty"`
	// ScopedEnv names variables copied into each child as scoped thread values, for its tools
	// only: they never reach a model.
	ScopedEnv []string `json:"scopedEnv,omitempty"`
}

// UnmarshalJSON reads true, false or the object form.
func (im *Immediate) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	var on bool
	if json.Unmarshal(b, &on) == nil {
		*im = Immediate{Enabled: on}
		return nil
	}
	type plain Immediate
	var p plain
	if err := unmarshalCanonical(b, reflect.TypeFor[Immediate](), &p, true); err != nil {
		return fmt.Errorf("immediate: want true, false or {nameEnv, descriptionEnv, scopedEnv}: %v", err)
	}
	*im = Immediate(p)
	im.Enabled = true
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads.
func (im Immediate) MarshalJSON() ([]byte, error) {
	if im.NameEnv == "" && im.DescriptionEnv == "" && len(im.ScopedEnv) == 0 {
		return json.Marshal(im.Enabled)
	}
	type plain Immediate
	return json.Marshal(plain(im))
}

// grouped reports the object form: one instance per group of values.
func (im *Immediate) grouped() bool {
	return im != nil && (im.NameEnv != "" || im.DescriptionEnv != "" || len(im.ScopedEnv) > 0)
}

// Resumable is how a resumable sub-agent is messaged and reports back.
type Resumable struct {
	// ReceivesMessages is the role the parent's messages take in the child: side_a (the
	// default) as the user's, side_b as the assistant's.
	ReceivesMessages string `json:"receives_messages,omitempty"`
	// MaxInstances caps the children of this agent that are not terminated; 0 means
	// DefaultMaxInstances.
	MaxInstances int `json:"maxInstances,omitempty"`
	// ParentCommunication: implicit (the default) queues each finished run's result, or its
	// failure, to the parent; explicit sends nothing unless the child's tools call
	// NotifyParent.
	ParentCommunication string `json:"parentCommunication,omitempty"`
}

// UnmarshalJSON reads the object form, or true for every default. false, the short way of
// saying "not resumable", is read by Subagent, which then has no Resumable at all: here it
// would have to be a Resumable, which it is not.
func (r *Resumable) UnmarshalJSON(b []byte) error {
	var on bool
	if json.Unmarshal(b, &on) == nil {
		if !on {
			return errors.New("resumable: false is no Resumable: a Subagent reads it as not resumable (nil); on its own, write true or an object")
		}
		*r = Resumable{}
		return nil
	}
	type plain Resumable
	var p plain
	if err := unmarshalCanonical(b, reflect.TypeFor[Resumable](), &p, true); err != nil {
		return fmt.Errorf("resumable: want false, true or {receives_messages, maxInstances, parentCommunication}: %v", err)
	}
	*r = Resumable(p)
	return nil
}

// Side and communication values.
const (
	SideA    = "side_a"
	SideB    = "side_b"
	Implicit = "implicit"
	Explicit = "explicit"
)

// DefaultMaxInstances caps a resumable sub-agent's live children when it sets no cap.
const DefaultMaxInstances = 10

// maxInstancesLimit bounds what a definition may ask for: each live child is a thread the
// model can keep messaging.
const maxInstancesLimit = 1000

func (r *Resumable) maxInstances() int {
	if r.MaxInstances > 0 {
		return r.MaxInstances
	}
	return DefaultMaxInstances
}

func (r *Resumable) receives() string {
	if r.ReceivesMessages == "" {
		return SideA
	}
	return r.ReceivesMessages
}

func (r *Resumable) communication() string {
	if r.ParentCommunication == "" {
		return Implicit
	}
	return r.ParentCommunication
}

func (s *Subagent) blocking() bool { return s.Blocking == nil || *s.Blocking }

func on(b *bool) bool { return b == nil || *b }

// check reports what is wrong with the configuration by itself.
func (s *Subagent) check(prompt string) error {
	if s.Name == "" {
		return fmt.Errorf("%w: prompt %s: a subagent without a name", ErrDefinition, prompt)
	}
	if err := s.Resumable.check(); err != nil {
		return fmt.Errorf("%w: prompt %s: subagent %s: %v", ErrDefinition, prompt, s.Name, err)
	}
	if s.Immediate.grouped() && s.Immediate.NameEnv == "" {
		return fmt.Errorf("%w: prompt %s: subagent %s: immediate needs nameEnv to name its instances", ErrDefinition, prompt, s.Name)
	}
	return nil
}

// check reports what is wrong with a resumable sub-agent's configuration (none without one).
func (r *Resumable) check() error {
	switch {
	case r == nil:
		return nil
	case r.receives() != SideA && r.receives() != SideB:
		return fmt.Errorf("receives_messages %q: want side_a or side_b", r.ReceivesMessages)
	case r.communication() != Implicit && r.communication() != Explicit:
		return fmt.Errorf("parentCommunication %q: want implicit or explicit", r.ParentCommunication)
	case r.MaxInstances < 0 || r.MaxInstances > maxInstancesLimit:
		return fmt.Errorf("maxInstances %d: want 0 (the default, %d) to %d", r.MaxInstances, DefaultMaxInstances, maxInstancesLimit)
	}
	return nil
}

// defaultArgs is the argument schema of a prompt or agent run as a tool that declares none.
func defaultArgs() *schema.Schema {
	return &schema.Schema{Type: "object", Required: []string{"message"}, Properties: map[string]*schema.Schema{
		"message": {Type: "string", MaxLength: ptr(maxMessageChars), Description: "What to ask, in full: the called prompt sees nothing else of this conversation."},
	}}
}

// argsOf is the argument schema a prompt takes when run as a tool.
func argsOf(p *Prompt) *schema.Schema {
	if p.Args != nil {
		return p.Args
	}
	return defaultArgs()
}

// withProperty returns s with an extra property (s's own properties win), for the attachments
// and name arguments a configuration names but a schema may not declare.
func withProperty(s *schema.Schema, name string, prop *schema.Schema) *schema.Schema {
	if name == "" {
		return s
	}
	if _, ok := s.Properties[name]; ok {
		return s
	}
	out := *s
	out.Properties = make(map[string]*schema.Schema, len(s.Properties)+1)
	for k, v := range s.Properties {
		out.Properties[k] = v
	}
	out.Properties[name] = prop
	return &out
}

func attachmentsProperty() *schema.Schema {
	return &schema.Schema{Type: "array", Description: "Paths of this thread's files to hand over, each under /attachments/.",
		Items: &schema.Schema{Type: "string"}, MaxItems: ptr(maxAttachmentsPerCall)}
}

// maxMessageChars bounds a message one thread sends another (a child's first message, a
// subagent_message): it is stored in the child's history, and while the child is deferred, in
// its thread's state.
const maxMessageChars = 64 << 10

// maxAttachmentsPerCall bounds the files one call hands to another thread.
const maxAttachmentsPerCall = 32

func ptr[T any](v T) *T { return &v }

// toolDescription is what the model reads about a prompt or agent offered as a tool.
func toolDescription(kind, name, description string) string {
	d := strings.TrimSpace(description)
	if d == "" {
		d = fmt.Sprintf("Runs the %s %s.", kind, name)
	}
	return d
}

// variablesOf is what a prompt declares, for checks of a child's required variables.
func variablesOf(p *Prompt) []quiver.Variable { return p.Variables }

// UnmarshalJSON reads a prompt's name alone, or the configuration.
func (s *Subprompt) UnmarshalJSON(b []byte) error {
	if json.Unmarshal(b, &s.Name) == nil {
		*s = Subprompt{Name: s.Name}
		return nil
	}
	type plain Subprompt
	var p plain
	if err := unmarshalCanonical(b, reflect.TypeFor[Subprompt](), &p, true); err != nil {
		return fmt.Errorf("subprompt: want a prompt's name or {name, include_text_response, include_tool_calls, include_errors, "+
			"init_user_message_property, init_attachments_property}: %v", err)
	}
	*s = Subprompt(p)
	return nil
}

// UnmarshalJSON reads an agent's name alone, or the configuration.
func (s *Subagent) UnmarshalJSON(b []byte) error {
	if json.Unmarshal(b, &s.Name) == nil {
		*s = Subagent{Name: s.Name}
		return nil
	}
	type plain Subagent
	var p plain
	doc, err := canonicalJSON(b, reflect.TypeFor[Subagent]())
	if obj, ok := doc.(map[string]any); ok && obj["resumable"] == false {
		delete(obj, "resumable") // false: not resumable, which is no Resumable at all
	}
	if err == nil {
		err = decodeCanonical(doc, &p, true)
	}
	if err != nil {
		return fmt.Errorf("subagent: want an agent's name or {name, blocking, init_user_message_property, init_attachments_property, "+
			"init_agent_name_property, immediate, optional, resumable}: %v", err)
	}
	*s = Subagent(p)
	return nil
}

// checkNested reports prompts whose subprompts and subagents name what the catalog does not
// have: a subprompt must be a prompt exposed as a tool, a subagent a dual-AI agent.
func (c *Catalog) checkNested() error {
	for _, name := range keys(c.Prompts) {
		if err := c.checkPromptNested(c.Prompts[name]); err != nil {
			return err
		}
	}
	for _, name := range keys(c.Agents) {
		for _, p := range c.Agents[name].Prompts() {
			if err := c.checkPromptNested(p); err != nil {
				return fmt.Errorf("agent %s: %w", name, err)
			}
		}
	}
	return nil
}

func (c *Catalog) checkPromptNested(p *Prompt) error {
	if p == nil {
		return nil
	}
	for _, sp := range p.Subprompts {
		if err := c.checkSubprompt(p, sp); err != nil {
			return err
		}
	}
	for _, sa := range p.Subagents {
		if err := c.checkSubagent(p, sa); err != nil {
			return err
		}
	}
	return nil
}

// checkSubprompt checks that a subprompt of p is a prompt of the catalog exposed as a tool,
// and its init properties.
func (c *Catalog) checkSubprompt(p *Prompt, sp Subprompt) error {
	q, ok := c.Prompts[sp.Name]
	switch {
	case !ok:
		return fmt.Errorf("%w: prompt %s: subprompt %q is not defined (prompts: %v)", ErrDefinition, p.Name, sp.Name, keys(c.Prompts))
	case !q.ExposeAsTool:
		return fmt.Errorf("%w: prompt %s: subprompt %q is not exposed as a tool: set expose_as_tool: true in its definition", ErrDefinition, p.Name, sp.Name)
	}
	return sp.checkInit(p.Name, q)
}

// checkSubagent checks a sub-agent of p: its configuration, that it is a dual_ai agent of the
// catalog, and its init properties.
func (c *Catalog) checkSubagent(p *Prompt, sa Subagent) error {
	if err := sa.check(p.Name); err != nil {
		return err
	}
	a, ok := c.Agents[sa.Name]
	switch {
	case !ok:
		return fmt.Errorf("%w: prompt %s: subagent %q is not defined (agents: %v)", ErrDefinition, p.Name, sa.Name, keys(c.Agents))
	case a.Type != DualAI:
		return fmt.Errorf("%w: prompt %s: subagent %q is a human-facing agent: give it type: dual_ai, or name it in tools for a handoff",
			ErrDefinition, p.Name, sa.Name)
	}
	return sa.checkInit(p.Name, a)
}

func (r *Runner) buildNested(p *Prompt) (*nestedSet, error) {
	if r.catalog() == nil {
		if len(p.Subprompts) > 0 || len(p.Subagents) > 0 {
			return nil, fmt.Errorf("%w: prompt %s names subprompts or subagents, but the runner has no Catalog to find them in", ErrDefinition, p.Name)
		}
		return &nestedSet{}, nil
	}
	b := &nestedBuilder{r: r, p: p, ns: &nestedSet{}, seen: map[string]bool{}}
	for _, step := range []func() error{b.subprompts, b.subagents, b.exposed} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	ns := b.ns
	if len(ns.resumable) > 0 {
		var err error
		if ns.create, ns.message, ns.terminate, err = r.lifecycleTools(ns.resumable); err != nil {
			return nil, fmt.Errorf("%w: prompt %s: %v", ErrDefinition, p.Name, err)
		}
	}
	return ns, nil
}

// nestedBuilder gathers the nested tools of prompt p, once for each name.
type nestedBuilder struct {
	r    *Runner
	p    *Prompt
	ns   *nestedSet
	seen map[string]bool
}

func (b *nestedBuilder) add(t *quiver.Tool, optional string) {
	b.ns.direct = append(b.ns.direct, nestedTool{tool: t, optional: optional})
	b.seen[t.Name()] = true
}

// definitionError is err, about making one of the prompt's nested tools, as a bad definition.
func (b *nestedBuilder) definitionError(err error) error {
	return fmt.Errorf("%w: prompt %s: %v", ErrDefinition, b.p.Name, err)
}

// subprompts adds a tool for each of the prompt's subprompts.
func (b *nestedBuilder) subprompts() error {
	for _, sp := range b.p.Subprompts {
		if q, ok := b.r.catalog().Prompts[sp.Name]; ok {
			if err := sp.checkInit(b.p.Name, q); err != nil {
				return err // a catalog built in Go, not read by LoadDir, meets the check here
			}
		}
		t, err := b.r.promptTool(sp)
		if err != nil {
			return b.definitionError(err)
		}
		b.add(t, "")
	}
	return nil
}

// subagents adds a tool for each of the prompt's sub-agents that a model calls; resumable ones
// are gathered for their lifecycle tools, immediate ones started by the runtime.
func (b *nestedBuilder) subagents() error {
	for _, sa := range b.p.Subagents {
		a, err := b.subagent(sa)
		if err != nil {
			return err
		}
		switch {
		case sa.Resumable != nil:
			b.ns.resumable = append(b.ns.resumable, sa)
		case sa.Immediate != nil && sa.Immediate.Enabled:
			// started by the runtime, not called
		default:
			t, err := b.r.agentTool(a, sa)
			if err != nil {
				return b.definitionError(err)
			}
			b.add(t, sa.Optional)
		}
	}
	return nil
}

// subagent is the agent a sub-agent configuration names, once the configuration is checked.
func (b *nestedBuilder) subagent(sa Subagent) (*Agent, error) {
	if err := sa.check(b.p.Name); err != nil {
		return nil, err
	}
	a, ok := b.r.catalog().Lookup(sa.Name)
	if !ok || b.r.catalog().Agents[sa.Name] == nil {
		return nil, fmt.Errorf("%w: prompt %s: subagent %s is not an agent of the catalog (agents: %v)", ErrDefinition, b.p.Name, sa.Name, b.r.catalog().agentNames())
	}
	if err := sa.checkInit(b.p.Name, a); err != nil {
		return nil, err
	}
	return a, nil
}

// exposed adds the prompts and agents exposed as tools that the prompt names among its tools.
// Built once per prompt whatever registry a run has (each workspace has its own): a run
// leaves out the nested tools whose name its registry has (see withNested).
func (b *nestedBuilder) exposed() error {
	for _, name := range b.p.Tools {
		if isGlob(name) || b.seen[name] {
			continue
		}
		t, err := b.exposedTool(name)
		if err != nil {
			return b.definitionError(err)
		}
		if t != nil {
			b.add(t, "")
		}
	}
	return nil
}

// exposedTool is the tool of the prompt or agent called name when it is exposed as a tool; nil
// when none is.
func (b *nestedBuilder) exposedTool(name string) (*quiver.Tool, error) {
	if sp, ok := b.r.catalog().Prompts[name]; ok && sp.ExposeAsTool {
		return b.r.promptTool(Subprompt{Name: name})
	}
	if a, ok := b.r.catalog().Agents[name]; ok && a.ExposeAsTool {
		return b.r.agentTool(a, Subagent{Name: name})
	}
	return nil, nil
}
