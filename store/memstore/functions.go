package memstore

import (
	"bytes"
	"context"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// CreateSchema stores a schema (a JSON object or boolean), setting ID (when empty) and
// CreatedAt. Its workspace, when set, must exist (store.ErrNotFound).
func (s *Store) CreateSchema(ctx context.Context, sc *store.Schema) error {
	const op entityOp = "create schema"
	if sc == nil {
		return op.failf(store.ErrInvalid, "nil schema")
	}
	if err := store.CheckSchemaContent(sc.Content); err != nil {
		return op.fail(err)
	}
	id := sc.ID
	if id == "" {
		id = stamp.ID(ctx, store.PrefixSchema)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	if sc.WorkspaceID != "" && d.workspaces[sc.WorkspaceID] == nil {
		return op.failf(store.ErrNotFound, "no workspace %s", sc.WorkspaceID)
	}
	if d.schemas[id] != nil {
		return op.failf(store.ErrConflict, "the id %s is already taken", id)
	}
	at := stamp.Now(ctx)
	d.schemas[id] = &store.Schema{ID: id, WorkspaceID: sc.WorkspaceID, Content: bytes.Clone(sc.Content), CreatedAt: at}
	sc.ID, sc.CreatedAt = id, at
	return nil
}

// Schema returns a schema of the workspace, or a system schema, or store.ErrNotFound.
func (s *Store) Schema(ctx context.Context, workspaceID, id string) (*store.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.ent.schemas[id]
	if sc == nil || !readableFrom(sc.WorkspaceID, workspaceID) {
		return nil, entityOp("schema " + id).fail(store.ErrNotFound)
	}
	out := *sc
	out.Content = bytes.Clone(sc.Content)
	return &out, nil
}

// checkSchema fails with store.ErrNotFound unless id names a schema that a record of workspace
// scope ("" for system) may use: one of the workspace, or a system schema. role says which
// of the record's schemas it is.
func (d *entityData) checkSchema(op entityOp, scope, role, id string) error {
	if sc := d.schemas[id]; sc == nil || !readableFrom(sc.WorkspaceID, scope) {
		return op.failf(store.ErrNotFound, "%s schema %s is not in the workspace", role, id)
	}
	return nil
}

// CreateFunction stores a function without versions, setting ID (when empty) and the times.
// Its workspace (when set) must exist, and its name be free there (store.ErrConflict).
func (s *Store) CreateFunction(ctx context.Context, f *store.Function) error {
	const op entityOp = "create function"
	if f == nil {
		return op.failf(store.ErrInvalid, "nil function")
	}
	if err := f.Check(); err != nil {
		return op.fail(err)
	}
	if f.DefaultVersionID != "" {
		return op.failf(store.ErrInvalid, "a new function has no versions: its first version becomes the default")
	}
	id := f.ID
	if id == "" {
		id = stamp.ID(ctx, store.PrefixFunction)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	if f.WorkspaceID != "" && d.workspaces[f.WorkspaceID] == nil {
		return op.failf(store.ErrNotFound, "no workspace %s", f.WorkspaceID)
	}
	sc := d.scopes[f.WorkspaceID]
	for _, other := range sc.functions {
		if other.Name == f.Name {
			return op.failf(store.ErrConflict, "the workspace already has a function named %q (%s)", f.Name, other.ID)
		}
	}
	if d.functions[id] != nil {
		return op.failf(store.ErrConflict, "the id %s is already taken", id)
	}
	at := stamp.Now(ctx)
	nf := &store.Function{ID: id, WorkspaceID: f.WorkspaceID, Name: f.Name, CreatedAt: at, UpdatedAt: at}
	d.functions[id] = nf
	sc.functions = insertOrdered(sc.functions, nf, functionOrder)
	sc.rev++
	f.ID, f.CreatedAt, f.UpdatedAt = id, at, at
	return nil
}

// Function returns a function of the workspace, or a system function, or store.ErrNotFound.
func (s *Store) Function(ctx context.Context, workspaceID, id string) (*store.Function, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.ent.functions[id]
	if f == nil || !readableFrom(f.WorkspaceID, workspaceID) {
		return nil, entityOp("function " + id).fail(store.ErrNotFound)
	}
	out := *f
	return &out, nil
}

// Functions lists the functions of the workspace ("": the system functions), oldest first.
func (s *Store) Functions(ctx context.Context, workspaceID string) ([]*store.Function, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.ent.scopes[workspaceID]
	if sc == nil {
		return nil, nil
	}
	out := make([]*store.Function, len(sc.functions))
	for i, f := range sc.functions {
		c := *f
		out[i] = &c
	}
	return out, nil
}

// ownFunction returns a function of the workspace itself (scope "" for a system function),
// never a system function through a workspace: what a write may change or refer to.
func (d *entityData) ownFunction(op entityOp, scope, id string) (*store.Function, error) {
	f := d.functions[id]
	if f == nil || f.WorkspaceID != scope {
		return nil, op.failf(store.ErrNotFound, "function %s is not in the workspace", id)
	}
	return f, nil
}

// CreateFunctionVersion adds a version to function v.FunctionID of workspace v.WorkspaceID,
// setting ID (when empty), Version and CreatedAt; the function's first version becomes its
// default. Schema ids, when set, must name schemas the workspace can use (store.ErrNotFound).
func (s *Store) CreateFunctionVersion(ctx context.Context, v *store.FunctionVersion) error {
	if v == nil {
		return entityOp("create function version").failf(store.ErrInvalid, "nil version")
	}
	op := entityOp("create function version of " + v.FunctionID)
	id := v.ID
	if id == "" {
		id = stamp.ID(ctx, store.PrefixFunctionVersion)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	f, err := d.ownFunction(op, v.WorkspaceID, v.FunctionID)
	if err != nil {
		return err
	}
	for _, sch := range []struct{ role, id string }{{"input", v.InputSchemaID}, {"output", v.OutputSchemaID}} {
		if sch.id == "" {
			continue
		}
		if err := d.checkSchema(op, v.WorkspaceID, sch.role, sch.id); err != nil {
			return err
		}
	}
	if d.versions[id] != nil {
		return op.failf(store.ErrConflict, "the id %s is already taken", id)
	}
	list := d.fnVersions[f.ID]
	number := 1
	if n := len(list); n > 0 {
		number = list[n-1].Version + 1
	}
	at := stamp.Now(ctx)
	nv := &store.FunctionVersion{ID: id, WorkspaceID: f.WorkspaceID, FunctionID: f.ID, Version: number, Code: v.Code,
		InputSchemaID: v.InputSchemaID, OutputSchemaID: v.OutputSchemaID, CreatedAt: at}
	d.versions[id] = nv
	d.fnVersions[f.ID] = append(list, nv)
	if f.DefaultVersionID == "" {
		f.DefaultVersionID, f.UpdatedAt = id, notEarlier(at, f.UpdatedAt)
	}
	d.scopes[f.WorkspaceID].rev++
	v.ID, v.Version, v.CreatedAt = id, number, at
	return nil
}

// FunctionVersion returns a version of a function of the workspace, or of a system function,
// or store.ErrNotFound.
func (s *Store) FunctionVersion(ctx context.Context, workspaceID, id string) (*store.FunctionVersion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.ent.versions[id]
	if v == nil || !readableFrom(v.WorkspaceID, workspaceID) {
		return nil, entityOp("function version " + id).fail(store.ErrNotFound)
	}
	out := *v
	return &out, nil
}

// FunctionVersions lists the versions of a function the workspace can see, in order
// (store.ErrNotFound for a function it cannot).
func (s *Store) FunctionVersions(ctx context.Context, workspaceID, functionID string) ([]*store.FunctionVersion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.ent.functions[functionID]
	if f == nil || !readableFrom(f.WorkspaceID, workspaceID) {
		return nil, entityOp("versions of function " + functionID).fail(store.ErrNotFound)
	}
	list := s.ent.fnVersions[functionID]
	out := make([]*store.FunctionVersion, len(list))
	for i, v := range list {
		c := *v
		out[i] = &c
	}
	return out, nil
}

// SetDefaultVersion makes versionID, a version of the function, its default and returns the
// function; store.ErrNotFound when either is not in the workspace.
func (s *Store) SetDefaultVersion(ctx context.Context, workspaceID, functionID, versionID string) (*store.Function, error) {
	op := entityOp("set the default version of function " + functionID)
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.ent
	f, err := d.ownFunction(op, workspaceID, functionID)
	if err != nil {
		return nil, err
	}
	if v := d.versions[versionID]; v == nil || v.FunctionID != functionID {
		return nil, op.failf(store.ErrNotFound, "%s is not a version of the function", versionID)
	}
	f.DefaultVersionID, f.UpdatedAt = versionID, notEarlier(stamp.Now(ctx), f.UpdatedAt)
	d.scopes[f.WorkspaceID].rev++
	out := *f
	return &out, nil
}
