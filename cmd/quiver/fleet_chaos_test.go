//go:build linux

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/crashtest"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/secret"
)

// The fleet chaos test (issue 32): three quiver serve nodes on one PostgreSQL server of the
// test's own, behind HAProxy in round-robin without stickiness. Through the balancer, two
// workspaces' clients run agents over the API (a confirmation, a client tool and a blocking
// sub-agent in every run, each run's events followed and resumed with Last-Event-ID), call a
// tool over the API, and call it over MCP with the official Go SDK, in sessions that any node
// continues (the SDK's default, which falls back from 2026-07-28 to 2025-11-25, and
// 2025-06-18). Meanwhile the test SIGKILLs random nodes
// (each started again on its port with an empty data directory), drains one with SIGTERM and
// restarts PostgreSQL. Then it checks, against the database and what the nodes reported of
// every execution of the tally tools (crashtest.Report, before the result is stored):
//
//   - every run finished, with each of its calls answered once;
//   - every answered call is recorded exactly once, and no tool ran again after its result was
//     stored;
//   - every event stream saw every message of its thread, once and in order;
//   - no workspace saw another's data.
//
// QUIVER_CHAOS_CLIENTS (default "api,mcp") names the clients to run: "api" or "mcp" alone
// leaves the others out, to work on one door.

const (
	chaosNodes = 3
	chaosKills = 21
	// chaosDrainDelay is the nodes' --drain-delay; a drained node must exit within it plus the
	// 10 s its requests get and the 10 s its runs get (docs/DEPLOY.md), and a little.
	chaosDrainDelay = time.Second
	chaosDrainBound = chaosDrainDelay + 22*time.Second
	// chaosRunLimit is how long a client waits for its run before giving up on it.
	chaosRunLimit = 45 * time.Second
)

// TestFleetChaosNode is a node of the chaos test: quiver serve with the tally tools.
func TestFleetChaosNode(t *testing.T) {
	dsn := os.Getenv(chaosEnvDSN)
	if dsn == "" {
		return // not a node: a normal run of the tests
	}
	// TestMain gave this process a data directory of its own and no secret key; the node's are
	// the test's: a directory the test deletes before every life, and the fleet's key.
	os.RemoveAll(testRoot)
	os.Setenv("XDG_DATA_HOME", os.Getenv(chaosEnvData))
	os.Setenv(secret.EnvKey, os.Getenv(chaosEnvSecret))
	life := os.Getenv(chaosEnvLife)
	tally := func(ctx context.Context, in struct {
		Key string `json:"key"`
	}) (string, error) {
		// Reported as it starts, then a little work: a kill that lands inside the call shows as
		// an execution without a result.
		s := quiver.ScopeFrom(ctx)
		crashtest.Report(fmt.Sprintf("ran %s %s %s %s", cmp.Or(in.Key, "-"), cmp.Or(s.WorkspaceID, "-"), cmp.Or(s.ThreadID, "-"), cmp.Or(quiver.CallFrom(ctx).ID, "-")))
		time.Sleep(time.Duration(5+rand.IntN(25)) * time.Millisecond)
		return "tallied " + in.Key + " by " + life, nil
	}
	quiver.MustRegister(
		quiver.Func("tally", "Counts a call.", tally),
		quiver.Func("guarded_tally", "Counts a call a person approved.", tally, quiver.WithConfirmation()),
	)
	args := []string{"serve", "--postgres", dsn, "--agents", os.Getenv(chaosEnvAgents), "--addr", os.Getenv(chaosEnvAddr),
		"--drain-delay", os.Getenv(chaosEnvDrain)}
	if code := run(context.Background(), args, strings.NewReader(""), os.Stdout, os.Stderr); code != exitOK {
		crashtest.Fail("quiver serve exited with %d", code)
	}
}

func TestFleetChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the fleet chaos test runs three nodes, HAProxy and PostgreSQL for about a minute")
	}
	// Skipped without PostgreSQL, as the other PostgreSQL tests are (failed under CI=true); the
	// fleet runs on a server of its own, which the test restarts.
	pgtest.DSN(t)
	// Skipped without HAProxy too, saying how to run it (failed when CI is set).
	haproxy := haproxyBinary(t)
	began := time.Now()
	clients := chaosClientKinds(t)

	pg := startChaosPostgres(t)
	agents := writeChaosAgents(t)
	fleet := newChaosFleet(t, chaosNodes, pg.DSN(), agents, []string{"OPENAI_BASE_URL=" + startChaosModel(t), "OPENAI_API_KEY=sk-chaos"})
	fleet.drainWait = chaosDrainDelay
	fleet.start()
	fleet.startHAProxy(haproxy)
	workspaces := createChaosWorkspaces(t, fleet.lb, fleet.admin)
	t.Logf("set up in %v: PostgreSQL on port %d, %d nodes, HAProxy at %s", time.Since(began).Round(100*time.Millisecond), pg.port, chaosNodes, fleet.lb)

	// The clients work while the chaos lasts; the runs under way then finish.
	// starting ends the clients' new work; alive ends everything they do, when the test ends
	// early.
	alive, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	starting, stopStarting := context.WithCancel(alive)
	load := startChaosLoad(alive, starting, workspaces, fleet.lb, clients)
	chaosBegan := time.Now()
	report := runChaos(t, fleet, pg)
	stopStarting()
	chaosTook := time.Since(chaosBegan)
	load.wait()
	settled := time.Since(chaosBegan) - chaosTook
	if t.Failed() {
		t.Fatalf("the chaos failed:\n%s", fleet.logs())
	}

	stored := readChaosTallies(t, pg)
	executions := fleet.executions()
	t.Run("nodes", func(t *testing.T) {
		for _, e := range fleet.errors {
			t.Error(e)
		}
	})
	t.Run("runs", func(t *testing.T) { checkChaosRuns(t, workspaces, load) })
	t.Run("api calls", func(t *testing.T) { checkChaosAnswered(t, load.apiAnswered, stored, executions) })
	t.Run("executions", func(t *testing.T) { checkChaosExecutions(t, workspaces, stored, executions) })
	t.Run("isolation", func(t *testing.T) { checkChaosIsolation(t, workspaces, load, stored) })
	if clients["mcp"] {
		t.Run("mcp", func(t *testing.T) { checkChaosMCP(t, load, stored, executions) })
	}
	if t.Failed() {
		t.Logf("the nodes' last lines:\n%s", fleet.logs())
	}
	fleet.stopAll()
	t.Logf("%s", fleet.loggedSummary())
	t.Logf("%d SIGKILLs, PostgreSQL restarted in %v, node drained in %v; chaos %v, settling %v, in all %v",
		report.kills, report.pgRestart.Round(time.Millisecond), report.drain.Round(time.Millisecond),
		chaosTook.Round(100*time.Millisecond), settled.Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond))
	t.Logf("%s", load.summary(stored, executions))
}

// chaosClientKinds reads QUIVER_CHAOS_CLIENTS: which of the api and mcp clients run.
func chaosClientKinds(t testing.TB) map[string]bool {
	kinds := map[string]bool{}
	for _, k := range strings.Split(cmp.Or(os.Getenv("QUIVER_CHAOS_CLIENTS"), "api,mcp"), ",") {
		switch k = strings.TrimSpace(k); k {
		case "api", "mcp":
			kinds[k] = true
		default:
			t.Fatalf("QUIVER_CHAOS_CLIENTS: unknown client %q (api, mcp)", k)
		}
	}
	if !kinds["api"] {
		t.Fatal("QUIVER_CHAOS_CLIENTS must name api: the runs and the API calls are the test's core")
	}
	return kinds
}

// writeChaosAgents writes the agents directory: the lead (the model's lead turns, chaosTurns)
// and its blocking sub-agent, the helper.
func writeChaosAgents(t testing.TB) string {
	agents := filepath.Join(t.TempDir(), "agents")
	writeTestFiles(t, map[string]string{
		filepath.Join(agents, "lead.yaml"): "name: lead\nmodel: openai-compatible:lead\n" +
			"tools: [tally, guarded_tally, open_file, helper]\nstop: {max_steps: 20}\n",
		filepath.Join(agents, "helper.yaml"): "name: helper\ntype: dual_ai\ndescription: Helps.\nmodel: openai-compatible:helper\n" +
			"tools: [tally]\nexpose_as_tool: true\nstop: {max_steps: 10}\n",
	})
	return agents
}

