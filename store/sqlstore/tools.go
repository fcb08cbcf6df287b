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

// ---- tools

const toolCols = `id, workspace_id, name, description, target, function_id, function_version_id, input_schema_id,
	output_schema_id, examples, requires_confirmation, enabled, system, created_by, runtime_user_id, deleted_at,
	retention_tier, created_at, updated_at`

func scanTool(row scanner) (*store.Tool, error) {
	var (
		t                                                   store.Tool
		ws, desc, fn, fnv, examples, creator, runtime, tier sql.NullString
	)
	if err := row.Scan(&t.ID, &ws, &t.Name, &desc, &t.Target, &fn, &fnv, &t.InputSchemaID, &t.OutputSchemaID, &examples,
		&t.RequiresConfirmation, &t.Enabled, &t.System, &creator, &runtime, scanNullTime{&t.DeletedAt}, &tier,
		scanTime{&t.CreatedAt}, scanTime{&t.UpdatedAt}); err != nil {
		return nil, err
	}
	t.WorkspaceID, t.Description, t.FunctionID, t.FunctionVersionID = ws.String, desc.String, fn.String, fnv.String
	t.CreatedBy, t.RuntimeUserID, t.RetentionTier = creator.String, runtime.String, store.RetentionTier(tier.String)
	if examples.Valid {
		if err := json.Unmarshal([]byte(examples.String), &t.Examples); err != nil {
			return nil, fmt.Errorf("tool %s: examples: %w", t.ID, err)
		}
		if t.Examples == nil {
			t.Examples = []store.ToolExample{}
		}
	}
	return &t, nil
}

