package memstore

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// checkToolRefs checks what a tool refers to: its workspace, function, pinned version and
// schemas (store.ErrNotFound when not the workspace's), and that its name is free among the
// workspace's active tools (store.ErrConflict).
func (d *entityData) checkToolRefs(op entityOp, t *store.Tool) error {
	ws := t.WorkspaceID
	if ws != "" && d.workspaces[ws] == nil {
		return op.failf(store.ErrNotFound, "no workspace %s", ws)
	}
	if t.FunctionID != "" {
		if _, err := d.ownFunction(op, ws, t.FunctionID); err != nil {
			return err
		}
	}
	if err := d.checkPinnedVersion(op, t); err != nil {
		return err
	}
	if err := d.checkSchema(op, ws, "input", t.InputSchemaID); err != nil {
		return err
	}
	if err := d.checkSchema(op, ws, "output", t.OutputSchemaID); err != nil {
		return err
	}
	return d.checkToolNameFree(op, t)
}

// checkPinnedVersion checks that the version a tool pins, if any, is its function's.
func (d *entityData) checkPinnedVersion(op entityOp, t *store.Tool) error {
	if t.FunctionVersionID == "" {
		return nil
	}
	v := d.versions[t.FunctionVersionID]
	if v == nil || v.WorkspaceID != t.WorkspaceID {
		return op.failf(store.ErrNotFound, "function version %s is not in the workspace", t.FunctionVersionID)
	}
	if v.FunctionID != t.FunctionID {
		return op.failf(store.ErrInvalid, "pinned version %s is not a version of function %s", t.FunctionVersionID, t.FunctionID)
	}
	return nil
}

func (d *entityData) checkToolNameFree(op entityOp, t *store.Tool) error {
	for _, other := range d.scopes[t.WorkspaceID].tools {
		if other.DeletedAt == nil && other.Name == t.Name && other.ID != t.ID {
			return op.failf(store.ErrConflict, "an active tool of the workspace is already named %q (%s)", t.Name, other.ID)
		}
	}
	return nil
}

