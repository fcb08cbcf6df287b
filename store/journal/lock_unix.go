//go:build unix

package journal

import (
	"errors"
	"os"
	"syscall"
)

// errLocked: another process holds the file.
var errLocked = errors.New("locked by another process")

// lock takes an exclusive advisory lock on f without waiting; it lasts until f is closed, or
// the process ends, however it ends.
func lock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errLocked
		case errors.Is(err, syscall.EINTR):
			continue
		default:
			return err
		}
	}
}
