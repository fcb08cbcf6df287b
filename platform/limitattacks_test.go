package platform_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/platform/limits"
	"github.com/quiverhq/quiver/store"
)

// TestLimitAttacks: the ways a caller might dodge a limit, on SQLite and PostgreSQL. A user's
// limit holds across the user's keys and tokens and any number of sessions; a name that is a
// case or Unicode variant of a limited tool's is no tool (refused, not run, not counted); 200
// calls at once let exactly the bound through; one workspace's calls never count in another's,
// nor its refusals show there; a member may neither read nor change the limits.
func TestLimitAttacks(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, bs backendtest.Store) {
		ctx := context.Background()
		st := bs.(store.Backend)
		for _, ws := range []string{"wsp_a", "wsp_b"} {
			must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: ws, Name: ws}))
		}
		var ran atomic.Int64
		shared := &quiver.Registry{}
		must(t, shared.Register(quiver.Func("refund_payment", "Refunds a payment.", func(context.Context, struct{}) (string, error) {
			ran.Add(1)
			return "refunded", nil
		})))
		p, err := platform.New(platform.Config{Store: st, Registry: shared})
		must(t, err)
		t.Cleanup(func() { p.Close() })
		admin := platform.Actor{WorkspaceID: "wsp_a", Role: store.KeyRoleAdmin, KeyID: "key_admin", UserID: "usr_admin"}
		_, err = p.SetLimits(ctx, admin, limits.Document{Limits: []limits.Limit{
			{Name: "refunds-per-user", Tools: []string{"refund_payment"}, Per: []string{limits.PerUser}, Calls: limits.Rates{PerHour: 3}},
			{Name: "refunds-at-once", Tools: []string{"refund_payment"}, Who: entitle.Who{User: "usr_burst"}, Calls: limits.Rates{PerHour: 25}},
		}}, 0)
		must(t, err)
		d := p.Workspace(ctx, "wsp_a").Dispatcher()
		call := func(a platform.Actor, name string) *quiver.Result {
			r, err := d.Call(platform.WithActor(ctx, a), name, nil)
			must(t, err)
			return r
		}

		// One user, three keys and a token, each as many sessions as it likes: 3 an hour in all.
		mallory := []platform.Actor{
			{WorkspaceID: "wsp_a", Role: store.KeyRoleMember, UserID: "usr_m", KeyID: "key_m1"},
			{WorkspaceID: "wsp_a", Role: store.KeyRoleMember, UserID: "usr_m", KeyID: "key_m2"},
			{WorkspaceID: "wsp_a", Role: store.KeyRoleMember, UserID: "usr_m", KeyID: "key_m3"},
			{WorkspaceID: "wsp_a", Role: store.KeyRoleMember, UserID: "usr_m", Who: "a token of usr_m"},
		}
		passed := 0
		for i := range 12 {
			if r := call(mallory[i%len(mallory)], "refund_payment"); !r.IsError() {
				passed++
			} else if r.Code != quiver.CodeRateLimited {
				t.Fatalf("call %d: %s %q, want rate_limited", i, r.Code, r.Error)
			}
		}
		if passed != 3 || ran.Load() != 3 {
			t.Errorf("one user through four credentials: %d passed, the tool ran %d times; want 3", passed, ran.Load())
		}

		// Variants of the name are no tool: refused as unknown, never run nor counted.
		before := ran.Load()
		for _, name := range []string{"Refund_Payment", "REFUND_PAYMENT", "refund_payment ", "refund\u200bpayment", "ｒefund_payment", "refund_payment\x00"} {
			if r := call(platform.Actor{WorkspaceID: "wsp_a", Role: store.KeyRoleMember, UserID: "usr_v", KeyID: "key_v"}, name); r.Code != quiver.CodeUnknownTool {
				t.Errorf("calling %q: %s %q, want unknown_tool", name, r.Code, r.Error)
			}
		}
		if r := call(platform.Actor{WorkspaceID: "wsp_a", Role: store.KeyRoleMember, UserID: "usr_v", KeyID: "key_v"}, "refund_payment"); r.IsError() {
			t.Errorf("the variants were counted: the real name's first call was refused: %q", r.Error)
		}
		if ran.Load() != before+1 {
			t.Errorf("the tool ran %d times for six variants and one real call", ran.Load()-before)
		}

		// 200 calls at once, by a user whom a limit of 25 an hour names and every user's 3 an
		// hour holds too (every matching limit applies): exactly 3 pass, whoever wins the race.
		burst := platform.Actor{WorkspaceID: "wsp_a", Role: store.KeyRoleMember, UserID: "usr_burst", KeyID: "key_burst"}
		var wg sync.WaitGroup
		var ok atomic.Int64
		var mu sync.Mutex
		refusals := map[string]int{} // the refusals other than the limit's, by what they said
		for range 200 {
			wg.Go(func() {
				r := call(burst, "refund_payment")
				switch {
				case !r.IsError():
					ok.Add(1)
				case r.Code != quiver.CodeRateLimited:
					mu.Lock()
					refusals[string(r.Code)+": "+r.Error]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if ok.Load() != 3 {
			t.Errorf("200 calls at once under 3 an hour: %d passed; refused for another reason than the limit: %v", ok.Load(), refusals)
		}

		// Workspace B has no limits, and A's counts are not B's.
		b := p.Workspace(ctx, "wsp_b").Dispatcher()
		for i := range 5 {
			r, err := b.Call(platform.WithActor(ctx, platform.Actor{WorkspaceID: "wsp_b", Role: store.KeyRoleMember, UserID: "usr_m", KeyID: "key_m1"}), "refund_payment", nil)
			must(t, err)
			if r.IsError() {
				t.Fatalf("workspace B's call %d, by a user A limits: %q", i, r.Error)
			}
		}
		member := platform.Actor{WorkspaceID: "wsp_a", Role: store.KeyRoleMember, KeyID: "key_m1", UserID: "usr_m"}
		if _, err := p.Limits(ctx, member); err == nil {
			t.Error("a member read the limits")
		}
		if _, err := p.SetLimits(ctx, member, limits.Document{}, 1); err == nil {
			t.Error("a member changed the limits")
		}
		otherAdmin := platform.Actor{WorkspaceID: "wsp_b", Role: store.KeyRoleAdmin, KeyID: "key_b", UserID: "usr_b"}
		if l, err := p.Limits(ctx, otherAdmin); err != nil || l.Version != 0 {
			t.Errorf("workspace B's admin sees limits %+v, %v: want B's own, none", l, err)
		}
	})
}
