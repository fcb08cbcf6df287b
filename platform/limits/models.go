package limits

import (
	"context"
	"fmt"
	"math"
	"time"
)

// A run's model requests are bounded by tokens and cost, which are known only once a request
// has ended: a request is let go when every bound it counts against has room (Meter.Room),
// and what it used is counted once it ends (Meter.Charge). So a bound is passed by at most the
// requests that were under way when it was reached, each by what it used; the runs then stop
// until the window has room again. Both read and write the Windows directly, one statement a
// bound: a model request takes seconds and writes the thread already, and a node's batched
// takes (Meter.Batch) count calls, not amounts.

// Room reports whether a model request may go: nil when every check's window has room now;
// otherwise the refusal of the first that is full, whose RetryAfter is when it has room again.
// An error is the Windows' (the caller decides whether to let the request go).
func (m *Meter) Room(ctx context.Context, workspaceID string, checks []Check) (*Refusal, error) {
	now := m.now()
	for i := range checks {
		ch := &checks[i]
		if !ch.Quantity.Model() {
			continue
		}
		counts, slot, slotLen, err := m.add(ctx, workspaceID, ch, 0, now)
		if err != nil {
			return nil, err
		}
		if sum(counts) >= ch.Max {
			free := time.Unix(0, (slot+int64(slotsToFree(counts, ch.Max)))*int64(slotLen))
			return &Refusal{Limit: ch.Limit, Quantity: ch.Quantity, Max: ch.Max, RetryAfter: max(time.Second, free.Sub(now))}, nil
		}
	}
	return nil, nil
}

// Charge counts what a model request used against checks: its input and output tokens, and
// its cost in millionths of the price table's unit. It counts past a bound: the request has
// been made.
func (m *Meter) Charge(ctx context.Context, workspaceID string, checks []Check, input, output, costMicros int64) error {
	now := m.now()
	for i := range checks {
		ch := &checks[i]
		var n int64
		switch ch.Quantity {
		case InputTokensPerMinute, InputTokensPerDay:
			n = input
		case OutputTokensPerMinute, OutputTokensPerDay:
			n = output
		case CostPerDay, CostPerMonth:
			n = costMicros
		}
		if n <= 0 {
			continue
		}
		if _, _, _, err := m.add(ctx, workspaceID, ch, int(n), now); err != nil {
			return fmt.Errorf("limits: charging %s of %q: %w", ch.Quantity, ch.Limit, err)
		}
	}
	return nil
}

// unbounded is the bound an amount already used is counted under: whatever the window holds.
const unbounded = math.MaxInt64 / 4

// add counts n in ch's window at now, whatever its bound (n 0 reads it), and returns the
// window's counts after, oldest first, the slot of now and the length of a slot.
func (m *Meter) add(ctx context.Context, workspaceID string, ch *Check, n int, now time.Time) (counts []int, slot int64, slotLen time.Duration, err error) {
	w := windows[ch.Quantity]
	slotLen = w.period / time.Duration(w.slots)
	slot = now.UnixNano() / int64(slotLen)
	span := w.slots + 1
	if m.Windows != nil {
		got, err := m.Windows.Take(ctx, workspaceID, Take{Key: ch.Key, Slot: slot, Span: span, Slots: 1, Max: unbounded, Want: n})
		return got.Counts, slot, slotLen, err
	}
	_, counts = m.memory().take(workspaceID, ch.Key, slot, span, unbounded, n, now, slotLen)
	return counts, slot, slotLen, nil
}

func sum(counts []int) int {
	s := 0
	for _, n := range counts {
		s += n
	}
	return s
}
