package quiver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/internal/jsonptr"
	"github.com/quiverhq/quiver/schema"
)

// The stateful meta-fields of a call say where its output goes and how
// it runs: _outputPath writes the output into the thread's state, _instance routes the call's
// reads and writes to one instance's state, _delegate runs the call as an isolated request.
// A tool accepts them when its Spec.MetaFields or the Dispatcher's MetaFields (an agent's)
// enable them; the dispatcher parses them after decoding, refuses malformed or unenabled ones
// before the tool runs, and never passes them to the handler.

// OutputPath is a call's parsed _outputPath.
type OutputPath struct {
	// Paths are JSON Pointers into the state, in the order written.
	Paths []string
	// Any is "a || b": the output goes to the first path still free. Otherwise ("a && b", or
	// one path) it goes to every path, and all must be free.
	Any bool
}

// String is the _outputPath as written in canonical form.
func (p *OutputPath) String() string {
	sep := " && "
	if p.Any {
		sep = " || "
	}
	return strings.Join(p.Paths, sep)
}

// Delegation is a call's parsed _delegate: a saved request (Prompt, the name of a prompt) or
// an anonymous one (System, with optional Model and Tools).
type Delegation struct {
	Prompt string   `json:"prompt,omitempty"`
	System string   `json:"system,omitempty"`
	Model  string   `json:"model,omitempty"`
	Tools  []string `json:"tools,omitempty"`
}

// Limits on _delegate, so that a model cannot hand the runtime a huge request to run.
const (
	maxDelegateSystem = 32 << 10
	maxDelegateTools  = 64
)

// Delegator runs calls that name _delegate: an agent runtime (agent.Runner) runs each in a
// child thread of the call's thread and returns the request's final output as the result.
// The dispatcher then checks that output against the tool's output schema.
type Delegator interface {
	Delegate(ctx context.Context, call *Call, d *Delegation) *Result
}

// StateRecorder is a Recorder that keeps thread state: the dispatcher checks a call's
// _instance against Instances before the tool runs, and stores a result whose call names
// _outputPath with RecordOutput, which writes the output in the transaction that stores the
// result.
type StateRecorder interface {
	Recorder
	// Instances returns the instances of the thread the call in ctx runs on. An error says
	// the call has no state to use (it runs on no thread); the call fails with it.
	Instances(ctx context.Context) ([]string, error)
	// RecordOutput stores r and writes out at the call's output paths (in the state of its
	// instance) in one transaction, and returns the result as stored: r, or, when the state
	// cannot take the write (a path already written, a path through a value that is not an
	// object, a state grown too large), an error result saying which path and why, stored in
	// r's place with nothing written.
	RecordOutput(ctx context.Context, call *Call, r *Result, out json.RawMessage) (*Result, error)
}

// CheckMetaFields reports a list of meta-fields to enable that names one Quiver does not
// know (those of schema.MetaFields) or names one twice.
func CheckMetaFields(fields []string) error {
	for i, f := range fields {
		if !slices.Contains(schema.MetaFields, f) {
			return fmt.Errorf("unknown meta-field %q in meta_fields (allowed: %s)", f, strings.Join(schema.MetaFields, ", "))
		}
		if slices.Contains(fields[:i], f) {
			return fmt.Errorf("meta-field %q is listed twice in meta_fields", f)
		}
	}
	return nil
}

// OutputPath returns the call's parsed _outputPath, or nil (before decoding, or none given).
func (c *Call) OutputPath() *OutputPath { return c.outputPath }

// Instance returns the call's _instance, or "" for the thread's own state.
func (c *Call) Instance() string { return c.instance }

// Delegation returns the call's parsed _delegate, or nil.
func (c *Call) Delegation() *Delegation { return c.delegation }

// accepts reports whether the call's tool accepts meta-field f.
func (d *Dispatcher) accepts(c *Call, f string) bool {
	return slices.Contains(c.tool.spec.MetaFields, f) || slices.Contains(d.MetaFields, f)
}

