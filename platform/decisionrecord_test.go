package platform_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

// A decision made through the platform names the actor who made it (issue 46): its user, and
// its key, or that it came with an access token; the call's result says so. Before, the
// thread's user was recorded as the decider, whoever decided.
func TestDecisionNamesTheActor(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	st, err := sqlite.Open(path)
	must(t, err)
	t.Cleanup(func() { st.Close() })
	reg := &quiver.Registry{}
	must(t, reg.Register(quiver.Func("wipe", "Wipes the disk.", func(context.Context, struct{}) (string, error) { return "wiped", nil },
		quiver.WithConfirmation())))
	wipe := func() model.Model {
		return scripted.Turns(scripted.Turn{Calls: []scripted.Call{{Name: "wipe", Args: map[string]any{}}}}, scripted.Turn{Text: "Wiped."})
	}
	agents := map[string]*agent.Agent{"wiper": {Name: "wiper", Prompt: &agent.Prompt{Name: "wiper", Model: "scripted:wipe", Tools: []string{"wipe"}}}}
	p, err := platform.New(platform.Config{Store: st, Registry: reg, Logger: slog.New(slog.DiscardHandler),
		Catalog: &agent.Catalog{Agents: agents},
		OpenModel: func(spec string) (model.Model, error) {
			if spec == "scripted:wipe" {
				return wipe(), nil
			}
			return nil, fmt.Errorf("no model %s", spec)
		}})
	must(t, err)
	must(t, p.StartJobs(ctx, func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) { return jobs.StartSQLite(ctx, path, c) }))
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	owner := platform.Actor{WorkspaceID: "wsp_local", UserID: "usr_owner", Role: store.KeyRoleMember, KeyID: "key_owner", Who: "API key key_owner"}

	tests := []struct {
		name    string
		decider platform.Actor
		key     string
		token   bool
	}{
		{"a key", platform.Actor{WorkspaceID: "wsp_local", UserID: "usr_ann", Role: store.KeyRoleMember, KeyID: "key_ann", Who: "API key key_ann"},
			"key_ann", false},
		{"an access token", platform.Actor{WorkspaceID: "wsp_local", UserID: "usr_bo", Role: store.KeyRoleMember, Who: "the access token of user usr_bo"},
			"", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th, err := p.OpenThread(ctx, owner, platform.NewThread{Agent: "wiper"})
			must(t, err)
			_, err = p.StartRun(ctx, owner, th.ID, "wiper", "Go.")
			must(t, err)
			out := waitOutcome(t, st, th.ID, agent.RunPaused)
			_, err = p.Decide(ctx, tt.decider, th.ID, platform.NewDecision{CallID: out.Pending.Call.ID, Action: quiver.Approve})
			must(t, err)
			waitOutcome(t, st, th.ID, agent.RunFinished)

			ds, err := st.Decisions(ctx, "wsp_local", th.ID)
			must(t, err)
			if len(ds) != 1 || ds[0].UserID != tt.decider.UserID || ds[0].KeyID != tt.key || ds[0].AccessToken != tt.token {
				t.Errorf("stored decisions %+v, want one by %s (key %q, token %v)", ds, tt.decider.UserID, tt.key, tt.token)
			}
			opened, err := thread.Open(ctx, st, "wsp_local", th.ID)
			must(t, err)
			hist, err := opened.History(ctx)
			must(t, err)
			var rec quiver.DecisionRecord
			for _, m := range hist {
				if m.Role == store.RoleTool && m.ToolCallID == out.Pending.Call.ID {
					r, err := thread.Result(m.Result)
					must(t, err)
					rec, _ = quiver.DecisionOf(r)
				}
			}
			if rec.Action != quiver.Approve || rec.UserID != tt.decider.UserID || rec.KeyID != tt.key || rec.AccessToken != tt.token ||
				len(ds) != 1 || !rec.DecidedAt.Equal(ds[0].DecidedAt) {
				t.Errorf("the result's decision %+v, want the approval by %s (key %q, token %v) as stored", rec, tt.decider.UserID, tt.key, tt.token)
			}
		})
	}
}
