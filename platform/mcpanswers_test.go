package platform_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

// The MCP servers of every node take an answer to a confirmation once, through the store's
// leases: two platforms over one SQLite database (two processes' worth) share the record.
func TestMCPAnswersAreTakenOnce(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	must(t, err)
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	ws := &store.Workspace{Name: "answers"}
	must(t, st.CreateWorkspace(ctx, ws))
	node := func() *platform.Platform {
		p, err := platform.New(platform.Config{Store: st})
		must(t, err)
		return p
	}
	a, b := node().MCPOptions(ws.ID, nil).Answers, node().MCPOptions(ws.ID, nil).Answers
	if a == nil || b == nil {
		t.Fatal("the platform gave its MCP servers no ledger of answers")
	}
	expires := time.Now().Add(10 * time.Minute)
	for i, c := range []struct {
		take func(context.Context, string, time.Time) (bool, error)
		id   string
		at   time.Time
		want bool
	}{
		{a.Take, "q1", expires, true},
		{b.Take, "q1", expires, false}, // the other node
		{a.Take, "q1", expires, false},
		{b.Take, "q2", expires, true},
		// An expiry already past (a clock behind) still makes a lease the store takes.
		{a.Take, "q3", time.Now().Add(-time.Hour), true},
	} {
		got, err := c.take(ctx, c.id, c.at)
		if err != nil || got != c.want {
			t.Errorf("take %d (%s): %v %v, want %v", i+1, c.id, got, err, c.want)
		}
	}
}
