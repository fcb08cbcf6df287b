package runcode

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
)

func TestOwnerOf(t *testing.T) {
	tests := []struct {
		scope quiver.Scope
		want  string
	}{
		{quiver.Scope{WorkspaceID: "w", UserID: "u", AgentID: "a", ThreadID: "t"}, "thread t"},
		{quiver.Scope{WorkspaceID: "w", UserID: "u", AgentID: "a"}, "user u"},
		{quiver.Scope{WorkspaceID: "w", AgentID: "a"}, "workspace w"},
		{quiver.Scope{AgentID: "a"}, "anonymous"},
		{quiver.Scope{}, "anonymous"},
	}
	for _, tt := range tests {
		if got := ownerOf(quiver.WithScope(context.Background(), tt.scope)); got != tt.want {
			t.Errorf("ownerOf(%+v) = %q, want %q", tt.scope, got, tt.want)
		}
	}
	if got := ownerOf(context.Background()); got != "anonymous" {
		t.Errorf("ownerOf without a scope = %q", got)
	}
}

// waitFor polls until ok holds: the goroutines under test queue in their own time.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after 10s", what)
		}
	}
}

// A freed slot goes to the waiting owner with the fewest runs, the first in turn among equals,
// not to the owner whose calls arrived first.
func TestFairTurns(t *testing.T) {
	s := newSlots(2, 2)
	type grant struct {
		label   string
		release func()
	}
	granted := make(chan grant)
	releases := map[string]func(){}
	for _, label := range []string{"A0", "A0'"} { // A holds both slots
		release, _, _, err := s.acquire(context.Background(), "A")
		if err != nil {
			t.Fatal(err)
		}
		releases[label] = release
	}
	for i, label := range []string{"A1", "A2", "A3", "B1", "B2", "C1"} {
		go func() {
			release, _, _, err := s.acquire(context.Background(), label[:1])
			if err != nil {
				t.Error(err)
				return
			}
			granted <- grant{label, release}
		}()
		waitFor(t, label+" queued", func() bool { _, waiting, _, _ := s.state(""); return waiting == i+1 })
	}
	for _, step := range []struct{ release, next string }{
		{"A0", "B1"},  // B and C have no runs, A one: B, whose turn came first
		{"A0'", "A1"}, // A and C have none, B one: A's turn comes before C's
		{"B1", "C1"},
		{"A1", "B2"},
		{"C1", "A2"},
		{"B2", "A3"}, // only A waits
	} {
		releases[step.release]()
		select {
		case g := <-granted:
			if g.label != step.next {
				t.Fatalf("after %s gave its slot back, %s got it, want %s", step.release, g.label, step.next)
			}
			releases[g.label] = g.release
		case <-time.After(10 * time.Second):
			t.Fatalf("nobody got the slot %s gave back", step.release)
		}
	}
	releases["A2"]()
	releases["A3"]()
	if running, waiting, _, _ := s.state(""); running != 0 || waiting != 0 || len(s.owners) != 0 {
		t.Errorf("after everything was given back: %d running, %d waiting, %d owners", running, waiting, len(s.owners))
	}
}

// Under contention from many goroutines (run with -race), no owner ever holds more than its
// limit nor all of them more than the total, calls that give up leave no trace, and every slot
// comes back.
func TestPerOwnerLimitHolds(t *testing.T) {
	const total, perOwner, owners, calls = 6, 2, 4, 40
	s := newSlots(total, perOwner)
	var inUse, peak atomic.Int32
	var ownerUse, ownerPeak [owners]atomic.Int32
	var gaveUp atomic.Int32
	var wg sync.WaitGroup
	for o := range owners {
		for c := range calls {
			wg.Go(func() {
				ctx := context.Background()
				if c%5 == 0 { // some give up while they wait
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(3))*time.Millisecond)
					defer cancel()
				}
				release, _, _, err := s.acquire(ctx, fmt.Sprint("owner ", o))
				if err != nil {
					gaveUp.Add(1)
					return
				}
				n, m := inUse.Add(1), ownerUse[o].Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				for p := ownerPeak[o].Load(); m > p && !ownerPeak[o].CompareAndSwap(p, m); p = ownerPeak[o].Load() {
				}
				time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
				inUse.Add(-1)
				ownerUse[o].Add(-1)
				release()
			})
		}
	}
	wg.Wait()
	if p := peak.Load(); p > total {
		t.Errorf("%d runs at once, over the total of %d", p, total)
	}
	for o := range owners {
		if p := ownerPeak[o].Load(); p > perOwner {
			t.Errorf("owner %d had %d runs at once, over its limit of %d", o, p, perOwner)
		}
	}
	if running, waiting, _, _ := s.state(""); running != 0 || waiting != 0 || len(s.owners) != 0 || len(s.turns) != 0 {
		t.Errorf("after all calls: %d running, %d waiting, %d owners, %d turns", running, waiting, len(s.owners), len(s.turns))
	}
	t.Logf("%d of %d calls gave up waiting; at most %d runs at once", gaveUp.Load(), owners*calls, peak.Load())
}