// parseMeta reads the stateful meta-fields out of c.Meta. A null value counts as absent:
// strict dialects make every optional property nullable, and a model fills it with null.
func (d *Dispatcher) parseMeta(c *Call) *Result {
	c.outputPath, c.instance, c.delegation = nil, "", nil
	for _, f := range schema.MetaFields {
		raw, ok := c.Meta[f]
		if !ok {
			continue
		}
		if absent(raw) {
			delete(c.Meta, f)
			continue
		}
		if !d.accepts(c, f) {
			return Errorf(CodeInvalidArguments, "tool %s does not accept %s; leave it out (a tool or an agent enables it with meta_fields)", c.Name, f)
		}
		var r *Result
		switch f {
		case schema.OutputPathField:
			c.outputPath, r = parseOutputPath(c.Name, raw)
		case schema.InstanceField:
			if json.Unmarshal(raw, &c.instance) != nil || c.instance == "" {
				r = Errorf(CodeInvalidArguments, "%s of %s must be a non-empty string naming an instance, got %s", f, c.Name, truncate(string(raw), 64))
			}
		case schema.DelegateField:
			c.delegation, r = parseDelegation(c.Name, raw)
			if r == nil && c.tool.spec.Target == TargetClient {
				r = Errorf(CodeInvalidArguments, "%s runs in the client, so it cannot be delegated; leave %s out", c.Name, f)
			}
		}
		if r != nil {
			return r
		}
	}
	return nil
}

// absent reports a meta-field's value that means "not used": null, "", or an object of such
// values. Strict dialects make every optional property required and nullable, and models fill
// the ones they do not use with null or an empty value.
func absent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	switch {
	case bytes.Equal(raw, []byte("null")), bytes.Equal(raw, []byte(`""`)):
		return true
	case len(raw) > 0 && raw[0] == '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return false
		}
		for _, v := range obj {
			if v = bytes.TrimSpace(v); !absent(v) && !bytes.Equal(v, []byte("[]")) {
				return false
			}
		}
		return true
	}
	return false
}

func parseOutputPath(tool string, raw json.RawMessage) (*OutputPath, *Result) {
	const how = `write one JSON Pointer like "/plan/steps", "/a || /b" for the first free path, or "/a && /b" for all of them`
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, Errorf(CodeInvalidArguments, "%s of %s must be a string: %s", schema.OutputPathField, tool, how)
	}
	any, all := strings.Contains(s, "||"), strings.Contains(s, "&&")
	if any && all {
		return nil, Errorf(CodeInvalidArguments, "%s of %s mixes || and &&: %s", schema.OutputPathField, tool, how)
	}
	sep := "&&"
	if any {
		sep = "||"
	}
	parts := strings.Split(s, sep)
	if len(parts) > 8 {
		return nil, Errorf(CodeInvalidArguments, "%s of %s names %d paths, over the limit of 8", schema.OutputPathField, tool, len(parts))
	}
	out := &OutputPath{Any: any}
	segs := make([][]string, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		var err error
		if segs[i], err = jsonptr.Parse(p); err != nil {
			return nil, Errorf(CodeInvalidArguments, "%s of %s: %v; %s", schema.OutputPathField, tool, err, how)
		}
		for j := range i {
			if jsonptr.Overlap(segs[i], segs[j]) {
				return nil, Errorf(CodeInvalidArguments, "%s of %s: %s overlaps %s; the paths of one call name separate places",
					schema.OutputPathField, tool, p, out.Paths[j])
			}
		}
		out.Paths = append(out.Paths, p)
	}
	return out, nil
}

