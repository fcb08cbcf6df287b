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
