package platform

import (
	"context"

	"github.com/quiverhq/quiver/store"
)

// A function is what its stored server tools run: reading its code reads what those tools do,
// and a new version or default changes what they do for every caller. So an actor whom
// entitlements restrict sees a function that backs stored tools only when it may see at least
// one of them (see storedToolsVisible); any other is not found, in the words of a missing
// function, for every operation: listed, read, its versions listed, a version added, its
// default set, or named by a tool the actor creates or changes (a tool the actor may see would
// otherwise make the function visible). A function that backs no stored tool is visible as
// before. Deleted tools count until they are purged: a restored one runs the function again.

// functionScanLimit is the page size of the tool listings that decide a function's visibility.
const functionScanLimit = store.MaxListLimit

// checkFunctionVisible answers hiddenFunction(id) for a function the actor may not see (see
// functionHidden), nil otherwise.
func (p *Platform) checkFunctionVisible(ctx context.Context, a Actor, id string) error {
	hidden, err := p.functionHidden(ctx, a, id)
	if err != nil {
		return err
	}
	if hidden {
		return hiddenFunction(id)
	}
	return nil
}

// functionHidden reports whether entitlements restrict the actor and the function id backs
// stored tools the actor may see none of; a function that does not exist is not hidden (the
// caller's own lookup answers for it). Only the function's tools are read, through the
// store's filter, until one the actor may see is found.
func (p *Platform) functionHidden(ctx context.Context, a Actor, id string) (bool, error) {
	visible := p.storedToolsVisible(ctx, a)
	if visible == nil {
		return false, nil
	}
	f := store.ToolFilter{WorkspaceID: a.WorkspaceID, IncludeSystem: true, FunctionID: id,
		Deleted: store.DeletedInclude, Limit: functionScanLimit}
	backs := false
	for {
		page, err := p.cfg.Store.ListTools(ctx, f)
		if err != nil {
			return false, storeError(err, "the tools of function "+id, "")
		}
		for _, t := range page.Tools {
			if visible(t) {
				return false, nil
			}
			backs = true
		}
		if page.NextCursor == "" {
			break
		}
		f.Cursor = page.NextCursor
	}
	return backs, nil
}

// visibleFunctions keeps the functions of fs the actor may see. When entitlements restrict
// the actor, the workspace's stored tools are read once, a page at a time, into a map of the
// functions they back, rather than once per function.
func (p *Platform) visibleFunctions(ctx context.Context, a Actor, fs []*store.Function) ([]*store.Function, error) {
	visible := p.storedToolsVisible(ctx, a)
	if visible == nil || len(fs) == 0 {
		return fs, nil
	}
	seen := map[string]bool{} // function id → whether a tool it backs is visible
	f := store.ToolFilter{WorkspaceID: a.WorkspaceID, IncludeSystem: true, Target: store.TargetServer,
		Deleted: store.DeletedInclude, Limit: functionScanLimit}
	for {
		page, err := p.cfg.Store.ListTools(ctx, f)
		if err != nil {
			return nil, storeError(err, "the tools of the functions", "")
		}
		for _, t := range page.Tools {
			if t.FunctionID != "" && !seen[t.FunctionID] {
				seen[t.FunctionID] = visible(t)
			}
		}
		if page.NextCursor == "" {
			break
		}
		f.Cursor = page.NextCursor
	}
	out := make([]*store.Function, 0, len(fs))
	for _, fn := range fs {
		if shown, backs := seen[fn.ID]; shown || !backs {
			out = append(out, fn)
		}
	}
	return out, nil
}

// hiddenFunction is the answer to an operation on a function the actor may not see: the words
// of a missing one.
func hiddenFunction(id string) error { return storeError(store.ErrNotFound, "function "+id, "") }
