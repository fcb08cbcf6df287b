//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store"
)

// The sub-agent crash test is the API crash test (api_crash_test.go) with a tree under every
// run: `quiver serve` runs in this test binary started again (TestSubagentCrashServer), the
// test starts runs of a lead over the API, and kills the server with SIGKILL at random moments.
// The lead's first turn calls a blocking sub-agent (researcher, run inside the lead's call), a
// non-blocking one (writer, a job of its own whose answer reaches the lead as a queued message
// and wakes it with a quiver.wake job) and a resumable one (keeper, by subagent_create); each
// child calls the tally tool once and answers. The tally tool reports each execution, and its
// result names the process that ran it, as in the API crash test.
const (
	sacRuns      = 20
	sacLeadTexts = 6 // text turns of the lead after its first: a woken lead takes one per wake
)

var subagentCrashServer = crashServer{
	test:      "TestSubagentCrashServer",
	envDB:     "QUIVER_SUBAGENT_CRASH_DB",
	envAgents: "QUIVER_SUBAGENT_CRASH_AGENTS",
	envLife:   "QUIVER_SUBAGENT_CRASH_LIFE",
}

// sacChildren are the lead's sub-agents, by the call of its first turn that starts each.
var sacChildren = []struct{ call, agent string }{
	{"call_1_1", "researcher"}, // blocking: its answer is the call's result
	{"call_1_2", "writer"},     // non-blocking: a reference now, its answer as a message later
	{"call_1_3", "keeper"},     // resumable, started by subagent_create (blocking)
}

// sacDelivery is the message a finished non-blocking child leaves its parent.
var sacDelivery = regexp.MustCompile(`^\[sub-agent (\w+)(?: \("[^"]*"\))? \(ref (thr_\w+)\) (finished|failed)\]`)

// TestSubagentCrashServer is the server the sub-agent crash test kills.
func TestSubagentCrashServer(t *testing.T) {
	life, ok := subagentCrashServer.life()
	if !ok {
		return
	}
	quiver.MustRegister(quiver.Func("tally", "Counts a call.", func(ctx context.Context, in struct {
		Who string `json:"who"`
	}) (string, error) {
		// Reported as it starts, then a little work: a kill that lands inside the call shows as
		// an execution whose result was never stored, which the next life executes again.
		reportTally(ctx, life)
		time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond)
		return tallied(life), nil
	}))
	subagentCrashServer.serve()
}

// SIGKILL the server at random moments during 20 runs of a tree with blocking, non-blocking
// and resumable children, restart it, and check that after the restarts every child finishes,
// every completion reaches its parent exactly once, and no tool call runs twice (again only
// when the kill came before its result was persisted).
func TestSubagentCrashDuringTrees(t *testing.T) {
	if testing.Short() {
		t.Skip("the sub-agent crash test kills and restarts the server several times (about 3 s, 20 s on PostgreSQL)")
	}
	forEachCrashBackend(t, testSubagentCrash)
}

// sacTree is a lead's thread and what it and its children hold.
type sacTree struct {
	lead     *store.Thread
	children []*store.Thread
	hist     map[string][]*store.Message // by thread
}

func testSubagentCrash(t *testing.T, db string, kills int) {
	began := time.Now()
	agents, script := scriptedAgentsDir(t)
	var lead strings.Builder
	lead.WriteString("turns:\n  - calls:\n" +
		"      - {name: researcher, args: {message: Find three facts about otters.}}\n" +
		"      - {name: writer, args: {message: Write a title for an article about otters.}}\n" +
		"      - {name: subagent_create, args: {agent: keeper, name: k1, message: Keep the notes of the article.}}\n")
	for i := range sacLeadTexts {
		fmt.Fprintf(&lead, "  - text: Lead turn %d.\n", i+2)
	}
	files := map[string]string{
		script("lead"): lead.String(),
		filepath.Join(agents, "lead.yaml"): "name: lead\nmodel: scripted:" + script("lead") + "\n" +
			// tally too: a child calls only the tools its parent may (P2).
			"tools: [researcher, tally]\n" +
			"subagents:\n  - {name: writer, blocking: false}\n  - {name: keeper, resumable: {maxInstances: 2}}\n" +
			"stop: {max_steps: 20}\n",
	}
	for _, c := range sacChildren {
		files[script(c.agent)] = "turns:\n  - calls: [{name: tally, args: {who: " + c.agent + "}}]\n" +
			"  - expect: {result_contains: tallied by life}\n    text: " + c.agent + " answer\n"
		files[filepath.Join(agents, c.agent+".yaml")] = "name: " + c.agent + "\ntype: dual_ai\ndescription: Does its part.\n" +
			"model: scripted:" + script(c.agent) + "\ntools: [tally]\nstop: {max_steps: 10}\n"
	}
	files[filepath.Join(agents, "researcher.yaml")] += "expose_as_tool: true\n"
	writeTestFiles(t, files)

	h := newCrashHarness(t, subagentCrashServer, db, agents)
	var leads []string
	child, base, lastKill := h.killLives(kills,
		func() time.Duration { return time.Duration(50+rand.IntN(250)) * time.Millisecond },
		func(base string) { leads = h.startRuns(base, "lead", "Prepare an article about otters.", sacRuns) })

	// The last life runs every tree to its end; the PostgreSQL node takes the dead nodes'
	// runs only after their grace (10 s, checked every 15 s).
	deadline := time.Now().Add(50 * time.Second)
	var trees map[string]*sacTree
	for {
		var why string
		trees = sacRead(t, base, h.admin, leads, false)
		if why = sacPending(trees); why == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trees did not all finish after %d kills: %s\n%s", kills, why, child.Stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A completion delivered twice, a child run again, would come after the trees were
	// complete: give it the time to, then read everything again.
	time.Sleep(time.Second)
	trees = sacRead(t, base, h.admin, leads, true)
	h.stop(child)
	again := verifySubagentTrees(t, trees, h.ran)
	// A run that fails is tried again by River, later: none should have failed.
	for i, s := range h.stderrs {
		for _, line := range strings.Split(s, "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				t.Errorf("life %d logged: %s", i, line)
			}
		}
	}
	t.Logf("%d trees, %d kills, %d tally executions (%d in the last life killed); %d calls executed again because a kill came before "+
		"their result was stored; %s", sacRuns, kills, h.executions(), lastKill, again, time.Since(began).Round(100*time.Millisecond))
}

