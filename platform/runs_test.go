package platform_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

// waitOutcome waits for the thread's last run to end as want (a paused or finished run).
func waitOutcome(t *testing.T, st *sqlite.Store, threadID string, want agent.RunStatus) *agent.Outcome {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		th, err := st.Thread(context.Background(), "wsp_local", threadID)
		must(t, err)
		if out := agent.ReadState(th).Outcome; th.Status == store.StatusIdle && out != nil && out.Status == want {
			return out
		}
	}
	t.Fatalf("thread %s: no run ended %s within a minute", threadID, want)
	return nil
}

// A thread and the runs of an agent on it, through the platform alone: the rules of a new
// thread, a run that pauses on a client tool's call, a result for the wrong call refused as
// not pending, the right one resuming the run to its end.
func TestRunsThroughThePlatform(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	st, err := sqlite.Open(path)
	must(t, err)
	t.Cleanup(func() { st.Close() })
	shared := &quiver.Registry{}
	must(t, shared.Register(openFileTool(t)))
	helper := &agent.Agent{Name: "helper", Prompt: &agent.Prompt{Name: "helper", Model: "scripted:helper", Tools: []string{"open_file"}}}
	m := scripted.Turns(scripted.Turn{Calls: []scripted.Call{{Name: "open_file", Args: map[string]any{"path": "/motd"}}}},
		scripted.Turn{Text: "The file says hello."})
	p, err := platform.New(platform.Config{Store: st, Registry: shared, Logger: slog.New(slog.DiscardHandler),
		Catalog: &agent.Catalog{Agents: map[string]*agent.Agent{"helper": helper}},
		OpenModel: func(spec string) (model.Model, error) {
			if spec != "scripted:helper" {
				return nil, fmt.Errorf("no model %s", spec)
			}
			return m, nil
		}})
	must(t, err)
	member := platform.Actor{WorkspaceID: "wsp_local", Role: store.KeyRoleMember, KeyID: "key_m"}
	viewer := platform.Actor{WorkspaceID: "wsp_local", Role: store.KeyRoleViewer, KeyID: "key_v"}

	_, err = p.StartRun(ctx, member, "thr_x", "helper", "hi")
	refusal(t, "a run without background runs", err, platform.Unavailable, "")
	must(t, p.StartJobs(ctx, func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) { return jobs.StartSQLite(ctx, path, c) }))
	t.Cleanup(func() { _ = p.Stop(context.Background()) })

	for _, c := range []struct {
		name  string
		actor platform.Actor
		in    platform.NewThread
		kind  platform.Kind
		field string
	}{
		{"a viewer", viewer, platform.NewThread{Agent: "helper"}, platform.Forbidden, ""},
		{"a tag the runtime sets", member, platform.NewThread{Tags: []string{"ok", "call:42"}}, platform.Invalid, "tags[1]"},
		{"an instance twice", member, platform.NewThread{Instances: []string{"a", "a"}}, platform.Invalid, "instances[1]"},
		{"an unknown agent", member, platform.NewThread{Agent: "nobody"}, platform.Invalid, "agent"},
	} {
		_, err := p.OpenThread(ctx, c.actor, c.in)
		refusal(t, c.name, err, c.kind, c.field)
	}
	th, err := p.OpenThread(ctx, member, platform.NewThread{Agent: "helper", Instances: []string{"draft"}})
	must(t, err)
	_, err = p.StartRun(ctx, member, th.ID, "helper", "")
	refusal(t, "a run without a message on an empty thread", err, platform.Invalid, "message")
	_, err = p.StartRun(ctx, viewer, th.ID, "helper", "hi")
	refusal(t, "a viewer's run", err, platform.Forbidden, "")

	if _, err := p.StartRun(ctx, member, th.ID, "helper", "What does /motd say?"); err != nil {
		t.Fatal(err)
	}
	out := waitOutcome(t, st, th.ID, agent.RunPaused)
	if out.Pending == nil || out.Pending.Call.Name != "open_file" {
		t.Fatalf("the run paused on %+v, want open_file's call", out.Pending)
	}
	_, err = p.SubmitResult(ctx, member, th.ID, platform.NewResult{CallID: "call_nope", Result: quiver.Result{Status: quiver.StatusSuccess, Text: "hello"}})
	refusal(t, "a result for no pending call", err, platform.NotPending, "call_id")
	_, err = p.SubmitResult(ctx, member, th.ID, platform.NewResult{CallID: out.Pending.Call.ID, Result: quiver.Result{Status: quiver.StatusError}})
	refusal(t, "an error result that says nothing", err, platform.Invalid, "error")
	if _, err := p.SubmitResult(ctx, member, th.ID, platform.NewResult{CallID: out.Pending.Call.ID,
		Result: quiver.Result{Status: quiver.StatusSuccess, Text: "hello"}}); err != nil {
		t.Fatal(err)
	}
	if done := waitOutcome(t, st, th.ID, agent.RunFinished); done.Text != "The file says hello." {
		t.Errorf("the run ended with %q", done.Text)
	}
}
