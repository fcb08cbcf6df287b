package limits

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Concurrent calls on a fleet: each node holds places among a limit's concurrent calls in the
// database (Holds), a few more than it runs, so that a call starts without a write while the
// node has a free place; it takes more when it runs out, renews its holding while it uses it,
// and gives back what it has not needed for a moment. The nodes together never hold more than
// the bound, so never run more calls at once than it. A node that dies stops renewing, and
// its places lapse after HoldTTL: until then the others have fewer, never more.

// Holds keeps the places each process holds among limits' concurrent calls (see
// store.LimitHolds): the process's own holding, set to want places, as many of them as the
// others' leave within max.
type Holds interface {
	Hold(ctx context.Context, workspaceID, key string, want, max int) (held int, err error)
}

// HoldTTL is how long a node's holding lasts without being renewed; a node renews what it
// holds every HoldTTL/3.
const HoldTTL = 15 * time.Second

// holdGrace is how long a node keeps places it holds and does not use before giving them back.
const holdGrace = time.Second

// holding is this process's places among one counter's concurrent calls.
type holding struct {
	mu       sync.Mutex
	held     int // places held in Holds
	inflight int // calls running now
	max      int
	renewed  time.Time // when held was last set in Holds
	used     time.Time // when inflight last reached held, or a call took a place
}

// holdShared takes a place of ch in Holds for a call of workspace's: one this process holds,
// else one more it is given. False when the fleet's places are all taken. The first starts
// the upkeep of the holdings (maintain), which Close stops.
func (m *Meter) holdShared(ctx context.Context, workspaceID string, ch *Check) (bool, error) {
	m.upkeep.Do(func() {
		uctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		m.cancelUpkeep = func() { cancel(); <-done }
		go func() {
			defer close(done)
			m.keepHoldings(uctx, holdInterval)
		}()
	})
	h := m.holding(workspaceID, ch)
	h.mu.Lock()
	defer h.mu.Unlock()
	now := m.now()
	h.max, h.used = ch.Max, now
	if h.inflight < h.held {
		h.inflight++
		return true, nil
	}
	// A few places more than the call needs: the next calls start without a write.
	want := min(ch.Max, h.inflight+max(1, ch.Max/10))
	held, err := m.Holds.Hold(ctx, workspaceID, ch.Key, want, ch.Max)
	if err != nil {
		return false, err
	}
	h.held, h.renewed = held, now
	if h.inflight >= h.held {
		return false, nil
	}
	h.inflight++
	return true, nil
}

// releaseShared frees the place a call of ch held.
func (m *Meter) releaseShared(workspaceID, key string) {
	m.mu.Lock()
	h := m.holdings[workspaceID+"\x00"+key]
	m.mu.Unlock()
	if h == nil {
		return
	}
	h.mu.Lock()
	if h.inflight > 0 {
		h.inflight--
	}
	h.mu.Unlock()
}

func (m *Meter) holding(workspaceID string, ch *Check) *holding {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holdings == nil {
		m.holdings = map[string]*holding{}
	}
	k := workspaceID + "\x00" + ch.Key
	h := m.holdings[k]
	if h == nil {
		h = &holding{}
		m.holdings[k] = h
	}
	return h
}

// holdInterval is how often a node looks at its holdings: to give back what it has not
// needed for holdGrace, and to renew the rest before they lapse.
const holdInterval = 500 * time.Millisecond

// Close stops the upkeep of this process's holdings, giving back the places it holds beyond
// the calls it runs. A Meter without Holds has nothing to stop.
func (m *Meter) Close() {
	m.upkeep.Do(func() {}) // no upkeep starts after Close
	if m.cancelUpkeep != nil {
		m.cancelUpkeep()
	}
}

// keepHoldings keeps this process's holdings in Holds until ctx ends: every interval it gives
// back the places it has not needed for a moment and renews the rest before they lapse.
func (m *Meter) keepHoldings(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.giveBackAll()
			return
		case <-t.C:
			m.maintain(ctx)
		}
	}
}

// maintain gives back or renews each holding, and forgets those that hold nothing.
func (m *Meter) maintain(ctx context.Context) {
	m.mu.Lock()
	keys := make([]string, 0, len(m.holdings))
	for k := range m.holdings {
		keys = append(keys, k)
	}
	m.mu.Unlock()
	now := m.now()
	for _, k := range keys {
		m.mu.Lock()
		h := m.holdings[k]
		m.mu.Unlock()
		if h == nil {
			continue
		}
		workspaceID, key, _ := strings.Cut(k, "\x00")
		h.mu.Lock()
		want := h.held
		if h.held > h.inflight && now.Sub(h.used) >= holdGrace {
			want = h.inflight
		}
		if want != h.held || (h.held > 0 && now.Sub(h.renewed) >= HoldTTL/3) {
			if held, err := m.Holds.Hold(ctx, workspaceID, key, want, h.max); err == nil {
				h.held, h.renewed = held, now
			}
		}
		idle := h.held == 0 && h.inflight == 0
		h.mu.Unlock()
		if idle {
			m.mu.Lock()
			if m.holdings[k] == h {
				delete(m.holdings, k)
			}
			m.mu.Unlock()
		}
	}
}

// giveBackAll gives back every place this process holds beyond the calls it runs (a node
// stopping), so that the others need not wait for them to lapse.
func (m *Meter) giveBackAll() {
	m.mu.Lock()
	hs := make(map[string]*holding, len(m.holdings))
	for k, h := range m.holdings {
		hs[k] = h
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for k, h := range hs {
		workspaceID, key, _ := strings.Cut(k, "\x00")
		h.mu.Lock()
		if h.held > h.inflight {
			if held, err := m.Holds.Hold(ctx, workspaceID, key, h.inflight, h.max); err == nil {
				h.held = held
			}
		}
		h.mu.Unlock()
	}
}
