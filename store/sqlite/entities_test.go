package sqlite_test

import (
	"testing"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/storetest"
)

func TestEntities(t *testing.T) {
	storetest.RunEntities(t, func(t *testing.T) store.Entities {
		s, _ := openTemp(t)
		return s
	})
}
