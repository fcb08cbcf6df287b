package platform_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/limits"
	"github.com/quiverhq/quiver/store"
)

// TestBudgetAttacks: the ways a caller might dodge a budget of model tokens, on SQLite and
// PostgreSQL. A user's budget holds across the user's keys and tokens; a sub-agent's requests
// count as its caller's; 50 runs asking at once pass it by at most the requests under way; a
// run whose caller does not decode, or that no door started, counts as the workspace's
// operator's and keeps the workspace's budget; one workspace's spend never limits another.
func TestBudgetAttacks(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, bs backendtest.Store) {
		ctx := context.Background()
		st := bs.(store.Backend)
		for _, ws := range []string{"wsp_a", "wsp_b"} {
			must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: ws, Name: ws}))
		}
		p, err := platform.New(platform.Config{Store: st})
		must(t, err)
		t.Cleanup(func() { p.Close() })
		admin := platform.Actor{WorkspaceID: "wsp_a", Role: store.KeyRoleAdmin, KeyID: "key_admin", UserID: "usr_admin"}
		_, err = p.SetLimits(ctx, admin, limits.Document{Limits: []limits.Limit{
			{Name: "per-user", Per: []string{limits.PerUser}, Tokens: limits.Tokens{InputPerDay: 100}},
			{Name: "workspace", Tokens: limits.Tokens{OutputPerDay: 1000}},
		}}, 0)
		must(t, err)
		rules := p.Runner().Rules
		// request is one model request of a run by caller (as the platform stores one), as the
		// agents: whether it went, its 40 input and 10 output tokens charged when it did.
		request := func(ws string, caller json.RawMessage, agents ...string) bool {
			charge, exhausted := rules(ctx, ws, caller, agents).Spend(ctx, "openai:gpt-4o")
			if exhausted != nil {
				return false
			}
			if charge != nil {
				charge(ctx, &model.Usage{InputTokens: 40, OutputTokens: 10})
			}
			return true
		}
		as := func(key, user string) json.RawMessage {
			b, _ := json.Marshal(map[string]any{"key": key, "user": user, "role": "member"})
			return b
		}

		// One user through three keys, a token and a sub-agent: 100 input tokens a day in all,
		// so the third request is refused (40 + 40 < 100 had room; 120 has none).
		mallory := []json.RawMessage{as("key_m1", "usr_m"), as("key_m2", "usr_m"), as("", "usr_m"), as("key_m3", "usr_m")}
		went := 0
		for i := range 8 {
			agents := []string{"lead"}
			if i%2 == 1 {
				agents = append(agents, "helper") // a sub-agent counts as its caller's
			}
			if request("wsp_a", mallory[i%len(mallory)], agents...) {
				went++
			}
		}
		if went != 3 {
			t.Errorf("one user through four credentials and a sub-agent: %d requests went, want 3", went)
		}

		// 50 runs of one user asking at once: each asks while the window has room, so at most
		// the ones under way pass it, and then none.
		var wg sync.WaitGroup
		var ok atomic.Int64
		for range 50 {
			wg.Go(func() {
				if request("wsp_a", as("key_burst", "usr_burst"), "lead") {
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		if n := ok.Load(); n < 3 || n > 50 {
			t.Errorf("50 at once: %d went", n)
		}
		if request("wsp_a", as("key_burst", "usr_burst"), "lead") {
			t.Error("a request went after the burst spent the budget")
		}

		// A caller that does not decode, and a run no door started, are the operator's, one
		// caller whatever they claim: the per-user budget's 3 requests for them together.
		spent := 0
		for range 200 {
			if !request("wsp_a", json.RawMessage(`{"user": 42}`), "lead") && !request("wsp_a", nil, "lead") {
				break
			}
			spent++
		}
		if spent != 3 {
			t.Errorf("runs of no known caller made %d requests, want 3", spent)
		}
		// The workspace's 1000 output tokens bound everyone together: new users, 10 tokens a
		// request, find what the requests above (10 each) left.
		users := 0
		for i := range 200 {
			if !request("wsp_a", as("key_u", "usr_"+strconv.Itoa(i)), "lead") {
				break
			}
			users++
		}
		if want := 100 - 3 - int(ok.Load()) - spent; users != want {
			t.Errorf("other users made %d requests, want the workspace's %d left", users, want)
		}

		// Workspace B has no budget, and A's spend is not B's.
		for range 10 {
			if !request("wsp_b", as("key_m1", "usr_m"), "lead") {
				t.Fatal("workspace B's request was refused for A's budget")
			}
		}
	})
}
