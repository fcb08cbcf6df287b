package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/quiverhq/quiver/store"
)

// ConnectionStore implements store.Connections (migration 0022) for both backends.
type ConnectionStore struct{ db }

var _ store.Connections = (*ConnectionStore)(nil)

var connectionsTable = docTable{"workspace_connections", "document", "connection providers", "connection providers"}

// WorkspaceConnections returns the workspace's providers document (see store.Connections).
func (s *ConnectionStore) WorkspaceConnections(ctx context.Context, workspaceID string) (*store.WorkspaceConnections, error) {
	e := &Entities{s.db}
	d, err := e.workspaceDoc(ctx, connectionsTable, workspaceID)
	if err != nil {
		return nil, err
	}
	return &store.WorkspaceConnections{WorkspaceID: workspaceID, Document: d.doc, Version: d.version, UpdatedBy: d.updatedBy, UpdatedAt: d.updatedAt}, nil
}

// PutWorkspaceConnections stores the workspace's next version of its providers document when
// its current one is after (see store.Connections).
func (s *ConnectionStore) PutWorkspaceConnections(ctx context.Context, c *store.WorkspaceConnections, after int64) error {
	if err := store.CheckConnections(c); err != nil {
		return s.d.fail("put connection providers", err)
	}
	e := &Entities{s.db}
	return e.putWorkspaceDoc(ctx, connectionsTable, c.WorkspaceID, c.Document, c.UpdatedBy, after, &c.Version, &c.UpdatedAt)
}

const connectionCols = `workspace_id, user_id, provider, access_token, refresh_token, scopes, expires_at, created_at, updated_at`

func scanConnection(row scanner) (*store.Connection, error) {
	c := &store.Connection{}
	var scopes string
	var expires *time.Time
	if err := row.Scan(&c.WorkspaceID, &c.UserID, &c.Provider, &c.AccessToken, &c.RefreshToken, &scopes, scanNullTime{&expires},
		scanTime{&c.CreatedAt}, scanTime{&c.UpdatedAt}); err != nil {
		return nil, err
	}
	c.Scopes = strings.Fields(scopes)
	if expires != nil {
		c.ExpiresAt = *expires
	}
	return c, nil
}

// checkConnection refuses a connection no store keeps.
func checkConnection(c *store.Connection) error {
	switch {
	case c.WorkspaceID == "" || c.UserID == "" || c.Provider == "":
		return errors.New("a connection needs its workspace, user and provider: " + store.ErrInvalid.Error())
	case c.AccessToken == "":
		return errors.New("a connection needs its access token: " + store.ErrInvalid.Error())
	}
	return nil
}

