package quiver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quiverhq/quiver/schema"
)

func (d *Dispatcher) mask(next Handler) Handler {
	return func(ctx context.Context, c *Call) *Result {
		r := next(ctx, c)
		if m := secretReplacer(c.secrets); m != nil {
			redact(r, m)
			// The call is done: what hooks and the recorder see of its arguments is masked
			// too (a tool may pass a secret on to a tool it calls).
			c.Args = redactJSON(c.Args, m)
		}
		return r
	}
}

func (d *Dispatcher) lookupAndPolicy(next Handler) Handler {
	return func(ctx context.Context, c *Call) *Result {
		if r := d.lookup(ctx, c); r != nil {
			return r
		}
		if d.Admit != nil {
			done, refusal := d.Admit(ctx, c.tool)
			if refusal != nil {
				return refusal
			}
			defer done()
		}
		return next(ctx, c)
	}
}

// lookup sets the call's tool, or returns the error result of a tool that is unknown or that
// the policy does not permit.
func (d *Dispatcher) lookup(ctx context.Context, c *Call) *Result {
	allowed := d.entitledFor(ctx)
	t, ok := d.registry().Lookup(c.Name)
	if !ok {
		// A tool that is missing for a reason (its remote server is down) says so, unless the
		// policy would refuse it anyway: then it is unknown, as any tool out of reach.
		if permitted, _ := d.Policy.permits(c.Name); !permitted {
			return d.unknown(c.Name, allowed)
		}
		var err error
		if t, err = d.awaitTool(ctx, c.Name); err != nil && allowed == nil {
			return errorResult(err)
		}
		if t == nil {
			return d.unknown(c.Name, allowed)
		}
	}
	if allowed != nil && !allowed(t) {
		return d.unknown(c.Name, allowed)
	}
	if ok, why := d.Policy.Permits(t); !ok {
		return Errorf(CodePolicyDenied, "tool %s is not available: %s. %s", quoteName(c.Name), why, d.available(allowed))
	}
	c.tool, c.entitled = t, allowed
	return nil
}

// unknown is the answer to a call of a tool that is not there, or, for a caller whose
// entitlements restrict them (allowed set), not there for them: the same words either way.
func (d *Dispatcher) unknown(name string, allowed func(*Tool) bool) *Result {
	if allowed != nil {
		return Errorf(CodeNotEntitled, "no tool %s is available to this caller. %s", quoteName(name), d.available(allowed))
	}
	return Errorf(CodeUnknownTool, "unknown tool %s. %s", quoteName(name), d.available(nil))
}

// awaitTool is a tool the registry does not hold, once it is there: while its source says it
// is connecting (a ToolPending), the call waits for it, at most ToolWait and within ctx. It
// returns the reason the tool cannot be called when it stays missing, and neither tool nor
// reason for a name no source knows.
func (d *Dispatcher) awaitTool(ctx context.Context, name string) (*Tool, error) {
	wait := cmp.Or(d.ToolWait, DefaultToolWait)
	if wait < 0 {
		wait = 0
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		err := d.registry().Missing(name)
		var pending *ToolPending
		if !errors.As(err, &pending) {
			return nil, err
		}
		select {
		case <-pending.Ready:
		case <-deadline.C:
			return nil, fmt.Errorf("%w (the call waited %s for it)", pending.Err, wait)
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (the call ended while it waited: %w)", pending.Err, context.Cause(ctx))
		}
		if t, ok := d.registry().Lookup(name); ok {
			return t, nil
		}
	}
}

// available lists the tools the model may call, for error results that must say what exists.
func (d *Dispatcher) available(allowed func(*Tool) bool) string {
	tools := Entitled(d.Tools(), allowed)
	if len(tools) == 0 {
		return "No tools are available."
	}
	const max = 50
	names := make([]string, 0, min(len(tools), max))
	for i, t := range tools {
		if i == max {
			break
		}
		names = append(names, t.Name())
	}
	s := "Available tools: " + strings.Join(names, ", ")
	if len(tools) > max {
		s += fmt.Sprintf(" and %d more", len(tools)-max)
	}
	return s + "."
}

// quoteName quotes a name taken from a call for an error message: escaped, and cut short, so a
// hostile or broken name is never echoed back raw.
func quoteName(name string) string {
	return fmt.Sprintf("%q", truncate(strings.ToValidUTF8(name, "\uFFFD"), 64))
}

func (d *Dispatcher) beforeCall(next Handler) Handler {
	if d.Hooks.BeforeCall == nil {
		return next
	}
	return func(ctx context.Context, c *Call) *Result {
		if err := d.Hooks.BeforeCall(ctx, c); err != nil {
			return Errorf(CodeRejected, "call to %s was rejected: %v", c.Name, err)
		}
		return next(ctx, c)
	}
}

