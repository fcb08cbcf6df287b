package postgres

import (
	"database/sql"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlstore"
)

// Variables (store.Variables, migration 0003) are sqlstore's, with the dialect of entities.go.

var _ store.Variables = (*Store)(nil)

// variables is embedded in Store under a name of its own, like entities.
type variables = sqlstore.Variables

// newVariables runs the variables on db, each write in a transaction of its own.
func newVariables(db *sql.DB) *variables {
	return sqlstore.NewVariables(dialect, db, sqlstore.Transactions(db))
}
