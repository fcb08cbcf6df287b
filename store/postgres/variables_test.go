package postgres

import (
	"testing"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/storetest"
)

func TestVariables(t *testing.T) {
	testDSN(t)
	storetest.RunVariables(t, func(t *testing.T) store.Store { return openTest(t) })
}

func TestSecretKeys(t *testing.T) {
	testDSN(t)
	storetest.RunSecretKeys(t, func(t *testing.T) storetest.SecretKeysStore { return openTest(t) })
}
