package postgres

import (
	"context"
	"sync"
	"testing"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/storetest"
)

// TestLeases opens each test's stores on one schema, as the nodes of a fleet share one
// database: the concurrency case acquires through two pools at once.
func TestLeases(t *testing.T) {
	dsn := testDSN(t)
	var mu sync.Mutex
	schemas := map[*testing.T]string{}
	storetest.RunLeases(t, func(t *testing.T) store.Leases {
		mu.Lock()
		schema, ok := schemas[t]
		if !ok {
			schema = newSchema(t, dsn)
			schemas[t] = schema
		}
		mu.Unlock()
		s, err := Open(context.Background(), dsn, WithSchema(schema))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
