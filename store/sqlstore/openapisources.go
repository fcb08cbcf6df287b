package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/quiverhq/quiver/store"
)

// The OpenAPI documents a workspace imported (store.OpenAPISources; migration 0012), part of
// Entities: a change to them changes ToolsStamp, like a change to the tools.

// openAPIOptions is the options column: what a source sets besides its document.
type openAPIOptions struct {
	Servers          []string          `json:"servers,omitempty"`
	Operations       []string          `json:"operations,omitempty"`
	Credentials      map[string]string `json:"credentials,omitempty"`
	TimeoutMS        int64             `json:"timeout_ms,omitempty"`
	MaxResponseBytes int64             `json:"max_response_bytes,omitempty"`
	// MaxOperations and Strict came after migration 0012: a row written before has neither,
	// which reads as their defaults (0, false).
	MaxOperations int  `json:"max_operations,omitempty"`
	Strict        bool `json:"strict,omitempty"`
}

const openAPISourceCols = `workspace_id, name, document, options, created_by, created_at, updated_at`

func scanOpenAPISource(row scanner) (*store.OpenAPISource, error) {
	var s store.OpenAPISource
	var options string
	if err := row.Scan(&s.WorkspaceID, &s.Name, &s.Document, &options, &s.CreatedBy, scanTime{&s.CreatedAt}, scanTime{&s.UpdatedAt}); err != nil {
		return nil, err
	}
	var o openAPIOptions
	if err := json.Unmarshal([]byte(options), &o); err != nil {
		return nil, err
	}
	s.Servers, s.Operations, s.Credentials = o.Servers, o.Operations, o.Credentials
	s.Timeout, s.MaxResponseBytes = time.Duration(o.TimeoutMS)*time.Millisecond, o.MaxResponseBytes
	s.MaxOperations, s.Strict = o.MaxOperations, o.Strict
	return &s, nil
}

// PutOpenAPISource stores s, replacing the workspace's source of the same name; see
// store.OpenAPISources.
func (e *Entities) PutOpenAPISource(ctx context.Context, s *store.OpenAPISource) (bool, error) {
	op := "put OpenAPI source " + s.Name
	if err := store.CheckOpenAPISource(s); err != nil {
		return false, e.d.fail(op, err)
	}
	options, err := json.Marshal(openAPIOptions{Servers: s.Servers, Operations: s.Operations, Credentials: s.Credentials,
		TimeoutMS: s.Timeout.Milliseconds(), MaxResponseBytes: s.MaxResponseBytes, MaxOperations: s.MaxOperations, Strict: s.Strict})
	if err != nil {
		return false, e.d.fail(op, err)
	}
	var created bool
	var createdAt, at time.Time
	createdBy := s.CreatedBy
	err = e.write(ctx, func(ctx context.Context, tx Querier) error {
		// The workspace row is locked: sources of one workspace are written one at a time.
		if _, err := e.lockWorkspace(ctx, tx, op, s.WorkspaceID); err != nil {
			return err
		}
		var err error
		if at, err = e.d.Now(ctx, tx); err != nil {
			return err
		}
		var by string
		var updatedAt time.Time
		err = tx.QueryRowContext(ctx, `SELECT created_by, created_at, updated_at FROM openapi_sources WHERE workspace_id = $1 AND name = $2`,
			s.WorkspaceID, s.Name).Scan(&by, scanTime{&createdAt}, scanTime{&updatedAt})
		switch {
		case errors.Is(err, sql.ErrNoRows):
			created, createdAt = true, at
			_, err = tx.ExecContext(ctx, `INSERT INTO openapi_sources (`+openAPISourceCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				s.WorkspaceID, s.Name, s.Document, string(options), s.CreatedBy, e.d.Time(at), e.d.Time(at))
			return err
		case err != nil:
			return err
		}
		createdBy = by
		// A replacement moves UpdatedAt forward, if only by a microsecond (PostgreSQL's
		// resolution): ToolsStamp, read by every node, must change.
		if !at.After(updatedAt) {
			at = updatedAt.Add(time.Microsecond)
		}
		_, err = tx.ExecContext(ctx, `UPDATE openapi_sources SET document = $3, options = $4, updated_at = $5 WHERE workspace_id = $1 AND name = $2`,
			s.WorkspaceID, s.Name, s.Document, string(options), e.d.Time(at))
		return err
	})
	if err != nil {
		return false, e.d.Err(op, err)
	}
	s.CreatedBy, s.CreatedAt, s.UpdatedAt = createdBy, createdAt, at
	return created, nil
}

// OpenAPISource returns a source of the workspace, or store.ErrNotFound.
func (e *Entities) OpenAPISource(ctx context.Context, workspaceID, name string) (*store.OpenAPISource, error) {
	s, err := scanOpenAPISource(e.read.QueryRowContext(ctx, `SELECT `+openAPISourceCols+` FROM openapi_sources WHERE workspace_id = $1 AND name = $2`,
		workspaceID, name))
	if err != nil {
		return nil, e.d.Err("OpenAPI source "+name, err)
	}
	return s, nil
}

// OpenAPISources lists the sources of the workspace, by name.
func (e *Entities) OpenAPISources(ctx context.Context, workspaceID string) ([]*store.OpenAPISource, error) {
	op := "list OpenAPI sources"
	rows, err := e.read.QueryContext(ctx, `SELECT `+openAPISourceCols+` FROM openapi_sources WHERE workspace_id = $1 ORDER BY name`, workspaceID)
	if err != nil {
		return nil, e.d.Err(op, err)
	}
	return collect(&e.d, rows, op, scanOpenAPISource)
}

// DeleteOpenAPISource removes a source of the workspace, or is store.ErrNotFound.
func (e *Entities) DeleteOpenAPISource(ctx context.Context, workspaceID, name string) error {
	op := "delete OpenAPI source " + name
	err := e.write(ctx, func(ctx context.Context, tx Querier) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM openapi_sources WHERE workspace_id = $1 AND name = $2`, workspaceID, name)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err == nil && n == 0 {
			err = e.d.failf(op, store.ErrNotFound, "no OpenAPI source %s", name)
		}
		return err
	})
	return e.d.Err(op, err)
}
