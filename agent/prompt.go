// Package agent runs prompts and agents on threads: the loop that asks a model, persists its
// turn, runs the calls it made one by one through the dispatcher, persists each result before
// the next, and goes on until a stop rule holds. A run pauses, persisted, for a
// call that needs a person's confirmation or a client's result, and resumes exactly there; a
// run interrupted by a crash resumes from the store without losing a step or running a
// completed call again.
package agent

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
)

// Prompt is what a model is run with: system text, model, tools, variables, stop rules and an
// optional structured output.
type Prompt struct {
	Name        string `json:"name" yaml:"name"`
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	// System is the system prompt. The tools' examples are added after it.
	System string `json:"system,omitempty" yaml:"system,omitempty"`
	// Model is "provider:model" (for example "openai:gpt-4.1-mini"); empty uses the runner's.
	Model string `json:"model,omitempty" yaml:"model,omitempty"`
	// Tools are the names (or glob patterns) of the tools bound to the prompt; Allow and Deny
	// narrow them (an empty Allow permits all, Deny wins).
	Tools []string `json:"tools,omitempty" yaml:"tools,omitempty"`
	Allow []string `json:"allow,omitempty" yaml:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty" yaml:"deny,omitempty"`
	// Variables the prompt declares; they resolve on the prompt's layer.
	Variables quiver.Variables `json:"variables,omitempty" yaml:"variables,omitempty"`
	// Output, when set, asks the model for a final answer in this JSON Schema. With tools, the
	// model is asked for the composed {calls, output} document.
	Output *schema.Schema `json:"output,omitempty" yaml:"-"`
	Stop   StopRules      `json:"stop" yaml:"stop"`
	// Strict asks OpenAI models for strict mode on the tools that allow it.
	Strict bool `json:"strict,omitempty" yaml:"strict,omitempty"`
	// ReasoningForCall offers the model a _reasoningForCall argument on every tool, to say why
	// it makes each call; it is stored with the call and never reaches the tool. Off by
	// default, in native tool calling and in the composed {calls, output} mode alike: the
	// {calls, output} shape needs no such field, and a model asked for it spends tokens on it.
	ReasoningForCall bool `json:"reasoning_for_call,omitempty" yaml:"reasoning_for_call,omitempty"`
	// UntrustedToolOutput marks what tools return as data, not instructions, in every request
	// to the model: each result's text is sent between delimiters with an id of its own
	// (any delimiter inside the text neutralised, so the text cannot end it early), and the
	// system prompt says that nothing inside them is an instruction. It narrows prompt
	// injection through tool output (a web page or a file that says "ignore your
	// instructions") without preventing it; see docs/SECURITY.md. Off by default: the model
	// then sees each result as the tool wrote it. A request delegated with _delegate keeps
	// the caller's setting when the caller has it on.
	UntrustedToolOutput bool `json:"untrusted_tool_output,omitempty" yaml:"untrusted_tool_output,omitempty"`
	// MaxCallsPerStep bounds the tool calls one model turn may ask for; 0 means
	// DefaultMaxCallsPerStep. The calls past it are answered with an error result
	// (too_many_calls) and not run.
	MaxCallsPerStep int      `json:"max_calls_per_step,omitempty" yaml:"max_calls_per_step,omitempty"`
	Temperature     *float64 `json:"temperature,omitempty" yaml:"temperature,omitempty"`
	MaxTokens       int      `json:"max_tokens,omitempty" yaml:"max_tokens,omitempty"`

	// ExposeAsTool lets other prompts call this one as a tool, named after it: it runs as
	// a nested flow with its own tools and model, and its answer is the call's result.
	ExposeAsTool bool `json:"expose_as_tool,omitempty" yaml:"expose_as_tool,omitempty"`
	// Args is the argument schema the prompt takes as a tool (and as a sub-agent's prompt);
	// nil means {message: string}.
	Args *schema.Schema `json:"args,omitempty" yaml:"-"`
	// Subprompts and Subagents configure the prompts and dual-AI agents this prompt calls as
	// tools (see Subprompt, Subagent); naming one in Tools is the same with every default.
	// Handoffs to human-facing agents are named in Tools.
	Subprompts []Subprompt `json:"subprompts,omitempty" yaml:"-"`
	Subagents  []Subagent  `json:"subagents,omitempty" yaml:"-"`

	// MetaFields enables stateful meta-fields ("_outputPath", "_instance",
	// "_delegate") on every tool of the prompt, besides those a tool enables itself: the
	// model is offered them, and its calls may use them.
	MetaFields []string `json:"meta_fields,omitempty" yaml:"meta_fields,omitempty"`
	// Instances name the instances the prompt's runs keep state for: each has a
	// state object of its own on the thread, which calls naming it in _instance read and
	// write. A run gives its thread those it does not have yet.
	Instances []string `json:"instances,omitempty" yaml:"instances,omitempty"`
}

