package postgres

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlstore"
)

// PostgreSQL's side of store/sqlstore, the SQL both backends share (entities, the thread file
// system, variables, part of the thread state), run through database/sql on the store's own
// pool (pgx/v5/stdlib). Each write is a transaction of its own at READ COMMITTED, which locks
// the rows its checks rely on; times come from the database clock.
type shared = sqlstore.Store // embedded in Store: its methods become the store's, no field is exported

var (
	_ store.Entities  = (*Store)(nil)
	_ store.Files     = (*Store)(nil)
	_ store.Variables = (*Store)(nil)
)

// dialect is what sqlstore needs to know of PostgreSQL.
var dialect = sqlstore.Dialect{
	Name:          "postgres",
	RowsPerInsert: 200, // 48 parameters a usage row: within PostgreSQL's 65,535
	// Transactions run side by side at READ COMMITTED, on several nodes: a write locks the
	// rows its checks read.
	RowLocks: true,
	Time:     func(t time.Time) any { return t },
	// The database's clock, which every node shares; a timestamptz keeps microseconds.
	Now: func(ctx context.Context, tx sqlstore.Querier) (time.Time, error) {
		var t time.Time
		err := tx.QueryRowContext(ctx, `SELECT clock_timestamp()`).Scan(&t)
		return t.UTC(), err
	},
	// Constraint names are part of the contract with the migrations (see sqlstore's
	// constraints): the schema's, the mapping's and the one statement of Append's.
	Constraint: func(err error) sqlstore.Violation {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			return sqlstore.Violation{}
		}
		var kind error
		switch {
		case pe.Code == "23505":
			kind = store.ErrConflict
		case pe.Code == "23503":
			kind = store.ErrNotFound
		case pe.Code == "23514" || strings.HasPrefix(pe.Code, "22"):
			kind = store.ErrInvalid
		default:
			return sqlstore.Violation{}
		}
		msg := pe.Message
		if pe.Detail != "" {
			msg += " (" + pe.Detail + ")"
		}
		return sqlstore.Violation{Kind: kind, Name: pe.ConstraintName, Message: msg}
	},
	// The default collation follows the database's locale.
	Bytewise: ` COLLATE "C"`,
	// The identity column of the tables listed in insertion order.
	RowOrder: "n",
	// READ COMMITTED would let each query of a read see other commits.
	ReadTx: &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
	// An advisory lock held until the transaction ends, on a 64-bit hash of the key.
	TakeTurns: func(ctx context.Context, tx sqlstore.Querier, key string) error {
		_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, key)
		return err
	},
}

// newShared runs the shared SQL on db, a database/sql view of the store's pool, each write in
// a transaction of its own.
func newShared(db *sql.DB) *shared { return sqlstore.New(dialect, db, sqlstore.Transactions(db)) }