func parseDelegation(tool string, raw json.RawMessage) (*Delegation, *Result) {
	const how = `name a saved prompt ({"prompt": "NAME"}, or just "NAME") or describe one ({"system": "INSTRUCTIONS", "model": ..., "tools": [...]})`
	d := &Delegation{}
	var name string
	if json.Unmarshal(raw, &name) == nil {
		d.Prompt = name
	} else {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(d); err != nil {
			return nil, Errorf(CodeInvalidArguments, "%s of %s: %v; %s", schema.DelegateField, tool, err, how)
		}
	}
	d.Prompt, d.System, d.Model = strings.TrimSpace(d.Prompt), strings.TrimSpace(d.System), strings.TrimSpace(d.Model)
	switch {
	case d.Prompt != "" && (d.System != "" || d.Model != "" || len(d.Tools) > 0):
		return nil, Errorf(CodeInvalidArguments, "%s of %s names a saved prompt and describes one too; %s", schema.DelegateField, tool, how)
	case d.Prompt == "" && d.System == "":
		return nil, Errorf(CodeInvalidArguments, "%s of %s names no prompt and gives no system text; %s", schema.DelegateField, tool, how)
	case len(d.System) > maxDelegateSystem:
		return nil, Errorf(CodeInvalidArguments, "%s of %s: system is %d bytes, over the limit of %d", schema.DelegateField, tool, len(d.System), maxDelegateSystem)
	case len(d.Tools) > maxDelegateTools:
		return nil, Errorf(CodeInvalidArguments, "%s of %s names %d tools, over the limit of %d", schema.DelegateField, tool, len(d.Tools), maxDelegateTools)
	}
	return d, nil
}

// checkMeta is the pipeline's stage for the stateful meta-fields: it parses them and checks,
// before the tool runs, that this door can honour them.
func (d *Dispatcher) checkMeta(next Handler) Handler {
	return func(ctx context.Context, c *Call) *Result {
		if len(c.Meta) == 0 {
			c.outputPath, c.instance, c.delegation = nil, "", nil
			return next(ctx, c)
		}
		if r := d.parseMeta(c); r != nil {
			return r
		}
		if r := d.checkDoor(ctx, c); r != nil {
			return r
		}
		return next(ctx, c)
	}
}

// checkDoor checks that this dispatcher can honour the call's meta-fields: state for
// _outputPath and _instance (checkState), a Delegator for _delegate.
func (d *Dispatcher) checkDoor(ctx context.Context, c *Call) *Result {
	if r := d.checkState(ctx, c); r != nil {
		return r
	}
	if c.delegation != nil && d.Delegator == nil {
		return Errorf(CodeInvalidArguments, "%s: %s cannot be delegated here: this dispatcher has no runtime to run requests (an agent run or the server has one)",
			c.Name, schema.DelegateField)
	}
	return nil
}

// checkState checks that a call naming _outputPath or _instance can have state: its result
// is recorded on a thread by a recorder that keeps state, and its instance exists.
func (d *Dispatcher) checkState(ctx context.Context, c *Call) *Result {
	if c.outputPath == nil && c.instance == "" {
		return nil
	}
	field := schema.InstanceField
	if c.outputPath != nil {
		field = schema.OutputPathField
	}
	sr, ok := d.Recorder.(StateRecorder)
	if !ok || c.NoRecord {
		return Errorf(CodeInvalidArguments, "%s: %s needs the call's result recorded on a thread, and this call's is not", c.Name, field)
	}
	names, err := sr.Instances(ctx)
	if err != nil {
		return Errorf(CodeInvalidArguments, "%s: %s cannot be used: %v", c.Name, field, err)
	}
	if c.instance != "" && !slices.Contains(names, c.instance) {
		if len(names) == 0 {
			return Errorf(CodeInvalidArguments, "%s: unknown instance %q: this thread has no instances; leave %s out", c.Name, truncate(c.instance, 64), schema.InstanceField)
		}
		return Errorf(CodeInvalidArguments, "%s: unknown instance %q; the instances are: %s", c.Name, truncate(c.instance, 64), strings.Join(names, ", "))
	}
	return nil
}

// outputOf is what a result writes at its call's _outputPath: its structured value (a latent
// tool's _output is one), else its text as a JSON string.
func outputOf(r *Result) json.RawMessage {
	if len(r.Value) > 0 {
		return r.Value
	}
	b, _ := json.Marshal(r.ModelText()) // a string always encodes
	return b
}

