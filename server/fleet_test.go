package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
)

// Two nodes of a fleet on one PostgreSQL schema: every run started through node A's API is live
// on node B's event stream of its thread (its streamed text and how it ended), whichever node
// runs it; for the runs node A runs, only the relay between the nodes can have told B. Runs
// are started until A has run three of them.
func TestFleetStreamsAreLiveOnEveryNode(t *testing.T) {
	if os.Getenv(pgtest.EnvDSN) == "" && os.Getenv("CI") != "true" {
		t.Skipf("PostgreSQL not tested: %s is not set", pgtest.EnvDSN)
	}
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	a, b := postgresNode(t, dsn, schema, true), postgresNode(t, dsn, schema, true)
	b.key = a.key // the nodes share the database, and so the keys

	var mu sync.Mutex
	ranOnA := map[string]bool{}
	defer a.p.Runner().Subscribe(func(e agent.Event) {
		if e.Type == agent.EventFinished {
			mu.Lock()
			ranOnA[e.ThreadID] = true
			mu.Unlock()
		}
	})()

	onA := 0
	for run := 0; onA < 3; run++ {
		if run == 40 {
			t.Fatalf("node A ran %d of 40 runs, want 3", onA)
		}
		threadID := liveOnB(t, a, b)
		mu.Lock()
		if ranOnA[threadID] {
			onA++
		}
		mu.Unlock()
	}
}

// liveOnB starts a run through a's API and follows its thread's events on b until the run's
// end, which must come with the run's streamed text before it; it returns the thread.
func liveOnB(t *testing.T, a, b *benchServer) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	status, out, err := a.do(ctx, "POST", "/v1/threads", `{"agent":"`+benchAgent+`"}`)
	var th struct{ ID string }
	if err != nil || status != http.StatusCreated || json.Unmarshal(out, &th) != nil {
		t.Fatalf("a thread on A: %d %s %v", status, out, err)
	}
	events, err := b.openEvents(ctx, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.name != "state" {
		t.Fatalf("B's stream began with %+v, want the state", ev)
	}
	if status, out, err := a.do(ctx, "POST", "/v1/threads/"+th.ID+"/runs", `{"agent":"`+benchAgent+`","message":"Hi"}`); err != nil || status != http.StatusAccepted {
		t.Fatalf("starting the run on A: %d %s %v", status, out, err)
	}
	text := ""
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("B's stream of %s ended before the run did", th.ID)
			}
			switch ev.name {
			case "delta":
				var d struct{ Text string }
				_ = json.Unmarshal([]byte(ev.data), &d)
				text += d.Text
			case "run":
				var r struct{ Type string }
				if json.Unmarshal([]byte(ev.data), &r) != nil || r.Type != "finished" || text != "Hello." {
					t.Fatalf("B saw the run of %s end with %s after the text %q, want finished after %q", th.ID, ev.data, text, "Hello.")
				}
				return th.ID
			}
		case <-ctx.Done():
			t.Fatalf("B's stream of %s did not see the run end within 30s (text so far %q)", th.ID, text)
		}
	}
}
