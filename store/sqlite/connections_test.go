package sqlite_test

import (
	"testing"

	"github.com/quiverhq/quiver/store/storetest"
)

func TestConnections(t *testing.T) {
	storetest.RunConnections(t, func(t *testing.T) storetest.ConnectionStore {
		s, _ := openTemp(t)
		return s
	})
}
