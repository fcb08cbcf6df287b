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
	"time"
)

// Children returns the process IDs of this process's children (Linux: /proc/self/task/*/
// children).
func Children(t testing.TB) map[int]bool {
	t.Helper()
	pids, err := childPIDs()
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// Watch collects the child processes of this process every 10 ms until the returned function
// is called, which returns every one seen: for processes that may come and go while
// something runs. It may be called from any goroutine.
func Watch() (stop func() map[int]bool) {
	done, out := make(chan struct{}), make(chan map[int]bool)
	go func() {
		seen := map[int]bool{}
		for {
			pids, _ := childPIDs() // a failed look is only a missed sample
			for pid := range pids {
				seen[pid] = true
			}
			select {
			case <-done:
				out <- seen
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() map[int]bool { close(done); return <-out }
}

func childPIDs() (map[int]bool, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
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
	return pids, nil
}

// Exists reports whether a process with this ID exists (a zombie not yet waited for
// included).
func Exists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return !errors.Is(err, fs.ErrNotExist)
}

// CPUTime returns the CPU time a process has used (user and system, from /proc/PID/stat), and
// false once the process is gone.
func CPUTime(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces: count fields after it.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, false
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	// Clock ticks are 1/100 s on Linux (USER_HZ), whatever the kernel's own rate.
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}
