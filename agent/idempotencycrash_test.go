//go:build unix

package agent_test

import (
	"bytes"
	"context"
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
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/thread"
)

// The idempotency crash test: a tool with an external effect (a line appended to a file)
// deduplicates on its call's idempotency key (quiver.Execution's CallID and Attempt), and the
// agent process (TestIdempotencyCrashChild) is killed with SIGKILL again and again, often
// right after the effect and before the call's result is stored, so that the resumed run
// executes the call again. At the end every effect happened exactly once.
//
// The tool keeps its ledger in the effect itself: the line it appends names the call, in one
// write, so the key is recorded exactly when the effect happens (a ledger written apart from
// the effect would leave a window between the two). From attempt 2 on it looks for the call's
// line before appending; at attempt 1 it need not, and the test checks that promise: an attempt
// 1 that finds its call's line already there fails the test.
const (
	idemEnvDB     = "QUIVER_IDEM_CRASH_DB" // sqlite:PATH or postgres:SCHEMA (see openStateCrashStore)
	idemEnvThread = "QUIVER_IDEM_CRASH_THREAD"
	idemEnvDir    = "QUIVER_IDEM_CRASH_DIR" // holds effects.txt, the external effects and their keys
	idemWorkspace = "wsp_idem_crash"
	idemSteps     = 20 // turns of two calls each, then a final answer
)

func idemScript() *turnModel {
	m := &turnModel{}
	for i := range idemSteps {
		m.turns = append(m.turns, model.Response{ToolCalls: calls(
			call(fmt.Sprintf("d%02d_a", i), "deliver", fmt.Sprintf(`{"n":%d}`, 2*i)),
			call(fmt.Sprintf("d%02d_b", i), "deliver", fmt.Sprintf(`{"n":%d}`, 2*i+1)),
		)})
	}
	m.turns = append(m.turns, model.Response{Text: "all delivered"})
	return m
}

// TestIdempotencyCrashChild is the agent process the idempotency crash test kills. It reports
// "effect ID ATTEMPT" once its tool's effect is in the file (then the tool waits a moment, for a
// kill to land before the result is stored), "dedup ID ATTEMPT" when an attempt finds the
// effect done, and "finished ..." at the end.
func TestIdempotencyCrashChild(t *testing.T) {
	spec := os.Getenv(idemEnvDB)
	if spec == "" {
		return
	}
	fail := crashtest.Fail
	st, err := openStateCrashStore(spec)
	if err != nil {
		fail("open: %v", err)
	}
	effects := filepath.Join(os.Getenv(idemEnvDir), "effects.txt")
	reg := &quiver.Registry{}
	if err := reg.Register(quiver.Func("deliver", "Delivers a parcel: an effect outside Quiver.", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		e, _ := quiver.ExecutionFrom(ctx)
		if e.CallID == "" || e.Attempt < 1 {
			fail("the tool got no idempotency key: %+v", e)
		}
		line := e.CallID + " " + fmt.Sprint(in.N) + "\n"
		done, err := os.ReadFile(effects)
		if err != nil && !os.IsNotExist(err) {
			return "", err
		}
		already := bytes.Contains(done, []byte("\n"+line)) || bytes.HasPrefix(done, []byte(line))
		switch {
		case already && e.Attempt == 1:
			fail("attempt 1 of call %s found its effect already done", e.CallID)
		case already:
			crashtest.Report(fmt.Sprintf("dedup %s %d", e.CallID, e.Attempt))
			return "delivered before", nil
		}
		f, err := os.OpenFile(effects, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			return "", err
		}
		_, err = f.WriteString(line) // the effect and its key, in one write
		f.Close()
		if err != nil {
			return "", err
		}
		crashtest.Report(fmt.Sprintf("effect %s %d", e.CallID, e.Attempt))
		time.Sleep(40 * time.Millisecond) // room for the kill the parent sends on that line
		return "delivered", nil
	})); err != nil {
		fail("register: %v", err)
	}
	r := &agent.Runner{Store: st, Registry: reg, Model: idemScript()}
	th, err := thread.Open(ctx, st, idemWorkspace, os.Getenv(idemEnvThread))
	if err != nil {
		fail("thread: %v", err)
	}
	a := &agent.Agent{Name: "courier", Prompt: &agent.Prompt{Name: "courier", Tools: []string{"deliver"}, Stop: agent.StopRules{MaxSteps: 100}}}
	out, err := r.Resume(ctx, th, a)
	if err != nil {
		fail("resume: %v", err)
	}
	fmt.Fprintf(os.Stdout, "finished %s %s\n", out.Reason, out.Text)
	os.Exit(0)
}

