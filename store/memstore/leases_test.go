package memstore_test

import (
	"testing"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
	"github.com/quiverhq/quiver/store/storetest"
)

// TestLeases gives a test the same store each time it opens one: what two users would share.
func TestLeases(t *testing.T) {
	opened := map[*testing.T]store.Leases{}
	storetest.RunLeases(t, func(t *testing.T) store.Leases {
		if _, ok := opened[t]; !ok {
			opened[t] = memstore.New()
		}
		return opened[t]
	})
}