// StopRules say when a run is finished. The run also stops, paused, for a confirmation or a
// client tool, and on cancellation.
type StopRules struct {
	// NoCalls ends the run when the model answers without calls (default true).
	NoCalls *bool `json:"no_calls,omitempty" yaml:"no_calls,omitempty"`
	// OnOutput ends the run when the model gives the structured output (default true).
	OnOutput *bool `json:"on_output,omitempty" yaml:"on_output,omitempty"`
	// MaxSteps bounds the model turns of one run; 0 means DefaultMaxSteps.
	MaxSteps int `json:"max_steps,omitempty" yaml:"max_steps,omitempty"`
	// Tools are stop tools: once one of them has run, the run ends after the step.
	Tools []string `json:"tools,omitempty" yaml:"tools,omitempty"`
}

// DefaultMaxSteps bounds a run whose prompt sets no MaxSteps.
const DefaultMaxSteps = 25

// DefaultMaxCallsPerStep bounds the calls of one model turn when the prompt sets no
// MaxCallsPerStep: far more than a sane model asks for at once, and few enough that a model
// stuck repeating itself cannot queue work without end.
const DefaultMaxCallsPerStep = 128

func (p *Prompt) maxCallsPerStep() int {
	if p.MaxCallsPerStep > 0 {
		return p.MaxCallsPerStep
	}
	return DefaultMaxCallsPerStep
}

func (s StopRules) noCalls() bool  { return s.NoCalls == nil || *s.NoCalls }
func (s StopRules) onOutput() bool { return s.OnOutput == nil || *s.OnOutput }
func (s StopRules) maxSteps() int {
	if s.MaxSteps <= 0 {
		return DefaultMaxSteps
	}
	return s.MaxSteps
}

// Agent is a named, human-facing entry point that runs a prompt.
type Agent struct {
	Name        string  `json:"name" yaml:"name"`
	Description string  `json:"description,omitempty" yaml:"description,omitempty"`
	Prompt      *Prompt `json:"prompt" yaml:"-"`
	// Type is who the agent talks to: HumanFacing (the default) or DualAI. It decides what
	// calling the agent as a tool does: a handoff or a sub-agent.
	Type AgentType `json:"type,omitempty" yaml:"type,omitempty"`
	// ExposeAsTool lets prompts name the agent in their tools.
	ExposeAsTool bool `json:"expose_as_tool,omitempty" yaml:"expose_as_tool,omitempty"`
	// SideB makes a dual-AI agent two-sided: Prompt is then side_a and SideB the other
	// participant, and the two take turns on one thread by Conversation (see sides.go).
	// Without it a dual-AI agent is its one prompt, acting as side_a.
	SideB *Prompt `json:"side_b,omitempty" yaml:"-"`
	// Conversation is the rules of a two-sided agent's turns.
	Conversation Conversation `json:"conversation,omitzero" yaml:"conversation,omitempty"`
}

// ErrDefinition reports a prompt or agent that is not well formed.
var ErrDefinition = errors.New("agent: bad definition")

// Check reports what is wrong with the prompt by itself.
func (p *Prompt) Check() error {
	switch {
	case p == nil:
		return fmt.Errorf("%w: no prompt", ErrDefinition)
	case p.Name == "":
		return fmt.Errorf("%w: a prompt needs a name", ErrDefinition)
	}
	for _, check := range []func() error{p.checkBounds, p.checkPolicy, p.checkVariables, p.checkInstances, p.checkStopTools} {
		if err := check(); err != nil {
			return fmt.Errorf("%w: prompt %s: %v", ErrDefinition, p.Name, err)
		}
	}
	return nil
}

