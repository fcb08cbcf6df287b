package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/store/secret"
)

// The fleet's configuration (agents, prompts, tool sources, governance) is kept in the
// database: quiver apply writes its versions, every node serves the latest within a second.

// postgresArgs are quiver serve's flags for a schema of its own on the test's PostgreSQL; the
// test is skipped without one.
func postgresArgs(t *testing.T) []string {
	t.Helper()
	for _, b := range serveBackends(t) {
		if b.name == "postgres" {
			return b.args(t)
		}
	}
	t.Skip("a fleet of nodes needs PostgreSQL")
	return nil
}

// servingVersion matches a node's line saying it serves a version of the configuration.
func servingVersion(version int) *regexp.Regexp {
	return regexp.MustCompile(`msg="platform: serving the fleet's configuration" version=` + fmt.Sprint(version) + ` `)
}

// waitServed waits until every node's log says it serves version, and returns how long that
// took from since.
func waitServed(t *testing.T, version int, since time.Time, logs ...*syncBuffer) time.Duration {
	t.Helper()
	re := servingVersion(version)
	waitUntil(t, fmt.Sprintf("every node serving version %d", version), 10*time.Second, func() (bool, string) {
		for i, l := range logs {
			if !re.MatchString(l.String()) {
				return false, fmt.Sprintf("node %d does not", i)
			}
		}
		return true, ""
	})
	return time.Since(since)
}

// lastAnswer waits for the thread's run to end and returns the text of its last assistant
// message.
func lastAnswer(t *testing.T, base, key, threadID string) string {
	t.Helper()
	var answer string
	waitUntil(t, "the run on "+threadID+" to answer", 30*time.Second, func() (bool, string) {
		msgs, raw := threadMessages(t, base, key, threadID)
		if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" && len(msgs[n-1].ToolCalls) == 0 {
			answer = msgs[n-1].Content
			return true, ""
		}
		return false, raw
	})
	return answer
}

// ranOn counts the runs a node's log says it ended (at debug level).
func ranOn(log *syncBuffer) int { return strings.Count(log.String(), `msg="jobs: run ended"`) }

// blockingService answers each request once released, counting those that wait.
type blockingService struct {
	*httptest.Server
	waiting atomic.Int32
	release chan struct{}
	once    sync.Once
}

