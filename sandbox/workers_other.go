//go:build !linux

package sandbox

import (
	"os/exec"
	"syscall"
)

// workerProcAttr has nothing to add outside Linux: a worker exits when its input ends.
func workerProcAttr() *syscall.SysProcAttr { return nil }

func killWorker(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