// chaosWorkspace is one of the test's two workspaces, made by the operator, with its admin key
// and its own client tool, open_file.
type chaosWorkspace struct {
	name, id string
	api      *chaosAPI
}

func createChaosWorkspaces(t testing.TB, lb, admin string) map[string]*chaosWorkspace {
	t.Helper()
	out := map[string]*chaosWorkspace{}
	for _, name := range []string{"alpha", "beta"} {
		status, _, body := apiDo(t, "POST", lb+"/v1/workspaces", admin, asJSON(map[string]string{"name": name}))
		var made struct {
			Workspace struct{ ID string }
			Secret    string
		}
		if err := json.Unmarshal([]byte(asJSON(body)), &made); err != nil || status != http.StatusCreated || made.Secret == "" {
			t.Fatalf("creating workspace %s: %d %v", name, status, body)
		}
		status, _, tool := apiDo(t, "POST", lb+"/v1/tools", made.Secret, `{"name":"open_file","description":"Opens a file on the user's machine.",`+
			`"target":"client","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}`)
		if status != http.StatusCreated {
			t.Fatalf("creating %s's client tool: %d %v", name, status, tool)
		}
		out[name] = &chaosWorkspace{name: name, id: made.Workspace.ID, api: newChaosAPI(lb, made.Secret)}
	}
	return out
}

// chaosReport is what the chaos did.
type chaosReport struct {
	kills            int
	pgRestart, drain time.Duration
}

// runChaos kills random nodes with SIGKILL chaosKills times, each started again at once on its
// port with its data directory deleted; a third of the way through it restarts PostgreSQL,
// two thirds of the way it drains a node with SIGTERM (started again too).
func runChaos(t *testing.T, fleet *chaosFleet, pg *chaosPostgres) chaosReport {
	var r chaosReport
	began := time.Now()
	for i := 1; i <= chaosKills; i++ {
		// A restart takes 1-2 s on a busy 2-core machine: a kill every 1.5-3 s in all.
		time.Sleep(time.Duration(300+rand.IntN(600)) * time.Millisecond)
		n := fleet.nodes[rand.IntN(len(fleet.nodes))]
		fleet.kill(n)
		r.kills++
		fleet.startNode(n)
		t.Logf("%5.1fs: SIGKILL %d, node %d restarted", time.Since(began).Seconds(), i, n.index)
		switch i {
		case chaosKills / 3:
			r.pgRestart = pg.restart()
			t.Logf("%5.1fs: PostgreSQL restarted in %v", time.Since(began).Seconds(), r.pgRestart.Round(time.Millisecond))
		case 2 * chaosKills / 3:
			n := fleet.nodes[rand.IntN(len(fleet.nodes))]
			r.drain = fleet.drain(n, chaosDrainBound)
			fleet.startNode(n)
			t.Logf("%5.1fs: node %d drained in %v, restarted", time.Since(began).Seconds(), n.index, r.drain.Round(time.Millisecond))
		}
	}
	return r
}

// chaosLoad is the clients at work and what they were answered.
type chaosLoad struct {
	wg sync.WaitGroup

	mu          sync.Mutex
	runs        map[string][]*chaosRun // by workspace
	apiAnswered map[string]string      // the text of every answered API call, by key
	apiFailed   int
	mcp         map[string][]*chaosMCP // by workspace
}

// startChaosLoad starts every workspace's clients: two running agents one run after the other,
// one calling the tally tool over the API and, with mcp, two calling it over MCP. They start
// new work until starting ends; the runs under way then finish, unless alive ends first.
func startChaosLoad(alive, starting context.Context, workspaces map[string]*chaosWorkspace, lb string, kinds map[string]bool) *chaosLoad {
	l := &chaosLoad{runs: map[string][]*chaosRun{}, apiAnswered: map[string]string{}, mcp: map[string][]*chaosMCP{}}
	for _, ws := range workspaces {
		for c := range 2 {
			l.goDo(func() {
				for i := 0; starting.Err() == nil; i++ {
					run := ws.api.runAgent(alive, fmt.Sprintf("%s.api%d.r%d", ws.name, c, i), chaosRunLimit)
					l.mu.Lock()
					l.runs[ws.name] = append(l.runs[ws.name], run)
					l.mu.Unlock()
				}
			})
		}
		l.goDo(func() {
			for i := 0; starting.Err() == nil; i++ {
				key := fmt.Sprintf("%s.call.%d", ws.name, i)
				text, ok := ws.api.callTally(starting, key)
				l.mu.Lock()
				if ok {
					l.apiAnswered[key] = text
				} else {
					l.apiFailed++
				}
				l.mu.Unlock()
				time.Sleep(100 * time.Millisecond)
			}
		})
		if !kinds["mcp"] {
			continue
		}
		for _, m := range []*chaosMCP{
			// The SDK's default: 2026-07-28, without a session, found with server/discover.
			{name: "mcpdefault", want: "2026-07-28", lb: lb, key: ws.api.key},
			{name: "mcpsession", version: "2025-06-18", want: "2025-06-18", lb: lb, key: ws.api.key},
		} {
			l.mcp[ws.name] = append(l.mcp[ws.name], m)
			l.goDo(func() { m.run(starting, ws.name) })
		}
	}
	return l
}