func newBlockingService(t *testing.T) *blockingService {
	s := &blockingService{release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.waiting.Add(1)
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(func() { s.open(); s.Close() })
	return s
}

func (s *blockingService) open() { s.once.Do(func() { close(s.release) }) }

// Two quiver serve nodes on one PostgreSQL database, neither given files: the agents and the
// OpenAPI document quiver apply stores run on either node, whichever took the run; an agent
// changed by an apply is used by both nodes' next runs within a second (the time is measured
// from the apply's end to each node's log of the new version); runs under way when their agent
// is removed finish with the agent they started with, and a run queued before its agent was
// removed and taken after ends failed, with the reason, on the thread (both nodes), its event
// stream and the log of the node that took it.
func TestFleetSharesOneConfiguration(t *testing.T) {
	dbArgs := postgresArgs(t)
	t.Setenv(secret.EnvKey, strings.Repeat("cd", 32)) // the fleet's one key
	t.Setenv("QUIVER_AGENTS", "")
	t.Setenv(logLevelEnv, "debug") // each node logs the runs it ends
	svc := newBlockingService(t)
	dir := t.TempDir()
	cfg, script := filepath.Join(dir, "cfg"), func(name string) string { return filepath.Join(dir, "scripts", name+".yaml") }
	writeTestFiles(t, map[string]string{
		script("sunny"):                   "turns:\n  - text: Sunny.\n",
		script("rainy"):                   "turns:\n  - text: Rainy.\n",
		script("blocker"):                 "turns:\n  - calls: [{name: svc.wait}]\n  - text: Done.\n",
		filepath.Join(cfg, "quiver.yaml"): "openapi:\n  - name: svc\n    document: svc.json\n    servers: [" + svc.URL + "]\n",
		filepath.Join(cfg, "svc.json"): `{"openapi":"3.0.3","info":{"title":"svc","version":"1"},"paths":{"/wait":{"get":{"operationId":"wait",` +
			`"responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"type":"object"}}}}}}}}}`,
		filepath.Join(cfg, "agents", "forecaster.yaml"): "name: forecaster\ndescription: Tells the weather.\nmodel: scripted:" + script("sunny") + "\n",
		filepath.Join(cfg, "agents", "blocker.yaml"):    "name: blocker\nmodel: scripted:" + script("blocker") + "\ntools: [svc.wait]\n",
	})
	endpointA, _, logA := startServeWith(t, dbArgs...)
	key := firstKeyRE.FindString(logA.String())
	endpointB, _, logB := startServeWith(t, dbArgs...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node A's log:\n%s\nnode B's log:\n%s", logA.String(), logB.String())
		}
	})
	a, b := strings.TrimSuffix(endpointA, "/mcp")+"/v1", strings.TrimSuffix(endpointB, "/mcp")+"/v1"
	apply := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, "", append(append([]string{"apply"}, args...), dbArgs...)...)
		if code != want {
			t.Fatalf("quiver apply %v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
		return out
	}

	// Applied through one CLI, served by both nodes; the same again changes nothing.
	out := apply(0, "-f", cfg)
	for _, want := range []string{"version 1", "+ agent blocker", "+ agent forecaster", "+ openapi svc"} {
		if !strings.Contains(out, want) {
			t.Fatalf("quiver apply said:\n%s\nwant %q", out, want)
		}
	}
	if out := apply(0, "-f", cfg); !strings.Contains(out, "unchanged: the fleet's configuration is version 1") {
		t.Fatalf("applying the same again said:\n%s", out)
	}
	waitServed(t, 1, time.Now(), logA, logB)

	// Runs started through either node run on either.
	for round := 0; ranOn(logA) == 0 || ranOn(logB) == 0; round++ {
		if round == 20 {
			t.Fatalf("of 40 runs, node A ended %d and node B %d: one took none", ranOn(logA), ranOn(logB))
		}
		for _, node := range []string{a, b} {
			th := newAPIThread(t, node, key, "forecaster")
			startAPIRun(t, node, key, th, "forecaster", "Weather?")
			if got := lastAnswer(t, node, key, th); got != "Sunny." {
				t.Fatalf("a run through %s answered %q, want Sunny.", node, got)
			}
		}
	}

	// A change: the dry run lists it and writes nothing; applied, both nodes serve it within
	// a second, and the next runs through B use it.
	writeTestFiles(t, map[string]string{filepath.Join(cfg, "agents", "forecaster.yaml"): "name: forecaster\nmodel: scripted:" + script("rainy") + "\n"})
	out = apply(0, "-f", cfg, "--dry-run")
	if !strings.Contains(out, "version 1 would become version 2") || !strings.Contains(out, "~ agent forecaster") || !strings.Contains(out, "nothing written") ||
		strings.Contains(out, "blocker") {
		t.Fatalf("the dry run said:\n%s", out)
	}
	out = apply(0, "-f", cfg)
	applied := time.Now()
	if !strings.Contains(out, "version 2 (it was 1)") {
		t.Fatalf("quiver apply said:\n%s\nwant version 2: the dry run wrote nothing", out)
	}
	took := waitServed(t, 2, applied, logA, logB)
	t.Logf("both nodes served version 2 %v after the apply", took)
	if took > time.Second {
		t.Errorf("the nodes served the change %v after it was applied, want within a second", took)
	}
	for range 3 {
		th := newAPIThread(t, b, key, "forecaster")
		startAPIRun(t, b, key, th, "forecaster", "Weather?")
		if got := lastAnswer(t, b, key, th); got != "Rainy." {
			t.Fatalf("a run through B after the change answered %q, want Rainy.", got)
		}
	}

	// Every worker of both nodes busy with a run of blocker waiting on svc.wait; a run of
	// forecaster queued behind them.
	workers := 2 * jobs.DefaultWorkers
	var blocked []string
	for i := range workers {
		node := []string{a, b}[i%2]
		th := newAPIThread(t, node, key, "blocker")
		startAPIRun(t, node, key, th, "blocker", "Wait.")
		blocked = append(blocked, th)
	}
	waitUntil(t, "every worker waiting on svc.wait", 30*time.Second, func() (bool, string) {
		return int(svc.waiting.Load()) == workers, fmt.Sprint(svc.waiting.Load(), " waiting")
	})
	doomed := newAPIThread(t, a, key, "forecaster")
	events := openEvents(t, a+"/threads/"+doomed+"/events", key, "")
	startAPIRun(t, a, key, doomed, "forecaster", "Weather?")

	// Both agents removed while their runs wait: the agents directory alone is applied.
	agents2 := filepath.Join(dir, "agents2")
	writeTestFiles(t, map[string]string{filepath.Join(agents2, "helper.yaml"): "name: helper\nmodel: scripted:" + script("sunny") + "\n"})
	out = apply(0, "-f", agents2)
	if !strings.Contains(out, "- agent blocker") || !strings.Contains(out, "- agent forecaster") || !strings.Contains(out, "+ agent helper") ||
		strings.Contains(out, "openapi") {
		t.Fatalf("applying the agents alone said:\n%s", out)
	}
	waitServed(t, 3, time.Now(), logA, logB)
	svc.open()
	for _, th := range blocked {
		if got := lastAnswer(t, a, key, th); got != "Done." {
			t.Fatalf("a run under way when its agent was removed answered %q, want Done.: it finishes with what it started with", got)
		}
	}
	end, _ := next(t, events, "the queued run's end", func(e sseEvent) bool { return e.Event == "run" })
	var ended struct {
		Type    string
		Outcome struct{ Status, Reason, Error string }
	}
	if err := json.Unmarshal([]byte(end.Data), &ended); err != nil {
		t.Fatal(err)
	}
	if ended.Type != "failed" || ended.Outcome.Reason != "unknown_agent" || !strings.Contains(ended.Outcome.Error, `"forecaster"`) ||
		!strings.Contains(ended.Outcome.Error, "version 3") {
		t.Fatalf("the run of the removed agent: %s, want failed for unknown_agent naming the agent and the version", end.Data)
	}
	for _, node := range []string{strings.TrimSuffix(a, "/v1"), strings.TrimSuffix(b, "/v1")} {
		checkFailedThread(t, node, key, doomed, ended.Outcome.Error)
	}
	warned := 0
	for _, line := range strings.Split(logA.String()+logB.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, `msg="agent: the run failed"`) && strings.Contains(line, "thread="+doomed) &&
			strings.Contains(line, "agent=forecaster") && strings.Contains(line, "reason=unknown_agent") {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("the nodes' logs have %d warnings of the failure, want 1", warned)
	}
	if status, _, _ := apiDo(t, "POST", b+"/threads", key, `{"agent":"forecaster"}`); status != 400 {
		t.Errorf("a thread of the removed agent through B: %d, want 400", status)
	}
}

