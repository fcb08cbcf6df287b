// Package pgtest gives tests a PostgreSQL database of their own: the server named by
// QUIVER_TEST_POSTGRES, and a fresh schema dropped when the test ends. Without that variable
// the test is skipped, except in CI (CI=true), which must run PostgreSQL tests for real.
package pgtest

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the variable holding the test server's DSN.
const EnvDSN = "QUIVER_TEST_POSTGRES"

const howToRun = EnvDSN + " is not set: to run the PostgreSQL tests, point it at a server where the user may create schemas, e.g. " +
	EnvDSN + "='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' go test ./... (.ci/run starts one and sets it)"

// DSN returns the test server's DSN, or skips the test (fails it under CI=true) when none is
// configured.
func DSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatal("CI=true but " + howToRun)
		}
		tb.Skip(howToRun)
	}
	return dsn
}

// Schema returns the name of a schema of the test's own, dropped with everything in it when
// the test ends.
func Schema(tb testing.TB, dsn string) string {
	tb.Helper()
	name := "quiver_test_" + strings.ToLower(rand.Text()[:12])
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}