// PutConnection stores the user's connection, replacing the one it had (see store.Connections).
func (s *ConnectionStore) PutConnection(ctx context.Context, c *store.Connection) error {
	op := "put connection " + c.Provider + " of " + c.UserID
	if err := checkConnection(c); err != nil {
		return s.d.failf(op, store.ErrInvalid, "%s", strings.TrimSuffix(err.Error(), ": "+store.ErrInvalid.Error()))
	}
	return s.write(ctx, func(ctx context.Context, tx Querier) error {
		now, err := s.d.Now(ctx, tx)
		if err != nil {
			return s.d.Err(op, err)
		}
		c.CreatedAt, c.UpdatedAt = now, now
		_, err = tx.ExecContext(ctx, `INSERT INTO user_connections (`+connectionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
			ON CONFLICT (workspace_id, user_id, provider) DO UPDATE SET access_token = excluded.access_token,
			refresh_token = excluded.refresh_token, scopes = excluded.scopes, expires_at = excluded.expires_at, created_at = excluded.created_at,
			updated_at = excluded.updated_at`,
			c.WorkspaceID, c.UserID, c.Provider, c.AccessToken, c.RefreshToken, strings.Join(c.Scopes, " "), s.expires(c), s.d.Time(now))
		return s.d.Err(op, err)
	})
}

// expires is c's expiry as stored: NULL when unknown.
func (s *ConnectionStore) expires(c *store.Connection) any {
	if c.ExpiresAt.IsZero() {
		return nil
	}
	return s.d.Time(c.ExpiresAt)
}

// Connection returns the user's connection to the provider (see store.Connections).
func (s *ConnectionStore) Connection(ctx context.Context, workspaceID, userID, provider string) (*store.Connection, error) {
	c, err := scanConnection(s.read.QueryRowContext(ctx, `SELECT `+connectionCols+` FROM user_connections
		WHERE workspace_id = $1 AND user_id = $2 AND provider = $3`, workspaceID, userID, provider))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, s.d.failf("connection "+provider+" of "+userID, store.ErrNotFound, "not connected")
	}
	return c, s.d.Err("connection "+provider+" of "+userID, err)
}

// UpdateConnection runs fn on the connection with its row locked (see store.Connections).
func (s *ConnectionStore) UpdateConnection(ctx context.Context, workspaceID, userID, provider string,
	fn func(*store.Connection) (*store.Connection, error)) (*store.Connection, error) {
	op := "update connection " + provider + " of " + userID
	var out *store.Connection
	err := s.write(ctx, func(ctx context.Context, tx Querier) error {
		cur, err := scanConnection(tx.QueryRowContext(ctx, `SELECT `+connectionCols+` FROM user_connections
			WHERE workspace_id = $1 AND user_id = $2 AND provider = $3`+s.d.lock("FOR UPDATE"), workspaceID, userID, provider))
		if errors.Is(err, sql.ErrNoRows) {
			return s.d.failf(op, store.ErrNotFound, "not connected")
		}
		if err != nil {
			return s.d.Err(op, err)
		}
		next, err := fn(cur)
		if err != nil {
			return err
		}
		if next == nil {
			_, err = tx.ExecContext(ctx, `DELETE FROM user_connections WHERE workspace_id = $1 AND user_id = $2 AND provider = $3`,
				workspaceID, userID, provider)
			return s.d.Err(op, err)
		}
		next.WorkspaceID, next.UserID, next.Provider = workspaceID, userID, provider
		if err := checkConnection(next); err != nil {
			return s.d.failf(op, store.ErrInvalid, "%s", strings.TrimSuffix(err.Error(), ": "+store.ErrInvalid.Error()))
		}
		now, err := s.d.Now(ctx, tx)
		if err != nil {
			return s.d.Err(op, err)
		}
		next.CreatedAt, next.UpdatedAt = cur.CreatedAt, now
		_, err = tx.ExecContext(ctx, `UPDATE user_connections SET access_token = $4, refresh_token = $5, scopes = $6, expires_at = $7,
			updated_at = $8 WHERE workspace_id = $1 AND user_id = $2 AND provider = $3`,
			workspaceID, userID, provider, next.AccessToken, next.RefreshToken, strings.Join(next.Scopes, " "), s.expires(next), s.d.Time(now))
		out = next
		return s.d.Err(op, err)
	})
	return out, err
}

// UserConnections returns the user's connections (see store.Connections).
func (s *ConnectionStore) UserConnections(ctx context.Context, workspaceID, userID string) ([]*store.Connection, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+connectionCols+` FROM user_connections WHERE workspace_id = $1 AND user_id = $2
		ORDER BY provider`+s.d.Bytewise, workspaceID, userID)
	if err != nil {
		return nil, s.d.Err("connections of "+userID, err)
	}
	return collectConnections(s.d, rows, "connections of "+userID)
}

func collectConnections(d Dialect, rows *sql.Rows, op string) ([]*store.Connection, error) {
	defer rows.Close()
	out := []*store.Connection{}
	for rows.Next() {
		c, err := scanConnection(rows)
		if err != nil {
			return nil, d.Err(op, err)
		}
		out = append(out, c)
	}
	return out, d.Err(op, rows.Err())
}

// DeleteConnections deletes the user's connections, to provider or to all (see
// store.Connections).
func (s *ConnectionStore) DeleteConnections(ctx context.Context, workspaceID, userID, provider string) ([]*store.Connection, error) {
	op := "delete the connections of " + userID
	var out []*store.Connection
	err := s.write(ctx, func(ctx context.Context, tx Querier) error {
		rows, err := tx.QueryContext(ctx, `DELETE FROM user_connections WHERE workspace_id = $1 AND user_id = $2 AND ($3 = '' OR provider = $3)
			RETURNING `+connectionCols, workspaceID, userID, provider)
		if err != nil {
			return s.d.Err(op, err)
		}
		out, err = collectConnections(s.d, rows, op)
		return err
	})
	return out, err
}

// StartConnectionFlow stores a flow (see store.Connections).
func (s *ConnectionStore) StartConnectionFlow(ctx context.Context, f *store.ConnectionFlow) error {
	op := "start a connection to " + f.Provider
	if f.StateHash == "" || f.WorkspaceID == "" || f.UserID == "" || f.Provider == "" || f.Verifier == "" {
		return s.d.failf(op, store.ErrInvalid, "a flow needs its state, workspace, user, provider and verifier")
	}
	return s.write(ctx, func(ctx context.Context, tx Querier) error {
		now, err := s.d.Now(ctx, tx)
		if err != nil {
			return s.d.Err(op, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM connection_flows WHERE workspace_id = $1 AND user_id = $2 AND (expires_at <= $3 OR
			state_hash IN (SELECT state_hash FROM connection_flows WHERE workspace_id = $1 AND user_id = $2 ORDER BY created_at DESC LIMIT 1000000 OFFSET $4))`,
			f.WorkspaceID, f.UserID, s.d.Time(now), store.MaxConnectionFlows-1); err != nil {
			return s.d.Err(op, err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO connection_flows (state_hash, workspace_id, user_id, provider, verifier, scopes, return_to,
			browser_hash, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, f.StateHash, f.WorkspaceID, f.UserID,
			f.Provider, f.Verifier, strings.Join(f.Scopes, " "), f.ReturnTo, f.BrowserHash, s.d.Time(f.ExpiresAt), s.d.Time(now))
		return s.d.Err(op, err)
	})
}

// TakeConnectionFlow returns the flow of the state's hash and deletes it (see
// store.Connections).
func (s *ConnectionStore) TakeConnectionFlow(ctx context.Context, stateHash string, now time.Time) (*store.ConnectionFlow, error) {
	op := "finish a connection"
	var f *store.ConnectionFlow
	err := s.write(ctx, func(ctx context.Context, tx Querier) error {
		var scopes string
		var expires time.Time
		got := &store.ConnectionFlow{}
		err := tx.QueryRowContext(ctx, `DELETE FROM connection_flows WHERE state_hash = $1
			RETURNING state_hash, workspace_id, user_id, provider, verifier, scopes, return_to, browser_hash, expires_at`, stateHash).Scan(
			&got.StateHash, &got.WorkspaceID, &got.UserID, &got.Provider, &got.Verifier, &scopes, &got.ReturnTo, &got.BrowserHash, scanTime{&expires})
		if errors.Is(err, sql.ErrNoRows) {
			return s.d.failf(op, store.ErrNotFound, "no such connection under way")
		}
		if err != nil {
			return s.d.Err(op, err)
		}
		if !expires.After(now) {
			return nil // deleted, and expired: as if it were not there (the commit keeps it deleted)
		}
		got.Scopes, got.ExpiresAt = strings.Fields(scopes), expires
		f = got
		return nil
	})
	if err == nil && f == nil {
		return nil, s.d.failf(op, store.ErrNotFound, "the connection under way has expired: start it again")
	}
	return f, err
}

// rewriteConnectionSecrets re-seals, in tx, every connection's tokens and every flow's
// verifier with fn, as rewriteSecrets does the secret variables (see store.LayerConnection).
func (vs *VariableStore) rewriteConnectionSecrets(ctx context.Context, tx Querier, op string, fn func(v *store.Variable) (string, error)) error {
	rows, err := tx.QueryContext(ctx, `SELECT `+connectionCols+` FROM user_connections ORDER BY workspace_id, user_id, provider`)
	if err != nil {
		return vs.d.Err(op, err)
	}
	conns, err := collectConnections(vs.d, rows, op)
	if err != nil {
		return err
	}
	for _, c := range conns {
		owner := c.UserID + "/" + c.Provider
		access, err := fn(&store.Variable{WorkspaceID: c.WorkspaceID, Layer: store.LayerConnection, OwnerID: owner, Name: "access", Value: c.AccessToken, Secret: true})
		if err != nil {
			return err
		}
		refresh := ""
		if c.RefreshToken != "" {
			if refresh, err = fn(&store.Variable{WorkspaceID: c.WorkspaceID, Layer: store.LayerConnection, OwnerID: owner, Name: "refresh", Value: c.RefreshToken, Secret: true}); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE user_connections SET access_token = $4, refresh_token = $5
			WHERE workspace_id = $1 AND user_id = $2 AND provider = $3`, c.WorkspaceID, c.UserID, c.Provider, access, refresh); err != nil {
			return vs.d.Err(op, err)
		}
	}
	return vs.rewriteFlowSecrets(ctx, tx, op, fn)
}

// rewriteFlowSecrets re-seals, in tx, every flow's verifier with fn.
func (vs *VariableStore) rewriteFlowSecrets(ctx context.Context, tx Querier, op string, fn func(v *store.Variable) (string, error)) error {
	rows, err := tx.QueryContext(ctx, `SELECT workspace_id, state_hash, verifier FROM connection_flows ORDER BY state_hash`)
	if err != nil {
		return vs.d.Err(op, err)
	}
	type flow struct{ ws, hash, verifier string }
	var flows []flow
	for rows.Next() {
		var f flow
		if err := rows.Scan(&f.ws, &f.hash, &f.verifier); err != nil {
			rows.Close()
			return vs.d.Err(op, err)
		}
		flows = append(flows, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return vs.d.Err(op, err)
	}
	for _, f := range flows {
		v, err := fn(&store.Variable{WorkspaceID: f.ws, Layer: store.LayerConnectionFlow, Name: f.hash, Value: f.verifier, Secret: true})
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE connection_flows SET verifier = $2 WHERE state_hash = $1`, f.hash, v); err != nil {
			return vs.d.Err(op, err)
		}
	}
	return nil
}
