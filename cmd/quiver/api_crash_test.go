//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/crashtest"
)

// The crash test runs `quiver serve` in this test binary started again (TestServeCrashChild),
// starts runs over the API, and kills the server with SIGKILL at random moments; each
// restart picks the runs up again. The tally tool reports each execution, and its result names
// the process that ran it, so the test can tell a call run again after its result was
// persisted (a violation) from one run again because the kill came before its result was.
const (
	crashEnvDB     = "QUIVER_SERVE_CRASH_DB"
	crashEnvAgents = "QUIVER_SERVE_CRASH_AGENTS"
	crashEnvLife   = "QUIVER_SERVE_CRASH_LIFE" // which incarnation of the server this is
	crashRuns      = 20
	crashTurns     = 4 // model turns with two tally calls each, then the answer
)

// TestServeCrashChild is the server the crash test kills.
func TestServeCrashChild(t *testing.T) {
	db := os.Getenv(crashEnvDB)
	if db == "" {
		return
	}
	life := os.Getenv(crashEnvLife)
	quiver.MustRegister(quiver.Func("tally", "Counts a call.", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		// A little work, so that kills land inside calls as well as between them.
		time.Sleep(time.Duration(10+rand.IntN(40)) * time.Millisecond)
		sc := quiver.ScopeFrom(ctx)
		crashtest.Report(fmt.Sprintf("ran %s %s %s", sc.ThreadID, quiver.CallFrom(ctx).ID, life))
		return "tallied by life " + life, nil
	}))
	args := []string{"serve", "--agents", os.Getenv(crashEnvAgents), "--addr", "127.0.0.1:0", "--db", db}
	if strings.HasPrefix(db, "postgres://") {
		args[len(args)-2] = "--postgres"
	}
	code := run(context.Background(), args,
		strings.NewReader(""), os.Stdout, os.Stderr)
	crashtest.Fail("quiver serve exited with %d", code)
}

// SIGKILL the server at random moments during 20 runs started over the API, restart it, and
// check that every run finishes with each tool call executed once, or again only when the kill
// came before its result was persisted.
func TestServeCrashDuringRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test kills and restarts the server several times (about 20 s, a minute on PostgreSQL)")
	}
	for _, b := range serveBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			args := b.args(t) // --db FILE or --postgres DSN
			// On PostgreSQL a restarted node takes a dead node's runs once their leases have
			// been free a while (jobs: orphanGrace, 10 s): fewer kills keep the test short.
			kills := 5
			if b.name == "postgres" {
				kills = 2
			}
			testServeCrashDuringRuns(t, args[1], kills)
		})
	}
}

