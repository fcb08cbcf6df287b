package jobs

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store/sqlite"
)

// On SQLite a run starts because it was queued, not because River polls: with River's fetch
// poll set to an hour, twelve runs queued one after another, each as soon as the one before has
// started, all start. Before, River noticed an insert only through a table it polled every
// 50 ms, and ignored one made within 100 ms of the last, which then waited for the fetch poll
// (a second in quiver serve; here, an hour: the test would time out).
func TestSQLiteRunStartsWhenQueued(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, reg := newTools(t)
	cfg := config(st, reg, &stepModel{})
	cfg.pollInterval = 0
	cfg.fetchPoll = time.Hour // only a wake on insert starts a run
	j, err := StartSQLite(context.Background(), path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop(context.Background())
	for i := range 12 {
		th := newThread(t, st)
		if _, err := j.Start(context.Background(), RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", Message: "hi"}); err != nil {
			t.Fatal(err)
		}
		// The run's user message is appended by the run itself: its presence says it started.
		for deadline := time.Now().Add(30 * time.Second); len(history(t, th)) == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("run %d did not start: queued runs wait for River's fetch poll", i+1)
			}
		}
	}
}
