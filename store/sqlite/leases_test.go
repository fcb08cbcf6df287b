package sqlite_test

import (
	"testing"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/storetest"
)

// TestLeases gives a test the same store each time it opens one: what two nodes would share.
func TestLeases(t *testing.T) {
	opened := map[*testing.T]store.Leases{}
	storetest.RunLeases(t, func(t *testing.T) store.Leases {
		if s, ok := opened[t]; ok {
			return s
		}
		s, _ := openTemp(t)
		opened[t] = s
		return s
	})
}
