package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// ---- schemas

// visible is the condition for a record of the workspace $2, or a system record.
const visible = `(workspace_id IS NULL OR workspace_id = $2)`

// CreateSchema stores a schema (a JSON object or boolean), setting ID (when empty) and
// CreatedAt. Its workspace, when set, must exist (store.ErrNotFound).
func (e *Entities) CreateSchema(ctx context.Context, sc *store.Schema) error {
	op := "create schema"
	if sc == nil {
		return e.d.failf(op, store.ErrInvalid, "nil schema")
	}
	if err := store.CheckSchemaContent(sc.Content); err != nil {
		return e.d.fail(op, err)
	}
	id := sc.ID
	if id == "" {
		id = stamp.ID(ctx, store.PrefixSchema)
	}
	var at time.Time
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		if sc.WorkspaceID != "" {
			if err := e.d.exists(ctx, tx, op, `SELECT 1 FROM workspaces WHERE id = $1`, "no workspace "+sc.WorkspaceID, sc.WorkspaceID); err != nil {
				return err
			}
		}
		var err error
		if at, err = e.now(ctx, tx, op); err != nil {
			return err
		}
		// The content is sent as text: PostgreSQL's json column keeps it byte for byte.
		_, err = tx.ExecContext(ctx, `INSERT INTO schemas (id, workspace_id, content, created_at) VALUES ($1, $2, $3, $4)`,
			id, nullString(sc.WorkspaceID), string(sc.Content), e.d.Time(at))
		return err
	})
	if err != nil {
		return e.d.Err(op, err)
	}
	sc.ID, sc.CreatedAt = id, at
	return nil
}

// Schema returns a schema of the workspace, or a system schema, or store.ErrNotFound.
func (e *Entities) Schema(ctx context.Context, workspaceID, id string) (*store.Schema, error) {
	var (
		sc      store.Schema
		ws      sql.NullString
		content string
	)
	err := e.read.QueryRowContext(ctx, `SELECT id, workspace_id, content, created_at FROM schemas WHERE id = $1 AND `+visible,
		id, workspaceID).Scan(&sc.ID, &ws, &content, scanTime{&sc.CreatedAt})
	if err != nil {
		return nil, e.d.Err("schema "+id, err)
	}
	sc.WorkspaceID, sc.Content = ws.String, json.RawMessage(content)
	return &sc, nil
}

// checkSchema fails with store.ErrNotFound unless id names a schema that a record of workspace
// scope ("" for system) may use: one of the workspace, or a system schema.
func (e *Entities) checkSchema(ctx context.Context, tx Querier, op, scope, role, id string) error {
	return e.d.exists(ctx, tx, op, `SELECT 1 FROM schemas WHERE id = $1 AND `+visible,
		fmt.Sprintf("%s schema %s is not in the workspace", role, id), id, scope)
}

// ---- functions

const functionCols = `id, workspace_id, name, default_version_id, created_at, updated_at`

func scanFunction(row scanner) (*store.Function, error) {
	var (
		f       store.Function
		ws, def sql.NullString
	)
	if err := row.Scan(&f.ID, &ws, &f.Name, &def, scanTime{&f.CreatedAt}, scanTime{&f.UpdatedAt}); err != nil {
		return nil, err
	}
	f.WorkspaceID, f.DefaultVersionID = ws.String, def.String
	return &f, nil
}

// CreateFunction stores a function without versions, setting ID (when empty) and the times.
// Its workspace (when set) must exist, and its name be free there (store.ErrConflict).
func (e *Entities) CreateFunction(ctx context.Context, f *store.Function) error {
	op := "create function"
	if f == nil {
		return e.d.failf(op, store.ErrInvalid, "nil function")
	}
	if err := f.Check(); err != nil {
		return e.d.fail(op, err)
	}
	if f.DefaultVersionID != "" {
		return e.d.failf(op, store.ErrInvalid, "a new function has no versions: its first version becomes the default")
	}
	id := f.ID
	if id == "" {
		id = stamp.ID(ctx, store.PrefixFunction)
	}
	var at time.Time
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		var err error
		at, err = e.insertFunction(ctx, tx, op, id, f)
		return err
	})
	if err != nil {
		return e.d.Err(op, err)
	}
	f.ID, f.CreatedAt, f.UpdatedAt = id, at, at
	return nil
}

