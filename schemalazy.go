package quiver

import (
	"context"
	"sync"

	"github.com/quiverhq/quiver/schema"
)

// lazySchema is one of a tool's schemas and its compiled form: compiled by NewTool and kept, or,
// for a tool made with WithSchemasCompiledOnUse, compiled by NewTool to check it and compiled
// again at its first use. An advisory output schema (Spec.OutputAdvisory) without examples is
// not compiled by NewTool at all: a document's description of its service's answers is no
// contract, and most of a large document's tools are never called (GitHub's 964 read
// operations would compile a third of what importing it costs). Copies of the tool (As,
// RunningAs) share it.
type lazySchema struct {
	once     sync.Once
	s        *schema.Schema
	compiled *schema.Compiled
	err      error
}

// newLazySchema is s, compiled as c by NewTool: kept, unless ctx asks for schemas compiled on
// use.
func newLazySchema(ctx context.Context, s *schema.Schema, c *schema.Compiled) *lazySchema {
	l := &lazySchema{s: s}
	if ctx.Value(compiledOnUseKey{}) == nil {
		l.once.Do(func() { l.compiled = c })
	}
	return l
}

// get is the compiled schema, compiled now if this is its first use; nil for a nil lazySchema
// (the tool declares no such schema).
func (l *lazySchema) get() (*schema.Compiled, error) {
	if l == nil {
		return nil, nil
	}
	// The schema passed the bounds when the tool was made, so it passes them now: no request's
	// context need stop it.
	l.once.Do(func() { l.compiled, l.err = schema.CompileContext(context.Background(), l.s) })
	return l.compiled, l.err
}

type compiledOnUseKey struct{}

// WithSchemasCompiledOnUse returns ctx telling NewToolContext to compile a tool's schemas to
// check them, as always, but to keep none of what it compiles: each is compiled again at its
// first use (a call, CompiledInput), once, and kept from then on. A compiled validator is about
// nine kilobytes for four arguments, so a server holding many tools of which few are called in
// its life (tools loaded from a store at start, an imported document's operations) holds
// megabytes it has no use for; the price is one compilation more for each tool that is
// called, at its first call (about 0.2 ms for four arguments: BenchmarkSchemasCompiledOnUse).
// The platform loads stored and imported tools so; a tool made in code keeps its schemas
// compiled from when it is made (its first call costs no more than the others).
func WithSchemasCompiledOnUse(ctx context.Context) context.Context {
	return context.WithValue(ctx, compiledOnUseKey{}, true)
}

// declaresOutput reports whether the tool has an output schema its results are checked
// against, compiled or not yet.
func (t *Tool) declaresOutput() bool { return t.output != nil }

// outputSchema is the tool's compiled output schema (nil for none), compiled now if this is
// its first use; err says why it cannot be compiled, which only an advisory schema that
// NewTool left unchecked can be.
func (t *Tool) outputSchema() (*schema.Compiled, error) { return t.output.get() }

// inputSchema is the tool's compiled input schema (nil for a tool that takes no arguments),
// compiled now if this is its first use.
func (t *Tool) inputSchema() (*schema.Compiled, error) { return t.input.get() }
