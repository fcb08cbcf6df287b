//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The fleet chaos test's own PostgreSQL server (fleet_chaos_test.go): the machine's server on
// 5432 is shared with the other tests, and the chaos test restarts its server mid-run. It is a
// throwaway cluster, made with initdb in a temporary directory, its postmaster a child of the
// test on a free port of 127.0.0.1. A child, not a daemon of pg_ctl's: it gets SIGKILL if the
// test process dies (Pdeathsig), so that a test killed by its timeout leaks no server.

// chaosPostgres is a PostgreSQL cluster of the test's own.
type chaosPostgres struct {
	t    testing.TB
	bin  string // the directory of initdb and postgres
	data string // the cluster's data directory
	log  string // the server's log, across restarts
	port int
	// cred runs the server as the user postgres when the test is root: initdb and postgres
	// refuse to run as root. Nil otherwise.
	cred *syscall.Credential

	cmd    *exec.Cmd
	exited chan struct{}
}

// startChaosPostgres makes a cluster, starts it and stops it when the test ends. Missing
// binaries fail the test: the test runs only when PostgreSQL is asked for, and then must.
func startChaosPostgres(t testing.TB) *chaosPostgres {
	t.Helper()
	pg := &chaosPostgres{t: t, bin: postgresBinDir(t), port: freePort(t)}
	// Not t.TempDir(): its parent is private to root, and the postgres user must reach the
	// data directory.
	root, err := os.MkdirTemp("", "quiver-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	pg.data, pg.log = filepath.Join(root, "data"), filepath.Join(root, "server.log")
	if err := os.Mkdir(pg.data, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, the chaos test runs PostgreSQL as the user postgres, which does not exist: %v", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		pg.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(pg.data, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
	}
	// The superuser is postgres, trusted on 127.0.0.1.
	initdb := pg.command("initdb", "-D", pg.data, "-U", "postgres", "--auth=trust", "--no-sync", "--no-locale", "-E", "UTF8")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	pg.start()
	t.Cleanup(func() { pg.stop(syscall.SIGQUIT) }) // immediate shutdown
	return pg
}

// postgresBinDir finds the server's binaries: the newest /usr/lib/postgresql/*/bin (Debian),
// else initdb on PATH.
func postgresBinDir(t testing.TB) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	t.Fatalf("the fleet chaos test needs PostgreSQL's server binaries (initdb, postgres): none in /usr/lib/postgresql/*/bin or on PATH; " +
		"install them (apt-get install postgresql; .ci/run does)")
	return ""
}

// DSN is the cluster's connection string.
func (pg *chaosPostgres) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

// start starts the postmaster and waits until it accepts connections.
func (pg *chaosPostgres) start() {
	t := pg.t
	t.Helper()
	log, err := os.OpenFile(pg.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	pg.cmd = pg.command("postgres", "-D", pg.data, "-p", strconv.Itoa(pg.port), "-c", "listen_addresses=127.0.0.1", "-k", pg.data,
		// 3 nodes hold up to 35 connections each (docs/DEPLOY.md), and killed nodes' may
		// linger a moment.
		"-c", "max_connections=300",
		// No waiting for the disk: the server is only ever stopped cleanly (a fast shutdown
		// writes everything out); the test kills the nodes, not the database.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	pg.cmd.Stdout, pg.cmd.Stderr = log, log
	if err := pg.cmd.Start(); err != nil {
		t.Fatalf("starting PostgreSQL: %v", err)
	}
	pg.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(pg.cmd, pg.exited)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pg.connect(ctx)
		if err == nil {
			conn.Close(ctx)
			cancel()
			return
		}
		cancel()
		select {
		case <-pg.exited:
			t.Fatalf("PostgreSQL exited at start: %v\n%s", err, pg.logTail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("PostgreSQL did not accept connections within 30 s: %v\n%s", err, pg.logTail())
		}
	}
}

// stop shuts the server down with sig (SIGINT: fast, every session cut and everything written
// out; SIGQUIT: immediate) and waits for it to exit.
func (pg *chaosPostgres) stop(sig syscall.Signal) {
	if pg.cmd == nil {
		return
	}
	_ = pg.cmd.Process.Signal(sig)
	select {
	case <-pg.exited:
	case <-time.After(30 * time.Second):
		_ = pg.cmd.Process.Kill()
		<-pg.exited
	}
	pg.cmd = nil
}

// restart restarts the server with a fast shutdown, on the same port: every connection of the
// nodes is cut, and nothing is lost.
func (pg *chaosPostgres) restart() time.Duration {
	began := time.Now()
	pg.stop(syscall.SIGINT)
	pg.start()
	return time.Since(began)
}

// logTail is the end of the server's log, for a failure's message.
func (pg *chaosPostgres) logTail() string {
	b, _ := os.ReadFile(pg.log)
	return lastLines(string(b), 20)
}

// command is one of the server's programs, run as the user postgres when the test is root,
// and killed if the test process dies.
func (pg *chaosPostgres) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(pg.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// connect opens a connection to the cluster, for the test's own queries.
func (pg *chaosPostgres) connect(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, pg.DSN())
}

// freePort returns a port of 127.0.0.1 nothing listens on now. A node keeps its port across
// restarts, so that the load balancer finds it again.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
