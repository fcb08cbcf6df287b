package sqlite_test

import (
	"testing"

	"github.com/quiverhq/quiver/store/storetest"
)

func TestAPIKeys(t *testing.T) {
	storetest.RunAPIKeys(t, func(t *testing.T) storetest.APIKeysStore {
		s, _ := openTemp(t)
		return s
	})
}
