package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/quiverhq/quiver/store"
)

// VariableStore implements store.Variables (migration 0003) for both backends, which embed it
// (not named Variables: that is one of its methods).
// The store keeps values as it is given them: secret ones arrive sealed and leave sealed.
type VariableStore struct{ db }

var _ store.Variables = (*VariableStore)(nil)

const variableCols = `workspace_id, layer, owner_id, name, value, secret, scoped, created_at, updated_at`

func scanVariable(row scanner) (*store.Variable, error) {
	var v store.Variable
	if err := row.Scan(&v.WorkspaceID, &v.Layer, &v.OwnerID, &v.Name, &v.Value, &v.Secret, &v.Scoped,
		scanTime{&v.CreatedAt}, scanTime{&v.UpdatedAt}); err != nil {
		return nil, err
	}
	return &v, nil
}

// setVariableSQL inserts or replaces a value, keeping the created_at of the value it replaces
// and never moving updated_at back (another node's clock may be behind), and returns both.
const setVariableSQL = `INSERT INTO variables (` + variableCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
	ON CONFLICT (workspace_id, layer, owner_id, name) DO UPDATE SET
		value = excluded.value, secret = excluded.secret, scoped = excluded.scoped,
		updated_at = CASE WHEN variables.updated_at > excluded.updated_at THEN variables.updated_at ELSE excluded.updated_at END
	RETURNING created_at, updated_at`

// SetVariable creates or replaces the value of name for the owner (see store.Variables).
func (vs *VariableStore) SetVariable(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID, name, value string, secret, scoped bool) error {
	return vs.SetVariables(ctx, []*store.Variable{{WorkspaceID: workspaceID, Layer: layer, OwnerID: ownerID,
		Name: name, Value: value, Secret: secret, Scoped: scoped}})
}

// SetVariables sets several values in one write transaction: all are stored or none. It sets
// CreatedAt (for a new value) and UpdatedAt of each.
func (vs *VariableStore) SetVariables(ctx context.Context, values []*store.Variable) error {
	for _, v := range values {
		if err := store.CheckVariable(v); err != nil {
			return vs.d.fail("set variable", err)
		}
	}
	type times struct{ created, updated time.Time }
	got := make([]times, len(values))
	err := vs.write(ctx, func(ctx context.Context, tx Querier) error {
		now, err := vs.d.Now(ctx, tx)
		if err != nil {
			return vs.d.Err("set variables", err)
		}
		for i, v := range values {
			op := "set variable " + v.Name
			if v.Layer == store.LayerThread {
				op += " of thread " + v.OwnerID
				if err := vs.d.exists(ctx, tx, op, `SELECT 1 FROM threads WHERE id = $1 AND workspace_id = $2`,
					"thread "+v.OwnerID, v.OwnerID, v.WorkspaceID); err != nil {
					return err
				}
			}
			if err := tx.QueryRowContext(ctx, setVariableSQL, v.WorkspaceID, v.Layer, v.OwnerID, v.Name, v.Value, v.Secret, v.Scoped,
				vs.d.Time(now)).Scan(scanTime{&got[i].created}, scanTime{&got[i].updated}); err != nil {
				return vs.d.Err(op, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, v := range values {
		v.CreatedAt, v.UpdatedAt = got[i].created, got[i].updated
	}
	return nil
}

// DeleteVariable removes a value; store.ErrNotFound when the owner has none of that name.
func (vs *VariableStore) DeleteVariable(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID, name string) error {
	op := "delete variable " + name
	return vs.write(ctx, func(ctx context.Context, tx Querier) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM variables WHERE workspace_id = $1 AND layer = $2 AND owner_id = $3 AND name = $4`,
			workspaceID, layer, ownerID, name)
		if err != nil {
			return vs.d.Err(op, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return vs.d.fail(op, store.ErrNotFound)
		}
		return nil
	})
}

// Variables lists the owner's values by name, secret ones as stored (sealed).
func (vs *VariableStore) Variables(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID string) ([]*store.Variable, error) {
	op := "list variables"
	rows, err := vs.read.QueryContext(ctx, `SELECT `+variableCols+` FROM variables
		WHERE workspace_id = $1 AND layer = $2 AND owner_id = $3 ORDER BY name`+vs.d.Bytewise, workspaceID, layer, ownerID)
	if err != nil {
		return nil, vs.d.Err(op, err)
	}
	return collect(&vs.d, rows, op, scanVariable)
}

// lookupSQL reads, in one statement (one snapshot), a thread's ancestry and the values of the
// requested names for every owner resolution may consult. The owners CTE has one row per
// owner: each thread of the chain (depth 0 is the thread itself), then the agent, prompt, user
// and instance; every owner row comes out at least once (LEFT JOIN), so the chain is known even
// where no thread has a value. The recursion is bounded in case of corrupt data. The CASTs give
// PostgreSQL the types it cannot infer in a SELECT list.
//
// $1 workspace, $2 thread, $3 agent, $4 prompt, $5 user; %s: the condition on the names, %s:
// Dialect.Bytewise.
const lookupSQL = `WITH RECURSIVE chain(id, parent_id, depth) AS (
	SELECT id, parent_id, 0 FROM threads WHERE id = $2 AND workspace_id = $1 AND $2 <> ''
	UNION ALL
	SELECT t.id, t.parent_id, c.depth + 1 FROM chain c JOIN threads t ON t.id = c.parent_id
	WHERE t.workspace_id = $1 AND c.depth < 100000
),
owners(layer, owner_id, depth) AS (
	SELECT CAST('thread' AS TEXT), id, depth FROM chain
	UNION ALL SELECT 'agent', CAST($3 AS TEXT), -1 WHERE $3 <> ''
	UNION ALL SELECT 'prompt', CAST($4 AS TEXT), -1 WHERE $4 <> ''
	UNION ALL SELECT 'user', CAST($5 AS TEXT), -1 WHERE $5 <> ''
	UNION ALL SELECT 'instance', '', -1
)
SELECT o.layer, o.owner_id, o.depth, v.name, v.value, v.secret, v.scoped, v.created_at, v.updated_at
FROM owners o LEFT JOIN variables v
	ON v.workspace_id = $1 AND v.layer = o.layer AND v.owner_id = o.owner_id%s
ORDER BY o.depth, o.layer, v.name%s`

