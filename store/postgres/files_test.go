package postgres

import (
	"testing"

	"github.com/quiverhq/quiver/store/storetest"
)

func TestFilesConformance(t *testing.T) {
	testDSN(t)
	storetest.RunFiles(t, func(t *testing.T) storetest.FilesStore { return openTest(t) })
}
