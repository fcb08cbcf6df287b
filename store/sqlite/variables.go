package sqlite

import (
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlstore"
)

// Variables (store.Variables, migration 0003) are sqlstore's, with the dialect of entities.go.

var _ store.Variables = (*Store)(nil)

// variables is embedded in Store under a name of its own, like entities.
type variables = sqlstore.Variables

// newVariables writes on the writer connection and reads on the read pool.
func (s *Store) newVariables() *variables { return sqlstore.NewVariables(dialect, s.r, s.writeSQL) }
