//go:build unix

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
)

// The crash test runs `quiver serve` in this test binary started again (TestServeCrashChild),
// starts runs over the API, and kills the server with SIGKILL at random moments; each
// restart picks the runs up again. The harness (crashharness_test.go) tells a call run again
// after its result was persisted (a violation) from one run again because the kill came before
// its result was.
const (
	crashRuns  = 20
	crashTurns = 4 // model turns with two tally calls each, then the answer
)

var apiCrashServer = crashServer{
	test:      "TestServeCrashChild",
	envDB:     "QUIVER_SERVE_CRASH_DB",
	envAgents: "QUIVER_SERVE_CRASH_AGENTS",
	envLife:   "QUIVER_SERVE_CRASH_LIFE",
}

// TestServeCrashChild is the server the crash test kills.
func TestServeCrashChild(t *testing.T) {
	life, ok := apiCrashServer.life()
	if !ok {
		return
	}
	quiver.MustRegister(quiver.Func("tally", "Counts a call.", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		// A little work, so that kills land inside calls as well as between them.
		time.Sleep(time.Duration(10+rand.IntN(40)) * time.Millisecond)
		reportTally(ctx, life)
		return tallied(life), nil
	}))
	apiCrashServer.serve()
}

// SIGKILL the server at random moments during 20 runs started over the API, restart it, and
// check that every run finishes with each tool call executed once, or again only when the kill
// came before its result was persisted.
func TestServeCrashDuringRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test kills and restarts the server several times (about 20 s, a minute on PostgreSQL)")
	}
	forEachCrashBackend(t, testServeCrashDuringRuns)
}

// counterAgent writes the agents folder of the crash tests: the agent counter, whose script
// makes crashTurns turns of two tally calls each and answers Done.; extra is added to its
// definition.
func counterAgent(t *testing.T, extra string) (agents string) {
	dir := t.TempDir()
	agents = filepath.Join(dir, "agents")
	script := filepath.Join(dir, "turns.yaml")
	var turns strings.Builder
	turns.WriteString("turns:\n")
	for i := range crashTurns {
		fmt.Fprintf(&turns, "  - calls: [{name: tally, args: {n: %d}}, {name: tally, args: {n: %d}}]\n", 2*i, 2*i+1)
	}
	turns.WriteString("  - text: Done.\n")
	writeTestFiles(t, map[string]string{
		script:                                turns.String(),
		filepath.Join(agents, "counter.yaml"): "name: counter\nmodel: scripted:" + script + "\ntools: [tally]\nstop: {max_steps: 20}\n" + extra,
	})
	return agents
}

func testServeCrashDuringRuns(t *testing.T, db string, kills int) {
	agents := counterAgent(t, "")

	h := newCrashHarness(t, apiCrashServer, db, agents)
	var threads []string
	child, base, _ := h.killLives(kills,
		func() time.Duration { return time.Duration(100+rand.IntN(400)) * time.Millisecond },
		func(base string) { threads = h.startRuns(base, "counter", "count", crashRuns) })

	// The last life runs every run to its end.
	histories := h.finishRuns(child, base, threads, kills)
	verifyCrashRuns(t, histories, h.ran)
}

// verifyCrashRuns checks the threads' histories against the executions reported: every call
// has one result, recorded from its last execution, and no life executed a call twice.
func verifyCrashRuns(t testing.TB, histories map[string][]any, ran map[string][]string) {
	t.Helper()
	again := 0
	for id, msgs := range histories {
		results := map[string]string{}
		var text string
		for _, m := range msgs {
			msg := m.(map[string]any)
			switch msg["role"] {
			case "tool":
				callID := msg["tool_call_id"].(string)
				if _, dup := results[callID]; dup {
					t.Errorf("thread %s: call %s has two results", id, callID)
				}
				results[callID], _ = msg["content"].(string)
			case "assistant":
				if s, _ := msg["content"].(string); s != "" {
					text = s
				}
			}
		}
		if text != "Done." || len(results) != 2*crashTurns {
			t.Errorf("thread %s: %d results and the answer %q, want %d and Done.", id, len(results), text, 2*crashTurns)
		}
		for callID, content := range results {
			again += checkExecutions(t, id, callID, content, ran[id+"/"+callID])
		}
	}
	t.Logf("%d runs, %d calls; %d executed again because a kill came before their result was stored", len(histories), len(ran), again)
}