func (d *Dispatcher) confirm(next Handler) Handler {
	return func(ctx context.Context, c *Call) *Result {
		if !c.tool.spec.RequiresConfirmation || c.Approved {
			return next(ctx, c)
		}
		if d.Confirm == nil {
			return Errorf(CodeConfirmationRequired, "tool %s requires a person's confirmation before it runs; the call is waiting for a decision", c.Name)
		}
		dec, err := d.Confirm(ctx, c)
		if err != nil {
			return Errorf(CodeConfirmationRequired, "tool %s requires confirmation, which could not be obtained: %v", c.Name, err)
		}
		asked := c.Args
		r := d.applyDecision(ctx, c, dec)
		// Taken here, before hooks and middleware see the call: the record says what the
		// person approved, not what code made of it afterwards.
		rec := decisionRecord(dec, asked, c.Args)
		if r == nil {
			c.Approved = true
			r = next(ctx, c)
		}
		if rec == nil {
			return r
		}
		// The mask stage, outside this one, masks the record's secrets with the result's.
		return withMeta(r, map[string]any{MetaDecision: rec})
	}
}

func (d *Dispatcher) resolveVariables(next Handler) Handler {
	return func(ctx context.Context, c *Call) *Result {
		runAs := c.tool.spec.RunAs
		if runAs == "" {
			return d.withVariables(ctx, c, ScopeFrom(ctx), next)
		}
		// The tool runs as another user (Spec.RunAs): its variables are that user's; the
		// call stays the caller's, and its result says who both are.
		scope := ScopeFrom(ctx)
		caller := scope.UserID
		scope.UserID = runAs
		return withRunAsMeta(d.withVariables(ctx, c, scope, next), caller, runAs)
	}
}

// withVariables resolves the call's variables for scope and runs next with them.
func (d *Dispatcher) withVariables(ctx context.Context, c *Call, scope Scope, next Handler) *Result {
	decls := c.tool.spec.Variables
	if len(decls) == 0 {
		return next(ctx, c)
	}
	values, err := ResolveVariables(ctx, d.Resolver, scope, decls)
	var secrets []string
	for _, v := range decls {
		if val, ok := values[v.Name]; ok && v.Type == VarSecret && val != "" {
			secrets = append(secrets, val)
		}
	}
	if secrets != nil {
		// The forms of the secrets are computed once, here, with those the call inherited;
		// the one masker serves the result, the arguments and every log message.
		c.secrets = []*masker{newMasker(c.secrets, secrets)}
	}
	var missing *MissingVariablesError
	switch {
	case errors.As(err, &missing) && c.tool.spec.RunAs != "":
		return Errorf(CodeMissingVariable, "tool %s cannot run: %v (it runs as user %s: a user value is that user's)", c.Name, err, c.tool.spec.RunAs)
	case errors.As(err, &missing):
		return Errorf(CodeMissingVariable, "tool %s cannot run: %v", c.Name, err)
	case err != nil:
		return Errorf(CodeVariableError, "tool %s cannot run: %v", c.Name, err)
	}
	c.vars = values
	return next(ctx, c)
}

// withRunAsMeta returns r with its Meta naming the caller (when known) and the user the tool
// ran as (caller_user_id, runtime_user_id), beside what the tool put there.
func withRunAsMeta(r *Result, caller, runAs string) *Result {
	set := map[string]any{"runtime_user_id": runAs}
	if caller != "" {
		set["caller_user_id"] = caller
	}
	return withMeta(r, set)
}

func (d *Dispatcher) checkOutput(next Handler) Handler {
	return func(ctx context.Context, c *Call) *Result {
		r := next(ctx, c)
		t := c.tool
		// A delegated call's output comes from a model, not from the Go type the schema was
		// inferred from: it is checked even when the tool's own results need not be.
		if r.IsError() || !t.declaresOutput() || (t.outputTrusted && c.delegation == nil) || c.outputChecked {
			return r
		}
		if r.Value == nil && t.spec.OutputAdvisory {
			return withMeta(r, map[string]any{OutputWarningMeta: fmt.Sprintf("%s is described by an output schema but returned no structured value", c.Name)})
		}
		if r.Value == nil {
			return Errorf(CodeInvalidOutput, "tool %s declares an output schema but returned no structured value", c.Name)
		}
		out, err := t.outputSchema()
		if err != nil && t.spec.OutputAdvisory {
			// Only an advisory schema is left unchecked by NewTool: one that cannot be compiled
			// is the document's fault, like an answer that does not match it.
			return withMeta(r, map[string]any{OutputWarningMeta: fmt.Sprintf("%s is described by an output schema that cannot be used: %v", c.Name, err)})
		}
		if err != nil {
			return Errorf(CodeInvalidOutput, "tool %s: its output schema cannot be compiled: %v", c.Name, err)
		}
		v, err := schema.Decode(r.Value)
		if err == nil {
			err = out.Validate(v)
		}
		if err != nil && t.spec.OutputAdvisory {
			return withMeta(r, map[string]any{OutputWarningMeta: fmt.Sprintf("the output of %s does not match the output schema it is described by: %v", c.Name, err)})
		}
		if err != nil {
			return Errorf(CodeInvalidOutput, "the output of %s does not match its output schema: %v", c.Name, err)
		}
		return r
	}
}

// OutputWarningMeta is the key of a result's Meta that says how a result of a tool whose
// output schema is advisory (Spec.OutputAdvisory) departs from it.
const OutputWarningMeta = "output_warning"
