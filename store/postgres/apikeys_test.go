package postgres

import (
	"testing"

	"github.com/quiverhq/quiver/store/storetest"
)

func TestAPIKeys(t *testing.T) {
	testDSN(t)
	storetest.RunAPIKeys(t, func(t *testing.T) storetest.APIKeysStore { return openTest(t) })
}
