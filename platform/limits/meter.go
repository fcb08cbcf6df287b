package limits

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/quiverhq/quiver"
)

// A rate is counted in a sliding window of slots: a period of a minute is 60 slots of a
// second, and a call is let through when the calls counted in the last 61 slots, its own
// included, stay within the bound. 61 rather than 60 because any minute, however it falls
// across the slots, lies within 61 of them: no minute ever sees more calls than the bound
// (a fixed window lets twice the bound through across its edge; a token bucket, a burst
// and the refill). The price is a little under the bound for a caller at exactly the rate:
// 60/61 of it.
//
// The counts are kept by a Windows. In one process (a SQLite database, which one process
// serves) they are this process's, and every call is counted as it comes: exact. On a fleet
// they are in the database the nodes share, and a node takes a few calls' worth at a time
// (Meter.Batch) and lets calls through from what it took until its lease ends (up to ten
// slots far from the bound, one slot near it): one write per lease rather than per call, and
// never more than the bound in any period, since the database hands out no more than the
// bound to the windows a lease meets; what a node took and did not use is lost to the others
// until its lease leaves the window (see docs/SCALING.md for the bound this keeps).

// Windows keeps the counts of rates (see store.LimitWindows).
type Windows interface {
	// Take counts up to t.Want calls of workspace's counter t.Key in a lease of t.Slots slots
	// from t.Slot (of one slot when that lease would take fewer), as many as keep every window
	// of t.Span slots the lease meets within t.Max.
	Take(ctx context.Context, workspaceID string, t Take) (Taken, error)
}

// Take is what a process asks of a counter in Windows.
type Take struct {
	Key   string
	Slot  int64 // the current slot
	Span  int   // the slots of a window
	Slots int   // the slots from Slot the calls taken may be used in
	Max   int   // the bound of every window
	Want  int
}

// Taken is what a Take counted: Taken calls, to be used up to slot Until, and the counts of
// the Span slots ending at the take's slot after it, oldest first (leases that end later in
// the last).
type Taken struct {
	Taken  int
	Until  int64
	Counts []int
}

// leaseSlots is how many slots a lease of a process that takes a few calls at a time reaches
// over: up to ten, as long as they last no more than ten seconds. A per-second limit is then
// taken about once a second rather than ten times, a per-minute one once in ten seconds.
func leaseSlots(w window) int {
	slotLen := w.period / time.Duration(w.slots)
	return max(1, min(10, w.slots, int(10*time.Second/slotLen)))
}

// Meter counts calls against their checks.
type Meter struct {
	// Windows keeps the counts of rates; nil keeps them in this process.
	Windows Windows
	// Batch takes calls from Windows a few at a time (a fleet's shared counts); otherwise one
	// at a time.
	Batch bool
	// Holds keeps the places among concurrent calls each process holds, for a fleet; nil
	// counts concurrent calls in this process. With it, Close gives back what the process
	// holds when it stops.
	Holds Holds
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu       sync.Mutex
	counters map[string]*counter
	inflight map[string]int
	holdings map[string]*holding
	local    *memoryWindows
	// upkeep starts the upkeep of the holdings once; cancelUpkeep stops it (Close).
	upkeep       sync.Once
	cancelUpkeep func()
	sweepAt      int
}

// counter is this process's share of one rate's counts: the calls it took in its lease, and
// how long the rate stays spent.
type counter struct {
	mu sync.Mutex
	// The calls taken from slot from, for use up to slot until, and how many were let through.
	// A new lease is taken only once those taken are used, so that none is let through past
	// the end of the lease it came with.
	from, until int64
	taken, used int
	lease       int // counts the leases, so that a call given back goes back to its own
	rate        int // calls a slot let through in the lease before, for the size of a take
	spentUntil  time.Time
	spentMax    int       // the bound spentUntil was reckoned for
	idleAfter   time.Time // the end of its lease, or of its being spent
}

// Refusal is a call a check refused.
type Refusal struct {
	Limit      string
	Quantity   Quantity
	Max        int
	RetryAfter time.Duration
}

// Result is the refusal as the caller and a model read it: an error result with code
// rate_limited (quota_exhausted for a daily bound) that names the limit and says when to try
// again, also in its Meta ({"limit", "retry_after_seconds"}).
func (r *Refusal) Result() *quiver.Result {
	secs := r.RetryAfterSeconds()
	when := fmt.Sprintf("try again in %d seconds", secs)
	if r.Quantity == Concurrent {
		when = "try again when one of them has ended"
	}
	res := quiver.Errorf(r.Quantity.code(), "%s: %s", r.Reached(), when)
	res.Meta, _ = json.Marshal(map[string]any{"limit": r.Limit, "retry_after_seconds": secs})
	return res
}