// On SQLite, one node: what quiver apply stores is what quiver serve started without files
// runs, and quiver run where there is no agents directory; a node started with files on a database that has no configuration applies them; one
// started with files that differ says so, naming what differs and quiver apply, and runs the
// database's.
func TestApplyThenServeOnSQLite(t *testing.T) {
	t.Setenv("QUIVER_AGENTS", "")
	dir := t.TempDir()
	script := filepath.Join(dir, "sunny.yaml")
	agents := filepath.Join(dir, "agents")
	writeTestFiles(t, map[string]string{
		script:                                   "turns:\n  - text: Sunny.\n",
		filepath.Join(agents, "forecaster.yaml"): "name: forecaster\nmodel: scripted:" + script + "\n",
	})
	db := filepath.Join(dir, "q.db")
	if code, out, errOut := runCLI(t, "", "apply", "-f", agents, "--db", db); code != 0 || !strings.Contains(out, "+ agent forecaster") {
		t.Fatalf("quiver apply: %d\n%s%s", code, out, errOut)
	}
	// quiver run, where there is no agents directory, runs the fleet's agent too.
	if code, out, errOut := runCLI(t, "", "run", "--agent", "forecaster", "--db", db, "Weather?"); code != 0 || strings.TrimSpace(out) != "Sunny." {
		t.Fatalf("quiver run of the applied agent: %d %q\n%s", code, out, errOut)
	}
	endpoint, stop, log := startServeWith(t, "--db", db)
	base, key := strings.TrimSuffix(endpoint, "/mcp")+"/v1", firstKeyRE.FindString(log.String())
	th := newAPIThread(t, base, key, "forecaster")
	startAPIRun(t, base, key, th, "forecaster", "Weather?")
	if got := lastAnswer(t, base, key, th); got != "Sunny." {
		t.Fatalf("the applied agent answered %q", got)
	}
	if strings.Contains(log.String(), "warning") {
		t.Fatalf("a node without files warned:\n%s", log.String())
	}
	stop()

	// The same files at start: nothing to say.
	_, stop, log = startServeWith(t, "--db", db, "--agents", agents)
	if strings.Contains(log.String(), "differ") {
		t.Fatalf("a node started with the fleet's own files warned:\n%s", log.String())
	}
	stop()

	// Other files: said, and the database's served.
	other := filepath.Join(dir, "other")
	writeTestFiles(t, map[string]string{filepath.Join(other, "helper.yaml"): "name: helper\nmodel: scripted:" + script + "\n"})
	endpoint, _, log = startServeWith(t, "--db", db, "--agents", other)
	warning := regexp.MustCompile(`quiver: warning: this node's files \(agents [^)]*other\) differ from the fleet's configuration \(version 1\), ` +
		`which this node serves: applying them would change agent forecaster removed, agent helper added\. .*quiver apply -f DIR`)
	if !warning.MatchString(log.String()) {
		t.Fatalf("a node started with other files said:\n%s", log.String())
	}
	base = strings.TrimSuffix(endpoint, "/mcp") + "/v1"
	if status, _, _ := apiDo(t, "POST", base+"/threads", key, `{"agent":"helper"}`); status != 400 {
		t.Errorf("a thread of the node's own agent: %d, want 400: the node runs the database's", status)
	}

	// A database without a configuration takes the files of the node that starts first.
	fresh := filepath.Join(dir, "fresh.db")
	_, _, log = startServeWith(t, "--db", fresh, "--agents", agents)
	if !strings.Contains(log.String(), "the database had no fleet configuration: this node's files (agents "+agents+") became its version 1") {
		t.Fatalf("the first node on a new database said:\n%s", log.String())
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatal(err)
	}
}

// checkFailedThread checks that GET /v1/threads/{id} on node reads the thread's last run failed
// for unknown_agent with the words why, before any step.
func checkFailedThread(t *testing.T, node, key, threadID, why string) {
	t.Helper()
	status, _, th := apiDo(t, "GET", node+"/v1/threads/"+threadID, key, "")
	var view struct {
		Status    string
		StepCount int `json:"step_count"`
		Run       struct{ Status, Reason, Error string }
	}
	b, _ := json.Marshal(th)
	if status != 200 || json.Unmarshal(b, &view) != nil || view.Status != "failed" || view.StepCount != 0 ||
		view.Run.Status != "failed" || view.Run.Reason != "unknown_agent" || view.Run.Error != why {
		t.Errorf("GET /v1/threads/%s on %s: %d %s, want failed for unknown_agent: %q", threadID, node, status, b, why)
	}
}
