package jobs

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store/sqlite"
)

// On SQLite a run starts as soon as it is queued, with River configured as quiver serve
// configures it (no test poll interval): runs queued one after another, each as soon as the
// one before has started, each begin within a few milliseconds. Before, River noticed an
// insert only through a table it polled every 50 ms, and ignored one made within 100 ms of the
// last, which then waited for its fetch poll: about half of such runs waited 0.5 to 1 s.
func TestSQLiteRunStartsWhenQueued(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, reg := newTools(t)
	cfg := config(st, reg, &stepModel{})
	cfg.pollInterval = 0 // River's own polling, as in quiver serve
	began := make(chan time.Time, 1)
	agents := cfg.Agents
	cfg.Agents = func(ctx context.Context, name string) (*agent.Agent, error) {
		select {
		case began <- time.Now():
		default:
		}
		return agents(ctx, name)
	}
	j, err := StartSQLite(context.Background(), path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop(context.Background())
	var waits []time.Duration
	for range 12 {
		th := newThread(t, st)
		queued := time.Now()
		if _, err := j.Start(context.Background(), RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", Message: "hi"}); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-began:
			waits = append(waits, at.Sub(queued))
		case <-time.After(10 * time.Second):
			t.Fatal("a queued run did not start within 10 s")
		}
	}
	slices.Sort(waits)
	// Generous bounds for a loaded machine (and -race): the median is a few milliseconds.
	if median, worst := waits[len(waits)/2], waits[len(waits)-1]; median > 100*time.Millisecond || worst > 400*time.Millisecond {
		t.Errorf("runs began %v after they were queued (sorted); want each within 400 ms, half within 100 ms", waits)
	}
}
