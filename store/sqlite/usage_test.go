package sqlite_test

import (
	"testing"

	"github.com/quiverhq/quiver/store/storetest"
)

func TestUsage(t *testing.T) {
	storetest.RunUsage(t, func(t *testing.T) storetest.UsageStore {
		s, _ := openTemp(t)
		return s
	})
}