// sacRead reads the leads' trees: every thread of the workspace, by parent, and, with all,
// every thread's messages (else the leads' only).
func sacRead(t testing.TB, base, key string, leads []string, all bool) map[string]*sacTree {
	t.Helper()
	trees := map[string]*sacTree{}
	for _, id := range leads {
		trees[id] = &sacTree{hist: map[string][]*store.Message{}}
	}
	var cursor string
	for {
		var page struct {
			Threads    []*store.Thread `json:"threads"`
			NextCursor string          `json:"next_cursor"`
		}
		sacGet(t, base+"/threads?limit=100&cursor="+url.QueryEscape(cursor), key, &page)
		for _, th := range page.Threads {
			if tr := trees[th.ID]; tr != nil {
				tr.lead = th
			} else if tr := trees[th.ParentID]; tr != nil {
				tr.children = append(tr.children, th)
			} else {
				t.Fatalf("thread %s (agent %s, parent %q) is in no lead's tree", th.ID, th.AgentID, th.ParentID)
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	for id, tr := range trees {
		if tr.lead == nil {
			t.Fatalf("lead %s is not listed", id)
		}
		ids := []string{id}
		if all {
			for _, c := range tr.children {
				ids = append(ids, c.ID)
			}
		}
		for _, th := range ids {
			var page struct {
				Messages []*store.Message `json:"messages"`
			}
			sacGet(t, base+"/threads/"+th+"/messages?limit=1000", key, &page)
			tr.hist[th] = page.Messages
		}
	}
	return trees
}

func sacGet(t testing.TB, u, key string, out any) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v: %s", u, err, b)
	}
}

// sacPending says what keeps the trees from being complete ("" when none does): a lead or a
// child not finished, or a lead that has not answered after its writer's result.
func sacPending(trees map[string]*sacTree) string {
	var waiting []string
	for id, tr := range trees {
		if why := sacTreePending(tr); why != "" {
			waiting = append(waiting, id+": "+why)
		}
	}
	if len(waiting) == 0 {
		return ""
	}
	slices.Sort(waiting)
	return fmt.Sprintf("%d of %d trees not complete; %s", len(waiting), len(trees), waiting[0])
}

func sacTreePending(tr *sacTree) string {
	if !sacFinished(tr.lead, store.StatusIdle) {
		return "the lead is " + string(tr.lead.Status)
	}
	if len(tr.children) != len(sacChildren) {
		return fmt.Sprintf("%d children", len(tr.children))
	}
	for _, c := range tr.children {
		want := store.StatusTerminated // a sub-agent that is not resumable has done its one job
		if c.Resumable {
			want = store.StatusIdle
		}
		if !sacFinished(c, want) {
			return fmt.Sprintf("child %s (%s) is %s", c.ID, c.AgentID, c.Status)
		}
	}
	hist := tr.hist[tr.lead.ID]
	delivered := slices.IndexFunc(hist, func(m *store.Message) bool {
		return m.Role == store.RoleSystem && sacDelivery.MatchString(m.Content)
	})
	if delivered < 0 {
		return "the writer's result has not reached the lead"
	}
	if !slices.ContainsFunc(hist[delivered:], func(m *store.Message) bool { return m.Role == store.RoleAssistant }) {
		return "the lead has not answered after the writer's result"
	}
	return ""
}

// sacFinished says whether th is in status with its last run finished.
func sacFinished(th *store.Thread, status store.ThreadStatus) bool {
	out := agent.ReadState(th).Outcome
	return th.Status == status && out != nil && out.Status == agent.RunFinished
}

// verifySubagentTrees checks the trees against the executions reported and returns how many
// tally calls were executed again. Every call has one result, from its last execution, and no
// life executed a call twice; every nested call of the lead has one child, which finished with
// its answer; the writer's completion reached the lead once, and only it.
func verifySubagentTrees(t testing.TB, trees map[string]*sacTree, ran map[string][]string) (again int) {
	t.Helper()
	stored := map[string]bool{} // thread/call of every tally result
	for id, tr := range trees {
		if why := sacTreePending(tr); why != "" {
			t.Errorf("tree %s: %s, after it was complete", id, why)
			continue
		}
		leadResults := sacResults(t, id, tr.hist[id])
		byCall := map[string]*store.Thread{}
		for _, c := range tr.children {
			sp := agent.ReadState(c).Spawn
			if sp == nil || sp.Call == "" {
				t.Errorf("tree %s: child %s (%s) records no call that started it: %s", id, c.ID, c.AgentID, c.State)
				continue
			}
			if byCall[sp.Call] != nil {
				t.Errorf("tree %s: call %s started two children: %s and %s", id, sp.Call, byCall[sp.Call].ID, c.ID)
			}
			byCall[sp.Call] = c
		}
		for _, want := range sacChildren {
			c := byCall[want.call]
			if c == nil || c.AgentID != want.agent {
				t.Errorf("tree %s: call %s started %+v, want a child running %s", id, want.call, c, want.agent)
				continue
			}
			res := leadResults[want.call]
			if res == nil || res.Result == nil || res.Result.Status != string(quiver.StatusSuccess) || !strings.Contains(res.Content, c.ID) &&
				!strings.Contains(res.Content, want.agent+" answer") {
				t.Errorf("tree %s: the result of %s (%s): %+v", id, want.call, want.agent, res)
			}
			switch want.agent {
			case "researcher":
				if res != nil && res.Content != "researcher answer" {
					t.Errorf("tree %s: the blocking sub-agent's result is %q, want its answer", id, res.Content)
				}
			case "keeper":
				if res != nil && (!strings.Contains(res.Content, c.ID) || !strings.HasSuffix(res.Content, "keeper answer")) {
					t.Errorf("tree %s: the resumable sub-agent's result is %q, want its reference and answer", id, res.Content)
				}
			case "writer":
				var ref struct{ Ref string }
				if res != nil && res.Result != nil && (json.Unmarshal(res.Result.Value, &ref) != nil || ref.Ref != c.ID) {
					t.Errorf("tree %s: the non-blocking sub-agent's result %s does not refer to %s", id, res.Result.Value, c.ID)
				}
			}
			// The child: its message once, the tally call, its answer.
			hist := tr.hist[c.ID]
			var roles []string
			for _, m := range hist {
				roles = append(roles, string(m.Role))
			}
			if got := strings.Join(roles, " "); got != "user assistant tool assistant" || hist[3].Content != want.agent+" answer" {
				t.Errorf("tree %s: child %s (%s) has the history %q, want user assistant tool assistant, ending with its answer", id, c.ID, want.agent, got)
			}
			for call, m := range sacResults(t, c.ID, hist) {
				stored[c.ID+"/"+call] = true
				again += checkExecutions(t, c.ID, call, m.Content, ran[c.ID+"/"+call])
			}
		}
		if len(leadResults) != len(sacChildren) {
			t.Errorf("tree %s: the lead has %d results, want %d", id, len(leadResults), len(sacChildren))
		}
		// The writer's completion reached the lead once; the blocking children's answers came
		// as their calls' results, not as messages.
		var deliveries []string
		for _, m := range tr.hist[id] {
			if m.Role != store.RoleSystem {
				continue
			}
			d := sacDelivery.FindStringSubmatch(m.Content)
			if d == nil || d[1] != "writer" || d[3] != "finished" || byCall["call_1_2"] == nil || d[2] != byCall["call_1_2"].ID ||
				!strings.HasSuffix(m.Content, "\nwriter answer") {
				t.Errorf("tree %s: the lead was sent %q", id, m.Content)
			}
			deliveries = append(deliveries, m.Content)
		}
		if len(deliveries) != 1 {
			t.Errorf("tree %s: the writer's completion reached the lead %d times: %q", id, len(deliveries), deliveries)
		}
		last := tr.hist[id][len(tr.hist[id])-1]
		if last.Role != store.RoleAssistant || !strings.HasPrefix(last.Content, "Lead turn ") {
			t.Errorf("tree %s: the lead's last message is %s %q, want its answer", id, last.Role, last.Content)
		}
	}
	for key, lives := range ran {
		if !stored[key] {
			t.Errorf("call %s was executed (by lives %v) but no child of the trees has its result", key, lives)
		}
	}
	return again
}

// sacResults returns a thread's tool results by call, failing on a call with two.
func sacResults(t testing.TB, id string, hist []*store.Message) map[string]*store.Message {
	t.Helper()
	out := map[string]*store.Message{}
	for _, m := range hist {
		if m.Role != store.RoleTool {
			continue
		}
		if out[m.ToolCallID] != nil {
			t.Errorf("thread %s: call %s has two results", id, m.ToolCallID)
		}
		out[m.ToolCallID] = m
	}
	return out
}
