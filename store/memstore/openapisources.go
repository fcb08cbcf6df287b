package memstore

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// PutOpenAPISource stores s, replacing the workspace's source of the same name; see
// store.OpenAPISources.
func (s *Store) PutOpenAPISource(ctx context.Context, src *store.OpenAPISource) (bool, error) {
	op := entityOp("put OpenAPI source " + src.Name)
	if err := store.CheckOpenAPISource(src); err != nil {
		return false, op.fail(err)
	}
	ns := src.Clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	if d.workspaces[ns.WorkspaceID] == nil {
		return false, op.failf(store.ErrNotFound, "no workspace %s", ns.WorkspaceID)
	}
	if d.sources == nil {
		d.sources = map[string]map[string]*store.OpenAPISource{}
	}
	byName := d.sources[ns.WorkspaceID]
	if byName == nil {
		byName = map[string]*store.OpenAPISource{}
		d.sources[ns.WorkspaceID] = byName
	}
	at := stamp.Now(ctx)
	old := byName[ns.Name]
	if old != nil {
		ns.CreatedBy, ns.CreatedAt = old.CreatedBy, old.CreatedAt
		if !at.After(old.UpdatedAt) {
			at = old.UpdatedAt.Add(time.Microsecond) // a replacement moves UpdatedAt forward, as on the SQL backends
		}
	} else {
		ns.CreatedAt = at
	}
	ns.UpdatedAt = at
	byName[ns.Name] = ns
	d.scopes[ns.WorkspaceID].rev++ // the workspace's tools changed (ToolsStamp)
	src.CreatedBy, src.CreatedAt, src.UpdatedAt = ns.CreatedBy, ns.CreatedAt, ns.UpdatedAt
	return old == nil, nil
}

// OpenAPISource returns a source of the workspace, or store.ErrNotFound.
func (s *Store) OpenAPISource(_ context.Context, workspaceID, name string) (*store.OpenAPISource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.ent.sources[workspaceID][name]
	if src == nil {
		return nil, entityOp("OpenAPI source " + name).fail(store.ErrNotFound)
	}
	return src.Clone(), nil
}

// OpenAPISources lists the sources of the workspace, by name.
func (s *Store) OpenAPISources(_ context.Context, workspaceID string) ([]*store.OpenAPISource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*store.OpenAPISource
	for _, src := range s.ent.sources[workspaceID] {
		out = append(out, src.Clone())
	}
	slices.SortFunc(out, func(a, b *store.OpenAPISource) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteOpenAPISource removes a source of the workspace, or is store.ErrNotFound.
func (s *Store) DeleteOpenAPISource(_ context.Context, workspaceID, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ent.sources[workspaceID][name] == nil {
		return entityOp("delete OpenAPI source "+name).failf(store.ErrNotFound, "no OpenAPI source %s", name)
	}
	delete(s.ent.sources[workspaceID], name)
	s.ent.scopes[workspaceID].rev++
	return nil
}
