package memstore_test

import (
	"testing"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
	"github.com/quiverhq/quiver/store/storetest"
)

func TestFleetConfigs(t *testing.T) {
	storetest.RunFleetConfigs(t, func(t *testing.T) store.FleetConfigs { return memstore.New() })
}
