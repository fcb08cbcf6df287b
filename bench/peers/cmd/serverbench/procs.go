//go:build linux && (amd64 || arm64)

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A server process: started, followed through its log, measured through /proc and its
// profiles, stopped.

var (
	// servingPattern finds the MCP endpoint in a server's log: quiver serve's banner and the
	// peers' line say "serving MCP at URL".
	servingPattern = regexp.MustCompile(`serving MCP at (http://127\.0\.0\.1:[0-9]+/mcp)`)
	// pprofPattern finds quiver serve's profiles (--pprof-addr).
	pprofPattern = regexp.MustCompile(`pprof at (http://127\.0\.0\.1:[0-9]+/debug/pprof/)`)
	// keyPattern finds the admin key quiver serve prints on its first start, on a line of its own.
	keyPattern = regexp.MustCompile(`^\s*(qvk_[A-Za-z0-9_-]+)\s*$`)
)

// target is a server to measure.
type target struct {
	label string // as the benchmark lines name it: bare-go-sdk, mcp-go, quiver
	bin   string // its binary (a copy of its own, see dropCache)
	role  string // roleBare or roleMCPGo; "" for quiver serve
}

func (t target) isQuiver() bool { return t.role == "" }

// proc is a started server.
type proc struct {
	pid       int
	mcpURL    string // http://127.0.0.1:PORT/mcp
	pprofBase string // http://127.0.0.1:PORT/debug/pprof/
	key       string // the admin key, when the start printed one
	tail      *lastLines
	stop      func()         // stops the server (SIGTERM, then SIGKILL) and waits for it
	found     chan [2]string // what its output says: {kind, value}
	exited    chan struct{}  // closed once it has exited and its output is read
}

