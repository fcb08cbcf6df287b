package platform

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
)

// A stored tool's record (its definition as GET /v1/tools shows it) is the actor's to see,
// change or delete only when the actor may call the tool: a key bound to a toolset, or a
// caller a deny rule names, must not learn of the workspace's other stored tools through the
// records. An actor whom entitlements restrict is listed only the records it may see, and a
// get, change or delete of another is answered with the words of a missing tool.
//
// A record is decided by the tool the workspace serves under its name, as every door decides
// that tool. A record the workspace does not serve (deleted, or one whose build failed) is
// decided by its name alone, through tools made for the decision, rather than being left to
// unrestricted actors: once a workspace has a rule, every authenticated caller is decided by
// the rules, admins too, and an admin whom no rule restricts must still see and repair a tool
// that does not build, or restore a deleted one; a member bound to a toolset whose names take
// in the tool likewise. Its name, the toolsets that name it and its source (stored) are known;
// its annotations are not (they are in what failed to build), so it is shown only when the
// actor may call it whatever annotations it has: an allow list of read-only tools, or a deny
// of destructive ones, hides it.

// storedToolsVisible returns whether the actor may see a stored tool's record; nil when
// entitlements do not restrict the actor (every record is its to see).
func (p *Platform) storedToolsVisible(ctx context.Context, a Actor) func(*store.Tool) bool {
	w := p.Workspace(ctx, a.WorkspaceID)
	allows := w.entitled(WithActor(ctx, a))
	if allows == nil {
		return nil
	}
	reg := w.Registry()
	return func(st *store.Tool) bool {
		if st.DeletedAt == nil {
			if t, ok := reg.Lookup(st.Name); ok {
				return allows(t)
			}
		}
		tools := decisionTools(st.Name)
		for _, t := range tools {
			if !allows(t) {
				return false
			}
		}
		return len(tools) > 0
	}
}

// listVisibleTools is ListTools for an actor whom entitlements restrict: the store's pages
// are read until f.Limit tools the actor may see are found or the listing ends. The next
// cursor is made at the last tool returned, never at one the actor may not see (a cursor is
// the position of a tool, its id readable in it); so a page may be followed by an empty one
// when only hidden tools come after it.
func (p *Platform) listVisibleTools(ctx context.Context, f store.ToolFilter, visible func(*store.Tool) bool) (*store.ToolPage, error) {
	out := &store.ToolPage{Tools: []*store.Tool{}}
	for {
		page, err := p.cfg.Store.ListTools(ctx, f)
		if err != nil {
			return nil, storeError(err, "the tool page", "")
		}
		for i, t := range page.Tools {
			if !visible(t) {
				continue
			}
			out.Tools = append(out.Tools, t)
			if len(out.Tools) == f.Limit {
				if i < len(page.Tools)-1 || page.NextCursor != "" {
					out.NextCursor = f.EncodeCursor(store.ToolCursor{CreatedAt: t.CreatedAt, ID: t.ID})
				}
				return out, nil
			}
		}
		if page.NextCursor == "" {
			return out, nil
		}
		f.Cursor = page.NextCursor
	}
}

// hiddenTool is the answer to a get, change or delete of a stored tool the actor may not see:
// the words of a missing one.
func hiddenTool(id string) error { return storeError(store.ErrNotFound, "tool "+id, "") }

// decisionTools are the tools an unserved stored tool named name is decided by: one for each
// way its annotations can read to a rule's when (MCP's hints as quiver.Hints reads them: a
// read-only tool is neither destructive nor anything but idempotent), with the source of a
// stored tool. None when no tool can have that name (one stored before names were checked):
// such a record is shown to unrestricted actors alone.
//
// They are kept by name, for the entitlements' memo of what was compiled for a tool (keyed by
// the tool) to serve them again rather than fill with tools made per request.
func decisionTools(name string) []*quiver.Tool {
	decisions.Lock()
	defer decisions.Unlock()
	if ts, ok := decisions.m[name]; ok {
		return ts
	}
	var ts []*quiver.Tool
	for _, ro := range []bool{false, true} {
		for _, destructive := range []bool{false, true} {
			for _, idempotent := range []bool{false, true} {
				if ro && (destructive || !idempotent) {
					continue // read as not destructive and idempotent whatever it says
				}
				for _, openWorld := range []bool{false, true} {
					t, err := quiver.NewTool(quiver.Spec{Name: name, Description: "A stored tool the workspace does not serve, for its entitlement decision.",
						Source: quiver.SourceStored, Annotations: quiver.Annotations{ReadOnlyHint: quiver.Hint(ro),
							DestructiveHint: quiver.Hint(destructive), IdempotentHint: quiver.Hint(idempotent), OpenWorldHint: quiver.Hint(openWorld)}},
						notServed)
					if err != nil {
						return nil
					}
					ts = append(ts, t)
				}
			}
		}
	}
	if len(decisions.m) >= decisionsCap || decisions.m == nil {
		decisions.m = make(map[string][]*quiver.Tool)
	}
	decisions.m[name] = ts
	return ts
}

// notServed is the handler of decisionTools' tools, which no one calls: they are never served.
func notServed(context.Context, json.RawMessage) (any, error) {
	return nil, quiver.Fail(quiver.CodeUnknownTool, "the tool is not served")
}

// decisions holds decisionTools' tools, dropped whole past decisionsCap names.
var decisions struct {
	sync.Mutex
	m map[string][]*quiver.Tool
}

const decisionsCap = 4096