// Reached says which bound is reached: "the limit "x" allows 5 calls per minute and is
// reached" (a cost in the price table's unit).
func (r *Refusal) Reached() string {
	if r.Quantity == CostPerDay || r.Quantity == CostPerMonth {
		return fmt.Sprintf("the limit %q allows a cost of %s per %s and is reached", r.Limit,
			strconv.FormatFloat(float64(r.Max)/1e6, 'f', -1, 64), r.Quantity.Period())
	}
	return fmt.Sprintf("the limit %q allows %d %s and is reached", r.Limit, r.Max, r.Quantity)
}

// RetryAfterSeconds is RetryAfter in whole seconds, at least 1.
func (r *Refusal) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(r.RetryAfter.Seconds())))
}

func (m *Meter) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Admit counts a call against checks: when every check lets it through, it returns the
// function to call once the call has ended (which frees its place among concurrent calls);
// otherwise the first refusal, and the call is counted nowhere. An error is the Windows'
// (a database that cannot be reached): the caller decides whether to let calls through.
func (m *Meter) Admit(ctx context.Context, workspaceID string, checks []Check) (release func(), refusal *Refusal, err error) {
	if len(checks) == 0 {
		return func() {}, nil, nil
	}
	var held []string  // concurrent places taken
	var took []counted // calls counted in this process's leases
	undo := func() {
		m.releaseAll(workspaceID, held)
		for _, t := range took {
			t.c.giveBack(t.lease)
		}
	}
	for i := range checks {
		ch := &checks[i]
		if ch.Quantity == Concurrent {
			ok, err := m.hold(ctx, workspaceID, ch)
			if err != nil || !ok {
				undo()
				if err != nil {
					return nil, nil, err
				}
				return nil, &Refusal{Limit: ch.Limit, Quantity: Concurrent, Max: ch.Max, RetryAfter: time.Second}, nil
			}
			held = append(held, ch.Key)
			continue
		}
		c := m.counter(workspaceID, ch.Key)
		lease, r, err := m.take(ctx, workspaceID, c, ch)
		if err != nil || r != nil {
			undo()
			return nil, r, err
		}
		took = append(took, counted{c, lease})
	}
	return func() { m.releaseAll(workspaceID, held) }, nil, nil
}

// counted is a call counted in a counter's lease.
type counted struct {
	c     *counter
	lease int
}

// take counts one call in c for rate check ch, taking more from the Windows when this
// process has used what it took; it returns the lease the call was counted in.
func (m *Meter) take(ctx context.Context, workspaceID string, c *counter, ch *Check) (int, *Refusal, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The time once the counter is this call's: a call that waited for another's take must not
	// count in a lease that has ended.
	now := m.now()
	w := windows[ch.Quantity]
	slotLen := w.period / time.Duration(w.slots)
	slot := now.UnixNano() / int64(slotLen)
	span := w.slots + 1
	if slot > c.until {
		c.endLease(slot)
	}
	if c.used < c.taken {
		// What this process took and has not used (or another check gave back) goes first,
		// spent or not.
		c.used++
		return c.lease, nil, nil
	}
	// Spent for the bound it was refused under: a bound raised since asks again.
	if now.Before(c.spentUntil) && ch.Max <= c.spentMax {
		return 0, &Refusal{Limit: ch.Limit, Quantity: ch.Quantity, Max: ch.Max, RetryAfter: c.spentUntil.Sub(now)}, nil
	}
	t := Take{Key: ch.Key, Slot: slot, Span: span, Slots: 1, Max: ch.Max, Want: 1}
	if m.Batch {
		// As many as this process let through in a lease's slots before, then twice what it
		// took in this one when that runs out: a few takes a lease whatever the rate, and what
		// is taken and not used (lost to the other nodes until it leaves the window) about one
		// lease's use at most; never more than a tenth of the bound.
		t.Slots = leaseSlots(w)
		if c.until == slot {
			// Near the bound the last take was of this slot alone: so is the next.
			t.Slots = 1
		}
		t.Want = min(max(1, c.rate*t.Slots, 2*c.taken), max(1, ch.Max/10))
	}
	var got Taken
	if m.Windows != nil {
		var err error
		if got, err = m.Windows.Take(ctx, workspaceID, t); err != nil {
			return 0, nil, err
		}
	} else {
		got.Taken, got.Counts = m.memory().take(workspaceID, ch.Key, slot, span, ch.Max, t.Want, now, slotLen)
		got.Until = slot
	}
	if got.Taken == 0 {
		c.spentUntil, c.spentMax = time.Unix(0, (slot+int64(slotsToFree(got.Counts, ch.Max)))*int64(slotLen)), ch.Max
		c.idleAfter = c.spentUntil
		return 0, &Refusal{Limit: ch.Limit, Quantity: ch.Quantity, Max: ch.Max, RetryAfter: c.spentUntil.Sub(now)}, nil
	}
	c.taken += got.Taken
	c.until, c.lease = got.Until, c.lease+1
	c.idleAfter = time.Unix(0, (got.Until+1)*int64(slotLen))
	c.used++
	return c.lease, nil, nil
}

