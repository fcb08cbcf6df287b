//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/crashtest"
	"github.com/quiverhq/quiver/store/secret"
)

// The harness of the crash tests of `quiver serve` (api_crash_test.go, subagent_crash_test.go):
// the server runs in this test binary started again, as a test of its own that registers a
// tally tool and serves; the parent starts runs over the API, kills the server with SIGKILL at
// random moments and restarts it. The tally tool reports each execution ("ran THREAD CALL LIFE")
// before its result is stored, and its result names the life that ran it, so that the parent
// can tell a call run again after its result was persisted (a violation) from one run again
// because the kill came before its result was.

// crashServer names a crash test's server: the test of this binary that runs it, and the
// environment variables by which the parent gives it the database, the agents directory and
// the life (which incarnation of the server it is).
type crashServer struct {
	test                      string
	envDB, envAgents, envLife string
	// envConfig, when set, names the variable by which the parent gives the configuration
	// file (TestMain clears QUIVER_CONFIG in every test process).
	envConfig string
	// envArgs, when set, names the variable by which the parent gives more of quiver serve's
	// arguments, separated by spaces (a later --addr replaces the random port).
	envArgs string
}

// life returns the life this process serves as, and false when it is no crash test's child (a
// normal test run, in which the server's test passes at once).
func (s crashServer) life() (string, bool) {
	if os.Getenv(s.envDB) == "" {
		return "", false
	}
	return os.Getenv(s.envLife), true
}

// crashEnvSecret names the variable by which the parent gives every life the same secret key:
// TestMain gives each test process a data directory of its own and no QUIVER_SECRET_KEY, and
// on PostgreSQL the key file is in the data directory, so each life would be a new node
// without the database's key, which quiver serve refuses to start.
const crashEnvSecret = "QUIVER_CRASH_SECRET"

// crashSecret is the key the lives share (32 bytes, as hex).
var crashSecret = strings.Repeat("cd", 32)

// serve runs quiver serve on the parent's database and agents until the parent kills it; it
// never returns.
func (s crashServer) serve() {
	if key := os.Getenv(crashEnvSecret); key != "" {
		os.Setenv(secret.EnvKey, key)
	}
	db := os.Getenv(s.envDB)
	args := []string{"serve", "--agents", os.Getenv(s.envAgents), "--addr", "127.0.0.1:0", "--db", db}
	if strings.HasPrefix(db, "postgres://") {
		args[len(args)-2] = "--postgres"
	}
	if config := os.Getenv(s.envConfig); s.envConfig != "" && config != "" {
		args = append(args, "--config", config)
	}
	if s.envArgs != "" {
		args = append(args, strings.Fields(os.Getenv(s.envArgs))...)
	}
	code := run(context.Background(), args, strings.NewReader(""), os.Stdout, os.Stderr)
	crashtest.Fail("quiver serve exited with %d", code)
}

// reportTally reports, in the server, an execution of the tally call of ctx by life.
func reportTally(ctx context.Context, life string) {
	crashtest.Report(fmt.Sprintf("ran %s %s %s", quiver.ScopeFrom(ctx).ThreadID, quiver.CallFrom(ctx).ID, life))
}

// tallied is the result of a tally call executed by life.
func tallied(life string) string { return "tallied by life " + life }

// forEachCrashBackend runs test on each backend of serveBackends with its database (the SQLite
// file or the PostgreSQL DSN) and how many times to kill the server. On PostgreSQL a restarted
// node takes a dead node's runs once their leases have been free a while (jobs: orphanGrace,
// 10 s): fewer kills keep the test short.
func forEachCrashBackend(t *testing.T, test func(t *testing.T, db string, kills int)) {
	forEachServeBackend(t, func(t *testing.T, dbArgs []string) { // --db FILE or --postgres DSN
		kills := 5
		if dbArgs[0] == "--postgres" {
			kills = 2
		}
		test(t, dbArgs[1], kills)
	})
}

// crashHarness starts, kills and restarts a crash test's server, and gathers what its lives
// reported.
type crashHarness struct {
	t          testing.TB
	server     crashServer
	db, agents string
	env        []string            // more of the lives' environment ("NAME=value")
	count      func() int          // the tally executions so far, when not reported by the lives
	admin      string              // the admin key the first life printed
	ran        map[string][]string // ran["thread/call"] lists the lives that executed the call, in order
	stderrs    []string            // the standard error of every life that ended
}

func newCrashHarness(t testing.TB, server crashServer, db, agents string) *crashHarness {
	return &crashHarness{t: t, server: server, db: db, agents: agents, ran: map[string][]string{}}
}