// CreateTool stores a new, active tool, setting ID (when empty) and the times. See
// store.ToolStore for the rules it must follow.
func (s *Store) CreateTool(ctx context.Context, t *store.Tool) error {
	op := entityOp("create tool")
	if t == nil {
		return op.failf(store.ErrInvalid, "nil tool")
	}
	nt := t.Clone()
	if nt.ID == "" {
		nt.ID = stamp.ID(ctx, store.PrefixTool)
	}
	op += entityOp(" " + nt.Name)
	if err := nt.Check(); err != nil {
		return op.fail(err)
	}
	if nt.DeletedAt != nil {
		return op.failf(store.ErrInvalid, "a new tool is not deleted")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	if err := d.checkNewTool(op, nt); err != nil {
		return err
	}
	nt.CreatedAt = stamp.Now(ctx)
	nt.UpdatedAt = nt.CreatedAt
	d.tools[nt.ID] = nt
	sc := d.scopes[nt.WorkspaceID]
	sc.tools = insertOrdered(sc.tools, nt, toolOrder)
	sc.rev++
	*t = *nt.Clone()
	return nil
}

// checkNewTool checks what a new tool refers to, who creates it (a member of its workspace),
// its runtime user and its id.
func (d *entityData) checkNewTool(op entityOp, nt *store.Tool) error {
	if err := d.checkToolRefs(op, nt); err != nil {
		return err
	}
	if nt.CreatedBy != "" && d.role(nt.WorkspaceID, nt.CreatedBy) == "" {
		return op.failf(store.ErrInvalid, "creator %s is not a member of workspace %s", nt.CreatedBy, nt.WorkspaceID)
	}
	if nt.RuntimeUserID != "" {
		// At creation, the creator is the one setting it.
		if err := d.checkRuntimeUser(op, nt.WorkspaceID, nt.CreatedBy, nt.RuntimeUserID, "a tool's runtime user"); err != nil {
			return err
		}
	}
	if d.tools[nt.ID] != nil {
		return op.failf(store.ErrConflict, "the id %s is already taken", nt.ID)
	}
	return nil
}

// Tool returns a tool of the workspace (active or deleted) or a system tool, or
// store.ErrNotFound.
func (s *Store) Tool(ctx context.Context, workspaceID, id string) (*store.Tool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.ent.tools[id]
	if t == nil || !readableFrom(t.WorkspaceID, workspaceID) {
		return nil, entityOp("tool " + id).fail(store.ErrNotFound)
	}
	return t.Clone(), nil
}

// writableTool returns a tool the workspace may change: a system tool is store.ErrForbidden,
// a deleted one store.ErrNotFound.
func (d *entityData) writableTool(op entityOp, workspaceID, id string) (*store.Tool, error) {
	t := d.tools[id]
	switch {
	case t == nil || !readableFrom(t.WorkspaceID, workspaceID):
		return nil, op.failf(store.ErrNotFound, "no tool %s in the workspace", id)
	case t.System:
		return nil, op.failf(store.ErrForbidden, "%s is a system tool: system tools cannot be edited or deleted", id)
	case t.DeletedAt != nil:
		return nil, op.failf(store.ErrNotFound, "tool %s is deleted", id)
	}
	return t, nil
}

// UpdateTool applies fn to a copy of an active tool of the workspace and stores the result.
// See store.ToolStore for what may change and the rules that apply. fn runs while the Store
// is locked: it must not call the Store.
func (s *Store) UpdateTool(ctx context.Context, workspaceID, toolID, callerUserID string, fn func(*store.Tool) error) (*store.Tool, error) {
	op := entityOp("update tool " + toolID)
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	cur, err := d.writableTool(op, workspaceID, toolID)
	if err != nil {
		return nil, err
	}
	t := cur.Clone()
	if err := fn(t); err != nil {
		return nil, err
	}
	if err := d.checkToolUpdate(op, cur, t, workspaceID, callerUserID); err != nil {
		return nil, err
	}
	t.CreatedAt = cur.CreatedAt
	t.UpdatedAt = notEarlier(stamp.Now(ctx), cur.UpdatedAt)
	*cur = *t.Clone() // fn may still hold t
	d.scopes[cur.WorkspaceID].rev++
	return t, nil
}

// checkToolUpdate checks t, an update of cur: what may not change has not, its rules, what it
// refers to, and a new runtime user.
func (d *entityData) checkToolUpdate(op entityOp, cur, t *store.Tool, workspaceID, callerUserID string) error {
	if !sameFixedFields(cur, t) {
		return op.failf(store.ErrInvalid, "id, workspace, system, creator, deletion and times cannot be changed")
	}
	if err := t.Check(); err != nil {
		return op.fail(err)
	}
	if err := d.checkToolRefs(op, t); err != nil {
		return err
	}
	if t.RuntimeUserID == cur.RuntimeUserID {
		return nil
	}
	return d.checkRuntimeUser(op, workspaceID, callerUserID, t.RuntimeUserID, "a tool's runtime user")
}

// sameFixedFields reports whether t, an update of cur, leaves alone what an update may not
// change: id, workspace, system, creator, deletion and times.
func sameFixedFields(cur, t *store.Tool) bool {
	return t.ID == cur.ID && t.WorkspaceID == cur.WorkspaceID && t.System == cur.System && t.CreatedBy == cur.CreatedBy &&
		t.DeletedAt == nil && t.RetentionTier == "" && t.CreatedAt.Equal(cur.CreatedAt) && t.UpdatedAt.Equal(cur.UpdatedAt)
}

// DeleteTool soft-deletes an active tool of the workspace, snapshotting the retention tier
// (tier, or the workspace's when ""), and returns it.
func (s *Store) DeleteTool(ctx context.Context, workspaceID, toolID string, tier store.RetentionTier) (*store.Tool, error) {
	op := entityOp("delete tool " + toolID)
	if tier != "" && !tier.Valid() {
		return nil, op.failf(store.ErrInvalid, "unknown retention tier %q", tier)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	t, err := d.writableTool(op, workspaceID, toolID)
	if err != nil {
		return nil, err
	}
	if tier == "" {
		tier = d.workspaces[t.WorkspaceID].RetentionTier
	}
	now := notEarlier(stamp.Now(ctx), t.UpdatedAt)
	t.DeletedAt, t.RetentionTier, t.UpdatedAt = &now, tier, now
	d.scopes[t.WorkspaceID].rev++
	return t.Clone(), nil
}

// ListTools returns a page of tools, oldest first by (CreatedAt, ID). See store.ToolFilter.
func (s *Store) ListTools(ctx context.Context, f store.ToolFilter) (*store.ToolPage, error) {
	const op entityOp = "list tools"
	if err := f.Check(); err != nil {
		return nil, op.fail(err)
	}
	after, hasCursor, err := f.DecodeCursor()
	if err != nil {
		return nil, op.fail(err)
	}
	if f.Names != nil && len(f.Names) == 0 {
		return &store.ToolPage{}, nil
	}
	scopes := []string{f.WorkspaceID}
	if f.WorkspaceID != "" && f.IncludeSystem {
		scopes = append(scopes, "")
	}
	keep := toolFilter(&f)
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []*store.Tool
	for _, id := range scopes {
		if sc := s.ent.scopes[id]; sc != nil {
			// One more than a page tells whether another page follows.
			found = append(found, sc.listTools(after, hasCursor, keep, f.Limit+1)...)
		}
	}
	if len(scopes) > 1 {
		slices.SortFunc(found, toolOrder)
	}
	return toolPage(&f, found), nil
}

// toolPage is the page of the tools found (one more than a page, when another page follows),
// copied.
func toolPage(f *store.ToolFilter, found []*store.Tool) *store.ToolPage {
	page := &store.ToolPage{}
	if len(found) > f.Limit {
		found = found[:f.Limit]
		last := found[f.Limit-1]
		page.NextCursor = f.EncodeCursor(store.ToolCursor{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	for _, t := range found {
		page.Tools = append(page.Tools, t.Clone())
	}
	return page
}

// listTools returns, in order, up to n of the scope's tools that keep keeps, after the cursor
// when hasCursor.
func (sc *scope) listTools(after store.ToolCursor, hasCursor bool, keep func(*store.Tool) bool, n int) []*store.Tool {
	tools := sc.tools
	if hasCursor {
		i, at := slices.BinarySearchFunc(tools, after, func(t *store.Tool, c store.ToolCursor) int {
			return creationOrder(t.CreatedAt, t.ID, c.CreatedAt, c.ID)
		})
		if at {
			i++
		}
		tools = tools[i:]
	}
	var out []*store.Tool
	for _, t := range tools {
		if len(out) == n {
			break
		}
		if keep(t) {
			out = append(out, t)
		}
	}
	return out
}

// toolFilter returns what keeps a tool in f's listing, besides its workspace and the cursor.
func toolFilter(f *store.ToolFilter) func(*store.Tool) bool {
	k := toolKeep{f: f}
	if f.Names != nil {
		k.names = make(map[string]bool, len(f.Names))
		for _, n := range f.Names {
			k.names[n] = true
		}
	}
	return k.keeps
}

// toolKeep is a listing's filter of tools.
type toolKeep struct {
	f     *store.ToolFilter
	names map[string]bool // f.Names, nil when it names none
}

func (k toolKeep) keeps(t *store.Tool) bool {
	return k.fieldsMatch(t) && k.nameMatches(t) && deletionMatches(k.f.Deleted, t)
}

// fieldsMatch reports whether t has the function, target and confirmation the filter asks for.
func (k toolKeep) fieldsMatch(t *store.Tool) bool {
	f := k.f
	return (f.FunctionID == "" || t.FunctionID == f.FunctionID) && (f.Target == "" || t.Target == f.Target) &&
		(f.RequiresConfirmation == nil || t.RequiresConfirmation == *f.RequiresConfirmation)
}

// nameMatches reports whether t's name is the filter's: by prefix, in full, or among its names.
func (k toolKeep) nameMatches(t *store.Tool) bool {
	f := k.f
	switch {
	case f.NamePrefix && !strings.HasPrefix(t.Name, f.Name):
		return false
	case !f.NamePrefix && f.Name != "" && t.Name != f.Name:
		return false
	}
	return k.names == nil || k.names[t.Name]
}

// deletionMatches reports whether t, deleted or not, is in a listing of d.
func deletionMatches(d store.DeletedFilter, t *store.Tool) bool {
	switch d {
	case store.DeletedInclude:
		return true
	case store.DeletedOnly:
		return t.DeletedAt != nil
	}
	return t.DeletedAt == nil
}

// ResolveToolVersion returns the function version a tool of the workspace runs: its pinned
// version, or its function's default. A client tool is store.ErrInvalid; a deleted tool, or a
// function without a default version, store.ErrNotFound.
func (s *Store) ResolveToolVersion(ctx context.Context, workspaceID, toolID string) (*store.FunctionVersion, error) {
	op := entityOp("resolve the version of tool " + toolID)
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	t := d.tools[toolID]
	switch {
	case t == nil || !readableFrom(t.WorkspaceID, workspaceID):
		return nil, op.failf(store.ErrNotFound, "no tool %s in the workspace", toolID)
	case t.DeletedAt != nil:
		return nil, op.failf(store.ErrNotFound, "the tool is deleted")
	case t.Target != store.TargetServer:
		return nil, op.failf(store.ErrInvalid, "a client tool runs no function")
	}
	id := t.FunctionVersionID
	if id == "" {
		// Functions are never deleted: a tool's function is there.
		id = d.functions[t.FunctionID].DefaultVersionID
		if id == "" {
			return nil, op.failf(store.ErrNotFound, "function %s has no default version", t.FunctionID)
		}
	}
	out := *d.versions[id]
	return &out, nil
}

// PurgeExpired deletes for good the soft-deleted tools, of every workspace, whose DeletedAt
// plus their tier's days is at or before now (tier none: never), and returns them as they
// were, oldest first.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time) ([]*store.Tool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	var gone []*store.Tool
	for _, sc := range d.scopes {
		n := len(gone)
		sc.tools = slices.DeleteFunc(sc.tools, func(t *store.Tool) bool {
			keep, ok := t.RetentionTier.Keep()
			if t.DeletedAt == nil || !ok || t.DeletedAt.Add(keep).After(now) {
				return false
			}
			delete(d.tools, t.ID)
			gone = append(gone, t) // no longer the Store's: safe to hand out
			return true
		})
		if len(gone) > n {
			sc.rev++
		}
	}
	slices.SortFunc(gone, toolOrder)
	return gone, nil
}

// ToolsStamp identifies the state of a workspace's tools and functions: it changes when one
// is added, changed, deleted or purged, or a function gets a version; and with who they run
// as: when the default runtime user changes, and when a member is added or removed.
func (s *Store) ToolsStamp(ctx context.Context, workspaceID string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rev uint64
	if sc := s.ent.scopes[workspaceID]; sc != nil {
		rev = sc.rev
	}
	return strconv.FormatUint(rev, 10), nil
}