// LookupVariables reads every value resolution may need (see store.VariableQuery), in one
// statement; store.ErrNotFound when the query names a thread the workspace does not have.
func (vs *VariableStore) LookupVariables(ctx context.Context, workspaceID string, q store.VariableQuery) (*store.VariableLookup, error) {
	op := "look up variables"
	args := []any{workspaceID, q.ThreadID, q.AgentID, q.PromptName, q.UserID}
	names := "" // nil: every name
	switch {
	case q.Names == nil:
	case len(q.Names) == 0:
		names = " AND false"
	default:
		names = " AND v.name IN (" + inList(&args, q.Names) + ")"
	}
	rows, err := vs.read.QueryContext(ctx, fmt.Sprintf(lookupSQL, names, vs.d.Bytewise), args...)
	if err != nil {
		return nil, vs.d.Err(op, readErr(ctx, err))
	}
	defer rows.Close()
	out := &store.VariableLookup{}
	for rows.Next() {
		var (
			layer, owner     string
			depth            int
			name, value      sql.NullString
			secret, scoped   sql.NullBool
			created, updated *time.Time
		)
		if err := rows.Scan(&layer, &owner, &depth, &name, &value, &secret, &scoped, scanNullTime{&created}, scanNullTime{&updated}); err != nil {
			return nil, vs.d.Err(op, err)
		}
		if layer == string(store.LayerThread) && depth == len(out.Threads) {
			out.Threads = append(out.Threads, owner) // rows come by depth: the first of each depth
		}
		if !name.Valid {
			continue // an owner without values
		}
		out.Values = append(out.Values, &store.Variable{WorkspaceID: workspaceID, Layer: store.VariableLayer(layer),
			OwnerID: owner, Name: name.String, Value: value.String, Secret: secret.Bool, Scoped: scoped.Bool,
			CreatedAt: *created, UpdatedAt: *updated})
	}
	if err := rows.Err(); err != nil {
		return nil, vs.d.Err(op, readErr(ctx, err))
	}
	if q.ThreadID != "" && len(out.Threads) == 0 {
		return nil, vs.d.failf(op, store.ErrNotFound, "thread %s", q.ThreadID)
	}
	return out, nil
}

// RewriteSecrets replaces every secret value with what fn returns, in one write transaction
// that keeps every other writer of variables out until it commits, so no value is missed or
// overwritten. An error from fn leaves everything as it was.
func (vs *VariableStore) RewriteSecrets(ctx context.Context, fn func(v *store.Variable) (string, error)) error {
	op := "rewrite secrets"
	return vs.write(ctx, func(ctx context.Context, tx Querier) error {
		if err := vs.lockVariables(ctx, tx, op); err != nil {
			return err
		}
		return vs.rewriteSecrets(ctx, tx, op, fn)
	})
}

// lockVariables keeps every other node from changing a variable until tx commits; reads go
// on. Where writers take turns, the write transaction is that lock already.
func (vs *VariableStore) lockVariables(ctx context.Context, tx Querier, op string) error {
	if !vs.d.RowLocks {
		return nil
	}
	for _, table := range []string{"variables", "user_connections", "connection_flows"} {
		if _, err := tx.ExecContext(ctx, `LOCK TABLE `+table+` IN EXCLUSIVE MODE`); err != nil {
			return vs.d.Err(op, err)
		}
	}
	return nil
}

// rewriteSecrets replaces, in tx, every secret value with what fn returns.
func (vs *VariableStore) rewriteSecrets(ctx context.Context, tx Querier, op string, fn func(v *store.Variable) (string, error)) error {
	rows, err := tx.QueryContext(ctx, `SELECT `+variableCols+` FROM variables WHERE secret
		ORDER BY workspace_id, layer, owner_id, name`)
	if err != nil {
		return vs.d.Err(op, err)
	}
	all, err := collect(&vs.d, rows, op, scanVariable)
	if err != nil {
		return err
	}
	if err := vs.rewriteConnectionSecrets(ctx, tx, op, fn); err != nil {
		return err
	}
	for _, v := range all {
		c := *v
		value, err := fn(&c)
		if err != nil {
			return err
		}
		nv := *v
		nv.Value = value
		if err := store.CheckVariable(&nv); err != nil {
			return vs.d.fail(op, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE variables SET value = $1 WHERE workspace_id = $2 AND layer = $3 AND owner_id = $4 AND name = $5`,
			value, v.WorkspaceID, v.Layer, v.OwnerID, v.Name); err != nil {
			return vs.d.Err(op, err)
		}
	}
	return nil
}
