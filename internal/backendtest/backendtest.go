// Package backendtest runs a test against a fresh store of each backend: a SQLite file in the
// test's temporary directory, and a PostgreSQL schema of the test's own (see
// store/postgres/pgtest: skipped without QUIVER_TEST_POSTGRES, failed under CI=true).
package backendtest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/sqlite"
)

// Store is what both backends provide that the tests using this package need: threads and
// messages, and the thread file system (thread.Store).
type Store interface {
	store.Store
	store.Files
}

// Each runs fn as the subtests "sqlite" and "postgres", each with a fresh store closed when
// the subtest ends.
func Each(t *testing.T, fn func(t *testing.T, st Store)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(pgtest.Schema(t, dsn)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}
