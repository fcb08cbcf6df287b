//go:build unix

package agent_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/crashtest"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

// The two-sided crash test runs this test binary again as the agent process
// (TestTwoSidedResumeChild) and kills it with SIGKILL at random moments, often right between
// two turns; the next process resumes the conversation from the store.
const (
	sidesEnvDB     = "QUIVER_AGENT_SIDES_DB"
	sidesEnvThread = "QUIVER_AGENT_SIDES_THREAD"
	sidesEnvLog    = "QUIVER_AGENT_SIDES_LOG"
	sidesTurns     = 30 // turns of each side: more lines than 20 kills can take
)

// sidesScript is side's script, the same in every process: in its turn k it calls work, then
// answers.
func sidesScript(side string) *turnModel {
	m := &turnModel{}
	for k := range sidesTurns {
		m.turns = append(m.turns,
			model.Response{ToolCalls: calls(call(fmt.Sprintf("%s%02d", side, k), "work", "{}"))},
			model.Response{Text: fmt.Sprintf("%s says %d", side, k)})
	}
	return m
}

func sidesAgent() *agent.Agent {
	return &agent.Agent{Name: "pair", Type: agent.DualAI, Conversation: agent.Conversation{MaxTurns: 2 * sidesTurns},
		Prompt: &agent.Prompt{Name: "a", Model: "t:a", Tools: []string{"work"}},
		SideB:  &agent.Prompt{Name: "b", Model: "t:b", Tools: []string{"work"}}}
}

// TestTwoSidedResumeChild is the agent process the test kills. Each execution of work
// appends "<call id> <side>" to the log before it returns; the process prints "committed
// <call id>" after each result is persisted, "turn <side>" after each answer, and "finished"
// at the end.
func TestTwoSidedResumeChild(t *testing.T) {
	path := os.Getenv(sidesEnvDB)
	if path == "" {
		return
	}
	fail := crashtest.Fail
	st, err := sqlite.Open(path)
	if err != nil {
		fail("open: %v", err)
	}
	logFile, err := os.OpenFile(os.Getenv(sidesEnvLog), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		fail("log: %v", err)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(quiver.Func("work", "Does a unit of work.", func(ctx context.Context, _ struct{}) (string, error) {
		e, _ := quiver.ExecutionFrom(ctx)
		if _, err := fmt.Fprintf(logFile, "%s %s\n", quiver.CallFrom(ctx).ID, e.Side); err != nil {
			return "", err
		}
		return "done", nil
	})); err != nil {
		fail("register: %v", err)
	}
	scripts := map[string]*turnModel{"t:a": sidesScript("a"), "t:b": sidesScript("b")}
	r := &agent.Runner{Store: st, Registry: reg, OpenModel: func(spec string) (model.Model, error) { return named{scripts[spec], spec}, nil }}
	r.Subscribe(func(e agent.Event) {
		switch {
		case e.Type == agent.EventToolResult:
			crashtest.Report("committed " + e.Call.ID)
		case e.Type == agent.EventModelTurn && len(e.Calls) == 0:
			crashtest.Report("turn " + e.Side)
		}
	})
	th, err := thread.Open(ctx, st, resumeWorkspace, os.Getenv(sidesEnvThread))
	if err != nil {
		fail("thread: %v", err)
	}
	out, err := r.Resume(ctx, th, sidesAgent())
	if err != nil {
		fail("resume: %v", err)
	}
	fmt.Fprintf(os.Stdout, "finished %s %s %s\n", out.Reason, out.Side, out.Text)
	os.Exit(0)
}

// TestTwoSidedResumeAfterKills kills the process of a two-sided conversation 20 times at
// random moments, many right after a turn ended. At the end the sides took their turns in
// order (a kill between two turns resumed with the right side), every call ran for its own
// side and has one result, no turn was stored twice, and no call whose result was persisted
// ran again.
func TestTwoSidedResumeAfterKills(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a process 20+ times; run without -short")
	}
	dbPath, logPath, threadID := resumeThread(t, "talk it over")
	killUntilDone(t, 0x2545f491, logPath, fmt.Sprintf("finished max_turns side_a a says %d", sidesTurns-1), func() *crashtest.Child {
		return crashtest.Start(t, "TestTwoSidedResumeChild", sidesEnvDB+"="+dbPath, sidesEnvThread+"="+threadID, sidesEnvLog+"="+logPath)
	})
	// Every execution ran for its call's own side.
	raw, _ := os.ReadFile(logPath)
	for _, line := range strings.Fields(strings.ReplaceAll(string(raw), " side_", "/side_")) {
		id, side, _ := strings.Cut(line, "/")
		if want := "side_" + id[:1]; side != want {
			t.Fatalf("call %s ran for %q, want %s", id, side, want)
		}
	}

	st, err := sqlite.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	th, err := thread.Open(ctx, st, resumeWorkspace, threadID)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := th.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sides []string
	results := map[string]int{}
	for _, m := range hist {
		switch m.Role {
		case store.RoleAssistant:
			sides = append(sides, m.Side)
		case store.RoleTool:
			results[m.ToolCallID]++
		}
	}
	var want []string
	for range sidesTurns {
		want = append(want, "side_a", "side_a", "side_b", "side_b") // a call and an answer each
	}
	if !slices.Equal(sides, want) {
		t.Fatalf("turns by %v, want %v", sides, want)
	}
	if len(results) != 2*sidesTurns {
		t.Fatalf("%d calls have results, want %d", len(results), 2*sidesTurns)
	}
	for id, n := range results {
		if n != 1 {
			t.Fatalf("call %s has %d results", id, n)
		}
	}
}
