package platform_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// The calls of a sessionless MCP client that name no thread are recorded on one thread per
// caller, client and day: the same one for every call of a day, made once even when the first
// calls come at once, and another for another key, another client, another day, and on
// another platform (a node) over the same store, the same one.
func TestSessionlessCallersShareAThreadADay(t *testing.T) {
	st := openStore(t)
	ws := &store.Workspace{Name: "callers"}
	must(t, st.CreateWorkspace(context.Background(), ws))
	node := func() *platform.Platform {
		p, err := platform.New(platform.Config{Store: st})
		must(t, err)
		return p
	}
	a, b := node(), node()
	day := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	thread := func(p *platform.Platform, at time.Time, key, client string) string {
		t.Helper()
		ctx := stamp.WithClock(context.Background(), func() time.Time { return at })
		ctx = platform.WithActor(ctx, platform.Actor{WorkspaceID: ws.ID, KeyID: key, Role: store.KeyRoleMember})
		scope, err := p.SessionThread(ctx, ws.ID, mcp.SessionInfo{Sessionless: true, ClientName: client})
		must(t, err)
		return scope.ThreadID
	}
	first := make([]string, 8)
	var wg sync.WaitGroup
	for i := range first {
		wg.Go(func() { first[i] = thread([]*platform.Platform{a, b}[i%2], day, "key_1", "agent") })
	}
	wg.Wait()
	for _, id := range first {
		if id != first[0] {
			t.Fatalf("the first calls at once went to threads %v, want one", first)
		}
	}
	cases := []struct {
		name       string
		p          *platform.Platform
		at         time.Time
		key, agent string
		same       bool
	}{
		{"later the same day, another node", b, day.Add(13 * time.Hour), "key_1", "agent", true},
		{"the next day", a, day.Add(14 * time.Hour), "key_1", "agent", false},
		{"another key", a, day, "key_2", "agent", false},
		{"another client", a, day, "key_1", "other agent", false},
	}
	for _, c := range cases {
		if got := thread(c.p, c.at, c.key, c.agent); (got == first[0]) != c.same {
			t.Errorf("%s: thread %s, the first calls' %s: want same %v", c.name, got, first[0], c.same)
		}
	}
	th, err := st.Thread(context.Background(), ws.ID, first[0])
	must(t, err)
	if !slices.Contains(th.Tags, "mcp-sessionless") || !slices.Contains(th.Tags, "mcp-client:agent") {
		t.Errorf("the caller's thread is tagged %v", th.Tags)
	}
}
