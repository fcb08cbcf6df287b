package limits

import (
	"sync"
	"time"
)

// memoryWindows keeps counts in this process, exactly: what a Meter without Windows counts in.
type memoryWindows struct {
	mu      sync.Mutex
	counts  map[string]*slots
	sweepAt int
}

// slots are a counter's counts of its last span slots, a ring: the count of slot s is at
// s mod span while s is within span of newest.
type slots struct {
	newest  int64
	n       []int
	expires time.Time // when every slot counted has left the window
}

// take is Windows.Take in this process, at now, for slots of slotLen.
func (w *memoryWindows) take(workspaceID, key string, slot int64, span, max, want int, now time.Time, slotLen time.Duration) (int, []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := workspaceID + "\x00" + key
	s := w.counts[k]
	if s == nil || len(s.n) != span {
		w.sweep(now)
		s = &slots{newest: slot, n: make([]int, span)}
		w.counts[k] = s
	}
	// A take whose slot is older than one counted already (it waited on a lock) counts in the
	// newest: a count is never put where it would leave the window before those it came after.
	if slot < s.newest {
		slot = s.newest
	}
	s.advance(slot)
	s.expires = time.Unix(0, (slot+int64(span))*int64(slotLen))
	sum := 0
	for _, n := range s.n {
		sum += n
	}
	taken := min(want, max-sum)
	if taken < 0 {
		taken = 0
	}
	s.n[int(slot%int64(span))] += taken
	counts := make([]int, span)
	for i := range span {
		counts[i] = s.n[int((slot-int64(span)+1+int64(i))%int64(span))]
	}
	return taken, counts
}

// advance clears the slots between the newest counted and slot, which start at 0.
func (s *slots) advance(slot int64) {
	span := int64(len(s.n))
	if slot <= s.newest {
		return
	}
	for t := s.newest + 1; t <= slot && t <= s.newest+span; t++ {
		s.n[t%span] = 0
	}
	s.newest = slot
}

// sweep drops the counters whose every slot has left the window, once they are many.
func (w *memoryWindows) sweep(now time.Time) {
	if len(w.counts) < max(w.sweepAt, 4096) {
		return
	}
	for k, s := range w.counts {
		if now.After(s.expires) {
			delete(w.counts, k)
		}
	}
	w.sweepAt = 2 * len(w.counts)
}
