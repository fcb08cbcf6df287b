//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockServing takes the lock that keeps a second quiver serve off a SQLite database (PATH.serve.lock),
// held until release or the process's end, however it ends. Two servers on one SQLite file
// would both run its background jobs and journals, and each believe it is the only writer of
// what it caches.
func lockServing(dbPath string) (release func(), err error) {
	path := dbPath + ".serve.lock"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the server's lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	switch {
	case errors.Is(err, syscall.EWOULDBLOCK):
		f.Close()
		return nil, fmt.Errorf("another quiver serve is using the database %s (it holds %s): stop it first, "+
			"or give this one another database with --db", dbPath, path)
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
