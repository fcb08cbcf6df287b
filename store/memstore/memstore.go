// Package memstore is a store.Backend held in memory: every rule of store/sqlite and
// store/postgres (it passes store/storetest like them), nothing on disk. It is for tests that
// are not about persistence and for programs whose threads need not outlive the process.
//
// Record times and ids come from the context (quiver.WithClock, quiver.WithIDs), so a run
// replayed on a fresh store with the same sources leaves identical records.
package memstore

import (
	"sync"

	"github.com/quiverhq/quiver/store"
)

// Store is an in-memory store.Backend. Its zero value is not ready: make one with New. It is
// safe for concurrent use; each method is one critical section, which is what makes it a
// transaction.
type Store struct {
	mu     sync.Mutex
	th     threadData // threads, messages, queues, state, decisions, logs, files, variables
	ent    entityData // workspaces, users, members, schemas, functions, tools, API keys
	leases leaseData
	// fleet is the fleet's configuration (store.FleetConfigs).
	fleet fleetData
	// secretKeyID is the id of the key that seals the secrets (store.SecretKeys).
	secretKeyID string
}

var _ store.Backend = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	s := &Store{}
	s.th.init()
	s.ent.init()
	return s
}

// Close releases nothing: the records go when the Store is no longer referenced.
func (s *Store) Close() error { return nil }
