package sqlite_test

import (
	"testing"

	"github.com/quiverhq/quiver/store/storetest"
)

func TestFilesConformance(t *testing.T) {
	storetest.RunFiles(t, func(t *testing.T) storetest.FilesStore {
		s, _ := openTemp(t)
		return s
	})
}
