package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quiverhq/quiver/store"
)

var _ store.Variables = (*Store)(nil)

// setVariableSQL inserts or replaces one value. A thread value is stored only when the thread
// is one of the workspace's: otherwise no row comes back, which Scan reports as not found.
const setVariableSQL = `INSERT INTO variables (workspace_id, layer, owner_id, name, value, secret, scoped, created_at, updated_at)
SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::boolean, $7::boolean, clock_timestamp(), clock_timestamp()
WHERE $2::text <> 'thread' OR EXISTS (SELECT FROM threads WHERE id = $3::text AND workspace_id = $1::text)
ON CONFLICT (workspace_id, layer, owner_id, name) DO UPDATE SET
	value = EXCLUDED.value, secret = EXCLUDED.secret, scoped = EXCLUDED.scoped,
	updated_at = GREATEST(variables.updated_at, EXCLUDED.updated_at)
RETURNING created_at, updated_at`

// SetVariable creates or replaces the value of name for the owner (see store.Variables).
func (s *Store) SetVariable(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID, name, value string, secret, scoped bool) error {
	return s.SetVariables(ctx, []*store.Variable{{WorkspaceID: workspaceID, Layer: layer, OwnerID: ownerID,
		Name: name, Value: value, Secret: secret, Scoped: scoped}})
}

