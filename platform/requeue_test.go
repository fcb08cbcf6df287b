package platform_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// An answer is recorded, then its run queued: a node that dies between the two leaves the
// thread paused with its answer stored. The same answer sent again a second later queues the
// run, which goes on to its end; sent again at once, it is refused as a second answer is, and
// a different answer is refused. Both for a client tool's result and for
// a person's decision.
func TestTheSameAnswerAgainResumesARunLeftPaused(t *testing.T) {
	ctx := context.Background()
	tools := []*quiver.Tool{openFileTool(t), quiver.Func("wipe", "Wipes the disk.", func(context.Context, struct{}) (string, error) { return "wiped", nil },
		quiver.WithConfirmation())}
	models := map[string]model.Model{
		"scripted:client": scripted.Turns(scripted.Turn{Calls: []scripted.Call{{Name: "open_file", Args: map[string]any{"path": "/motd"}}}},
			scripted.Turn{Text: "The file says hello."}),
		"scripted:confirm": scripted.Turns(scripted.Turn{Calls: []scripted.Call{{Name: "wipe", Args: map[string]any{}}}},
			scripted.Turn{Text: "Wiped."}),
	}
	agents := map[string]*agent.Agent{
		"client":  {Name: "client", Prompt: &agent.Prompt{Name: "client", Model: "scripted:client", Tools: []string{"open_file"}}},
		"confirm": {Name: "confirm", Prompt: &agent.Prompt{Name: "confirm", Model: "scripted:confirm", Tools: []string{"wipe"}}},
	}
	path := filepath.Join(t.TempDir(), "q.db")
	p, st := runPlatform(t, path, tools, agents, func(spec string) (model.Model, bool) { m, ok := models[spec]; return m, ok })
	member := platform.Actor{WorkspaceID: "wsp_local", Role: store.KeyRoleMember, KeyID: "key_m"}

	paused := func(name string) (*thread.Thread, *agent.Outcome) {
		th, err := p.OpenThread(ctx, member, platform.NewThread{Agent: name})
		must(t, err)
		_, err = p.StartRun(ctx, member, th.ID, name, "Go.")
		must(t, err)
		out := waitOutcome(t, st, th.ID, agent.RunPaused)
		opened, err := thread.Open(ctx, st, "wsp_local", th.ID)
		must(t, err)
		return opened, out
	}

	th, out := paused("client")
	hello := quiver.Result{Status: quiver.StatusSuccess, Text: "hello"}
	// The first attempt: recorded, and then the node died before queueing the run.
	must(t, p.Runner().SubmitResult(ctx, th, agents["client"], out.Pending.Call.ID, &hello))
	_, err := p.SubmitResult(ctx, member, th.ID(), platform.NewResult{CallID: out.Pending.Call.ID, Result: hello})
	refusal(t, "the same result at once", err, platform.NotPending, "call_id")
	time.Sleep(time.Second + 100*time.Millisecond) // past answerSettle: the first answer's own queueing would have happened
	_, err = p.SubmitResult(ctx, member, th.ID(), platform.NewResult{CallID: out.Pending.Call.ID, Result: quiver.Result{Status: quiver.StatusSuccess, Text: "bye"}})
	refusal(t, "another result for the answered call", err, platform.NotPending, "call_id")
	if _, err := p.SubmitResult(ctx, member, th.ID(), platform.NewResult{CallID: out.Pending.Call.ID, Result: hello}); err != nil {
		t.Fatalf("the same result again: %v", err)
	}
	if done := waitOutcome(t, st, th.ID(), agent.RunFinished); done.Text != "The file says hello." {
		t.Errorf("the client tool's run ended with %q", done.Text)
	}

	th, out = paused("confirm")
	approve := quiver.Decision{Action: quiver.Approve}
	must(t, p.Runner().Decide(ctx, th, agents["confirm"], out.Pending.Call.ID, approve))
	_, err = p.Decide(ctx, member, th.ID(), platform.NewDecision{CallID: out.Pending.Call.ID, Action: quiver.Approve})
	refusal(t, "the same decision at once", err, platform.NotPending, "call_id")
	time.Sleep(time.Second + 100*time.Millisecond)
	_, err = p.Decide(ctx, member, th.ID(), platform.NewDecision{CallID: out.Pending.Call.ID, Action: quiver.Deny})
	refusal(t, "another decision on the decided call", err, platform.NotPending, "call_id")
	if _, err := p.Decide(ctx, member, th.ID(), platform.NewDecision{CallID: out.Pending.Call.ID, Action: quiver.Approve}); err != nil {
		t.Fatalf("the same decision again: %v", err)
	}
	if done := waitOutcome(t, st, th.ID(), agent.RunFinished); done.Text != "Wiped." {
		t.Errorf("the confirmed run ended with %q", done.Text)
	}

	// Every answer through the platform queues its watch first (jobs.Watch), which resumes a
	// run left paused without the client: one for each of the answers sent here.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	must(t, err)
	t.Cleanup(func() { db.Close() })
	var watches int
	must(t, db.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE kind = 'quiver.wake'
		AND json_extract(args, '$.answered') AND json_extract(args, '$.thread_id') = ?`, th.ID()).Scan(&watches))
	if watches != 3 {
		t.Errorf("%d watches of the thread after three decisions, want 3", watches)
	}
}
