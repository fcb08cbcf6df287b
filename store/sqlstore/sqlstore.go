// Package sqlstore is the SQL that store/sqlite and store/postgres share, written once: the
// statements both databases accept as they are ($N parameters, RETURNING, row values in
// comparisons, COALESCE, EXISTS), run through database/sql, together with the rules they
// enforce and the wording of their errors.
//
// A backend provides what really differs between the databases, in a Dialect (how a time is
// stored, which clock a write reads, whether rows must be locked, which errors are which
// constraint), and a way to run a write transaction (SQLite's single writer connection,
// PostgreSQL's pool through pgx/v5/stdlib). Everything else, including which rows a write
// locks, is here.
//
// What is here so far: the entities (store.Entities), the thread file system (store.Files),
// variables (store.Variables), API keys (store.APIKeys), leases (store.Leases), usage (store.Usage) and part of the thread state (see
// ThreadState). Threads and their history, whose appends are the hot path, are still each
// backend's own.
//
// # Adding a table
//
// A new table is a migration pair in migrations/ (NNNN_name.sqlite.sql and
// NNNN_name.postgres.sql, the same version; see Migrations) and its statements here, once,
// on a type that Store embeds. Write them in the SQL both databases accept: $N parameters,
// CAST(... AS TEXT) rather than ::text, a time as Dialect.Time(t) and read with scanTime,
// lock clauses through Dialect.lock, errors through Dialect.Err (name PostgreSQL's constraints
// and give the store's words for them in constraints). Where the databases
// really differ, add to Dialect rather than branch on its Name, and say why at the field.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quiverhq/quiver/store"
)

// Store is everything sqlstore implements for one database. A backend embeds it and
// implements the rest of store.Store (threads and their history) itself; a method the backend
// declares takes the place of one of Store's.
type Store struct {
	*Entities
	*Files
	*VariableStore
	*ThreadState
	*APIKeyStore
	*LeaseStore
	*FleetConfigStore
	*UsageStore
	*ConnectionStore
}

// New returns the shared part of a store on a database of dialect d: reads go to read (a
// pool), writes through write. The file system has the default caps
// (store.DefaultFileLimits).
func New(d Dialect, read *sql.DB, write WriteFunc) *Store {
	b := db{d: d, read: read, write: write}
	return &Store{
		Entities:         &Entities{b},
		Files:            &Files{db: b, lim: store.DefaultFileLimits()},
		VariableStore:    &VariableStore{b},
		ThreadState:      &ThreadState{b},
		APIKeyStore:      &APIKeyStore{b},
		LeaseStore:       &LeaseStore{b},
		FleetConfigStore: &FleetConfigStore{b},
		UsageStore:       &UsageStore{b},
		ConnectionStore:  &ConnectionStore{b},
	}
}

// db is a database as sqlstore's types use it.
type db struct {
	d     Dialect
	read  *sql.DB
	write WriteFunc
}

// Querier is what statements run on: a write transaction or the read pool.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// WriteFunc runs fn in one write transaction, committing it when fn returns nil and rolling it
// back otherwise. It returns fn's error as it is.
type WriteFunc func(ctx context.Context, fn func(ctx context.Context, tx Querier) error) error

// Violation is a constraint violation as a dialect reads it from the driver's error.
type Violation struct {
	// Kind is store.ErrConflict (a unique key), store.ErrNotFound (a foreign key) or
	// store.ErrInvalid (a check, bad data); nil when the error is no violation.
	Kind error
	// Name is the constraint's name, when the database gives it.
	Name string
	// Message is the database's words.
	Message string
}

