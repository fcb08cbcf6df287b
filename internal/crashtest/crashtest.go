//go:build unix

// Package crashtest runs a test of the current test binary as a child process and kills it with
// SIGKILL, for the crash-safety tests of the store, the journal and the agent loop. The child
// test reads what to do from environment variables the parent sets (without them it returns
// at once, so it passes in a normal run) and reports progress as lines on standard output, each
// written with one unbuffered write so that the parent has it even if the child dies the next
// instant.
package crashtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Report prints line on standard output with one unbuffered write: what a child does to tell
// the parent of progress it must find again after the kill.
func Report(line string) { _, _ = os.Stdout.WriteString(line + "\n") }

// Fail reports "error <message>" and ends the child with status 3; the parent's test fails on
// such a line.
func Fail(format string, args ...any) {
	Report("error " + fmt.Sprintf(format, args...))
	os.Exit(3)
}

// Child is a child test process whose standard output is read line by line.
type Child struct {
	t      testing.TB
	cmd    *exec.Cmd
	lines  chan string
	stderr lockedBuffer

	killOnce sync.Once
	done     bool
}

// Start runs the test named test of this test binary in a child process, with env ("NAME=value")
// added to the environment. The child is killed when the test ends, if it still runs.
func Start(t testing.TB, test string, env ...string) *Child {
	t.Helper()
	c := &Child{t: t, lines: make(chan string, 1024)}
	c.cmd = exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.timeout=60s")
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.lines)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if err != nil { // io.EOF once the child is gone; a line cut short was never reported
				if err != io.EOF {
					c.lines <- "error reading the child's output: " + err.Error()
				}
				return
			}
			c.lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	t.Cleanup(func() {
		if !c.done {
			c.Kill()
			c.Finish()
		}
	})
	return c
}

// Line returns the next line the child printed, or false once it has exited and every line
// was read. It fails the test when no line comes within timeout.
func (c *Child) Line(timeout time.Duration) (string, bool) {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		return line, ok
	case <-time.After(timeout):
		c.t.Fatalf("the child printed nothing for %v\nits standard error:\n%s", timeout, c.stderr.String())
		return "", false
	}
}

// Kill kills the child with SIGKILL. It may be called from any goroutine, more than once.
func (c *Child) Kill() {
	c.killOnce.Do(func() { _ = c.cmd.Process.Signal(syscall.SIGKILL) })
}

// Finish reads the rest of the child's output, waits for it to exit and returns the lines not
// yet read by Line, and whether it was killed by a signal (rather than exiting by itself).
func (c *Child) Finish() (rest []string, killed bool) {
	for line := range c.lines {
		rest = append(rest, line)
	}
	_ = c.cmd.Wait()
	c.done = true
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return rest, ok && ws.Signaled()
}

// Stderr is what the child wrote to its standard error so far.
func (c *Child) Stderr() string { return c.stderr.String() }

// lockedBuffer is a bytes.Buffer the child's stderr copier writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