// endLease starts the counter over at slot, after its lease has ended: the calls a slot it
// let through, when the lease ended just before slot, size the next take.
func (c *counter) endLease(slot int64) {
	c.rate = 0
	if c.until == slot-1 && c.used > 0 {
		c.rate = (c.used + int(c.until-c.from)) / int(c.until-c.from+1)
	}
	c.from, c.until, c.taken, c.used = slot, slot-1, 0, 0
	c.lease++
}

// slotsToFree is how many slots on from the current one a call fits again: when enough of
// the oldest counts have left the window that the rest are under max.
func slotsToFree(counts []int, max int) int {
	sum := 0
	for _, n := range counts {
		sum += n
	}
	for k, n := range counts {
		if sum < max {
			return k
		}
		sum -= n
	}
	return len(counts)
}

// giveBack returns a call counted in lease that another check refused: this process lets
// the next call through on it, if that lease is still the counter's.
func (c *counter) giveBack(lease int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lease == lease && c.used > 0 {
		c.used--
	}
}

func (m *Meter) memory() *memoryWindows {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.local == nil {
		m.local = &memoryWindows{counts: map[string]*slots{}}
	}
	return m.local
}

// memoryIfAny is the process's counts, nil when none were made.
func (m *Meter) memoryIfAny() *memoryWindows {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.local
}

// counter returns this process's counter of workspace's key.
func (m *Meter) counter(workspaceID, key string) *counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counters == nil {
		m.counters = map[string]*counter{}
	}
	k := workspaceID + "\x00" + key
	c := m.counters[k]
	if c == nil {
		m.sweep()
		c = &counter{}
		m.counters[k] = c
	}
	return c
}

// sweep drops the counters no call needs now, once they are many (a limit per key or per
// tool makes a counter per key or tool): those whose slot has ended and that are not spent.
// What they counted is in the Windows.
func (m *Meter) sweep() {
	if len(m.counters) < max(m.sweepAt, 4096) {
		return
	}
	now := m.now()
	for k, c := range m.counters {
		if c.mu.TryLock() {
			if now.After(c.idleAfter) {
				delete(m.counters, k)
			}
			c.mu.Unlock()
		}
	}
	m.sweepAt = 2 * len(m.counters)
}

// hold takes a place among the concurrent calls ch bounds: in Holds when the Meter has them,
// else in this process.
func (m *Meter) hold(ctx context.Context, workspaceID string, ch *Check) (bool, error) {
	if m.Holds != nil {
		return m.holdShared(ctx, workspaceID, ch)
	}
	return m.holdLocal(workspaceID, ch), nil
}

// holdLocal takes a place among the concurrent calls ch bounds, in this process.
func (m *Meter) holdLocal(workspaceID string, ch *Check) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inflight == nil {
		m.inflight = map[string]int{}
	}
	k := workspaceID + "\x00" + ch.Key
	if m.inflight[k] >= ch.Max {
		return false
	}
	m.inflight[k]++
	return true
}

func (m *Meter) releaseAll(workspaceID string, keys []string) {
	if len(keys) == 0 {
		return
	}
	if m.Holds != nil {
		for _, key := range keys {
			m.releaseShared(workspaceID, key)
		}
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, key := range keys {
		k := workspaceID + "\x00" + key
		if m.inflight[k] <= 1 {
			delete(m.inflight, k)
		} else {
			m.inflight[k]--
		}
	}
}
