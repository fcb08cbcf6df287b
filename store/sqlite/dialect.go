package sqlite

import (
	"context"
	"errors"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlstore"
)

// SQLite's side of store/sqlstore, the SQL both backends share (entities, the thread file
// system, variables and part of the thread state): its writes run on the writer connection,
// so they take turns with each other and with appends, and its reads on the read pool.
type shared = sqlstore.Store // embedded in Store: its methods become the store's, no field is exported

var (
	_ store.Entities  = (*Store)(nil)
	_ store.Files     = (*Store)(nil)
	_ store.Variables = (*Store)(nil)
)

// dialect is what sqlstore needs to know of SQLite.
var dialect = sqlstore.Dialect{
	Name: "sqlite",
	// Writers take turns on the writer connection (BEGIN IMMEDIATE): no row locks.
	RowLocks: false,
	// Times are Unix nanoseconds in INTEGER columns.
	Time: func(t time.Time) any { return t.UnixNano() },
	// SQL has no nanosecond clock: the process's, without its monotonic reading.
	Now: func(ctx context.Context, _ sqlstore.Querier) (time.Time, error) { return stamp.Now(ctx).Round(0), nil },
	// SQLite names no constraint in its errors, only the columns.
	Constraint: func(err error) sqlstore.Violation {
		var e *msqlite.Error
		if !errors.As(err, &e) || e.Code()&0xff != sqlite3.SQLITE_CONSTRAINT {
			return sqlstore.Violation{}
		}
		switch e.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return sqlstore.Violation{Kind: store.ErrConflict, Message: err.Error()}
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return sqlstore.Violation{Kind: store.ErrNotFound, Message: err.Error()}
		}
		return sqlstore.Violation{Kind: store.ErrInvalid, Message: err.Error()}
	},
	// Text compares byte by byte (BINARY) unless told otherwise.
	Bytewise: "",
	RowOrder: "rowid",
	// A read transaction of the read pool is a snapshot as it is.
	ReadTx: nil,
}

// newShared runs the shared SQL's writes on the writer connection and its reads on the read
// pool.
func (s *Store) newShared() *shared {
	return sqlstore.New(dialect, s.r, func(ctx context.Context, fn func(context.Context, sqlstore.Querier) error) error {
		return s.write(ctx, func(ctx context.Context, tx querier) error { return fn(ctx, tx) })
	})
}