// Dialect is what differs between the two databases, and nothing else.
type Dialect struct {
	// Name begins every error: "sqlite", "postgres".
	Name string
	// RowLocks says that writers run side by side and a write must lock the rows its checks
	// rely on (PostgreSQL at READ COMMITTED, several nodes). Without it the lock clauses are
	// left out: SQLite has no FOR UPDATE, and needs none since its writers take turns.
	RowLocks bool
	// Time is the value a time is stored as: SQLite keeps Unix nanoseconds in INTEGER columns,
	// PostgreSQL a timestamptz. Reading accepts both (see scanTime).
	Time func(time.Time) any
	// Now is the time of a write, in UTC, read inside its transaction. PostgreSQL reads the
	// database's clock, the one clock every node shares (to the microsecond); SQLite, which
	// has no nanosecond clock in SQL, the process's.
	Now func(ctx context.Context, tx Querier) (time.Time, error)
	// Constraint classifies err when it is a constraint violation (see Violation); its Kind
	// is nil for any other error.
	Constraint func(err error) Violation
	// Bytewise is the clause that makes an ORDER BY of text compare bytes, as names are
	// listed: SQLite's default; PostgreSQL's default follows the database's locale.
	Bytewise string
	// RowOrder is the column that numbers a table's rows in the order they were inserted, to
	// list them in that order: SQLite's rowid; PostgreSQL's tables that need one have an
	// identity column n.
	RowOrder string
	// ReadTx are the options of a read that takes more than one query: it must see one
	// snapshot. PostgreSQL needs REPEATABLE READ for that; a SQLite read transaction is one
	// already, and its read pool's connections are read-only.
	ReadTx *sql.TxOptions
	// TakeTurns makes the writes that call it with the same key inside their transactions run
	// one after another, until each commits: what a check over many rows (a count against a
	// cap) needs, where no one row can be locked. PostgreSQL takes a transaction-level advisory
	// lock; nil where writers take turns anyway (SQLite).
	TakeTurns func(ctx context.Context, tx Querier, key string) error
	// RowsPerInsert is how many rows a multi-row INSERT of many carries; 0 means one. Each
	// statement is a round trip to PostgreSQL, where many rows a statement are cheaper; SQLite's
	// driver binds every parameter by its name in time that grows with the statement's
	// parameters, so that a statement of many rows costs more a row than one of one.
	RowsPerInsert int
}

// takeTurns runs the dialect's TakeTurns, if any.
func (d *Dialect) takeTurns(ctx context.Context, tx Querier, key string) error {
	if d.TakeTurns == nil {
		return nil
	}
	return d.TakeTurns(ctx, tx, key)
}

// lock returns clause (such as "FOR SHARE") to end a SELECT with, or "" where writers take
// turns and rows need no lock.
func (d *Dialect) lock(clause string) string {
	if !d.RowLocks {
		return ""
	}
	return " " + clause
}

// constraints says what a violation of a named constraint means, in the store's words, and
// which store error it is where that is not the one its class implies (Dialect.Constraint).
// The names are PostgreSQL's (its migrations name every constraint, and its errors say which);
// SQLite's errors name none, so its violations are told apart by class alone (its writers
// check first, and take turns).
// The checks made before each write report most of these cases themselves; a violation is
// what is left when a concurrent writer got there first, or what a single statement
// (PostgreSQL's Append) leaves the database to check.
var constraints = map[string]struct {
	kind error // nil: the class's
	what string
}{
	"tools_name":               {nil, "an active tool of the workspace already has this name"},
	"functions_name":           {nil, "the workspace already has a function of this name"},
	"users_email_key":          {nil, "the email is already used"},
	"memberships_pkey":         {nil, "already a member"},
	"messages_one_result":      {store.ErrResultExists, "the call already has a result"},
	"messages_pkey":            {errIDTaken, "the id is already taken"},
	"messages_call_fkey":       {store.ErrInvalid, "a tool message answers no call of the thread"},
	"tool_calls_pkey":          {store.ErrInvalid, "a call id is already used in the thread"},
	"threads_pkey":             {store.ErrInvalid, "the id is already taken"},
	"threads_parent_fkey":      {store.ErrNotFound, "no such parent thread in the workspace"},
	"queued_messages_pkey":     {store.ErrInvalid, "the id is already taken"},
	"call_decisions_pkey":      {store.ErrDecided, "the call already has a decision"},
	"call_decisions_call_fkey": {store.ErrInvalid, "the thread asked for no such call"},
}

// errIDTaken is a message id already taken: both errors, so that a writer replaying appends
// (store/journal) tells "already done" from "refused".
var errIDTaken = fmt.Errorf("%w (%w)", store.ErrIDTaken, store.ErrInvalid)

