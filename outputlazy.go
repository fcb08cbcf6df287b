package quiver

import (
	"context"
	"sync"

	"github.com/quiverhq/quiver/schema"
)

// lazyOutput is an advisory output schema (Spec.OutputAdvisory) compiled on the first result
// it checks rather than when the tool is made: a document's description of its service's
// answers is no contract, and most of a large document's tools are never called in a
// process's life (GitHub's 964 read operations would compile a third of what importing it
// costs). Copies of the tool (As, RunningAs) share it.
type lazyOutput struct {
	once     sync.Once
	s        *schema.Schema
	compiled *schema.Compiled
	err      error
}

// declaresOutput reports whether the tool has an output schema its results are checked
// against, compiled or not yet.
func (t *Tool) declaresOutput() bool { return t.output != nil || t.lazy != nil }

// outputSchema is the tool's compiled output schema (nil for none), compiled now if it was
// left for its first use; err says why an advisory schema cannot be compiled.
func (t *Tool) outputSchema() (*schema.Compiled, error) {
	if t.lazy == nil {
		return t.output, nil
	}
	l := t.lazy
	l.once.Do(func() { l.compiled, l.err = schema.CompileContext(context.Background(), l.s) })
	return l.compiled, l.err
}