// checkBounds checks that the prompt's bounds are not negative.
func (p *Prompt) checkBounds() error {
	switch {
	case p.Stop.MaxSteps < 0:
		return fmt.Errorf("stop.max_steps %d is negative", p.Stop.MaxSteps)
	case p.MaxTokens < 0:
		return fmt.Errorf("max_tokens %d is negative", p.MaxTokens)
	case p.MaxCallsPerStep < 0:
		return fmt.Errorf("max_calls_per_step %d is negative", p.MaxCallsPerStep)
	}
	return nil
}

func (p *Prompt) checkPolicy() error {
	pol := p.policy()
	return pol.Validate()
}

// checkVariables checks that the prompt's variables have names, and its meta-fields.
func (p *Prompt) checkVariables() error {
	for _, v := range p.Variables {
		if v.Name == "" {
			return errors.New("a variable without a name")
		}
	}
	return quiver.CheckMetaFields(p.MetaFields)
}

// checkInstances checks the names of the prompt's instances, each listed once, and their
// number.
func (p *Prompt) checkInstances() error {
	if len(p.Instances) > store.MaxInstances {
		return fmt.Errorf("%d instances, over the limit of %d", len(p.Instances), store.MaxInstances)
	}
	for i, name := range p.Instances {
		if err := store.CheckInstance(name); err != nil {
			return fmt.Errorf("instances: %v", err)
		}
		if slices.Contains(p.Instances[:i], name) {
			return fmt.Errorf("instance %q is listed twice", name)
		}
	}
	return nil
}

// checkStopTools checks that the prompt's stop tools are among its tools.
func (p *Prompt) checkStopTools() error {
	for _, st := range p.Stop.Tools {
		if !slices.ContainsFunc(p.Tools, func(t string) bool { return globMatch(t, st) }) {
			return fmt.Errorf("stop tool %q is not among its tools %v", st, p.Tools)
		}
	}
	return nil
}

// policy is the prompt's tool policy.
func (p *Prompt) policy() quiver.Policy {
	bound := p.Tools
	if bound == nil {
		bound = []string{} // no tools listed: none bound
	}
	return quiver.Policy{Bound: bound, Allow: p.Allow, Deny: p.Deny}
}

// CheckTools reports tools the prompt names that reg does not have: an ErrDefinition, or, when
// every one missing is known to a source that is not connected yet (a remote MCP server
// connecting: see quiver.Registry.Explain), an ErrToolsUnavailable, which time may fix. Glob
// patterns are not checked: they may match nothing.
func (p *Prompt) CheckTools(reg *quiver.Registry) error {
	var missing, notYet []string
	var why error
	for _, name := range p.Tools {
		if isGlob(name) {
			continue
		}
		if _, ok := reg.Lookup(name); ok {
			continue
		}
		if err := reg.Missing(name); err != nil {
			notYet = append(notYet, name)
			why = cmp.Or(why, err)
			continue
		}
		missing = append(missing, name)
	}
	if len(missing) > 0 {
		var names []string
		for _, t := range reg.Tools() {
			names = append(names, t.Name())
		}
		return fmt.Errorf("%w: prompt %s names unknown tools %v; registered: %v", ErrDefinition, p.Name, missing, names)
	}
	if len(notYet) > 0 {
		return fmt.Errorf("%w: prompt %s names tools %v, which are not there yet: %w", ErrToolsUnavailable, p.Name, notYet, why)
	}
	return nil
}

// Check reports what is wrong with the agent.
func (a *Agent) Check() error {
	if a == nil || a.Name == "" {
		return fmt.Errorf("%w: an agent needs a name", ErrDefinition)
	}
	if a.Prompt == nil {
		return fmt.Errorf("%w: agent %s has no prompt", ErrDefinition, a.Name)
	}
	if err := a.Prompt.Check(); err != nil {
		return fmt.Errorf("agent %s: %w", a.Name, err)
	}
	if a.Type != "" && a.Type != HumanFacing && a.Type != DualAI {
		return fmt.Errorf("%w: agent %s: type %q: want ai_human or dual_ai", ErrDefinition, a.Name, a.Type)
	}
	return a.checkSides()
}

// globMatch reports whether name matches pattern as a policy does (path.Match, "/" plain).
func globMatch(pattern, name string) bool {
	if pattern == name {
		return true
	}
	ok, err := path.Match(strings.ReplaceAll(pattern, "/", "\x00"), strings.ReplaceAll(name, "/", "\x00"))
	return err == nil && ok
}

func isGlob(name string) bool { return strings.ContainsAny(name, `*?[\`) }
