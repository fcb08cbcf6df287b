package sandbox

import (
	"os/exec"
	"syscall"
)

// workerProcAttr puts a worker in a process group of its own, so that killing it kills
// anything it started too (which would otherwise hold its output open), and makes the kernel
// kill it when the thread that started it ends, so that workers do not outlive a program that
// died without closing them. (A worker also exits when its input ends, which covers the rest.)
func workerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killWorker kills the worker's process group.
func killWorker(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
