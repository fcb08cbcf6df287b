//go:build unix

package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// A second quiver serve on the same SQLite database is refused, saying what to do, and a
// database that did not exist is said to be created; once the first server stops, its lock is
// free.
func TestServeRefusesASecondServerOnOneDatabase(t *testing.T) {
	_, stop, first := startServe(t)
	if !strings.Contains(first.String(), "created a new database at ") {
		t.Errorf("the first start did not say it created the database:\n%s", first.String())
	}
	var stderr strings.Builder
	code := run(context.Background(), []string{"serve", "--insecure-local", "--addr", "127.0.0.1:0"}, strings.NewReader(""), io.Discard, &stderr)
	if code != exitError || !strings.Contains(stderr.String(), "another quiver serve is using the database") ||
		!strings.Contains(stderr.String(), "--db") {
		t.Fatalf("a second serve on the same database: exit %d\n%s\nwant exit %d saying another server holds it", code, stderr.String(), exitError)
	}
	if strings.Contains(stderr.String(), "created a new database") {
		t.Errorf("the second start said it created the database:\n%s", stderr.String())
	}
	if code := stop(); code != exitOK {
		t.Fatalf("the first server exited with %d", code)
	}
	dir, err := dataDir()
	if err != nil {
		t.Fatal(err)
	}
	release, err := lockServing(filepath.Join(dir, defaultDBName))
	if err != nil {
		t.Fatalf("the database's lock once its server stopped: %v", err)
	}
	release()
}
