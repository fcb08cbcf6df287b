package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/quiverhq/quiver/store/sqlstore"
)

// ErrSchemaTooNew is returned by Open for a database whose schema was written by a newer
// version of this package: it has migrations this build does not know.
var ErrSchemaTooNew = errors.New("the database schema is newer than this program knows")

// migrations are the steps of the schema, SQLite's side of sqlstore's list.
func migrations() ([]sqlstore.Migration, error) { return sqlstore.Migrations(dialect.Name) }

// migrate brings the schema up to date, one migration per transaction. Every transaction
// re-reads the version under the write lock, so processes opening the same file at once apply
// each migration once.
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	for {
		done, err := migrateOne(ctx, db, ms)
		if err != nil || done {
			return err
		}
	}
}

// migrateOne applies the first migration the database lacks, and reports whether there was
// none left.
func migrateOne(ctx context.Context, db *sql.DB, ms []sqlstore.Migration) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock from the start
	if err != nil {
		return false, fmt.Errorf("migrate: begin: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	switch {
	case current > len(ms):
		return false, fmt.Errorf("%w (database at version %d, this program knows up to %d)", ErrSchemaTooNew, current, len(ms))
	case current == len(ms):
		return true, tx.Commit()
	}
	m := ms[current]
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.File, err)
	}
	// The file's name, as before the files moved to sqlstore (0001_init.sql then): the version
	// is what counts.
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.File, time.Now().UnixNano()); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.File, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.File, err)
	}
	return false, nil
}
