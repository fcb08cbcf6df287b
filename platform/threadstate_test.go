package platform_test

import (
	"context"
	"maps"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// A thread's status is the platform's, the same in a thread's state and in every list: a run
// that paused on a call leaves its thread waiting, one that failed leaves it failed (not
// idle, as the stored status says), one that finished leaves it idle; a list filtered by
// status keeps those and no others, with a tag of the caller's too; a later run that
// finishes takes the failure off.
func TestThreadStatusIsThePlatforms(t *testing.T) {
	ctx := context.Background()
	agents := map[string]*agent.Agent{
		"pauser":   {Name: "pauser", Prompt: &agent.Prompt{Name: "pauser", Model: "scripted:pauser", Tools: []string{"open_file"}}},
		"answerer": {Name: "answerer", Prompt: &agent.Prompt{Name: "answerer", Model: "scripted:answerer"}},
		"broken":   {Name: "broken", Prompt: &agent.Prompt{Name: "broken", Model: "scripted:broken"}},
	}
	// The broken agent's model is missing for its first two runs, there for the third.
	var brokenRuns atomic.Int32
	p, st := runPlatform(t, filepath.Join(t.TempDir(), "q.db"), []*quiver.Tool{openFileTool(t)}, agents, func(spec string) (model.Model, bool) {
		switch spec {
		case "scripted:pauser":
			return scripted.Turns(scripted.Turn{Calls: []scripted.Call{{Name: "open_file", Args: map[string]any{"path": "/motd"}}}}), true
		case "scripted:answerer":
			return scripted.Turns(scripted.Turn{Text: "Done."}), true
		case "scripted:broken":
			return scripted.Turns(scripted.Turn{Text: "Fixed."}), brokenRuns.Add(1) > 2
		}
		return nil, false
	})
	member := platform.Actor{WorkspaceID: "wsp_local", Role: store.KeyRoleMember, KeyID: "key_m"}

	run := func(name string, tags []string, want agent.RunStatus) *store.Thread {
		t.Helper()
		th, err := p.OpenThread(ctx, member, platform.NewThread{Agent: name, Tags: tags})
		must(t, err)
		_, err = p.StartRun(ctx, member, th.ID, name, "Go.")
		must(t, err)
		waitOutcome(t, st, th.ID, want)
		th, err = st.Thread(ctx, "wsp_local", th.ID)
		must(t, err)
		return th
	}
	waiting := run("pauser", []string{"team:a"}, agent.RunPaused)
	failed := run("broken", []string{"team:a"}, agent.RunFailed)
	failedElsewhere := run("broken", []string{"team:b"}, agent.RunFailed)
	finished := run("answerer", []string{"team:a"}, agent.RunFinished)

	for _, c := range []struct {
		th   *store.Thread
		want platform.Status
	}{{waiting, platform.StatusWaiting}, {failed, platform.StatusFailed}, {finished, platform.StatusIdle}} {
		state := p.ThreadState(ctx, "wsp_local", c.th)
		if state.Status != c.want || state.Run == nil {
			t.Errorf("thread %s: state %+v, want %s with its run", c.th.ID, state, c.want)
		}
		if (state.Pending != nil) != (c.want == platform.StatusWaiting) {
			t.Errorf("thread %s (%s): pending %+v", c.th.ID, c.want, state.Pending)
		}
	}

	list := func(f store.ThreadFilter, status platform.Status) map[string]platform.Status {
		t.Helper()
		page, err := p.Threads(ctx, member, f, status)
		must(t, err)
		got := map[string]platform.Status{}
		for _, item := range page.Threads {
			got[item.ID] = item.Status
			if item.Run == nil {
				t.Errorf("listed thread %s without its run", item.ID)
			}
		}
		return got
	}
	for _, c := range []struct {
		name   string
		filter store.ThreadFilter
		status platform.Status
		want   map[string]platform.Status
	}{
		{"every thread", store.ThreadFilter{}, "", map[string]platform.Status{waiting.ID: platform.StatusWaiting, failed.ID: platform.StatusFailed,
			failedElsewhere.ID: platform.StatusFailed, finished.ID: platform.StatusIdle}},
		{"waiting", store.ThreadFilter{}, platform.StatusWaiting, map[string]platform.Status{waiting.ID: platform.StatusWaiting}},
		{"failed", store.ThreadFilter{}, platform.StatusFailed, map[string]platform.Status{failed.ID: platform.StatusFailed, failedElsewhere.ID: platform.StatusFailed}},
		{"failed, of team a", store.ThreadFilter{Tag: "team:a"}, platform.StatusFailed, map[string]platform.Status{failed.ID: platform.StatusFailed}},
		{"running", store.ThreadFilter{}, platform.StatusRunning, map[string]platform.Status{}},
	} {
		if got := list(c.filter, c.status); !maps.Equal(got, c.want) {
			t.Errorf("%s: listed %v, want %v", c.name, got, c.want)
		}
	}
	_, err := p.Threads(ctx, member, store.ThreadFilter{}, "stuck")
	refusal(t, "an unknown status", err, platform.Invalid, "status")

	// A later run that finishes takes the failure off: the thread is idle, listed as such.
	_, err = p.StartRun(ctx, member, failed.ID, "broken", "Again.")
	must(t, err)
	waitOutcome(t, st, failed.ID, agent.RunFinished)
	if got := list(store.ThreadFilter{}, platform.StatusFailed); !maps.Equal(got, map[string]platform.Status{failedElsewhere.ID: platform.StatusFailed}) {
		t.Errorf("failed threads after a run succeeded one: %v", got)
	}
	if got := list(store.ThreadFilter{Tag: "team:a"}, ""); got[failed.ID] != platform.StatusIdle {
		t.Errorf("the thread whose run succeeded its failure lists as %q, want idle", got[failed.ID])
	}
}
