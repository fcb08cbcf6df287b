package postgres

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

// take is TakeLimitWindow of slots slots from slot.
func take(ctx context.Context, s *Store, ws, key string, slot int64, span, slots, max, want int) (int, []int, error) {
	got, err := s.TakeLimitWindow(ctx, store.LimitTake{WorkspaceID: ws, Key: key, Slot: slot, Span: span, Slots: slots, Max: max, Want: want})
	return got.Taken, got.Counts, err
}

// The counts of limits: a take counts within the bound and a late one with the newest slot;
// a holding is what the others leave; the purge drops the slots that have left every window
// and the lapsed holdings, and keeps the rest.
func TestLimitCounts(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	now := time.Now().UnixNano()
	minute := now / int64(time.Second) // a per-minute counter's slot: a second

	taken, counts, err := take(ctx, s, "wsp_1", "l/m", minute, 61, 1, 3, 2)
	if err != nil || taken != 2 || counts[60] != 2 {
		t.Fatalf("a first take: %d %v %v", taken, counts, err)
	}
	// A take of an older slot counts in the newest: the window's 3 hold.
	taken, counts, err = take(ctx, s, "wsp_1", "l/m", minute-5, 61, 1, 3, 5)
	if err != nil || taken != 1 || counts[60] != 3 {
		t.Fatalf("a late take: %d %v %v", taken, counts, err)
	}
	if taken, _, _ := take(ctx, s, "wsp_2", "l/m", minute, 61, 1, 3, 1); taken != 1 {
		t.Fatal("another workspace's counter was counted")
	}
	// Holdings: node a holds 3 of 4, node b gets the one left.
	if held, err := s.HoldLimit(ctx, "wsp_1", "c/c", "a", 3, 4, time.Minute); err != nil || held != 3 {
		t.Fatalf("node a: %d %v", held, err)
	}
	if held, _ := s.HoldLimit(ctx, "wsp_1", "c/c", "b", 3, 4, 10*time.Millisecond); held != 1 {
		t.Fatalf("node b got %d, want the 1 left", held)
	}
	// An old counter's slots, gone from every window; b's holding lapses.
	if _, _, err := take(ctx, s, "wsp_1", "old/m", minute-1000, 61, 1, 3, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	n, err := s.PurgeLimits(ctx)
	if err != nil || n != 2 {
		t.Fatalf("the purge removed %d rows (%v), want the old slot and the lapsed holding", n, err)
	}
	var windows, holds int
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM limit_windows), (SELECT count(*) FROM limit_holds)`).Scan(&windows, &holds); err != nil {
		t.Fatal(err)
	}
	if windows != 2 || holds != 1 {
		t.Fatalf("after the purge: %d slots and %d holdings, want 2 (the live counters') and 1 (node a's)", windows, holds)
	}
	if _, err := s.HoldLimit(ctx, "wsp_1", "c/c", "", 1, 4, time.Minute); err == nil {
		t.Error("a holding without a node was set")
	}
	if _, _, err := take(ctx, s, "wsp_1", "l/m", minute, 5000, 1, 3, 1); err == nil {
		t.Error("a window of 5,000 slots was taken")
	}
}

// The counters of model requests' tokens and cost: an amount counted whatever the bound, a
// take of 0 that reads, and periods read from the key's letters before the dot (a month's
// slots are days).
func TestLimitCountsOfModelRequests(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	now := time.Now().UnixNano()
	day := now / int64(24*time.Hour)
	quarter := now / int64(15*time.Minute)
	if taken, counts, err := take(ctx, s, "wsp_1", "b/mo.cost", day, 31, 1, 1<<60, 7_500_000); err != nil || taken != 7_500_000 || counts[30] != 7_500_000 {
		t.Fatalf("a cost counted: %d %v", taken, err)
	}
	if taken, counts, err := take(ctx, s, "wsp_1", "b/mo.cost", day, 31, 1, 1<<60, 0); err != nil || taken != 0 || counts[30] != 7_500_000 {
		t.Fatalf("a read: %d %v %v", taken, counts[30], err)
	}
	for _, k := range []struct {
		key  string
		slot int64
		span int
	}{{"b/d.in", quarter, 97}, {"old/d.out", quarter - 200, 97}, {"old/mo.cost", day - 40, 31}, {"live/mo.cost", day - 20, 31}} {
		if _, _, err := take(ctx, s, "wsp_1", k.key, k.slot, k.span, 1, 1<<60, 10); err != nil {
			t.Fatal(err)
		}
	}
	counts, err := s.LimitCounts(ctx, "wsp_1")
	if err != nil || counts["b/mo.cost"] != 7_500_000 || counts["b/d.in"] != 10 || counts["live/mo.cost"] != 10 || counts["old/d.out"] != 0 || counts["old/mo.cost"] != 0 {
		t.Fatalf("counts: %v %v", counts, err)
	}
	if n, err := s.PurgeLimits(ctx); err != nil || n != 2 {
		t.Fatalf("the purge removed %d rows (%v), want the two old counters' slots", n, err)
	}
}

// Leases over several slots: one is counted in every window it meets and taken only while
// those keep a quarter of the bound free, else a take counts in one slot up to the bound; a window
// after the lease's start holds it until it ends, and a window past its end holds none of it.
func TestLimitLeases(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	const slot, span, max = 1_000_000, 11, 100
	for _, c := range []struct {
		name         string
		slot         int64
		slots, want  int
		taken, until int
	}{
		{"a lease far from the bound", slot, 10, 20, 20, slot + 9},
		{"a second lease that leaves a quarter of the bound free", slot, 10, 25, 25, slot + 9},
		{"one that would not takes a slot's share of it in one slot", slot, 10, 600, 55, slot},
		{"the leases hold the windows up to their end", slot + 11, 10, 600, 55, slot + 11},
		{"past their end only the single slots' counts are held", slot + 20, 10, 1000, 45, slot + 20},
		{"a slot's share is want over the lease's slots", slot + 23, 10, 40, 4, slot + 23},
		{"a lease once the windows are empty again", slot + 32, 5, 30, 30, slot + 36},
	} {
		got, err := s.TakeLimitWindow(ctx, store.LimitTake{WorkspaceID: "wsp_1", Key: "l/s", Slot: c.slot, Span: span, Slots: c.slots, Max: max, Want: c.want})
		if err != nil || got.Taken != c.taken || got.Until != int64(c.until) {
			t.Fatalf("%s: took %d until %d (%v), want %d until %d", c.name, got.Taken, got.Until, err, c.taken, c.until)
		}
	}
	// The take of the release before, while a fleet is upgraded: one slot, and no lease.
	var old []int64
	if err := s.pool.QueryRow(ctx, `SELECT quiver_take_limit('wsp_1', 'l/s', $1, $2, $3, 5)`, slot+40, span, max).Scan(&old); err != nil || len(old) != span+1 || old[0] != 5 || old[span] != 5 {
		t.Fatalf("the take of the release before: %v %v", old, err)
	}
	for _, bad := range []store.LimitTake{{Span: 11, Slots: 0}, {Span: 11, Slots: 12}, {Span: 0, Slots: 1}} {
		bad.WorkspaceID, bad.Key, bad.Max, bad.Want = "wsp_1", "l/s", 1, 1
		if _, err := s.TakeLimitWindow(ctx, bad); err == nil {
			t.Errorf("a take of %d slots in a window of %d was counted", bad.Slots, bad.Span)
		}
	}
}

// Whatever the leases, and wherever in its lease each call falls, no window holds more calls
// than the bound: nodes take leases of random length at random times, their calls are put in
// random slots of their leases, and every window is summed.
func TestLimitLeasesKeepTheBound(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	const span, max, slots = 6, 40, 80
	rng := rand.New(rand.NewPCG(7, 52))
	used := make([]int, slots+span)
	var total int
	for now := int64(0); now < slots; now++ {
		for range rng.IntN(4) {
			got, err := s.TakeLimitWindow(ctx, store.LimitTake{WorkspaceID: "wsp_1", Key: "k/s", Slot: 1000 + now, Span: span,
				Slots: 1 + rng.IntN(span), Max: max, Want: 1 + rng.IntN(15)})
			if err != nil {
				t.Fatal(err)
			}
			for range got.Taken {
				used[now+rng.Int64N(got.Until-1000-now+1)]++
			}
			total += got.Taken
		}
	}
	for a := range len(used) - span {
		if n := sum(used[a : a+span]); n > max {
			t.Fatalf("the window from slot %d holds %d calls, over the bound of %d", a, n, max)
		}
	}
	if total < slots*max/span/3 {
		t.Fatalf("%d calls taken in %d slots: the leases starve the bound of %d a window", total, slots, max)
	}
}

func sum(ns []int) int {
	n := 0
	for _, x := range ns {
		n += x
	}
	return n
}