// SetVariables sets several values in one transaction: all are stored or none. It sets
// CreatedAt (for a new value) and UpdatedAt of each, from the database clock.
func (s *Store) SetVariables(ctx context.Context, values []*store.Variable) error {
	for _, v := range values {
		if err := store.CheckVariable(v); err != nil {
			return fmt.Errorf("postgres: set variable: %w", err)
		}
	}
	type times struct{ created, updated time.Time }
	got := make([]times, len(values))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for i, v := range values {
			err := tx.QueryRow(ctx, setVariableSQL, v.WorkspaceID, string(v.Layer), v.OwnerID, v.Name, v.Value, v.Secret, v.Scoped).
				Scan(&got[i].created, &got[i].updated)
			if err != nil {
				what := "set variable " + v.Name
				if v.Layer == store.LayerThread {
					what += " of thread " + v.OwnerID
				}
				return dbError(what, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, v := range values {
		v.CreatedAt, v.UpdatedAt = got[i].created.UTC(), got[i].updated.UTC()
	}
	return nil
}

// DeleteVariable removes a value; store.ErrNotFound when the owner has none of that name.
func (s *Store) DeleteVariable(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID, name string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM variables WHERE workspace_id = $1 AND layer = $2 AND owner_id = $3 AND name = $4`,
		workspaceID, string(layer), ownerID, name)
	if err != nil {
		return dbError("delete variable "+name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: delete variable %s: %w", name, store.ErrNotFound)
	}
	return nil
}

const variableColumns = `workspace_id, layer, owner_id, name, value, secret, scoped, created_at, updated_at`

func scanVariable(row pgx.Row) (*store.Variable, error) {
	var v store.Variable
	var layer string
	if err := row.Scan(&v.WorkspaceID, &layer, &v.OwnerID, &v.Name, &v.Value, &v.Secret, &v.Scoped, &v.CreatedAt, &v.UpdatedAt); err != nil {
		return nil, err
	}
	v.Layer = store.VariableLayer(layer)
	v.CreatedAt, v.UpdatedAt = v.CreatedAt.UTC(), v.UpdatedAt.UTC()
	return &v, nil
}

// Variables lists the owner's values by name, secret ones as stored (sealed).
func (s *Store) Variables(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID string) ([]*store.Variable, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+variableColumns+` FROM variables
WHERE workspace_id = $1 AND layer = $2 AND owner_id = $3 ORDER BY name COLLATE "C"`, workspaceID, string(layer), ownerID)
	if err != nil {
		return nil, dbError("list variables", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Variable, error) { return scanVariable(row) })
	if err != nil {
		return nil, dbError("list variables", err)
	}
	return out, nil
}

// lookupSQL reads, in one statement (one snapshot), a thread's ancestry and the values of the
// requested names for every owner resolution may consult. The owners CTE has one row per
// owner: each thread of the chain (depth 0 is the thread itself), then the agent, prompt, user
// and instance; every owner row comes out at least once (LEFT JOIN), so the chain is known even
// where no thread has a value. The recursion is bounded in case of corrupt data.
//
// $1 workspace, $2 thread, $3 agent, $4 prompt, $5 user, $6 names (NULL: all).
const lookupSQL = `WITH RECURSIVE chain(id, parent_id, depth) AS (
	SELECT id, parent_id, 0 FROM threads WHERE id = $2::text AND workspace_id = $1::text AND $2::text <> ''
	UNION ALL
	SELECT t.id, t.parent_id, c.depth + 1 FROM chain c JOIN threads t ON t.id = c.parent_id
	WHERE t.workspace_id = $1::text AND c.depth < 100000
),
owners(layer, owner_id, depth) AS (
	SELECT 'thread'::text, id, depth FROM chain
	UNION ALL SELECT 'agent', $3::text, -1 WHERE $3::text <> ''
	UNION ALL SELECT 'prompt', $4::text, -1 WHERE $4::text <> ''
	UNION ALL SELECT 'user', $5::text, -1 WHERE $5::text <> ''
	UNION ALL SELECT 'instance', '', -1
)
SELECT o.layer, o.owner_id, o.depth, v.name, v.value, v.secret, v.scoped, v.created_at, v.updated_at
FROM owners o LEFT JOIN variables v
	ON v.workspace_id = $1::text AND v.layer = o.layer AND v.owner_id = o.owner_id
	AND ($6::text[] IS NULL OR v.name = ANY ($6::text[]))
ORDER BY o.depth, o.layer, v.name COLLATE "C"`

// LookupVariables reads every value resolution may need (see store.VariableQuery), in one
// statement; store.ErrNotFound when the query names a thread the workspace does not have.
func (s *Store) LookupVariables(ctx context.Context, workspaceID string, q store.VariableQuery) (*store.VariableLookup, error) {
	op := "look up variables"
	rows, err := s.pool.Query(ctx, lookupSQL, workspaceID, q.ThreadID, q.AgentID, q.PromptName, q.UserID, q.Names)
	if err != nil {
		return nil, dbError(op, err)
	}
	defer rows.Close()
	out := &store.VariableLookup{}
	for rows.Next() {
		var (
			layer, owner     string
			depth            int
			name, value      *string
			secret, scoped   *bool
			created, updated *time.Time
		)
		if err := rows.Scan(&layer, &owner, &depth, &name, &value, &secret, &scoped, &created, &updated); err != nil {
			return nil, dbError(op, err)
		}
		if layer == string(store.LayerThread) && depth == len(out.Threads) {
			out.Threads = append(out.Threads, owner) // rows come by depth: the first of each depth
		}
		if name == nil {
			continue // an owner without values
		}
		out.Values = append(out.Values, &store.Variable{WorkspaceID: workspaceID, Layer: store.VariableLayer(layer),
			OwnerID: owner, Name: *name, Value: *value, Secret: *secret, Scoped: *scoped,
			CreatedAt: created.UTC(), UpdatedAt: updated.UTC()})
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(op, err)
	}
	if q.ThreadID != "" && len(out.Threads) == 0 {
		return nil, fmt.Errorf("postgres: %s: thread %s: %w", op, q.ThreadID, store.ErrNotFound)
	}
	return out, nil
}

// RewriteSecrets replaces every secret value with what fn returns, in one transaction. It
// locks the variables table in EXCLUSIVE mode first: reads go on, but no other node changes a
// variable until it commits, so no value is missed or overwritten. An error from fn leaves
// everything as it was.
func (s *Store) RewriteSecrets(ctx context.Context, fn func(v *store.Variable) (string, error)) error {
	op := "rewrite secrets"
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE variables IN EXCLUSIVE MODE`); err != nil {
			return dbError(op, err)
		}
		rows, err := tx.Query(ctx, `SELECT `+variableColumns+` FROM variables WHERE secret
ORDER BY workspace_id, layer, owner_id, name`)
		if err != nil {
			return dbError(op, err)
		}
		all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Variable, error) { return scanVariable(row) })
		if err != nil {
			return dbError(op, err)
		}
		if len(all) == 0 {
			return nil
		}
		ws, layers, owners, names, values := make([]string, len(all)), make([]string, len(all)),
			make([]string, len(all)), make([]string, len(all)), make([]string, len(all))
		for i, v := range all {
			c := *v
			value, err := fn(&c)
			if err != nil {
				return err
			}
			nv := *v
			nv.Value = value
			if err := store.CheckVariable(&nv); err != nil {
				return fmt.Errorf("postgres: %s: %w", op, err)
			}
			ws[i], layers[i], owners[i], names[i], values[i] = v.WorkspaceID, string(v.Layer), v.OwnerID, v.Name, value
		}
		tag, err := tx.Exec(ctx, `UPDATE variables v SET value = u.value
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS u(workspace_id, layer, owner_id, name, value)
WHERE v.workspace_id = u.workspace_id AND v.layer = u.layer AND v.owner_id = u.owner_id AND v.name = u.name`,
			ws, layers, owners, names, values)
		if err != nil {
			return dbError(op, err)
		}
		if int(tag.RowsAffected()) != len(all) {
			return fmt.Errorf("postgres: %s: updated %d of %d values", op, tag.RowsAffected(), len(all))
		}
		return nil
	})
}
