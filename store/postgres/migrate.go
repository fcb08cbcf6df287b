package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quiverhq/quiver/store/sqlstore"
)

// ErrSchemaTooNew is returned by Open when the database was migrated by a newer version of
// Quiver than this one: its schema has migrations this build does not know, so it refuses to
// touch it rather than guess. Upgrade the binary (or point it at another schema).
var ErrSchemaTooNew = errors.New("postgres: the database schema is newer than this build of quiver")

// migrations are the steps of the schema, PostgreSQL's side of sqlstore's list.
var migrations = mustLoadMigrations()

func mustLoadMigrations() []sqlstore.Migration {
	ms, err := sqlstore.Migrations(dialect.Name)
	if err != nil {
		panic(err) // the embedded files are part of the build: a test catches this first
	}
	return ms
}

// latestVersion is the schema version this build migrates to.
func latestVersion() int { return len(migrations) }

// migrateLockKey is the advisory lock that serialises migrations of one schema: several nodes
// starting at once take turns, and the later ones find nothing left to do.
func migrateLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("quiver/store/postgres migrate " + schema))
	return int64(h.Sum64())
}

// migrate brings the schema up to date in one transaction, holding an advisory lock for the
// schema until it commits. createSchema names a schema to create when missing ("" for none).
func migrate(ctx context.Context, pool *pgxpool.Pool, lockName, createSchema string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockKey(lockName)); err != nil {
			return fmt.Errorf("postgres: migrate: take the migration lock: %w", err)
		}
		if createSchema != "" {
			// Checked first so that a role without CREATE on the database can use a schema
			// made for it (CREATE SCHEMA IF NOT EXISTS checks the privilege before existence).
			var exists bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", createSchema).Scan(&exists); err != nil {
				return fmt.Errorf("postgres: migrate: look up schema %q: %w", createSchema, err)
			}
			if !exists {
				if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{createSchema}.Sanitize()); err != nil {
					return fmt.Errorf("postgres: migrate: create schema %q: %w", createSchema, err)
				}
			}
		}
		var hasTable bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass('schema_migrations') IS NOT NULL").Scan(&hasTable); err != nil {
			return fmt.Errorf("postgres: migrate: look up schema_migrations: %w", err)
		}
		if !hasTable {
			if _, err := tx.Exec(ctx, `CREATE TABLE schema_migrations (
	version    integer     NOT NULL PRIMARY KEY,
	name       text        NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
				return fmt.Errorf("postgres: migrate: create schema_migrations: %w", err)
			}
		}
		var current int
		if err := tx.QueryRow(ctx, "SELECT COALESCE(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
			return fmt.Errorf("postgres: migrate: read the schema version: %w", err)
		}
		if current > latestVersion() {
			return fmt.Errorf("%w: it is at version %d and this build knows versions up to %d; upgrade quiver",
				ErrSchemaTooNew, current, latestVersion())
		}
		for _, m := range migrations[current:] {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("postgres: migrate: apply %s: %w", m.File, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
				return fmt.Errorf("postgres: migrate: record %s: %w", m.File, err)
			}
		}
		return nil
	})
}
