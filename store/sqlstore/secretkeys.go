package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/store"
)

// The key id that seals the secrets (store.SecretKeys, migration 0013) is kept by
// VariableStore: RekeySecrets changes it in the transaction that re-encrypts the variables.

var _ store.SecretKeys = (*VariableStore)(nil)

// secretKeyTurn is what the writes of the recorded key id take turns on (Dialect.TakeTurns):
// the row may not exist yet, so there is no row to lock.
const secretKeyTurn = "secret-key"

// SecretKeyID returns the recorded key id, "" when none is (see store.SecretKeys).
func (vs *VariableStore) SecretKeyID(ctx context.Context) (string, error) {
	return vs.recordedKeyID(ctx, vs.read, "read the secret key id")
}

func (vs *VariableStore) recordedKeyID(ctx context.Context, q Querier, op string) (string, error) {
	var id string
	err := q.QueryRowContext(ctx, `SELECT key_id FROM secret_key WHERE one = 1`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", vs.d.Err(op, err)
	}
	return id, nil
}

// RecordSecretKeyID records id unless an id is recorded, and returns the recorded one (see
// store.SecretKeys). The insert does nothing where a row exists, and the read that follows,
// in the same transaction after the turn is taken, sees whichever node's insert committed
// first.
func (vs *VariableStore) RecordSecretKeyID(ctx context.Context, id string) (string, error) {
	op := "record the secret key id"
	if err := store.CheckSecretKeyID(id); err != nil {
		return "", vs.d.fail(op, err)
	}
	var recorded string
	err := vs.write(ctx, func(ctx context.Context, tx Querier) error {
		if err := vs.d.takeTurns(ctx, tx, secretKeyTurn); err != nil {
			return vs.d.Err(op, err)
		}
		now, err := vs.d.Now(ctx, tx)
		if err != nil {
			return vs.d.Err(op, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO secret_key (one, key_id, updated_at) VALUES (1, $1, $2)
			ON CONFLICT (one) DO NOTHING`, id, vs.d.Time(now)); err != nil {
			return vs.d.Err(op, err)
		}
		recorded, err = vs.recordedKeyID(ctx, tx, op)
		return err
	})
	return recorded, err
}

// LatestSecret returns the sealed value of the secret set most recently, "" when there is
// none (see store.SecretKeys).
func (vs *VariableStore) LatestSecret(ctx context.Context) (string, error) {
	var value string
	err := vs.read.QueryRowContext(ctx, `SELECT value FROM variables WHERE secret
		ORDER BY updated_at DESC, workspace_id, layer, owner_id, name LIMIT 1`).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", vs.d.Err("read the latest secret", err)
	}
	return value, nil
}

// RekeySecrets re-encrypts every secret with fn and records id, in one write transaction (see
// store.SecretKeys). The variables are locked first, as RewriteSecrets does, then the turn on
// the record is taken: RecordSecretKeyID takes only the turn, so the two never wait on each
// other in opposite orders.
func (vs *VariableStore) RekeySecrets(ctx context.Context, from []string, id string, fn func(v *store.Variable) (string, error)) error {
	op := "re-key secrets"
	if err := store.CheckSecretKeyID(id); err != nil {
		return vs.d.fail(op, err)
	}
	return vs.write(ctx, func(ctx context.Context, tx Querier) error {
		if err := vs.lockVariables(ctx, tx, op); err != nil {
			return err
		}
		if err := vs.d.takeTurns(ctx, tx, secretKeyTurn); err != nil {
			return vs.d.Err(op, err)
		}
		recorded, err := vs.recordedKeyID(ctx, tx, op)
		if err != nil {
			return err
		}
		if recorded != "" && !slices.Contains(from, recorded) {
			return vs.d.failf(op, store.ErrConflict, "the secrets are recorded as sealed with key %s, not %s", recorded, strings.Join(from, " or "))
		}
		if err := vs.rewriteSecrets(ctx, tx, op, fn); err != nil {
			return err
		}
		now, err := vs.d.Now(ctx, tx)
		if err != nil {
			return vs.d.Err(op, err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO secret_key (one, key_id, updated_at) VALUES (1, $1, $2)
			ON CONFLICT (one) DO UPDATE SET key_id = excluded.key_id, updated_at = excluded.updated_at`, id, vs.d.Time(now))
		return vs.d.Err(op, err)
	})
}
