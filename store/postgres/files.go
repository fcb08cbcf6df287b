package postgres

import (
	"database/sql"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlstore"
)

// The thread file system (store.Files, migration 0002) is sqlstore's, with the dialect of
// entities.go: every change locks the thread's file_usage row, so changes to one thread's
// files take turns across connections and nodes while appends to its messages, which lock
// the thread row, go on.

var _ store.Files = (*Store)(nil)

// files is embedded in Store under a name of its own, like entities.
type files = sqlstore.Files

// newFiles runs the file system on db, each change in a transaction of its own.
func newFiles(db *sql.DB) *files { return sqlstore.NewFiles(dialect, db, sqlstore.Transactions(db)) }
