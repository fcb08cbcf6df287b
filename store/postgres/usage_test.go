package postgres

import (
	"testing"

	"github.com/quiverhq/quiver/store/storetest"
)

func TestUsage(t *testing.T) {
	testDSN(t)
	storetest.RunUsage(t, func(t *testing.T) storetest.UsageStore { return openTest(t) })
}