func TestIdempotencyKeysMakeEffectsExactlyOnceUnderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a process 15+ times; run without -short")
	}
	t.Run("sqlite", func(t *testing.T) {
		testIdempotencyCrash(t, "sqlite:"+filepath.Join(t.TempDir(), "q.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		testIdempotencyCrash(t, "postgres:"+pgtest.Schema(t, dsn))
	})
}

func testIdempotencyCrash(t *testing.T, spec string) {
	st, err := openStateCrashStore(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: idemWorkspace})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.AppendUser(ctx, "deliver everything"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f491))
	const wantKills = 15
	kills, dedups, finished := 0, 0, false
	for life := 0; !finished && life < 80; life++ {
		c := crashtest.Start(t, "TestIdempotencyCrashChild", idemEnvDB+"="+spec, idemEnvThread+"="+th.ID(), idemEnvDir+"="+dir)
		// Every other kill comes right after an effect (the 1st to 3rd of the life), while
		// the tool has not returned: its call is left without a result, and runs again. The
		// others come at a random moment: starting, reading, writing, stepping.
		kill, afterEffects := kills < wantKills, 0
		var timer *time.Timer
		if kill && kills%2 == 0 {
			afterEffects = 1 + rng.IntN(3)
		} else if kill {
			timer = time.AfterFunc(time.Duration(5+rng.IntN(80))*time.Millisecond, c.Kill)
		}
		effectsSeen := 0
		for {
			l, ok := c.Line(60 * time.Second)
			if !ok {
				break
			}
			switch {
			case strings.HasPrefix(l, "effect "):
				if effectsSeen++; afterEffects > 0 && effectsSeen == afterEffects {
					c.Kill()
				}
			case strings.HasPrefix(l, "dedup "):
				dedups++
			case strings.HasPrefix(l, "finished "):
				if l != "finished no_calls all delivered" {
					t.Fatalf("life %d finished with %q", life, l)
				}
				finished = true
			case strings.HasPrefix(l, "error "):
				t.Fatalf("life %d: %s", life, l)
			}
		}
		c.Finish()
		if timer != nil {
			timer.Stop()
		}
		if !finished {
			kills++
		}
	}
	if !finished {
		t.Fatalf("the run did not finish after %d kills", kills)
	}

	// Every call has one result, and its effect happened once: no line twice, none missing.
	_, results := resultsByCall(t, th)
	raw, err := os.ReadFile(filepath.Join(dir, "effects.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	times := map[string]int{}
	for _, l := range lines {
		times[l]++
	}
	for i := range 2 * idemSteps {
		id := fmt.Sprintf("d%02d_%c", i/2, "ab"[i%2])
		if n := times[fmt.Sprintf("%s %d", id, i)]; n != 1 {
			t.Errorf("the effect of call %s happened %d times, want exactly once", id, n)
		}
		if got := results[id]; len(got) != 1 || got[0].Result == nil || got[0].Result.Status != string(quiver.StatusSuccess) {
			t.Errorf("call %s has results %+v, want one success", id, got)
		}
	}
	if len(lines) != 2*idemSteps {
		t.Errorf("%d effects, want %d:\n%s", len(lines), 2*idemSteps, raw)
	}
	info, err := th.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a := agent.ReadState(&info).Attempts; len(a) != 0 || info.Status != store.StatusIdle {
		t.Errorf("the finished thread is %s and keeps attempt counts %v", info.Status, a)
	}
	// The test proves something only if calls ran again after their effect: the kills right
	// after an effect make that all but certain.
	if dedups == 0 {
		t.Fatalf("no call ran again after its effect in %d kills: the test proved nothing", kills)
	}
	t.Logf("%d kills; %d executions found their effect done and skipped it", kills, dedups)
}