func encodeExamples(ex []store.ToolExample) (sql.NullString, error) {
	if ex == nil {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(ex)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("examples: %v: %w", err, store.ErrInvalid)
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// checkToolRefs checks, inside the write transaction, what a tool refers to: its workspace,
// function, pinned version and schemas (store.ErrNotFound when not the workspace's), and that
// its name is free among the active tools (store.ErrConflict; where writers run side by side,
// the unique index tools_name settles a race).
func (e *Entities) checkToolRefs(ctx context.Context, tx Querier, op string, t *store.Tool) error {
	scope := t.WorkspaceID
	if scope != "" {
		if err := e.d.exists(ctx, tx, op, `SELECT 1 FROM workspaces WHERE id = $1`, "no workspace "+scope, scope); err != nil {
			return err
		}
	}
	if t.FunctionID != "" {
		if _, err := e.ownFunction(ctx, tx, op, scope, t.FunctionID, false); err != nil {
			return err
		}
	}
	if err := e.checkPinnedVersion(ctx, tx, op, t); err != nil {
		return err
	}
	if err := e.checkSchema(ctx, tx, op, scope, "input", t.InputSchemaID); err != nil {
		return err
	}
	if err := e.checkSchema(ctx, tx, op, scope, "output", t.OutputSchemaID); err != nil {
		return err
	}
	return e.checkToolNameFree(ctx, tx, op, t)
}

// checkPinnedVersion checks that the version a tool pins, if any, is its function's.
func (e *Entities) checkPinnedVersion(ctx context.Context, tx Querier, op string, t *store.Tool) error {
	if t.FunctionVersionID == "" {
		return nil
	}
	var fn string
	err := tx.QueryRowContext(ctx, `SELECT v.function_id FROM function_versions v JOIN functions f ON f.id = v.function_id
		WHERE v.id = $1 AND COALESCE(f.workspace_id, '') = $2`, t.FunctionVersionID, t.WorkspaceID).Scan(&fn)
	if errors.Is(err, sql.ErrNoRows) {
		return e.d.failf(op, store.ErrNotFound, "function version %s is not in the workspace", t.FunctionVersionID)
	}
	if err != nil {
		return e.d.Err(op, err)
	}
	if fn != t.FunctionID {
		return e.d.failf(op, store.ErrInvalid, "pinned version %s is not a version of function %s", t.FunctionVersionID, t.FunctionID)
	}
	return nil
}

func (e *Entities) checkToolNameFree(ctx context.Context, tx Querier, op string, t *store.Tool) error {
	var other string
	err := tx.QueryRowContext(ctx, `SELECT id FROM tools WHERE COALESCE(workspace_id, '') = $1 AND name = $2 AND deleted_at IS NULL AND id <> $3`,
		t.WorkspaceID, t.Name, t.ID).Scan(&other)
	if err == nil {
		return e.d.failf(op, store.ErrConflict, "an active tool of the workspace is already named %q (%s)", t.Name, other)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return e.d.Err(op, err)
	}
	return nil
}

// CreateTool stores a new, active tool, setting ID (when empty) and the times. See
// store.Entities for the rules it must follow.
func (e *Entities) CreateTool(ctx context.Context, t *store.Tool) error {
	op := "create tool"
	if t == nil {
		return e.d.failf(op, store.ErrInvalid, "nil tool")
	}
	nt := t.Clone()
	if nt.ID == "" {
		nt.ID = stamp.ID(ctx, store.PrefixTool)
	}
	op += " " + nt.Name
	if err := nt.Check(); err != nil {
		return e.d.fail(op, err)
	}
	if nt.DeletedAt != nil {
		return e.d.failf(op, store.ErrInvalid, "a new tool is not deleted")
	}
	examples, err := encodeExamples(nt.Examples)
	if err != nil {
		return e.d.fail(op, err)
	}
	err = e.write(ctx, func(ctx context.Context, tx Querier) error {
		return e.insertTool(ctx, tx, op, nt, examples)
	})
	if err != nil {
		return e.d.Err(op, err)
	}
	*t = *nt
	return nil
}

// insertTool checks, inside the write transaction, what a new tool refers to and who creates
// it, and inserts it.
func (e *Entities) insertTool(ctx context.Context, tx Querier, op string, nt *store.Tool, examples sql.NullString) error {
	if err := e.checkToolRefs(ctx, tx, op, nt); err != nil {
		return err
	}
	if err := e.checkToolCreator(ctx, tx, op, nt); err != nil {
		return err
	}
	now, err := e.now(ctx, tx, op)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO tools (`+toolCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, NULL, NULL, $16, $16)`,
		nt.ID, nullString(nt.WorkspaceID), nt.Name, nullString(nt.Description), nt.Target, nullString(nt.FunctionID),
		nullString(nt.FunctionVersionID), nt.InputSchemaID, nt.OutputSchemaID, examples, nt.RequiresConfirmation,
		nt.Enabled, nt.System, nullString(nt.CreatedBy), nullString(nt.RuntimeUserID), e.d.Time(now)); err != nil {
		return err
	}
	nt.CreatedAt, nt.UpdatedAt = now, now
	return nil
}

// checkToolCreator checks that a new tool's creator, if named, is a member of its workspace,
// and that its runtime user, if any, is one the creator may name.
func (e *Entities) checkToolCreator(ctx context.Context, tx Querier, op string, nt *store.Tool) error {
	if nt.CreatedBy != "" {
		role, err := e.memberRole(ctx, tx, op, nt.WorkspaceID, nt.CreatedBy)
		if err != nil {
			return err
		}
		if role == "" {
			return e.d.failf(op, store.ErrInvalid, "creator %s is not a member of workspace %s", nt.CreatedBy, nt.WorkspaceID)
		}
	}
	if nt.RuntimeUserID == "" {
		return nil
	}
	return e.checkRuntimeUser(ctx, tx, op, nt.WorkspaceID, nt.CreatedBy, nt.RuntimeUserID, "a tool's runtime user")
}

// Tool returns a tool of the workspace (active or deleted) or a system tool, or
// store.ErrNotFound.
func (e *Entities) Tool(ctx context.Context, workspaceID, id string) (*store.Tool, error) {
	t, err := scanTool(e.read.QueryRowContext(ctx, `SELECT `+toolCols+` FROM tools WHERE id = $1 AND `+visible, id, workspaceID))
	if err != nil {
		return nil, e.d.Err("tool "+id, err)
	}
	return t, nil
}

// writableTool reads and locks, inside the write transaction, a tool the workspace may
// change: a system tool is store.ErrForbidden, a deleted one store.ErrNotFound.
func (e *Entities) writableTool(ctx context.Context, tx Querier, op, workspaceID, id string) (*store.Tool, error) {
	t, err := scanTool(tx.QueryRowContext(ctx, `SELECT `+toolCols+` FROM tools WHERE id = $1 AND `+visible+e.d.lock("FOR NO KEY UPDATE"),
		id, workspaceID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, e.d.failf(op, store.ErrNotFound, "no tool %s in the workspace", id)
	}
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	if t.System {
		return nil, e.d.failf(op, store.ErrForbidden, "%s is a system tool: system tools cannot be edited or deleted", id)
	}
	if t.DeletedAt != nil {
		return nil, e.d.failf(op, store.ErrNotFound, "tool %s is deleted", id)
	}
	return t, nil
}

// UpdateTool applies fn to an active tool of the workspace in one transaction and stores the
// result. See store.Entities for what may change and the rules that apply.
func (e *Entities) UpdateTool(ctx context.Context, workspaceID, toolID, callerUserID string, fn func(*store.Tool) error) (*store.Tool, error) {
	op := "update tool " + toolID
	var out *store.Tool
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		var err error
		out, err = e.updateTool(ctx, tx, op, workspaceID, toolID, callerUserID, fn)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// updateTool is UpdateTool inside the write transaction.
func (e *Entities) updateTool(ctx context.Context, tx Querier, op, workspaceID, toolID, callerUserID string, fn func(*store.Tool) error) (*store.Tool, error) {
	before, err := e.writableTool(ctx, tx, op, workspaceID, toolID)
	if err != nil {
		return nil, err
	}
	t := before.Clone()
	if err := fn(t); err != nil {
		return nil, err
	}
	if !sameFixedFields(before, t) {
		return nil, e.d.failf(op, store.ErrInvalid, "id, workspace, system, creator, deletion and times cannot be changed")
	}
	if err := t.Check(); err != nil {
		return nil, e.d.fail(op, err)
	}
	examples, err := encodeExamples(t.Examples)
	if err != nil {
		return nil, e.d.fail(op, err)
	}
	if err := e.checkToolRefs(ctx, tx, op, t); err != nil {
		return nil, err
	}
	if t.RuntimeUserID != before.RuntimeUserID {
		if err := e.checkRuntimeUser(ctx, tx, op, workspaceID, callerUserID, t.RuntimeUserID, "a tool's runtime user"); err != nil {
			return nil, err
		}
	}
	now, err := e.now(ctx, tx, op)
	if err != nil {
		return nil, err
	}
	now = notBefore(now, before.UpdatedAt)
	if _, err := tx.ExecContext(ctx, `UPDATE tools SET name = $1, description = $2, target = $3, function_id = $4,
		function_version_id = $5, input_schema_id = $6, output_schema_id = $7, examples = $8, requires_confirmation = $9,
		enabled = $10, runtime_user_id = $11, updated_at = $12 WHERE id = $13`,
		t.Name, nullString(t.Description), t.Target, nullString(t.FunctionID), nullString(t.FunctionVersionID),
		t.InputSchemaID, t.OutputSchemaID, examples, t.RequiresConfirmation, t.Enabled, nullString(t.RuntimeUserID),
		e.d.Time(now), toolID); err != nil {
		return nil, e.d.Err(op, err)
	}
	t.UpdatedAt = now
	return t, nil
}

// sameFixedFields reports whether t, an update of before, leaves alone what an update may not
// change: id, workspace, system, creator, deletion and times.
func sameFixedFields(before, t *store.Tool) bool {
	return t.ID == before.ID && t.WorkspaceID == before.WorkspaceID && t.System == before.System && t.CreatedBy == before.CreatedBy &&
		t.DeletedAt == nil && t.RetentionTier == "" && t.CreatedAt.Equal(before.CreatedAt) && t.UpdatedAt.Equal(before.UpdatedAt)
}

// DeleteTool soft-deletes an active tool of the workspace, snapshotting the retention tier
// (tier, or the workspace's when ""), and returns it.
func (e *Entities) DeleteTool(ctx context.Context, workspaceID, toolID string, tier store.RetentionTier) (*store.Tool, error) {
	op := "delete tool " + toolID
	if tier != "" && !tier.Valid() {
		return nil, e.d.failf(op, store.ErrInvalid, "unknown retention tier %q", tier)
	}
	var out *store.Tool
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		var err error
		out, err = e.deleteTool(ctx, tx, op, workspaceID, toolID, tier)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// deleteTool is DeleteTool inside the write transaction.
func (e *Entities) deleteTool(ctx context.Context, tx Querier, op, workspaceID, toolID string, tier store.RetentionTier) (*store.Tool, error) {
	t, err := e.writableTool(ctx, tx, op, workspaceID, toolID)
	if err != nil {
		return nil, err
	}
	if tier == "" {
		if err := tx.QueryRowContext(ctx, `SELECT retention_tier FROM workspaces WHERE id = $1`, workspaceID).Scan(&tier); err != nil {
			return nil, e.d.Err(op, err)
		}
	}
	now, err := e.now(ctx, tx, op)
	if err != nil {
		return nil, err
	}
	now = notBefore(now, t.UpdatedAt)
	var purge any // the tier's days after the deletion; NULL: never purged
	if keep, ok := tier.Keep(); ok {
		purge = e.d.Time(now.Add(keep))
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tools SET deleted_at = $1, retention_tier = $2, purge_at = $3, updated_at = $1 WHERE id = $4`,
		e.d.Time(now), tier, purge, toolID); err != nil {
		return nil, e.d.Err(op, err)
	}
	t.DeletedAt, t.RetentionTier, t.UpdatedAt = &now, tier, now
	return t, nil
}

// ListTools returns a page of tools, oldest first by (CreatedAt, ID). See store.ToolFilter.
func (e *Entities) ListTools(ctx context.Context, f store.ToolFilter) (*store.ToolPage, error) {
	op := "list tools"
	if err := f.Check(); err != nil {
		return nil, e.d.fail(op, err)
	}
	after, hasCursor, err := f.DecodeCursor()
	if err != nil {
		return nil, e.d.fail(op, err)
	}
	if f.Names != nil && len(f.Names) == 0 {
		return &store.ToolPage{}, nil
	}
	q := toolQuery(f)
	if hasCursor {
		q.where(`(created_at, id) > (` + q.arg(e.d.Time(after.CreatedAt)) + `, ` + q.arg(after.ID) + `)`)
	}
	limit := q.arg(f.Limit + 1)
	rows, err := e.read.QueryContext(ctx, `SELECT `+toolCols+` FROM tools WHERE `+q.conditions()+`
		ORDER BY created_at, id LIMIT `+limit, q.args...)
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	tools, err := collect(&e.d, rows, op, scanTool)
	if err != nil {
		return nil, err
	}
	page := &store.ToolPage{Tools: tools}
	if len(tools) > f.Limit {
		page.Tools = tools[:f.Limit]
		last := page.Tools[f.Limit-1]
		page.NextCursor = f.EncodeCursor(store.ToolCursor{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	return page, nil
}

// ResolveToolVersion returns the function version a tool of the workspace runs: its pinned
// version, or its function's default. A client tool is store.ErrInvalid; a deleted tool, or a
// function without a default version, store.ErrNotFound.
func (e *Entities) ResolveToolVersion(ctx context.Context, workspaceID, toolID string) (*store.FunctionVersion, error) {
	op := "resolve the version of tool " + toolID
	t, err := e.Tool(ctx, workspaceID, toolID)
	if err != nil {
		return nil, err
	}
	switch {
	case t.DeletedAt != nil:
		return nil, e.d.failf(op, store.ErrNotFound, "the tool is deleted")
	case t.Target != store.TargetServer:
		return nil, e.d.failf(op, store.ErrInvalid, "a client tool runs no function")
	case t.FunctionVersionID != "":
		return e.FunctionVersion(ctx, t.WorkspaceID, t.FunctionVersionID)
	}
	f, err := e.Function(ctx, t.WorkspaceID, t.FunctionID)
	if err != nil {
		return nil, err
	}
	if f.DefaultVersionID == "" {
		return nil, e.d.failf(op, store.ErrNotFound, "function %s has no default version", f.ID)
	}
	return e.FunctionVersion(ctx, t.WorkspaceID, f.DefaultVersionID)
}

// PurgeExpired deletes for good the soft-deleted tools, of every workspace, whose DeletedAt
// plus their tier's days is at or before now (tier none: never), and returns them as they were.
func (e *Entities) PurgeExpired(ctx context.Context, now time.Time) ([]*store.Tool, error) {
	var gone []*store.Tool
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		gone = gone[:0] // a retried transaction starts again
		rows, err := tx.QueryContext(ctx, `DELETE FROM tools WHERE purge_at IS NOT NULL AND purge_at <= $1 RETURNING `+toolCols, e.d.Time(now))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			t, err := scanTool(rows)
			if err != nil {
				return err
			}
			gone = append(gone, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, e.d.Err("purge expired tools", err)
	}
	return gone, nil
}

// ToolsStamp identifies the state of a workspace's tools, functions, OpenAPI sources,
// governance rules, entitlements and limits, and of who they run as: it changes when one is added,
// changed, deleted or purged, when the default runtime user changes and when a member is added
// or removed (the count, or the newest membership, moves).
func (e *Entities) ToolsStamp(ctx context.Context, workspaceID string) (string, error) {
	var nt, nf, nm, no, ng, ne, nl int64
	var mt, mf, mm, mo any
	var runtime sql.NullString
	err := e.read.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM tools WHERE workspace_id = $1), (SELECT max(updated_at) FROM tools WHERE workspace_id = $1),
		(SELECT count(*) FROM functions WHERE workspace_id = $1), (SELECT max(updated_at) FROM functions WHERE workspace_id = $1),
		(SELECT default_runtime_user_id FROM workspaces WHERE id = $1),
		(SELECT count(*) FROM memberships WHERE workspace_id = $1), (SELECT max(created_at) FROM memberships WHERE workspace_id = $1),
		(SELECT count(*) FROM openapi_sources WHERE workspace_id = $1), (SELECT max(updated_at) FROM openapi_sources WHERE workspace_id = $1),
		(SELECT coalesce(max(version), 0) FROM workspace_governance WHERE workspace_id = $1),
		(SELECT coalesce(max(version), 0) FROM workspace_entitlements WHERE workspace_id = $1),
		(SELECT coalesce(max(version), 0) FROM workspace_limits WHERE workspace_id = $1)`,
		workspaceID).Scan(&nt, &mt, &nf, &mf, &runtime, &nm, &mm, &no, &mo, &ng, &ne, &nl)
	if err != nil {
		return "", e.d.Err("read the stamp of the tools", err)
	}
	return fmt.Sprintf("%d/%v/%d/%v/%s/%d/%v/%d/%v/%d/%d/%d", nt, mt, nf, mf, runtime.String, nm, mm, no, mo, ng, ne, nl), nil
}
