package sqlite_test

import (
	"testing"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/storetest"
)

func TestVariables(t *testing.T) {
	storetest.RunVariables(t, func(t *testing.T) store.Store {
		s, _ := openTemp(t)
		return s
	})
}

func TestSecretKeys(t *testing.T) {
	storetest.RunSecretKeys(t, func(t *testing.T) storetest.SecretKeysStore {
		s, _ := openTemp(t)
		return s
	})
}
