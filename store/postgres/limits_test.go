package postgres

import (
	"context"
	"testing"
	"time"
)

// The counts of limits: a take counts within the bound and a late one with the newest slot;
// a holding is what the others leave; the purge drops the slots that have left every window
// and the lapsed holdings, and keeps the rest.
func TestLimitCounts(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	now := time.Now().UnixNano()
	minute := now / int64(time.Second) // a per-minute counter's slot: a second

	taken, counts, err := s.TakeLimitWindow(ctx, "wsp_1", "l/m", minute, 61, 3, 2)
	if err != nil || taken != 2 || counts[60] != 2 {
		t.Fatalf("a first take: %d %v %v", taken, counts, err)
	}
	// A take of an older slot counts in the newest: the window's 3 hold.
	taken, counts, err = s.TakeLimitWindow(ctx, "wsp_1", "l/m", minute-5, 61, 3, 5)
	if err != nil || taken != 1 || counts[60] != 3 {
		t.Fatalf("a late take: %d %v %v", taken, counts, err)
	}
	if taken, _, _ := s.TakeLimitWindow(ctx, "wsp_2", "l/m", minute, 61, 3, 1); taken != 1 {
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
	if _, _, err := s.TakeLimitWindow(ctx, "wsp_1", "old/m", minute-1000, 61, 3, 1); err != nil {
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
	if _, _, err := s.TakeLimitWindow(ctx, "wsp_1", "l/m", minute, 5000, 3, 1); err == nil {
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
	if taken, counts, err := s.TakeLimitWindow(ctx, "wsp_1", "b/mo.cost", day, 31, 1<<60, 7_500_000); err != nil || taken != 7_500_000 || counts[30] != 7_500_000 {
		t.Fatalf("a cost counted: %d %v", taken, err)
	}
	if taken, counts, err := s.TakeLimitWindow(ctx, "wsp_1", "b/mo.cost", day, 31, 1<<60, 0); err != nil || taken != 0 || counts[30] != 7_500_000 {
		t.Fatalf("a read: %d %v %v", taken, counts[30], err)
	}
	for _, k := range []struct {
		key  string
		slot int64
		span int
	}{{"b/d.in", quarter, 97}, {"old/d.out", quarter - 200, 97}, {"old/mo.cost", day - 40, 31}, {"live/mo.cost", day - 20, 31}} {
		if _, _, err := s.TakeLimitWindow(ctx, "wsp_1", k.key, k.slot, k.span, 1<<60, 10); err != nil {
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
