package platform

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiverhq/quiver/platform/limits"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
)

// countingWindows counts the takes of a process, each a write transaction of the database.
type countingWindows struct {
	limits.Windows
	takes *atomic.Int64
}

func (c countingWindows) Take(ctx context.Context, workspaceID string, t limits.Take) (limits.Taken, error) {
	c.takes.Add(1)
	return c.Windows.Take(ctx, workspaceID, t)
}

// Two processes counting a per-second limit in one PostgreSQL database, on a clock the test
// moves a slot at a time: far from the bound each takes about once a lease (ten slots), not
// once a slot; at a rate over the bound the calls let through in any second stay within it
// (a lease's calls may fall in any of its slots), and the two together still get most of it.
func TestMeterLeasesOnPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(pgtest.Schema(t, dsn)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	const slotLen = 100 * time.Millisecond
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	var takes atomic.Int64
	node := func() *limits.Meter {
		m := newMeter(st, now)
		if !m.Batch || m.Windows == nil {
			t.Fatal("a meter on PostgreSQL does not take from the database a few calls at a time")
		}
		m.Windows = countingWindows{m.Windows, &takes}
		return m
	}
	a, b := node(), node()
	check := func(max int) []limits.Check {
		return []limits.Check{{Limit: "ws", Quantity: limits.CallsPerSecond, Max: max, Key: "ws/s"}}
	}
	// run lets each node try perSlot calls a slot for slots slots and returns the calls let
	// through in each slot.
	run := func(slots, perSlot, max int) []int {
		passed := make([]int, slots)
		rng := rand.New(rand.NewPCG(1, uint64(max)))
		for s := range slots {
			for range 2 * perSlot {
				m := a
				if rng.IntN(2) == 1 {
					m = b
				}
				_, refusal, err := m.Admit(ctx, "wsp_1", check(max))
				if err != nil {
					t.Fatal(err)
				}
				if refusal == nil {
					passed[s]++
				}
			}
			clock.Add(int64(slotLen))
		}
		return passed
	}

	// Far from the bound: 20 calls a slot against 10,000 a second.
	passed := run(100, 10, 10_000)
	if got := slotSum(passed); got != 2000 {
		t.Fatalf("far from the bound %d of 2,000 calls passed", got)
	}
	t.Logf("far from the bound: %d takes in 100 slots", takes.Load())
	if n := takes.Load(); n > 40 {
		t.Errorf("far from the bound the two nodes took %d times in 100 slots, want about one a lease of ten slots each", n)
	}

	// Over the bound: 40 calls a slot against 100 a second, a window of 11 slots.
	clock.Add(int64(20 * slotLen))
	passed = run(100, 20, 100)
	for s := range len(passed) - 10 {
		if n := slotSum(passed[s : s+11]); n > 100 {
			t.Fatalf("slots %d to %d let %d calls through, over the bound of 100", s, s+10, n)
		}
	}
	t.Logf("over the bound: %d calls passed in 100 slots, %d the bound allows", slotSum(passed), 100*100/11)
	if got := slotSum(passed); got < 100*100/11*8/10 {
		t.Errorf("over the bound %d calls passed in 100 slots, want most of the %d the bound allows", got, 100*100/11)
	}
}

func slotSum(ns []int) int {
	n := 0
	for _, x := range ns {
		n += x
	}
	return n
}
