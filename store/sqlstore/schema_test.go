package sqlstore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/sqlite"
)

// onlyIn are the columns one database's schema has and the other's does not, each for a
// reason of that database. Anything else must be in both: the shared SQL reads and writes the
// same columns on both.
var onlyIn = map[string][]string{
	"postgres": {
		"threads.last_seq",       // numbers appends across nodes (a row lock), where SQLite takes max(seq)
		"threads.last_log_seq",   // likewise for the log
		"queued_messages.n",      // insertion order: SQLite has rowid
		"call_decisions.n",       // likewise
		"tool_calls.message_seq", // the asking message's seq, under PostgreSQL's name
		// The counts of limits the nodes of a fleet share: one process serves a SQLite
		// database, and counts them in memory (platform/limits).
		"limit_windows.workspace_id", "limit_windows.key", "limit_windows.slot", "limit_windows.back", "limit_windows.n",
		"limit_holds.workspace_id", "limit_holds.key", "limit_holds.node", "limit_holds.held", "limit_holds.expires_at",
	},
	"sqlite": {
		"tool_calls.seq", // the asking message's seq, under SQLite's name
	},
}

// TestSchemasAgree migrates a SQLite file and a PostgreSQL schema and compares their tables
// and columns: the migrations are one list, and what differs is listed in onlyIn.
func TestSchemasAgree(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()

	path := filepath.Join(t.TempDir(), "q.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	lite, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	liteCols := columns(t, lite, `SELECT m.name || '.' || p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`)

	schema := pgtest.Schema(t, dsn)
	p, err := postgres.Open(ctx, dsn, postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pg := stdlib.OpenDB(*cfg)
	defer pg.Close()
	pgCols := columns(t, pg, `SELECT table_name || '.' || column_name FROM information_schema.columns WHERE table_schema = $1`, schema)

	for _, c := range []struct {
		db         string
		have, lack []string
	}{{"postgres", pgCols, liteCols}, {"sqlite", liteCols, pgCols}} {
		for _, col := range c.have {
			if !slices.Contains(c.lack, col) && !slices.Contains(onlyIn[c.db], col) {
				t.Errorf("%s has %s and the other database does not: add it to both migrations, or to onlyIn with why", c.db, col)
			}
		}
		for _, col := range onlyIn[c.db] {
			if !slices.Contains(c.have, col) || slices.Contains(c.lack, col) {
				t.Errorf("onlyIn says %s alone has %s, which is not so", c.db, col)
			}
		}
	}
}

func columns(t *testing.T, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