func (l *chaosLoad) goDo(f func()) {
	l.wg.Add(1)
	go func() { defer l.wg.Done(); f() }()
}

func (l *chaosLoad) wait() { l.wg.Wait() }

// summary says what the clients did, for the log.
func (l *chaosLoad) summary(stored map[string][]chaosStored, ran map[string][]chaosExecution) string {
	var b strings.Builder
	runs, reconnects := 0, 0
	for _, rs := range l.runs {
		runs += len(rs)
		for _, r := range rs {
			if r.stream != nil {
				_, n := r.stream.stop()
				reconnects += n
			}
		}
	}
	again := 0
	for _, execs := range ran {
		if len(execs) > 1 {
			again++
		}
	}
	fmt.Fprintf(&b, "%d runs (their event streams reconnected %d times), %d API calls answered and %d not; %d tally executions of %d keys, %d keys executed more than once, %d results stored",
		runs, reconnects, len(l.apiAnswered), l.apiFailed, countExecutions(ran), len(ran), again, len(stored))
	for ws, ms := range l.mcp {
		for _, m := range ms {
			fmt.Fprintf(&b, "\nMCP %s/%s (negotiated %s): %d calls answered, %d not, %d sessions, at most %d nodes answered one session; first errors: %q",
				ws, m.name, m.protocol, len(m.answered), m.failed, m.connects, m.spread, m.errs)
		}
	}
	return b.String()
}

func countExecutions(ran map[string][]chaosExecution) int {
	n := 0
	for _, e := range ran {
		n += len(e)
	}
	return n
}

// chaosStored is a tally result stored in the database.
type chaosStored struct {
	workspace, thread, call, content string
}

