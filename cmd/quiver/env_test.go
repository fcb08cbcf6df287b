package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/quiverhq/quiver/sandbox"
)

// testRoot is the tests' temporary folder, removed when they end.
var testRoot string

// TestMain serves as the sandbox's worker when a command under test starts it, and otherwise
// runs the tests in an environment of their own: a data directory in a
// temporary folder, and none of the variables that point the CLI at a deployment, so that no
// test reads or writes the database of the machine it runs on.
func TestMain(m *testing.M) {
	// The commands run code in worker processes: this test binary, started again.
	sandbox.WorkerMain()
	dir, err := os.MkdirTemp("", "quiver-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testRoot = dir
	os.Setenv("XDG_DATA_HOME", dir)
	for _, k := range []string{"QUIVER_POSTGRES", "QUIVER_MODEL", "QUIVER_AGENTS", "QUIVER_ADDR", "QUIVER_CONFIG", "QUIVER_SECRET_KEY"} {
		os.Unsetenv(k)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
