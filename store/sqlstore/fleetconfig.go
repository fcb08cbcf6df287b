package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/quiverhq/quiver/store"
)

// FleetConfigStore keeps the versions of the fleet's configuration (store.FleetConfigs;
// migration 0015) and the documents they refer to, by digest.
type FleetConfigStore struct{ db }

var _ store.FleetConfigs = (*FleetConfigStore)(nil)

// fleetConfigTurn is what writers of a new version take turns on (Dialect.TakeTurns): the
// check against the latest version reads a row that the write then adds after it, so there is
// no row to lock.
const fleetConfigTurn = "fleet-config"

// FleetConfigVersion returns the latest version and its digest; 0 and "" when none is stored.
func (fs *FleetConfigStore) FleetConfigVersion(ctx context.Context) (int64, string, error) {
	return fs.latest(ctx, fs.read, "read the fleet configuration's version")
}

func (fs *FleetConfigStore) latest(ctx context.Context, q Querier, op string) (int64, string, error) {
	var version int64
	var digest string
	err := q.QueryRowContext(ctx, `SELECT version, digest FROM fleet_config ORDER BY version DESC LIMIT 1`).Scan(&version, &digest)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fs.d.Err(op, err)
	}
	return version, digest, nil
}

// FleetConfig returns a version (0: the latest) with its documents, read in one snapshot.
func (fs *FleetConfigStore) FleetConfig(ctx context.Context, version int64) (*store.FleetConfig, error) {
	op := fmt.Sprintf("read fleet configuration version %d", version)
	if version == 0 {
		op = "read the fleet configuration"
	}
	tx, err := fs.read.BeginTx(ctx, fs.d.ReadTx)
	if err != nil {
		return nil, fs.d.Err(op, err)
	}
	defer tx.Rollback() // read only: nothing to keep
	query := `SELECT version, digest, content, documents, applied_by, created_at FROM fleet_config WHERE version = $1`
	args := []any{version}
	if version == 0 {
		query, args = `SELECT version, digest, content, documents, applied_by, created_at FROM fleet_config ORDER BY version DESC LIMIT 1`, nil
	}
	var c store.FleetConfig
	var docs string
	err = tx.QueryRowContext(ctx, query, args...).Scan(&c.Version, &c.Digest, &c.Content, &docs, &c.AppliedBy, scanTime{&c.CreatedAt})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fs.d.failf(op, store.ErrNotFound, "no such version")
	}
	if err != nil {
		return nil, fs.d.Err(op, err)
	}
	var digests []string
	if err := json.Unmarshal([]byte(docs), &digests); err != nil {
		return nil, fs.d.fail(op, err)
	}
	if c.Documents, err = fs.documents(ctx, tx, digests); err != nil {
		return nil, fs.d.Err(op, err)
	}
	return &c, nil
}

// documents reads the documents of digests, one query each: a version refers to few.
func (fs *FleetConfigStore) documents(ctx context.Context, tx *sql.Tx, digests []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(digests))
	for _, d := range digests {
		var content []byte
		if err := tx.QueryRowContext(ctx, `SELECT content FROM fleet_documents WHERE digest = $1`, d).Scan(&content); err != nil {
			return nil, fmt.Errorf("document %.12s: %w", d, err)
		}
		out[d] = content
	}
	return out, nil
}

// FleetConfigHistory lists up to limit versions, newest first, without content or documents.
func (fs *FleetConfigStore) FleetConfigHistory(ctx context.Context, limit int) ([]*store.FleetConfig, error) {
	op := "list the fleet configuration's versions"
	if err := store.CheckHistoryLimit(limit); err != nil {
		return nil, fs.d.fail(op, err)
	}
	rows, err := fs.read.QueryContext(ctx, `SELECT version, digest, applied_by, created_at FROM fleet_config ORDER BY version DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fs.d.Err(op, err)
	}
	return collect(&fs.d, rows, op, func(row scanner) (*store.FleetConfig, error) {
		var c store.FleetConfig
		err := row.Scan(&c.Version, &c.Digest, &c.AppliedBy, scanTime{&c.CreatedAt})
		return &c, err
	})
}

// PutFleetConfig stores c as the next version unless the latest is the same (see
// store.FleetConfigs). Writers take turns, so two nodes storing at once make two versions
// one after the other, or one and a conflict when each stores after the version it read.
func (fs *FleetConfigStore) PutFleetConfig(ctx context.Context, c *store.FleetConfig, after int64) (bool, error) {
	op := "store a fleet configuration"
	if err := store.CheckFleetConfig(c); err != nil {
		return false, fs.d.fail(op, err)
	}
	digests := slices.Sorted(maps.Keys(c.Documents))
	listed, err := json.Marshal(digests)
	if err != nil {
		return false, fs.d.fail(op, err)
	}
	var created bool
	var latest store.FleetConfig
	err = fs.write(ctx, func(ctx context.Context, tx Querier) error {
		var err error
		latest, created, err = fs.put(ctx, tx, op, c, after, digests, string(listed))
		return err
	})
	if err != nil {
		return false, fs.d.Err(op, err)
	}
	c.Version, c.AppliedBy, c.CreatedAt = latest.Version, latest.AppliedBy, latest.CreatedAt
	return created, nil
}

// put is PutFleetConfig inside the write transaction: it returns the latest version, and
// whether it stored it.
func (fs *FleetConfigStore) put(ctx context.Context, tx Querier, op string, c *store.FleetConfig, after int64, digests []string,
	listed string) (store.FleetConfig, bool, error) {
	if err := fs.d.takeTurns(ctx, tx, fleetConfigTurn); err != nil {
		return store.FleetConfig{}, false, err
	}
	version, digest, err := fs.latest(ctx, tx, op)
	switch {
	case err != nil:
		return store.FleetConfig{}, false, err
	case digest == c.Digest:
		var latest store.FleetConfig
		err := tx.QueryRowContext(ctx, `SELECT version, applied_by, created_at FROM fleet_config WHERE version = $1`, version).
			Scan(&latest.Version, &latest.AppliedBy, scanTime{&latest.CreatedAt})
		return latest, false, err
	case after >= 0 && version != after:
		return store.FleetConfig{}, false, fs.d.failf(op, store.ErrConflict, "the latest version is %d, not %d: another writer stored one meanwhile", version, after)
	}
	at, err := fs.d.Now(ctx, tx)
	if err != nil {
		return store.FleetConfig{}, false, err
	}
	if err := fs.putDocuments(ctx, tx, c, digests, at); err != nil {
		return store.FleetConfig{}, false, err
	}
	latest := store.FleetConfig{Version: version + 1, AppliedBy: c.AppliedBy, CreatedAt: at}
	_, err = tx.ExecContext(ctx, `INSERT INTO fleet_config (version, digest, content, documents, applied_by, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, latest.Version, c.Digest, c.Content, listed, c.AppliedBy, fs.d.Time(at))
	return latest, true, err
}

// putDocuments stores the documents c refers to that are not stored yet.
func (fs *FleetConfigStore) putDocuments(ctx context.Context, tx Querier, c *store.FleetConfig, digests []string, at time.Time) error {
	for _, d := range digests {
		if _, err := tx.ExecContext(ctx, `INSERT INTO fleet_documents (digest, content, created_at) VALUES ($1, $2, $3)
			ON CONFLICT (digest) DO NOTHING`, d, c.Documents[d], fs.d.Time(at)); err != nil {
			return err
		}
	}
	return nil
}
