package agent

import "sync/atomic"

// A fleet's agents change while its nodes run (platform's fleet configuration): the runner's
// catalog is swapped whole, never edited in place, so that a lookup sees one version or the
// next and never a mix. A run resolves its agent and builds its prompt's nested tools when it
// starts, and keeps them to its end; what it looks up later by name (a sub-agent it creates, a
// thread it wakes) is looked up in the catalog of that moment.

// catalogRef holds a catalog set with SetCatalog: nil inside means "no catalog", which a nil
// pointer to catalogRef could not tell from "never set".
type catalogRef struct{ c *Catalog }

// swappedCatalog is the part of a Runner that SetCatalog changes.
type swappedCatalog struct {
	ref atomic.Pointer[catalogRef]
}

// SetCatalog makes c the runner's catalog from now on, in place of Catalog (nil: none). Runs
// under way keep the agent and nested tools they started with.
func (r *Runner) SetCatalog(c *Catalog) {
	r.swapped.ref.Store(&catalogRef{c: c})
	// The nested tools built for the prompts of the catalog before are not asked for again:
	// a prompt of c is another *Prompt.
	r.nestedTools.mu.Lock()
	r.nestedTools.sets = nil
	r.nestedTools.mu.Unlock()
}

// CurrentCatalog is the runner's catalog now: the last SetCatalog's, else Catalog.
func (r *Runner) CurrentCatalog() *Catalog { return r.catalog() }

func (r *Runner) catalog() *Catalog {
	if ref := r.swapped.ref.Load(); ref != nil {
		return ref.c
	}
	return r.Catalog
}