// start starts t with dir as its working (and, for quiver, data) directory, and returns once
// it answers HTTP. wantKey waits for the admin key quiver serve prints on its first start.
func start(ctx context.Context, t target, dir string, tools int, wantKey bool) (*proc, error) {
	if err := dropCache(t.bin); err != nil {
		return nil, fmt.Errorf("dropping the page cache of %s: %w", t.bin, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	cmd := command(ctx, t, dir, tools)
	p, err := launch(cmd, cancel)
	if err != nil {
		cancel()
		return nil, err
	}
	if err := p.waitLogged(ctx, t, cmd, wantKey); err != nil {
		p.stop()
		return nil, err
	}
	if p.pprofBase == "" {
		p.pprofBase = strings.TrimSuffix(p.mcpURL, "/mcp") + "/debug/pprof/"
	}
	if err := waitAnswers(ctx, p.mcpURL); err != nil {
		p.stop()
		return nil, fmt.Errorf("%s: %w; its log: %s", t.label, err, p.tail)
	}
	return p, nil
}

// command is the command that runs t in dir.
func command(ctx context.Context, t target, dir string, tools int) *exec.Cmd {
	var cmd *exec.Cmd
	if t.isQuiver() {
		// As its users run it: API keys on, the default configuration, its data in dir.
		cmd = exec.CommandContext(ctx, t.bin, "serve", "--addr", "127.0.0.1:0", "--pprof-addr", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "QUIVER_ADDR=", "QUIVER_CONFIG=", "QUIVER_POSTGRES=")
	} else {
		cmd = exec.CommandContext(ctx, t.bin)
		cmd.Env = append(os.Environ(), roleEnv+"="+t.role, toolsEnv+"="+strconv.Itoa(tools))
	}
	cmd.Dir = dir
	// Killed with serverbench even if it dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	return cmd
}

// launch starts cmd and follows its output; cancel stops it.
func launch(cmd *exec.Cmd, cancel context.CancelFunc) (*proc, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{pid: cmd.Process.Pid, tail: &lastLines{}, found: make(chan [2]string, 8), exited: make(chan struct{})}
	var readers sync.WaitGroup
	for _, r := range []io.Reader{stdout, stderr} {
		readers.Go(func() { follow(r, p.tail, p.found) })
	}
	go func() {
		readers.Wait() // every line read before Wait closes the pipes
		cmd.Wait()
		close(p.exited)
	}()
	p.stop = func() {
		cancel()
		<-p.exited
	}
	return p, nil
}

// waitLogged waits, two minutes at most, until the server has logged its MCP URL (and quiver
// its pprof URL, and the admin key when wantKey).
func (p *proc) waitLogged(ctx context.Context, t target, cmd *exec.Cmd, wantKey bool) error {
	wantPprof := t.isQuiver()
	deadline := time.After(2 * time.Minute)
	for p.mcpURL == "" || wantPprof && p.pprofBase == "" || wantKey && p.key == "" {
		select {
		case f := <-p.found:
			p.note(f[0], f[1])
		case <-p.exited:
			return fmt.Errorf("%s exited before serving (%s); its log: %s", t.label, cmd.ProcessState, p.tail)
		case <-deadline:
			return fmt.Errorf("%s: no MCP URL, pprof URL or key in its log after 2 minutes; its log: %s", t.label, p.tail)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// note takes what the server's output said.
func (p *proc) note(kind, value string) {
	switch kind {
	case "mcp":
		p.mcpURL = value
	case "pprof":
		p.pprofBase = value
	case "key":
		p.key = value
	}
}

// follow reads a server's output into tail until it ends, and reports the URLs and the key it
// names on found.
func follow(r io.Reader, tail *lastLines, found chan<- [2]string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	report := func(kind, v string) {
		select {
		case found <- [2]string{kind, v}:
		default:
		}
	}
	for sc.Scan() {
		line := sc.Text()
		tail.add(keyPattern.ReplaceAllString(line, "qvk_(the admin key)"))
		if m := servingPattern.FindStringSubmatch(line); m != nil {
			report("mcp", m[1])
		}
		if m := pprofPattern.FindStringSubmatch(line); m != nil {
			report("pprof", m[1])
		}
		if m := keyPattern.FindStringSubmatch(line); m != nil {
			report("key", m[1])
		}
	}
	io.Copy(io.Discard, r) // a line too long for the scanner: drain, so the server never blocks
}

// waitAnswers returns once the server answers an HTTP request (any status) at url. The
// answer's body is not read: a GET of an MCP endpoint may open an event stream.
func waitAnswers(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		req, err := http.NewRequestWithContext(attempt, http.MethodGet, url, nil)
		if err != nil {
			cancel()
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server at %s does not answer: %w", url, err)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// mem is what /proc/PID/status says of a process's resident memory, in kB.
type mem struct {
	rss, anon, file int64
}

// readMem reads the resident set of pid from /proc.
func readMem(pid int) (mem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return mem{}, err
	}
	return parseStatus(string(b))
}

// parseStatus picks VmRSS, RssAnon and RssFile (kB) out of a /proc/PID/status text.
func parseStatus(status string) (mem, error) {
	var m mem
	fields := map[string]*int64{"VmRSS:": &m.rss, "RssAnon:": &m.anon, "RssFile:": &m.file}
	seen := 0
	for line := range strings.Lines(status) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if p, ok := fields[f[0]]; ok {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return mem{}, fmt.Errorf("/proc status: %s: %w", f[0], err)
			}
			*p = v
			seen++
		}
	}
	if seen != len(fields) {
		return mem{}, errors.New("/proc status lacks VmRSS, RssAnon or RssFile")
	}
	return m, nil
}

// totalAlloc reads the server's cumulative bytes allocated (runtime.MemStats.TotalAlloc) from
// the MemStats lines that end its heap profile in text form.
func totalAlloc(ctx context.Context, pprofBase string) (uint64, error) {
	b, err := fetch(ctx, pprofBase+"heap?debug=1")
	if err != nil {
		return 0, err
	}
	return parseTotalAlloc(string(b))
}

func parseTotalAlloc(heap string) (uint64, error) {
	for line := range strings.Lines(heap) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "# TotalAlloc = "); ok {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	return 0, errors.New("the heap profile has no TotalAlloc line")
}

// fetch GETs url (a profile) and returns its body, which must come with 200.
func fetch(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, b)
	}
	return b, nil
}

// fadvDontNeed is POSIX_FADV_DONTNEED.
const fadvDontNeed = 4

// dropCache drops path's pages from the page cache before a server starts from it, so that
// every server starts as after a cold boot whatever wrote its binary last: a binary the Go
// linker (or a copy) has just written is cached in large folios, and every page a process
// touches then maps a whole folio, which inflates RssFile (see internal/cmd/rssbench).
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil { // dirty pages cannot be dropped
		return err
	}
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// copyFile copies src to dst with mode perm.
func copyFile(dst, src string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyTree copies the directory src (directories and regular files, with their permissions)
// to dst, which must not exist.
func copyTree(dst, src string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(to, info.Mode().Perm())
		case d.Type().IsRegular():
			return copyFile(to, path, info.Mode().Perm())
		}
		return fmt.Errorf("copying %s: not a regular file or a directory", path)
	})
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lastLines keeps the last lines of a server's log for error messages.
type lastLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *lastLines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
	if len(l.lines) > 15 {
		l.lines = l.lines[1:]
	}
}

func (l *lastLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return "(empty)"
	}
	return "\n\t" + strings.Join(l.lines, "\n\t")
}