func testServeCrashDuringRuns(t *testing.T, db string, kills int) {
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	script := filepath.Join(dir, "turns.yaml")
	var turns strings.Builder
	turns.WriteString("turns:\n")
	for i := range crashTurns {
		fmt.Fprintf(&turns, "  - calls: [{name: tally, args: {n: %d}}, {name: tally, args: {n: %d}}]\n", 2*i, 2*i+1)
	}
	turns.WriteString("  - text: Done.\n")
	for name, text := range map[string]string{
		script:                                "" + turns.String(),
		filepath.Join(agents, "counter.yaml"): "name: counter\nmodel: scripted:" + script + "\ntools: [tally]\nstop: {max_steps: 20}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// ran["thread/call"] lists the lives that executed the call, in order.
	ran := map[string][]string{}
	var admin string
	var threads []string
	start := func(life int) (*crashtest.Child, string) {
		t.Helper()
		child := crashtest.Start(t, "TestServeCrashChild", crashEnvDB+"="+db, crashEnvAgents+"="+agents, fmt.Sprintf("%s=%d", crashEnvLife, life))
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if m := servingRE.FindStringSubmatch(child.Stderr()); m != nil {
				if admin == "" {
					admin = firstKeyRE.FindString(child.Stderr())
				}
				return child, strings.TrimSuffix(m[1], "/mcp") + "/v1"
			}
			if time.Now().After(deadline) {
				t.Fatalf("life %d did not start serving:\n%s", life, child.Stderr())
			}
		}
	}
	// collect reads what the child reported until it exits (killed or not).
	collect := func(child *crashtest.Child, lines []string) {
		t.Helper()
		for _, line := range lines {
			switch f := strings.Fields(line); {
			case len(f) == 4 && f[0] == "ran":
				ran[f[1]+"/"+f[2]] = append(ran[f[1]+"/"+f[2]], f[3])
			case strings.HasPrefix(line, "error "):
				t.Fatalf("%s\n%s", line, child.Stderr())
			}
		}
	}
	finished := func(base string) int {
		n := 0
		for _, id := range threads {
			_, _, th := apiDo(t, "GET", base+"/threads/"+id, admin, "")
			b, _ := json.Marshal(th["state"])
			if th["status"] == "idle" && strings.Contains(string(b), `"status":"finished"`) {
				n++
			}
		}
		return n
	}

	for life := 0; ; life++ {
		child, base := start(life)
		if life == 0 {
			if admin == "" {
				t.Fatalf("no admin key on the first start:\n%s", child.Stderr())
			}
			for range crashRuns {
				status, _, th := apiDo(t, "POST", base+"/threads", admin, `{"agent":"counter"}`)
				id, _ := th["id"].(string)
				if status != 201 {
					t.Fatalf("a thread: %d %v", status, th)
				}
				threads = append(threads, id)
				if status, _, out := apiDo(t, "POST", base+"/threads/"+id+"/runs", admin, `{"agent":"counter","message":"count"}`); status != 202 {
					t.Fatalf("a run: %d %v", status, out)
				}
			}
		}
		if life < kills {
			time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
			child.Kill()
			rest, killed := child.Finish()
			if !killed {
				t.Fatalf("life %d was not killed:\n%s", life, child.Stderr())
			}
			before := executions(ran)
			collect(child, rest)
			t.Logf("life %d: killed after %d executions", life, executions(ran)-before)
			continue
		}
		// The last life runs every run to its end.
		deadline := time.Now().Add(90 * time.Second)
		for finished(base) < crashRuns {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d runs finished after %d kills\n%s", finished(base), crashRuns, kills, child.Stderr())
			}
			time.Sleep(50 * time.Millisecond)
		}
		histories := map[string][]any{}
		for _, id := range threads {
			_, _, page := apiDo(t, "GET", base+"/threads/"+id+"/messages?limit=1000", admin, "")
			histories[id], _ = page["messages"].([]any)
		}
		// Every execution is reported before the call's result is stored, so all are in.
		child.Kill()
		rest, _ := child.Finish()
		collect(child, rest)
		verifyCrashRuns(t, histories, ran)
		return
	}
}

// verifyCrashRuns checks the threads' histories against the executions reported: every call
// has one result, recorded from its last execution, and no life executed a call twice.
func verifyCrashRuns(t *testing.T, histories map[string][]any, ran map[string][]string) {
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
			lives := ran[id+"/"+callID]
			if len(lives) == 0 {
				t.Errorf("thread %s: call %s has a result but no execution was reported", id, callID)
				continue
			}
			seen := map[string]bool{}
			for _, l := range lives {
				if seen[l] {
					t.Errorf("thread %s: call %s was executed twice by life %s: %v", id, callID, l, lives)
				}
				seen[l] = true
			}
			// The result stored is the last execution's: no execution came after the result
			// was persisted.
			if want := "tallied by life " + lives[len(lives)-1]; content != want {
				t.Errorf("thread %s: call %s executed by lives %v, but the stored result is %q, want %q", id, callID, lives, content, want)
			}
			if len(lives) > 1 {
				again++
			}
		}
	}
	t.Logf("%d runs, %d calls; %d executed again because a kill came before their result was stored", len(histories), len(ran), again)
}

func executions(ran map[string][]string) int {
	n := 0
	for _, lives := range ran {
		n += len(lives)
	}
	return n
}