// readChaosTallies reads every tally result of the database, by key, straight from its tables.
func readChaosTallies(t testing.TB, pg *chaosPostgres) map[string][]chaosStored {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pg.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT t.workspace_id, m.thread_id, m.tool_call_id, m.content FROM messages m JOIN threads t ON t.id = m.thread_id
		WHERE m.role = 'tool' AND m.content LIKE 'tallied %'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]chaosStored{}
	for rows.Next() {
		var s chaosStored
		if err := rows.Scan(&s.workspace, &s.thread, &s.call, &s.content); err != nil {
			t.Fatal(err)
		}
		key := strings.Fields(s.content)[1]
		out[key] = append(out[key], s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkChaosRuns checks every run: it finished with the model's answer, each of its calls has
// one result, and its event stream saw every message of the thread, once and in order.
func checkChaosRuns(t *testing.T, workspaces map[string]*chaosWorkspace, l *chaosLoad) {
	n := 0
	for name, runs := range l.runs {
		ws := workspaces[name]
		for _, r := range runs {
			n++
			if !r.finished {
				t.Errorf("run %s (thread %s) did not finish: %s; the client answered %q; now: %s", r.key, r.thread, r.err, r.answers, ws.api.describe(r.thread))
				continue
			}
			msgs := checkChaosHistory(t, ws, r)
			checkChaosStream(t, r, msgs)
		}
	}
	if n == 0 {
		t.Error("no run was started")
	}
}

// checkChaosHistory checks a finished run's thread and returns its messages.
func checkChaosHistory(t *testing.T, ws *chaosWorkspace, r *chaosRun) []chaosMessage {
	t.Helper()
	msgs, err := ws.api.messages(r.thread)
	if err != nil {
		t.Errorf("run %s: %v", r.key, err)
		return nil
	}
	want := map[string]string{ // the result of each call, by tool
		"tally":         "tallied " + r.key + ".a by ",
		"helper":        "helped " + r.key + ".h",
		"guarded_tally": "tallied " + r.key + ".g by ",
		"open_file":     "opened " + r.key + ".f",
	}
	results := map[string]int{}
	for _, m := range msgs {
		if m.Role != "tool" {
			continue
		}
		results[m.ToolName]++
		if w, ok := want[m.ToolName]; !ok || !strings.HasPrefix(m.Content, w) {
			t.Errorf("run %s: the result of %s is %q, want %q...", r.key, m.ToolName, m.Content, w)
		}
	}
	for tool := range want {
		if results[tool] != 1 {
			t.Errorf("run %s: %d results of %s, want 1", r.key, results[tool], tool)
		}
	}
	if last := msgs[len(msgs)-1]; last.Role != "assistant" || last.Content != "Done "+r.key+"." {
		t.Errorf("run %s: the thread ends with %s %q, want the lead's answer", r.key, last.Role, last.Content)
	}
	return msgs
}

// checkChaosStream checks that a run's event stream saw msgs, the thread's messages, each once
// and in order, whatever broke it on the way. The stream is given a few seconds to catch up.
func checkChaosStream(t *testing.T, r *chaosRun, msgs []chaosMessage) {
	t.Helper()
	if len(msgs) == 0 {
		return
	}
	last := msgs[len(msgs)-1].Seq
	for deadline := time.Now().Add(10 * time.Second); r.stream.lastSeq() < last && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	seen, reconnects := r.stream.stop()
	var got, want []string
	for _, s := range seen {
		got = append(got, fmt.Sprintf("%d:%s", s.seq, s.id))
	}
	for _, m := range msgs {
		want = append(want, fmt.Sprintf("%d:%s", m.Seq, m.ID))
	}
	if !slices.Equal(got, want) {
		t.Errorf("run %s: the event stream of %s (reconnected %d times) saw the messages %v, want %v", r.key, r.thread, reconnects, got, want)
	}
}

// describe says where a thread is, for a failure's message: its view and its last messages.
func (c *chaosAPI) describe(thread string) string {
	if thread == "" {
		return "no thread"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, view, err := c.retry(ctx, "GET", "/threads/"+thread, "")
	msgs, merr := c.messages(thread)
	var last []string
	for _, m := range msgs[max(0, len(msgs)-4):] {
		last = append(last, fmt.Sprintf("%d %s %s %.80q", m.Seq, m.Role, m.ToolName, m.Content))
	}
	return fmt.Sprintf("%s %v; %d messages, the last %q %v", view, err, len(msgs), last, merr)
}

// chaosMessage is a message as the API lists it.
type chaosMessage struct {
	ID       string `json:"id"`
	Seq      int64  `json:"seq"`
	Role     string `json:"role"`
	Content  string `json:"content"`
	ToolName string `json:"tool_name"`
}

// messages reads a thread's messages (the last 1000).
func (c *chaosAPI) messages(thread string) ([]chaosMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	status, b, err := c.retry(ctx, "GET", "/threads/"+thread+"/messages?limit=1000", "")
	var page struct{ Messages []chaosMessage }
	if err != nil || status != http.StatusOK || json.Unmarshal(b, &page) != nil || len(page.Messages) == 0 {
		return nil, fmt.Errorf("the messages of %s: %d %s %v", thread, status, b, err)
	}
	return page.Messages, nil
}

// checkChaosAnswered checks that every call answered to a client is recorded exactly once,
// with the result the client was given.
func checkChaosAnswered(t *testing.T, answered map[string]string, stored map[string][]chaosStored, ran map[string][]chaosExecution) {
	t.Helper()
	if len(answered) == 0 {
		t.Error("no call was answered")
	}
	for key, text := range answered {
		switch s := stored[key]; {
		case len(s) != 1:
			t.Errorf("call %s was answered %q but is recorded %d times: %+v (executions %+v)", key, text, len(s), s, ran[key])
		case s[0].content != text:
			t.Errorf("call %s was answered %q but its record says %q", key, text, s[0].content)
		}
	}
}

// checkChaosExecutions checks every stored tally result against the executions the nodes
// reported: one result per key; the result is the last execution's, so no execution came after
// it was stored. (A life may execute a call twice: a node whose run lost its lease, in the
// database's restart, hands the run back, leaves the call it cut short unrecorded, and may
// take the run again.) Every execution of a run's call ends with its result stored.
func checkChaosExecutions(t *testing.T, workspaces map[string]*chaosWorkspace, stored map[string][]chaosStored, ran map[string][]chaosExecution) {
	for key, s := range stored {
		if len(s) != 1 {
			t.Errorf("tally %s has %d results: %+v", key, len(s), s)
			continue
		}
		execs := ran[key]
		if len(execs) == 0 {
			t.Errorf("tally %s has a result, %q, but no node reported executing it", key, s[0].content)
			continue
		}
		if want := " by " + execs[len(execs)-1].life; !strings.HasSuffix(s[0].content, want) {
			t.Errorf("tally %s: its stored result is %q, but it was executed after that (executions %+v)", key, s[0].content, execs)
		}
	}
	for key, execs := range ran {
		// A run's calls (".a", ".g", ".h" of "WS.apiC.rN") must all end stored; a direct call
		// whose answer was lost may have run without a record.
		if strings.Contains(key, ".api") && len(stored[key]) == 0 {
			t.Errorf("run call %s was executed (%+v) but has no result", key, execs)
		}
		if ws := workspaces[strings.SplitN(key, ".", 2)[0]]; ws == nil {
			t.Errorf("tally %s of no workspace of the test was executed: %+v", key, execs)
		}
	}
}

// checkChaosIsolation checks that every call ran and was recorded in the workspace of the key
// that made it, and that neither workspace's key reads the other's threads.
func checkChaosIsolation(t *testing.T, workspaces map[string]*chaosWorkspace, l *chaosLoad, stored map[string][]chaosStored) {
	for key, ss := range stored {
		ws := workspaces[strings.SplitN(key, ".", 2)[0]]
		for _, s := range ss {
			if ws == nil || s.workspace != ws.id {
				t.Errorf("call %s is recorded in workspace %s, thread %s: not the workspace of its key", key, s.workspace, s.thread)
			}
		}
	}
	for name := range workspaces {
		for other, ows := range workspaces {
			if other == name {
				continue
			}
			listed := map[string]bool{}
			for _, th := range listThreads(t, ows.api.base, ows.api.key, "") {
				listed[th.ID] = true
			}
			for _, r := range l.runs[name] {
				if r.thread == "" {
					continue
				}
				if listed[r.thread] {
					t.Errorf("%s's thread %s is listed to %s", name, r.thread, other)
				}
				for _, path := range []string{"/threads/" + r.thread, "/threads/" + r.thread + "/messages", "/threads/" + r.thread + "/pending"} {
					if status, b, err := ows.api.do(context.Background(), "GET", path, ""); err != nil || status != http.StatusNotFound {
						t.Errorf("%s's key on %s's %s: %d %s %v, want 404", other, name, path, status, b, err)
					}
				}
				break // one thread of each workspace is enough for the reads; the listing covers all
			}
		}
	}
}

// checkChaosMCP checks the MCP clients: each got answers, every answered call is recorded
// exactly once, and a session continued on another node when its node went away (the balancer
// sends its requests to all the nodes in turn).
func checkChaosMCP(t *testing.T, l *chaosLoad, stored map[string][]chaosStored, ran map[string][]chaosExecution) {
	for ws, ms := range l.mcp {
		for _, m := range ms {
			t.Run(ws+"/"+m.name, func(t *testing.T) {
				if m.protocol != m.want {
					t.Errorf("the client negotiated protocol version %q, want %q", m.protocol, m.want)
				}
				if len(m.answered) < 20 {
					t.Errorf("%d calls answered, %d not, in %d sessions; first errors: %q", len(m.answered), m.failed, m.connects, m.errs)
				}
				if m.failed > len(m.answered)/4 {
					t.Errorf("%d calls failed for %d answered, in %d sessions: the session does not survive the balancer and the kills; first errors: %q",
						m.failed, len(m.answered), m.connects, m.errs)
				}
				if m.spread < 2 {
					t.Errorf("no session was answered by more than one node (%d sessions)", m.connects)
				}
				checkChaosAnswered(t, m.answered, stored, ran)
			})
		}
	}
}