// insertFunction inserts f under id, inside the write transaction, once its workspace is
// found and its name free; it returns the time of its creation.
func (e *Entities) insertFunction(ctx context.Context, tx Querier, op, id string, f *store.Function) (time.Time, error) {
	if f.WorkspaceID != "" {
		if err := e.d.exists(ctx, tx, op, `SELECT 1 FROM workspaces WHERE id = $1`, "no workspace "+f.WorkspaceID, f.WorkspaceID); err != nil {
			return time.Time{}, err
		}
	}
	var other string
	err := tx.QueryRowContext(ctx, `SELECT id FROM functions WHERE COALESCE(workspace_id, '') = $1 AND name = $2`, f.WorkspaceID, f.Name).Scan(&other)
	if err == nil {
		return time.Time{}, e.d.failf(op, store.ErrConflict, "the workspace already has a function named %q (%s)", f.Name, other)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, err
	}
	at, err := e.now(ctx, tx, op)
	if err != nil {
		return time.Time{}, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO functions (`+functionCols+`) VALUES ($1, $2, $3, NULL, $4, $4)`,
		id, nullString(f.WorkspaceID), f.Name, e.d.Time(at))
	return at, err
}

// Function returns a function of the workspace, or a system function, or store.ErrNotFound.
func (e *Entities) Function(ctx context.Context, workspaceID, id string) (*store.Function, error) {
	f, err := scanFunction(e.read.QueryRowContext(ctx, `SELECT `+functionCols+` FROM functions WHERE id = $1 AND `+visible, id, workspaceID))
	if err != nil {
		return nil, e.d.Err("function "+id, err)
	}
	return f, nil
}

// Functions lists the functions of the workspace ("": the system functions), oldest first.
func (e *Entities) Functions(ctx context.Context, workspaceID string) ([]*store.Function, error) {
	op := "functions of workspace " + workspaceID
	rows, err := e.read.QueryContext(ctx, `SELECT `+functionCols+` FROM functions WHERE COALESCE(workspace_id, '') = $1
		ORDER BY created_at, id`, workspaceID)
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	return collect(&e.d, rows, op, scanFunction)
}

// ownFunction reads a function inside a write: one of the workspace itself (scope "" for a
// system function), never a system function through a workspace. lock locks its row for a
// change.
func (e *Entities) ownFunction(ctx context.Context, tx Querier, op, scope, id string, lock bool) (*store.Function, error) {
	query := `SELECT ` + functionCols + ` FROM functions WHERE id = $1 AND COALESCE(workspace_id, '') = $2`
	if lock {
		query += e.d.lock("FOR NO KEY UPDATE")
	}
	f, err := scanFunction(tx.QueryRowContext(ctx, query, id, scope))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, e.d.failf(op, store.ErrNotFound, "function %s is not in the workspace", id)
	}
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	return f, nil
}

const versionCols = `v.id, f.workspace_id, v.function_id, v.version, v.code, v.input_schema_id, v.output_schema_id, v.created_at`

func scanVersion(row scanner) (*store.FunctionVersion, error) {
	var (
		v           store.FunctionVersion
		ws, in, out sql.NullString
	)
	if err := row.Scan(&v.ID, &ws, &v.FunctionID, &v.Version, &v.Code, &in, &out, scanTime{&v.CreatedAt}); err != nil {
		return nil, err
	}
	v.WorkspaceID, v.InputSchemaID, v.OutputSchemaID = ws.String, in.String, out.String
	return &v, nil
}

// CreateFunctionVersion adds a version to function v.FunctionID of workspace v.WorkspaceID,
// setting ID (when empty), Version and CreatedAt; the function's first version becomes its
// default. Schema ids, when set, must name schemas the workspace can use (store.ErrNotFound).
func (e *Entities) CreateFunctionVersion(ctx context.Context, v *store.FunctionVersion) error {
	op := "create function version"
	if v == nil {
		return e.d.failf(op, store.ErrInvalid, "nil version")
	}
	op += " of " + v.FunctionID
	nv := *v
	if nv.ID == "" {
		nv.ID = stamp.ID(ctx, store.PrefixFunctionVersion)
	}
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		return e.insertVersion(ctx, tx, op, &nv)
	})
	if err != nil {
		return e.d.Err(op, err)
	}
	v.ID, v.Version, v.CreatedAt = nv.ID, nv.Version, nv.CreatedAt
	return nil
}

// insertVersion numbers v, inside the write transaction, and inserts it, making it its
// function's default when it is the first.
func (e *Entities) insertVersion(ctx context.Context, tx Querier, op string, v *store.FunctionVersion) error {
	// Locked: versions of a function are numbered one at a time.
	f, err := e.ownFunction(ctx, tx, op, v.WorkspaceID, v.FunctionID, true)
	if err != nil {
		return err
	}
	if err := e.checkVersionSchemas(ctx, tx, op, v); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(max(version), 0) + 1 FROM function_versions WHERE function_id = $1`,
		f.ID).Scan(&v.Version); err != nil {
		return err
	}
	if v.CreatedAt, err = e.now(ctx, tx, op); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO function_versions
		(id, function_id, version, code, input_schema_id, output_schema_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		v.ID, f.ID, v.Version, v.Code, nullString(v.InputSchemaID), nullString(v.OutputSchemaID), e.d.Time(v.CreatedAt)); err != nil {
		return err
	}
	if f.DefaultVersionID == "" {
		_, err = tx.ExecContext(ctx, `UPDATE functions SET default_version_id = $1, updated_at = $2 WHERE id = $3`,
			v.ID, e.d.Time(notBefore(v.CreatedAt, f.UpdatedAt)), f.ID)
	}
	return err
}

