package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/sqlite"
)

// localWorkspaceID is the workspace the CLI works in when none is named: a single-user
// installation has one workspace, created on first use.
const localWorkspaceID = "wsp_local"

// backend is everything the CLI keeps in a database; both store/sqlite and store/postgres
// provide all of it. It names store.Usage besides store.Backend because the platform and the
// retention purge find the usage store by asserting it (st.(store.Usage)) on the opened
// database, which embeds this interface: a method left out here is hidden from them, and
// quiver serve would meter no usage.
type backend interface {
	store.Backend
	store.Usage
	store.Connections
}

// storeFlags are the flags of every command that opens the database: the SQLite file in the
// data directory by default, or a PostgreSQL DSN (flag or QUIVER_POSTGRES).
type storeFlags struct {
	db       *string
	postgres *string
}

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		db:       fs.String("db", "", "the SQLite database (default: "+defaultDBName+" in $XDG_DATA_HOME/quiver or ~/.local/share/quiver)"),
		postgres: fs.String("postgres", "", "a PostgreSQL connection string, to use instead of SQLite (default: $QUIVER_POSTGRES)"),
	}
}

// opened is a database opened for a command, with where its secret key file lives.
type opened struct {
	backend
	// KeyPath is the key file secret variables are sealed with (unless QUIVER_SECRET_KEY is set).
	KeyPath string
	// Where says which database this is, for messages ("/home/u/.local/share/quiver/quiver.db").
	Where string
	// SQLitePath is the database file when the store is SQLite; DSN the connection string when
	// it is PostgreSQL.
	SQLitePath string
	DSN        string
	// Created says that the SQLite file did not exist and was made.
	Created bool
	// ctx is the context of the command that opened the database, which the database does
	// not outlive (dispatch closes it when the command returns): assemble, which takes no
	// context, checks the secret key with it (see keyring).
	ctx context.Context
}

// open opens (creating when needed) the database the flags name, applies its migrations and
// makes sure the local workspace exists.
func (f storeFlags) open(ctx context.Context) (*opened, error) {
	dsn := *f.postgres
	if dsn == "" {
		dsn = os.Getenv("QUIVER_POSTGRES")
	}
	if *f.db != "" && *f.postgres != "" {
		return nil, usagef("give --db or --postgres, not both")
	}
	keyPath, err := f.keyPath()
	if err != nil {
		return nil, err
	}
	o := &opened{KeyPath: keyPath, ctx: ctx}
	if dsn != "" && *f.db == "" {
		o.Where, o.DSN = "PostgreSQL", dsn
		st, err := postgres.Open(ctx, dsn)
		if err != nil {
			return nil, err
		}
		o.backend = st
	} else {
		path := *f.db
		if path == "" {
			dir, err := dataDir()
			if err != nil {
				return nil, err
			}
			path = filepath.Join(dir, defaultDBName)
		}
		// The directory holds the key file too: keep it private.
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("creating the data directory: %w", err)
		}
		o.Where, o.SQLitePath = path, path
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			o.Created = true
		}
		st, err := sqlite.Open(path)
		if err != nil {
			return nil, err
		}
		o.backend = st
	}
	if err := ensureLocalWorkspace(ctx, o.backend); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// keyPath is the secret key file for the database the flags name: beside the SQLite file, or
// in the data directory.
func (f storeFlags) keyPath() (string, error) {
	if *f.db != "" {
		return filepath.Join(filepath.Dir(*f.db), keyFileName), nil
	}
	dir, err := dataDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, keyFileName), nil
}

// ensureLocalWorkspace creates the local workspace unless it exists; two processes starting
// at once both succeed.
func ensureLocalWorkspace(ctx context.Context, st store.Entities) error {
	if _, err := st.Workspace(ctx, localWorkspaceID); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	err := st.CreateWorkspace(ctx, &store.Workspace{ID: localWorkspaceID, Name: "local"})
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating the local workspace: %w", err)
	}
	return nil
}