// fail wraps err, from a rule the store checks, with the operation.
func (d *Dialect) fail(op string, err error) error { return fmt.Errorf("%s: %s: %w", d.Name, op, err) }

// failf reports a broken rule: kind is the store error it wraps.
func (d *Dialect) failf(op string, kind error, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %s: %w", d.Name, op, fmt.Sprintf(format, args...), kind)
}

// Err maps a database error of operation op to the store's: no row is store.ErrNotFound, a
// constraint violation the store error its constraint or class means (see constraints), in
// the store's words. An error that already says which rule broke (or nil) is returned as it
// is. The backends use it for their own statements too, so that the mapping lives here only.
func (d *Dialect) Err(op string, err error) error {
	switch {
	case err == nil || saysRule(err):
		return err
	case errors.Is(err, sql.ErrNoRows): // pgx's ErrNoRows is one too
		return d.fail(op, store.ErrNotFound)
	}
	v := d.Constraint(err)
	if v.Kind == nil {
		return fmt.Errorf("%s: %s: %w", d.Name, op, err)
	}
	v = v.inStoreWords()
	return fmt.Errorf("%s: %s: %s: %w", d.Name, op, v.Message, v.Kind)
}

// ruleErrors are the store errors that say which rule broke.
var ruleErrors = []error{store.ErrNotFound, store.ErrInvalid, store.ErrConflict, store.ErrForbidden, store.ErrResultExists,
	store.ErrDecided, store.ErrExists, store.ErrTooLarge}

func saysRule(err error) bool {
	for _, kind := range ruleErrors {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

// inStoreWords is v as the store says it: with the error and words of its constraint (see
// constraints), or else of its class.
func (v Violation) inStoreWords() Violation {
	if c, ok := constraints[v.Name]; ok {
		v.Message = c.what
		if c.kind != nil {
			v.Kind = c.kind
		}
		return v
	}
	if strings.HasSuffix(v.Name, "_pkey") {
		v.Message = "the id is already taken"
	}
	return v
}

// nullTime is the stored form of an optional time.
func (d *Dialect) nullTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return d.Time(*t)
}

// scanTime reads a time column of either database: Unix nanoseconds (SQLite) or a timestamp
// (PostgreSQL), as UTC. NULL leaves t nil.
type scanTime struct{ t *time.Time }

// Scan implements sql.Scanner.
func (s scanTime) Scan(src any) error {
	switch v := src.(type) {
	case int64:
		*s.t = time.Unix(0, v).UTC()
	case time.Time:
		*s.t = v.UTC()
	default:
		return fmt.Errorf("sqlstore: a time stored as %T", src)
	}
	return nil
}

// scanNullTime is scanTime for a column that may be NULL.
type scanNullTime struct{ t **time.Time }

// Scan implements sql.Scanner.
func (s scanNullTime) Scan(src any) error {
	if src == nil {
		*s.t = nil
		return nil
	}
	var t time.Time
	if err := (scanTime{&t}).Scan(src); err != nil {
		return err
	}
	*s.t = &t
	return nil
}

// notBefore keeps an UpdatedAt from going back when the clock does (or when another node's
// clock is behind).
func notBefore(now, prev time.Time) time.Time {
	if now.Before(prev) {
		return prev
	}
	return now
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// scanner is a row to read: *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// collect reads every row with scan.
func collect[T any](d *Dialect, rows *sql.Rows, op string, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, d.Err(op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, d.Err(op, err)
	}
	return out, nil
}

// exists fails with store.ErrNotFound (saying what) when query finds no row.
func (d *Dialect) exists(ctx context.Context, q Querier, op, query, what string, args ...any) error {
	var one int
	err := q.QueryRowContext(ctx, query, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return d.failf(op, store.ErrNotFound, "%s", what)
	}
	return d.Err(op, err)
}

// Transactions is the WriteFunc of a database whose writers each take a connection of the pool
// and run side by side (PostgreSQL): a transaction at the database's default isolation, ended
// with ctx.
func Transactions(db *sql.DB) WriteFunc {
	return func(ctx context.Context, fn func(ctx context.Context, tx Querier) error) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(ctx, tx); err != nil {
			_ = tx.Rollback() // the error that matters is fn's
			return err
		}
		return tx.Commit()
	}
}
