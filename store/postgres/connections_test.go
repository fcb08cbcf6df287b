package postgres

import (
	"testing"

	"github.com/quiverhq/quiver/store/storetest"
)

func TestConnections(t *testing.T) {
	testDSN(t)
	storetest.RunConnections(t, func(t *testing.T) storetest.ConnectionStore { return openTest(t) })
}
