package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/store/vars"
)

// Where a deployment keeps its data by default: $XDG_DATA_HOME/quiver (or
// ~/.local/share/quiver), holding the SQLite database and, beside it, the key file that secret
// values are encrypted with.
const (
	defaultDBName = "quiver.db"
	keyFileName   = "secret.key"
)

// dataDir is the default data directory.
func dataDir() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "quiver"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no data directory (set XDG_DATA_HOME or pass --db): %w", err)
	}
	return filepath.Join(home, ".local", "share", "quiver"), nil
}

// variableStore is a store holding variables, to close after use.
type variableStore interface {
	store.Variables
	Close() error
}

// rotateKey re-encrypts every secret value under a new key: see vars.RotateKeyFile for the
// order of the steps and why a crash at any point loses nothing, and vars.RotateKeyEnv for a
// key given in QUIVER_SECRET_KEY.
//
// Its --db and --postgres are its own, not the store flags: rotating creates no database.
func (a *app) rotateKey(ctx context.Context, inv *invocation) (int, error) {
	dbPath := inv.fs.String("db", "", "the SQLite database (default: "+defaultDBName+" in $XDG_DATA_HOME/quiver or ~/.local/share/quiver)")
	dsn := inv.fs.String("postgres", "", "a PostgreSQL connection string, to use instead of a SQLite database")
	keyPath := inv.fs.String("key", "", "the key file (default: "+keyFileName+" beside the SQLite database, or in the data directory)")
	if err := inv.parseNone(""); err != nil {
		return exitUsage, err
	}
	if *dbPath != "" && *dsn != "" {
		return exitUsage, usagef("give --db or --postgres, not both")
	}

	st, key, err := openVariableStore(ctx, *dbPath, *dsn, *keyPath)
	if err != nil {
		return exitError, err
	}
	defer st.Close()
	if _, fromEnv := os.LookupEnv(secret.EnvKey); fromEnv {
		return a.rotateEnvKey(ctx, st)
	}
	return a.rotateFileKey(ctx, st, key)
}

// openVariableStore opens the database that rotate-key works on, PostgreSQL when dsn is set,
// and returns it with the key file's path (keyPath, or its default).
func openVariableStore(ctx context.Context, dbPath, dsn, keyPath string) (variableStore, string, error) {
	if dsn != "" {
		if keyPath == "" {
			dir, err := dataDir()
			if err != nil {
				return nil, "", err
			}
			keyPath = filepath.Join(dir, keyFileName)
		}
		st, err := postgres.Open(ctx, dsn)
		if err != nil {
			return nil, "", err
		}
		return st, keyPath, nil
	}
	if dbPath == "" {
		dir, err := dataDir()
		if err != nil {
			return nil, "", err
		}
		dbPath = filepath.Join(dir, defaultDBName)
	}
	// Rotating creates nothing: a database that does not exist is a mistyped path.
	if _, err := os.Stat(dbPath); errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("no database at %s (pass --db PATH or --postgres DSN)", dbPath)
	}
	if keyPath == "" {
		keyPath = filepath.Join(filepath.Dir(dbPath), keyFileName)
	}
	st, err := sqlite.Open(dbPath)
	if err != nil {
		return nil, "", err
	}
	return st, keyPath, nil
}

// rotateEnvKey rotates a key given in QUIVER_SECRET_KEY: it prints the new key, which the
// operator then sets in place of the old one.
func (a *app) rotateEnvKey(ctx context.Context, st variableStore) (int, error) {
	rot, err := vars.RotateKeyEnv(ctx, st, func(newKey string) error {
		_, err := fmt.Fprintf(a.stdout, "New key (not in effect until this command reports success):\n%s\n", newKey)
		return err
	})
	if err != nil {
		return exitError, fmt.Errorf("%w\nNothing was re-encrypted: keep %s as it is and discard any key printed above", err, secret.EnvKey)
	}
	fmt.Fprintf(a.stdout, "Re-encrypted %d secret value%s with key %s (was %s).\n"+
		"Set %s to the new key above for every process using this database, and restart them.\n",
		rot.Values, plural(rot.Values), rot.NewKeyID, rot.OldKeyID, secret.EnvKey)
	return exitOK, nil
}

// rotateFileKey rotates the key in the key file at keyPath, then re-seals the OAuth grants of
// remote MCP servers, which are sealed with the same key.
func (a *app) rotateFileKey(ctx context.Context, st variableStore, keyPath string) (int, error) {
	rot, err := vars.RotateKeyFile(ctx, st, keyPath)
	if err != nil {
		return exitError, err
	}
	if rot.Resumed {
		fmt.Fprintf(a.stdout, "Finished an interrupted rotation.\n")
	}
	fmt.Fprintf(a.stdout, "Re-encrypted %d secret value%s: %s now holds key %s (was %s).\n"+
		"The previous key is kept in %s, so that values written meanwhile by processes still running with it\n"+
		"stay readable: restart every process using this database, then delete that file.\n"+
		"The database now expects key %s: a node with another key file (on another machine) refuses to start\n"+
		"until it has a copy of %s.\n",
		rot.Values, plural(rot.Values), keyPath, rot.NewKeyID, rot.OldKeyID, rot.OldKeyPath, rot.NewKeyID, keyPath)
	if grants, err := oauthGrants(keyPath); err != nil {
		fmt.Fprintf(a.stderr, "quiver: warning: the OAuth grants were not re-encrypted: %v\n", err)
	} else if n, err := grants.Reseal(ctx); err != nil {
		fmt.Fprintf(a.stderr, "quiver: warning: %d OAuth grant%s re-encrypted, some not: %v\n", n, plural(n), err)
	} else if n > 0 {
		fmt.Fprintf(a.stdout, "Re-encrypted %d OAuth grant%s of remote MCP servers.\n", n, plural(n))
	}
	return exitOK, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