// record stores a result, writing its output into the thread's state when its call names
// _outputPath and it succeeded. It returns the result as stored when the state refused the
// write (the error result that replaced it), else nil.
func (d *Dispatcher) record(ctx context.Context, c *Call, stored *Result) (*Result, error) {
	if c.outputPath != nil && !stored.IsError() && c.resultCut {
		// What is left of a result cut to the limit is not its output: a write-once path
		// must not keep it.
		refused := Errorf(CodeStateConflict, "%s ran, but its output was not kept at %s: it was cut to fit the result limit. "+
			"Nothing was written to the state. What is left of it: %s", c.Name, c.outputPath, truncate(stored.ModelText(), 4<<10))
		return refused, d.Recorder.RecordResult(ctx, c, refused)
	}
	if c.outputPath != nil && !stored.IsError() {
		if sr, ok := d.Recorder.(StateRecorder); ok {
			got, err := sr.RecordOutput(ctx, c, stored, outputOf(stored))
			if err != nil || got == stored {
				return nil, err
			}
			return got, nil
		}
	}
	return nil, d.Recorder.RecordResult(ctx, c, stored)
}

// String is the delegation as the model wrote it, for logs and error messages.
func (d *Delegation) String() string {
	if d.Prompt != "" {
		return fmt.Sprintf("prompt %s", d.Prompt)
	}
	return "an anonymous request"
}

// Record stores a result the dispatcher did not produce, for a call it did not run: the
// result a client submits for a client tool's call. The call's meta-fields are read as
// Dispatch reads them, and the result is stored with the write of its output at the call's
// _outputPath in the same transaction; it is not checked against the tool's output schema nor
// cut, masked or shown to hooks (a client's result never was). A meta-field that cannot be
// honoured (malformed, not enabled, an unknown instance) turns a success into an error saying
// so, with the client's output, since the output cannot go where the call asked; arguments
// that do not decode leave the meta-fields unread, and the result is stored as it is. It
// returns the result as stored.
func (d *Dispatcher) Record(ctx context.Context, call Call, r *Result) (*Result, error) {
	d.once.Do(d.build)
	c := &call
	c.reset()
	if d.Recorder == nil {
		return r, nil
	}
	if t, ok := d.registry().Lookup(c.Name); ok {
		c.tool = t
		if d.prepareArgs(c) == nil {
			refusal := d.parseMeta(c)
			if refusal == nil {
				refusal = d.checkState(ctx, c)
			}
			if refusal != nil {
				c.outputPath = nil
				if !r.IsError() {
					r = Errorf(refusal.Code, "the result of %s was not kept where the call asked: %s. The result was: %s", c.Name, refusal.Error,
						truncate(r.ModelText(), 4<<10))
				}
			}
		}
	}
	rctx, cancel := d.recordContext(ctx)
	defer cancel()
	refused, err := d.record(rctx, c, r)
	if err != nil {
		return r, fmt.Errorf("quiver: recording the result of %s: %w", c.Name, err)
	}
	if refused != nil {
		return refused, nil
	}
	return r, nil
}

// Check reads a call as Dispatch would up to the point where it runs or waits (the tool, the
// policy, the arguments, the meta-fields and whether this dispatcher can honour them) without
// running it: nil when it would run, else the error result Dispatch would give. An agent loop
// asks before it pauses a call for a client's result or a person's decision, so that a call
// that cannot run is refused at once instead of asking anyone.
func (d *Dispatcher) Check(ctx context.Context, call Call) *Result {
	d.once.Do(d.build)
	if d.policyErr != nil {
		return Errorf(CodePolicyDenied, "no tool can run: the dispatcher's policy is invalid: %v", d.policyErr)
	}
	c := &call
	c.reset()
	if r := d.lookup(ctx, c); r != nil {
		return r
	}
	if r := d.prepareArgs(c); r != nil {
		return r
	}
	if len(c.Meta) == 0 {
		return nil
	}
	if r := d.parseMeta(c); r != nil {
		return r
	}
	return d.checkDoor(ctx, c)
}
