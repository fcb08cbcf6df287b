package postgres

import (
	"testing"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/storetest"
)

func TestEntities(t *testing.T) {
	testDSN(t)
	storetest.RunEntities(t, func(t *testing.T) store.Entities { return openTest(t) })
}
