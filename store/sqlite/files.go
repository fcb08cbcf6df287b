package sqlite

import (
	"context"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlstore"
)

// The thread file system (store.Files, migration 0002) is sqlstore's, with the dialect of
// entities.go. Its changes are write transactions like any other (the writer connection), so
// they take turns with each other and with appends; its reads use the read pool.

var _ store.Files = (*Store)(nil)

// files is embedded in Store under a name of its own, like entities.
type files = sqlstore.Files

// newFiles runs the file system's changes on the writer connection and its reads on the read
// pool.
func (s *Store) newFiles() *files { return sqlstore.NewFiles(dialect, s.r, s.writeSQL) }

// writeSQL is s.write as sqlstore runs it.
func (s *Store) writeSQL(ctx context.Context, fn func(context.Context, sqlstore.Querier) error) error {
	return s.write(ctx, func(ctx context.Context, tx querier) error { return fn(ctx, tx) })
}
