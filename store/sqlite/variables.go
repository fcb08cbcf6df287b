package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/quiverhq/quiver/store"
)

var _ store.Variables = (*Store)(nil)

const variableCols = `workspace_id, layer, owner_id, name, value, secret, scoped, created_at, updated_at`

// setVariableSQL inserts or replaces a value, keeping the created_at of the value it replaces,
// and returns that created_at. ?8 is the time.
const setVariableSQL = `INSERT INTO variables (` + variableCols + `) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)
	ON CONFLICT (workspace_id, layer, owner_id, name) DO UPDATE SET
		value = excluded.value, secret = excluded.secret, scoped = excluded.scoped, updated_at = excluded.updated_at
	RETURNING created_at`

// SetVariable creates or replaces the value of name for the owner (see store.Variables).
func (s *Store) SetVariable(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID, name, value string, secret, scoped bool) error {
	return s.SetVariables(ctx, []*store.Variable{{WorkspaceID: workspaceID, Layer: layer, OwnerID: ownerID,
		Name: name, Value: value, Secret: secret, Scoped: scoped}})
}

// SetVariables sets several values in one write transaction: all are stored or none. It sets
// CreatedAt (for a new value) and UpdatedAt of each.
func (s *Store) SetVariables(ctx context.Context, values []*store.Variable) error {
	for _, v := range values {
		if err := store.CheckVariable(v); err != nil {
			return fmt.Errorf("sqlite: set variable: %w", err)
		}
	}
	now := time.Now().UTC().Round(0)
	created := make([]int64, len(values))
	err := s.write(ctx, func(ctx context.Context, tx querier) error {
		for i, v := range values {
			if v.Layer == store.LayerThread {
				var one int
				err := tx.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE id = ? AND workspace_id = ?`, v.OwnerID, v.WorkspaceID).Scan(&one)
				if errors.Is(err, sql.ErrNoRows) {
					return fmt.Errorf("sqlite: set variable %s: thread %s: %w", v.Name, v.OwnerID, store.ErrNotFound)
				}
				if err != nil {
					return fmt.Errorf("sqlite: set variable %s: %w", v.Name, err)
				}
			}
			if err := tx.QueryRowContext(ctx, setVariableSQL, v.WorkspaceID, string(v.Layer), v.OwnerID, v.Name,
				v.Value, v.Secret, v.Scoped, now.UnixNano()).Scan(&created[i]); err != nil {
				return fmt.Errorf("sqlite: set variable %s: %w", v.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, v := range values {
		v.CreatedAt, v.UpdatedAt = fromNanos(created[i]), now
	}
	return nil
}

// DeleteVariable removes a value; store.ErrNotFound when the owner has none of that name.
func (s *Store) DeleteVariable(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID, name string) error {
	return s.write(ctx, func(ctx context.Context, tx querier) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM variables WHERE workspace_id = ? AND layer = ? AND owner_id = ? AND name = ?`, workspaceID, string(layer), ownerID, name)
		if err != nil {
			return fmt.Errorf("sqlite: delete variable %s: %w", name, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("sqlite: delete variable %s: %w", name, store.ErrNotFound)
		}
		return nil
	})
}

// Variables lists the owner's values by name, secret ones as stored (sealed).
func (s *Store) Variables(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID string) ([]*store.Variable, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+variableCols+` FROM variables
		WHERE workspace_id = ? AND layer = ? AND owner_id = ? ORDER BY name`, workspaceID, string(layer), ownerID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list variables: %w", err)
	}
	defer rows.Close()
	var out []*store.Variable
	for rows.Next() {
		v, err := scanVariable(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list variables: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list variables: %w", err)
	}
	return out, nil
}

// lookupSQL reads, in one statement (one snapshot), a thread's ancestry and the values of the
// requested names for every owner resolution may consult. The owners CTE has one row per
// owner: each thread of the chain (depth 0 is the thread itself), then the agent, prompt, user
// and instance. Every owner row comes out at least once (LEFT JOIN), so the chain is known even
// where no thread has a value. The recursion is bounded in case of corrupt data.
//
// ?1 workspace, ?2 thread, ?3 agent, ?4 prompt, ?5 user, ?6 names (JSON array, or NULL: all).
const lookupSQL = `WITH RECURSIVE chain(id, parent_id, depth) AS (
	SELECT id, parent_id, 0 FROM threads WHERE id = ?2 AND workspace_id = ?1 AND ?2 <> ''
	UNION ALL
	SELECT t.id, t.parent_id, c.depth + 1 FROM chain c JOIN threads t ON t.id = c.parent_id
	WHERE t.workspace_id = ?1 AND c.depth < 100000
),
owners(layer, owner_id, depth) AS (
	SELECT 'thread', id, depth FROM chain
	UNION ALL SELECT 'agent', ?3, -1 WHERE ?3 <> ''
	UNION ALL SELECT 'prompt', ?4, -1 WHERE ?4 <> ''
	UNION ALL SELECT 'user', ?5, -1 WHERE ?5 <> ''
	UNION ALL SELECT 'instance', '', -1
)
SELECT o.layer, o.owner_id, o.depth, v.name, v.value, v.secret, v.scoped, v.created_at, v.updated_at
FROM owners o LEFT JOIN variables v
	ON v.workspace_id = ?1 AND v.layer = o.layer AND v.owner_id = o.owner_id
	AND (?6 IS NULL OR v.name IN (SELECT value FROM json_each(?6)))
ORDER BY o.depth, o.layer, v.name`

// LookupVariables reads every value resolution may need (see store.VariableQuery), in one
// statement; store.ErrNotFound when the query names a thread the workspace does not have.
func (s *Store) LookupVariables(ctx context.Context, workspaceID string, q store.VariableQuery) (*store.VariableLookup, error) {
	var names any // NULL: every name
	if q.Names != nil {
		b, err := json.Marshal(q.Names)
		if err != nil {
			return nil, fmt.Errorf("sqlite: look up variables: %w", err)
		}
		names = string(b)
	}
	rows, err := s.r.QueryContext(ctx, lookupSQL, workspaceID, q.ThreadID, q.AgentID, q.PromptName, q.UserID, names)
	if err != nil {
		return nil, fmt.Errorf("sqlite: look up variables: %w", err)
	}
	defer rows.Close()
	out := &store.VariableLookup{}
	for rows.Next() {
		var (
			layer, owner     string
			depth            int
			name, value      sql.NullString
			secret, scoped   sql.NullBool
			created, updated sql.NullInt64
		)
		if err := rows.Scan(&layer, &owner, &depth, &name, &value, &secret, &scoped, &created, &updated); err != nil {
			return nil, fmt.Errorf("sqlite: look up variables: %w", err)
		}
		if layer == string(store.LayerThread) && depth == len(out.Threads) {
			out.Threads = append(out.Threads, owner) // rows come by depth: the first of each depth
		}
		if !name.Valid {
			continue // an owner without values
		}
		out.Values = append(out.Values, &store.Variable{WorkspaceID: workspaceID, Layer: store.VariableLayer(layer),
			OwnerID: owner, Name: name.String, Value: value.String, Secret: secret.Bool, Scoped: scoped.Bool,
			CreatedAt: fromNanos(created.Int64), UpdatedAt: fromNanos(updated.Int64)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: look up variables: %w", err)
	}
	if q.ThreadID != "" && len(out.Threads) == 0 {
		return nil, fmt.Errorf("sqlite: look up variables: thread %s: %w", q.ThreadID, store.ErrNotFound)
	}
	return out, nil
}

// RewriteSecrets replaces every secret value with what fn returns, in one write transaction:
// the store's write lock keeps every other writer, in this process or another, out until it
// commits. An error from fn leaves everything as it was.
func (s *Store) RewriteSecrets(ctx context.Context, fn func(v *store.Variable) (string, error)) error {
	return s.write(ctx, func(ctx context.Context, tx querier) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+variableCols+` FROM variables WHERE secret = 1
			ORDER BY workspace_id, layer, owner_id, name`)
		if err != nil {
			return fmt.Errorf("sqlite: rewrite secrets: %w", err)
		}
		var all []*store.Variable
		for rows.Next() {
			v, err := scanVariable(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("sqlite: rewrite secrets: %w", err)
			}
			all = append(all, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlite: rewrite secrets: %w", err)
		}
		update, err := tx.PrepareContext(ctx, `UPDATE variables SET value = ?5
			WHERE workspace_id = ?1 AND layer = ?2 AND owner_id = ?3 AND name = ?4`)
		if err != nil {
			return fmt.Errorf("sqlite: rewrite secrets: %w", err)
		}
		defer update.Close()
		for _, v := range all {
			c := *v
			value, err := fn(&c)
			if err != nil {
				return err
			}
			nv := *v
			nv.Value = value
			if err := store.CheckVariable(&nv); err != nil {
				return fmt.Errorf("sqlite: rewrite secrets: %w", err)
			}
			if _, err := update.ExecContext(ctx, v.WorkspaceID, string(v.Layer), v.OwnerID, v.Name, value); err != nil {
				return fmt.Errorf("sqlite: rewrite secrets: %w", err)
			}
		}
		return nil
	})
}

func scanVariable(row scanner) (*store.Variable, error) {
	var (
		v                store.Variable
		layer            string
		created, updated int64
	)
	if err := row.Scan(&v.WorkspaceID, &layer, &v.OwnerID, &v.Name, &v.Value, &v.Secret, &v.Scoped, &created, &updated); err != nil {
		return nil, err
	}
	v.Layer = store.VariableLayer(layer)
	v.CreatedAt, v.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &v, nil
}
