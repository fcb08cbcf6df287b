package postgres

import (
	"testing"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/storetest"
)

func TestFleetConfigs(t *testing.T) {
	testDSN(t)
	storetest.RunFleetConfigs(t, func(t *testing.T) store.FleetConfigs { return openTest(t) })
}
