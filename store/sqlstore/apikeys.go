package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// APIKeyStore implements store.APIKeys (migration 0007; the toolsets a key is bound to, 0018)
// for both backends.
//
// A key is created inside one transaction with the check that its user is a member whose role
// allows the key's (read FOR SHARE on PostgreSQL, so that a demotion and a creation take
// turns). Finding a key by hash also reads its user's current role, so that a key never does
// more than its user may now.
type APIKeyStore struct{ db }

var _ store.APIKeys = (*APIKeyStore)(nil)

// apiKeyCols are the columns scanAPIKey reads, of the table named k (SQLite's RETURNING takes
// only bare column names: apiKeyColsBare).
const (
	apiKeyCols     = `k.id, k.workspace_id, k.user_id, k.name, k.role, k.prefix, k.hash, k.created_at, k.expires_at, k.revoked_at, k.last_used_at, k.toolsets`
	apiKeyColsBare = `id, workspace_id, user_id, name, role, prefix, hash, created_at, expires_at, revoked_at, last_used_at, toolsets`
)

func scanAPIKey(row scanner, extra ...any) (*store.APIKey, error) {
	var k store.APIKey
	var toolsets string
	dest := append([]any{&k.ID, &k.WorkspaceID, &k.UserID, &k.Name, &k.Role, &k.Prefix, &k.Hash,
		scanTime{&k.CreatedAt}, scanNullTime{&k.ExpiresAt}, scanNullTime{&k.RevokedAt}, scanNullTime{&k.LastUsedAt}, &toolsets}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(toolsets), &k.Toolsets); err != nil {
		return nil, fmt.Errorf("API key %s: toolsets: %w", k.ID, err)
	}
	if len(k.Toolsets) == 0 {
		k.Toolsets = nil // not bound, however it was stored
	}
	return &k, nil
}

// encodeToolsets is the stored form of a key's toolsets: a JSON array, [] for none.
func encodeToolsets(toolsets []string) string {
	if len(toolsets) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(toolsets) // strings always encode
	return string(b)
}

// CreateAPIKey stores k; see store.APIKeys.
func (s *APIKeyStore) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	op := "create API key"
	if err := store.CheckAPIKey(k); err != nil {
		return s.d.fail(op, err)
	}
	id := k.ID
	if id == "" {
		id = stamp.ID(ctx, store.PrefixAPIKey)
	}
	var at time.Time
	err := s.write(ctx, func(ctx context.Context, tx Querier) error {
		var err error
		at, err = s.insertAPIKey(ctx, tx, op, id, k)
		return err
	})
	if err != nil {
		return s.d.Err(op, err)
	}
	k.ID, k.CreatedAt = id, at
	return nil
}

// insertAPIKey inserts k under id, inside the write transaction, once its user may make it;
// it returns the time of its creation.
func (s *APIKeyStore) insertAPIKey(ctx context.Context, tx Querier, op, id string, k *store.APIKey) (time.Time, error) {
	if err := s.checkKeyRole(ctx, tx, op, k); err != nil {
		return time.Time{}, err
	}
	at, err := s.d.Now(ctx, tx)
	if err != nil {
		return time.Time{}, err
	}
	if k.ExpiresAt != nil && !k.ExpiresAt.After(at) {
		return time.Time{}, s.d.failf(op, store.ErrInvalid, "the key would expire at %s, which is not after now (%s)",
			k.ExpiresAt.UTC().Format(time.RFC3339), at.Format(time.RFC3339))
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO api_keys (id, workspace_id, user_id, name, role, prefix, hash, created_at, expires_at, toolsets)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		id, k.WorkspaceID, k.UserID, k.Name, string(k.Role), k.Prefix, k.Hash, s.d.Time(at), s.d.nullTime(k.ExpiresAt), encodeToolsets(k.Toolsets))
	return at, err
}

// checkKeyRole checks that the key's user is a member of its workspace whose role allows the
// key's.
func (s *APIKeyStore) checkKeyRole(ctx context.Context, tx Querier, op string, k *store.APIKey) error {
	role, err := s.memberRole(ctx, tx, op, k.WorkspaceID, k.UserID)
	if err != nil {
		return err
	}
	if role == "" {
		return s.d.failf(op, store.ErrForbidden, "user %s is not a member of workspace %s", k.UserID, k.WorkspaceID)
	}
	if most := store.MemberKeyRole(role); !most.Allows(k.Role) {
		return s.d.failf(op, store.ErrForbidden, "user %s is a %s of workspace %s and cannot make a key of role %s (at most %s)",
			k.UserID, role, k.WorkspaceID, k.Role, most)
	}
	return nil
}

// APIKeyByHash returns the key with this hash and its user's role now; see store.APIKeys.
func (s *APIKeyStore) APIKeyByHash(ctx context.Context, hash []byte) (*store.APIKey, store.MemberRole, error) {
	var role sql.NullString
	k, err := scanAPIKey(s.read.QueryRowContext(ctx, `SELECT `+apiKeyCols+`, m.role FROM api_keys k
		LEFT JOIN memberships m ON m.workspace_id = k.workspace_id AND m.user_id = k.user_id
		WHERE k.hash = $1`, hash), &role)
	if err != nil {
		return nil, "", s.d.Err("API key by hash", err)
	}
	return k, store.MemberRole(role.String), nil
}

// APIKeys lists the workspace's keys, newest first.
func (s *APIKeyStore) APIKeys(ctx context.Context, workspaceID string) ([]*store.APIKey, error) {
	op := "API keys of workspace " + workspaceID
	rows, err := s.read.QueryContext(ctx, `SELECT `+apiKeyCols+` FROM api_keys k
		WHERE k.workspace_id = $1 ORDER BY k.created_at DESC, k.id DESC`, workspaceID)
	if err != nil {
		return nil, s.d.Err(op, err)
	}
	return collect(&s.d, rows, op, func(r scanner) (*store.APIKey, error) { return scanAPIKey(r) })
}

// RevokeAPIKey revokes the key; see store.APIKeys.
func (s *APIKeyStore) RevokeAPIKey(ctx context.Context, workspaceID, id string) (*store.APIKey, error) {
	op := "revoke API key " + id
	var out *store.APIKey
	err := s.write(ctx, func(ctx context.Context, tx Querier) error {
		at, err := s.d.Now(ctx, tx)
		if err != nil {
			return err
		}
		out, err = scanAPIKey(tx.QueryRowContext(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $3)
			WHERE workspace_id = $1 AND id = $2 RETURNING `+apiKeyColsBare, workspaceID, id, s.d.Time(at)))
		return err
	})
	if err != nil {
		return nil, s.d.Err(op, err)
	}
	return out, nil
}

// TouchAPIKey records a use of the key; see store.APIKeys.
func (s *APIKeyStore) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	op := "touch API key " + id
	err := s.write(ctx, func(ctx context.Context, tx Querier) error {
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET last_used_at = $2
			WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)`, id, s.d.Time(at.UTC()))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		// Nothing changed: a later use is recorded already, or there is no such key.
		var one int
		return tx.QueryRowContext(ctx, `SELECT 1 FROM api_keys WHERE id = $1`, id).Scan(&one)
	})
	return s.d.Err(op, err)
}