// start starts life and waits until it serves; it returns the child and the API's base URL.
func (h *crashHarness) start(life int) (*crashtest.Child, string) {
	t := h.t
	t.Helper()
	s := h.server
	env := append([]string{s.envDB + "=" + h.db, s.envAgents + "=" + h.agents, fmt.Sprintf("%s=%d", s.envLife, life),
		crashEnvSecret + "=" + crashSecret}, h.env...)
	child := crashtest.Start(t, s.test, env...)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := servingRE.FindStringSubmatch(child.Stderr()); m != nil {
			if h.admin == "" {
				h.admin = firstKeyRE.FindString(child.Stderr())
			}
			if h.admin == "" {
				t.Fatalf("no admin key on the first start:\n%s", child.Stderr())
			}
			return child, strings.TrimSuffix(m[1], "/mcp") + "/v1"
		}
		if time.Now().After(deadline) {
			t.Fatalf("life %d did not start serving:\n%s", life, child.Stderr())
		}
	}
}

// killLives starts the server kills+1 times. The first life calls begin with the API's base
// URL; each of the first kills lives is killed with SIGKILL after pause() and what it reported
// read. killLives returns the last life, left running, its base URL and how many tally
// executions the last life killed reported.
func (h *crashHarness) killLives(kills int, pause func() time.Duration, begin func(base string)) (child *crashtest.Child, base string, lastKilled int) {
	t := h.t
	t.Helper()
	for life := 0; ; life++ {
		before := h.executions()
		child, base := h.start(life)
		if life == 0 {
			begin(base)
		}
		if life == kills {
			return child, base, lastKilled
		}
		time.Sleep(pause())
		child.Kill()
		rest, killed := child.Finish()
		if !killed {
			t.Fatalf("life %d was not killed:\n%s", life, child.Stderr())
		}
		h.collect(child, rest)
		lastKilled = h.executions() - before
		t.Logf("life %d: killed after %d tally executions", life, lastKilled)
	}
}

// stop kills the last life once the test has read what it needs over the API, and reads what
// the life reported. Every execution is reported before the call's result is stored, so all
// are in.
func (h *crashHarness) stop(child *crashtest.Child) {
	h.t.Helper()
	child.Kill()
	rest, _ := child.Finish()
	h.collect(child, rest)
}

// collect reads what the child reported until it exited (killed or not).
func (h *crashHarness) collect(child *crashtest.Child, lines []string) {
	h.t.Helper()
	for _, line := range lines {
		switch f := strings.Fields(line); {
		case len(f) == 4 && f[0] == "ran":
			h.ran[f[1]+"/"+f[2]] = append(h.ran[f[1]+"/"+f[2]], f[3])
		case strings.HasPrefix(line, "error "):
			h.t.Fatalf("%s\n%s", line, child.Stderr())
		}
	}
	h.stderrs = append(h.stderrs, child.Stderr())
}

// startRuns starts n runs of agent, each on a thread of its own, with message; it returns the
// threads.
func (h *crashHarness) startRuns(base, agent, message string, n int) []string {
	h.t.Helper()
	var threads []string
	for range n {
		id := newAPIThread(h.t, base, h.admin, agent)
		startAPIRun(h.t, base, h.admin, id, agent, message)
		threads = append(threads, id)
	}
	return threads
}

// executions counts the tally executions reported so far (counted by h.count when the tool
// runs outside the server).
func (h *crashHarness) executions() int {
	if h.count != nil {
		return h.count()
	}
	n := 0
	for _, lives := range h.ran {
		n += len(lives)
	}
	return n
}

// checkExecutions checks a tally call's executions (the lives that ran it, in order) against
// its stored result: no life executed it twice, and the result is its last execution's. It
// returns 1 when the call was executed more than once.
func checkExecutions(t testing.TB, id, call, content string, lives []string) int {
	t.Helper()
	if len(lives) == 0 {
		t.Errorf("thread %s: call %s has a result but no execution was reported", id, call)
		return 0
	}
	seen := map[string]bool{}
	for _, l := range lives {
		if seen[l] {
			t.Errorf("thread %s: call %s was executed twice by life %s: %v", id, call, l, lives)
		}
		seen[l] = true
	}
	// The result stored is the last execution's: no execution came after the result was
	// persisted.
	if want := tallied(lives[len(lives)-1]); content != want {
		t.Errorf("thread %s: call %s executed by lives %v, but the stored result is %q, want %q", id, call, lives, content, want)
	}
	if len(lives) > 1 {
		return 1
	}
	return 0
}

// finishRuns waits until the last life (child, its API at base) has run every thread's run to
// its end, reads the threads' histories, and stops the life.
func (h *crashHarness) finishRuns(child *crashtest.Child, base string, threads []string, kills int) map[string][]any {
	t := h.t
	t.Helper()
	finished := func() int {
		n := 0
		for _, id := range threads {
			_, _, th := apiDo(t, "GET", base+"/threads/"+id, h.admin, "")
			b, _ := json.Marshal(th["state"])
			if th["status"] == "idle" && strings.Contains(string(b), `"status":"finished"`) {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(90 * time.Second); finished() < len(threads); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs finished after %d kills\n%s", finished(), len(threads), kills, child.Stderr())
		}
	}
	histories := map[string][]any{}
	for _, id := range threads {
		_, _, page := apiDo(t, "GET", base+"/threads/"+id+"/messages?limit=1000", h.admin, "")
		histories[id], _ = page["messages"].([]any)
	}
	h.stop(child)
	return histories
}
