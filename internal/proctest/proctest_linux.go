// Package proctest helps tests that start processes see them from the outside, as an operator
// would: which children a process has, and whether one still exists.
package proctest

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Children returns the process IDs of this process's children (Linux: /proc/self/task/*/
// children).
func Children(t testing.TB) map[int]bool {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	pids := map[int]bool{}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		if err != nil {
			continue // the thread has ended
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			pids[pid] = true
		}
	}
	return pids
}

// Exists reports whether a process with this ID exists (a zombie not yet waited for
// included).
func Exists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return !errors.Is(err, fs.ErrNotExist)
}
