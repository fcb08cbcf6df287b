package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
)

// ErrSchemaTooNew is returned by Open for a database whose schema was written by a newer
// version of this package: it has migrations this build does not know.
var ErrSchemaTooNew = errors.New("the database schema is newer than this program knows")

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered schema change.
type migration struct {
	version int
	name    string // the file name
	sql     string
}

// migrations returns the embedded migrations in order; their numbers must run 1, 2, 3...
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries { // ReadDir sorts by name
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || len(num) != 4 {
			return nil, fmt.Errorf("migration %s: name is not NNNN_name.sql", e.Name())
		}
		if v != len(out)+1 {
			return nil, fmt.Errorf("migration %s: want number %04d", e.Name(), len(out)+1)
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	return out, nil
}

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
func migrateOne(ctx context.Context, db *sql.DB, ms []migration) (done bool, err error) {
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
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.version, m.name, time.Now().UnixNano()); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.name, err)
	}
	return false, nil
}
