package limits

import (
	"context"
	"strings"
	"time"
)

// Status is how close a limit's bound of one quantity is, now: the fullest of its counters
// (a limit counting per key has one per key).
type Status struct {
	Limit    string
	Quantity Quantity
	Max      int
	// Used is the fullest counter's count in its window now (for Concurrent, the calls
	// running; on a fleet, the places the nodes hold, a little more than they run).
	Used int
	// Counters is how many of its counters have counts now.
	Counters int
}

// Counts reads the counts of a workspace's counters now, by key (see store.LimitCounts): a
// store that keeps a fleet's counts implements it beside Windows.
type Counts interface {
	Counts(ctx context.Context, workspaceID string) (map[string]int, error)
}

// Period is q's period as a word: second, minute, hour, day, month (30 days), or concurrent.
func (q Quantity) Period() string {
	return [...]string{"second", "minute", "hour", "day", "concurrent", "minute", "day", "minute", "day", "day", "month"}[q]
}

// Measure is what q counts: calls, input_tokens, output_tokens or cost (in millionths of the
// price table's unit).
func (q Quantity) Measure() string {
	switch q {
	case InputTokensPerMinute, InputTokensPerDay:
		return "input_tokens"
	case OutputTokensPerMinute, OutputTokensPerDay:
		return "output_tokens"
	case CostPerDay, CostPerMonth:
		return "cost"
	}
	return "calls"
}

// Status returns how close each bound of set's limits is in workspace now, in the
// document's order; a bound no call has counted against yet has Used 0.
func (m *Meter) Status(ctx context.Context, workspaceID string, set *Set) ([]Status, error) {
	if set.Empty() {
		return []Status{}, nil
	}
	counts, err := m.counts(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	var out []Status
	for i := range set.limits {
		l := &set.limits[i]
		for q := CallsPerSecond; q <= lastQuantity; q++ {
			if l.bound(q) == 0 {
				continue
			}
			st := Status{Limit: l.Name, Quantity: q, Max: l.bound(q)}
			prefix := l.Name + "/" + quantityKeys[q]
			for k, n := range counts {
				if k == prefix || strings.HasPrefix(k, prefix+"/") {
					st.Counters++
					st.Used = max(st.Used, n)
				}
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// quantityKeys are the quantities as a counter's key names them (see compiled.key): the
// period's letter first (s, m, h, d, mo: the store's purge reads it), then what is counted.
var quantityKeys = [...]string{"s", "m", "h", "d", "c", "m.in", "d.in", "m.out", "d.out", "d.cost", "mo.cost"}

// counts are the counts of the workspace's counters now: the fleet's, from the store, when
// the Windows keep them; else this process's.
func (m *Meter) counts(ctx context.Context, workspaceID string) (map[string]int, error) {
	if c, ok := m.Windows.(Counts); ok {
		return c.Counts(ctx, workspaceID)
	}
	out := map[string]int{}
	now := m.now()
	if w := m.memoryIfAny(); w != nil {
		w.mu.Lock()
		for k, s := range w.counts {
			key, ok := strings.CutPrefix(k, workspaceID+"\x00")
			if !ok {
				continue
			}
			if n := s.inWindow(now, windowOf(key)); n > 0 {
				out[key] = n
			}
		}
		w.mu.Unlock()
	}
	m.mu.Lock()
	for k, n := range m.inflight {
		if key, ok := strings.CutPrefix(k, workspaceID+"\x00"); ok && n > 0 {
			out[key] = n
		}
	}
	m.mu.Unlock()
	return out, nil
}

// windowOf is the window of a counter's key, by the quantity it names.
func windowOf(key string) window {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) < 2 {
		return window{}
	}
	for q, k := range quantityKeys {
		if parts[1] == k {
			return windows[q] // none for Concurrent
		}
	}
	return window{}
}

// inWindow sums the slots still in w's window at now.
func (s *slots) inWindow(now time.Time, w window) int {
	if w.slots == 0 {
		return 0
	}
	slotLen := w.period / time.Duration(w.slots)
	slot := now.UnixNano() / int64(slotLen)
	span := int64(len(s.n))
	sum := 0
	for t := max(s.newest-span+1, slot-span+1); t <= s.newest; t++ {
		sum += s.n[((t%span)+span)%span]
	}
	return sum
}