// checkVersionSchemas checks the schemas a version names, if any.
func (e *Entities) checkVersionSchemas(ctx context.Context, tx Querier, op string, v *store.FunctionVersion) error {
	if v.InputSchemaID != "" {
		if err := e.checkSchema(ctx, tx, op, v.WorkspaceID, "input", v.InputSchemaID); err != nil {
			return err
		}
	}
	if v.OutputSchemaID == "" {
		return nil
	}
	return e.checkSchema(ctx, tx, op, v.WorkspaceID, "output", v.OutputSchemaID)
}

// FunctionVersion returns a version of a function of the workspace, or of a system function,
// or store.ErrNotFound.
func (e *Entities) FunctionVersion(ctx context.Context, workspaceID, id string) (*store.FunctionVersion, error) {
	v, err := scanVersion(e.read.QueryRowContext(ctx, `SELECT `+versionCols+` FROM function_versions v
		JOIN functions f ON f.id = v.function_id WHERE v.id = $1 AND (f.workspace_id IS NULL OR f.workspace_id = $2)`, id, workspaceID))
	if err != nil {
		return nil, e.d.Err("function version "+id, err)
	}
	return v, nil
}

// FunctionVersions lists the versions of a function the workspace can see, in order
// (store.ErrNotFound for a function it cannot).
func (e *Entities) FunctionVersions(ctx context.Context, workspaceID, functionID string) ([]*store.FunctionVersion, error) {
	op := "versions of function " + functionID
	if _, err := e.Function(ctx, workspaceID, functionID); err != nil {
		return nil, err
	}
	rows, err := e.read.QueryContext(ctx, `SELECT `+versionCols+` FROM function_versions v
		JOIN functions f ON f.id = v.function_id WHERE v.function_id = $1 AND (f.workspace_id IS NULL OR f.workspace_id = $2)
		ORDER BY v.version`, functionID, workspaceID)
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	return collect(&e.d, rows, op, scanVersion)
}

// SetDefaultVersion makes versionID, a version of the function, its default and returns the
// function; store.ErrNotFound when either is not in the workspace.
func (e *Entities) SetDefaultVersion(ctx context.Context, workspaceID, functionID, versionID string) (*store.Function, error) {
	op := "set the default version of function " + functionID
	var out *store.Function
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		f, err := e.ownFunction(ctx, tx, op, workspaceID, functionID, true)
		if err != nil {
			return err
		}
		if err := e.d.exists(ctx, tx, op, `SELECT 1 FROM function_versions WHERE id = $1 AND function_id = $2`,
			fmt.Sprintf("%s is not a version of the function", versionID), versionID, functionID); err != nil {
			return err
		}
		now, err := e.now(ctx, tx, op)
		if err != nil {
			return err
		}
		now = notBefore(now, f.UpdatedAt)
		if _, err := tx.ExecContext(ctx, `UPDATE functions SET default_version_id = $1, updated_at = $2 WHERE id = $3`,
			versionID, e.d.Time(now), functionID); err != nil {
			return e.d.Err(op, err)
		}
		f.DefaultVersionID, f.UpdatedAt = versionID, now
		out = f
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
