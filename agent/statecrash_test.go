//go:build unix

package agent_test

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
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/crashtest"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

// The state crash test is the resume test (crash_test.go) with every call writing its output
// into the thread's state: the agent process (TestStateCrashChild) is killed with SIGKILL at
// random moments, also between a result's execution and its storing, and the next process
// resumes. A call's result and its state write are one transaction, so after all the kills
// each call has its result and its write, or neither (and then runs again); the write holds
// exactly the stored result's value, made by the same execution; and no call wrote twice,
// which a second write would show as a state_conflict result.
const (
	stateCrashEnvDB     = "QUIVER_STATE_CRASH_DB" // sqlite:PATH or postgres:SCHEMA
	stateCrashEnvThread = "QUIVER_STATE_CRASH_THREAD"
	stateCrashEnvLife   = "QUIVER_STATE_CRASH_LIFE"
	stateCrashWorkspace = "wsp_state_crash"
	stateCrashSteps     = 40
)

// stateCrashScript: turn i makes two calls, each writing its output at a path of its own.
func stateCrashScript() *turnModel {
	m := &turnModel{}
	for i := range stateCrashSteps {
		var cs []model.ToolCall
		for _, side := range []string{"a", "b"} {
			id := fmt.Sprintf("s%02d_%s", i, side)
			cs = append(cs, call(id, "stamp", fmt.Sprintf(`{"n":%d,"_outputPath":"/calls/%s"}`, i, id)))
		}
		m.turns = append(m.turns, model.Response{ToolCalls: cs})
	}
	m.turns = append(m.turns, model.Response{Text: "stamped"})
	return m
}

func openStateCrashStore(spec string) (thread.Store, error) {
	kind, where, _ := strings.Cut(spec, ":")
	if kind == "sqlite" {
		return sqlite.Open(where)
	}
	return postgres.Open(context.Background(), os.Getenv(pgtest.EnvDSN), postgres.WithSchema(where))
}

// TestStateCrashChild is the agent process the state crash test kills. Its stamp tool's output
// names the process (life) that executed it, so an output stored by one execution and a write
// made by another would differ.
func TestStateCrashChild(t *testing.T) {
	spec := os.Getenv(stateCrashEnvDB)
	if spec == "" {
		return
	}
	st, err := openStateCrashStore(spec)
	if err != nil {
		crashtest.Fail("open: %v", err)
	}
	life := os.Getenv(stateCrashEnvLife)
	reg := &quiver.Registry{}
	if err := reg.Register(quiver.Func("stamp", "Stamps a number.", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (map[string]any, error) {
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond) // room for a kill to land here
		return map[string]any{"n": in.N, "life": life, "call": quiver.CallFrom(ctx).ID}, nil
	}, quiver.WithMetaFields(schema.OutputPathField))); err != nil {
		crashtest.Fail("register: %v", err)
	}
	r := &agent.Runner{Store: st, Registry: reg, Model: stateCrashScript()}
	r.Subscribe(func(e agent.Event) {
		if e.Type == agent.EventToolResult {
			crashtest.Report("committed " + e.Call.ID)
		}
	})
	th, err := thread.Open(ctx, st, stateCrashWorkspace, os.Getenv(stateCrashEnvThread))
	if err != nil {
		crashtest.Fail("thread: %v", err)
	}
	a := &agent.Agent{Name: "stamper", Prompt: &agent.Prompt{Name: "stamper", Tools: []string{"stamp"}, Stop: agent.StopRules{MaxSteps: 100}}}
	out, err := r.Resume(ctx, th, a)
	if err != nil {
		crashtest.Fail("resume: %v", err)
	}
	fmt.Fprintf(os.Stdout, "finished %s %s\n", out.Reason, out.Text)
	os.Exit(0)
}

func TestStateWritesSurviveKills(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a process 15+ times; run without -short")
	}
	t.Run("sqlite", func(t *testing.T) {
		testStateCrash(t, "sqlite:"+filepath.Join(t.TempDir(), "q.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		testStateCrash(t, "postgres:"+pgtest.Schema(t, dsn))
	})
}

func testStateCrash(t *testing.T, spec string) {
	st, err := openStateCrashStore(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: stateCrashWorkspace})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.AppendUser(ctx, "stamp everything"); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b9))
	kills, finished := 0, false
	for life := 0; !finished && life < 60; life++ {
		c := crashtest.Start(t, "TestStateCrashChild", stateCrashEnvDB+"="+spec, stateCrashEnvThread+"="+th.ID(),
			stateCrashEnvLife+"="+fmt.Sprint(life))
		lines := playLife(c, kills < 15, rng, 5, 45, 6)
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "finished "):
				if l != "finished no_calls stamped" {
					t.Fatalf("life %d finished with %q", life, l)
				}
				finished = true
			case strings.HasPrefix(l, "error "):
				t.Fatalf("life %d: %s", life, l)
			}
		}
		if !finished {
			kills++
		}
	}
	if !finished {
		t.Fatalf("the run did not finish after %d kills", kills)
	}
	hist, err := th.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Calls map[string]json.RawMessage `json:"calls"`
	}
	raw, err := th.State(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("state %s: %v", raw, err)
	}
	results, lives := map[string]bool{}, map[string]bool{}
	for _, m := range hist {
		if m.Role != store.RoleTool {
			continue
		}
		if results[m.ToolCallID] {
			t.Errorf("call %s has two results", m.ToolCallID)
		}
		results[m.ToolCallID] = true
		if m.Result.Status != string(quiver.StatusSuccess) {
			t.Errorf("call %s: %s %s (a second write after a resume shows as state_conflict)", m.ToolCallID, m.Result.Code, m.Result.Error)
			continue
		}
		written, ok := doc.Calls[m.ToolCallID]
		if !ok {
			t.Errorf("call %s has its result but no state write", m.ToolCallID)
			continue
		}
		if string(written) != string(m.Result.Value) {
			t.Errorf("call %s: the state holds %s, its result %s: written by another execution", m.ToolCallID, written, m.Result.Value)
		}
		var v struct{ Life string }
		_ = json.Unmarshal(m.Result.Value, &v)
		lives[v.Life] = true
	}
	for id := range doc.Calls {
		if !results[id] {
			t.Errorf("the state holds a write of call %s, which has no result", id)
		}
	}
	if len(results) != 2*stateCrashSteps || len(doc.Calls) != 2*stateCrashSteps {
		t.Errorf("%d results and %d writes, want %d of each", len(results), len(doc.Calls), 2*stateCrashSteps)
	}
	t.Logf("%d kills; outputs stored by %d lives", kills, len(lives))
}
