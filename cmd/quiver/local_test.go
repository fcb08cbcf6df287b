package main

import (
	"context"
	"flag"
	"path/filepath"
	"sync"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// quiver serve gives its journal the opened database, and the journal batches its appends in
// one transaction only when the store it is given has AppendBatch: the opened database (a
// store.Backend in a struct) must have it, or every recorded call costs a commit of its own
// (as it did, found by bench/peers/cmd/serverbench: a third of the server's CPU under load).
func TestOpenedDatabaseBatchesAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quiver.db")
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f := addStoreFlags(fs)
	if err := fs.Parse([]string{"--db", path}); err != nil {
		t.Fatal(err)
	}
	db, err := f.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var st store.Store = db
	if _, ok := st.(store.BatchAppender); !ok {
		t.Fatal("the opened database is not a store.BatchAppender: the journal would store each record in its own transaction")
	}
}

func TestOpenCreatesDatabaseAndLocalWorkspaceOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "quiver.db")
	open := func() (*opened, error) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		f := addStoreFlags(fs)
		if err := fs.Parse([]string{"--db", path}); err != nil {
			t.Fatal(err)
		}
		return f.open(context.Background())
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			o, err := open()
			if err == nil {
				o.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent first open: %v", err)
		}
	}
	o, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	w, err := o.Workspace(context.Background(), localWorkspaceID)
	if err != nil || w.Name != "local" {
		t.Fatalf("local workspace = %+v, %v", w, err)
	}
	if o.KeyPath != filepath.Join(filepath.Dir(path), keyFileName) || o.Where != path {
		t.Errorf("KeyPath %q, Where %q", o.KeyPath, o.Where)
	}
}

func TestOpenRefusesBothBackends(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f := addStoreFlags(fs)
	if err := fs.Parse([]string{"--db", "a.db", "--postgres", "postgres://x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.open(context.Background()); err == nil {
		t.Fatal("open with --db and --postgres succeeded")
	}
}
