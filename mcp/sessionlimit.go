package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The caps on the sessions open through one HTTP handler, in total and per owner.

// sessionLimiter counts the sessions open through one HTTP handler, in total and per owner.
type sessionLimiter struct {
	max, perOwner int // negative: no cap
	idle          time.Duration
	logger        *slog.Logger
	pool          *sessionLimiter // shared with other handlers, or nil; locked after this one

	mu       sync.Mutex
	total    int
	owners   map[string]int
	refused  int       // refusals not yet logged
	lastLog  time.Time // of a refusal
	lastKind string

	// ends holds, by session id, a channel closed once the session's place is given back,
	// so that a DELETE is answered only then: a client that closes a session and opens
	// another at once finds the place free.
	ends sync.Map
}

// awaitRelease waits until the session's place is given back, if it holds one, or ctx ends,
// within a few seconds.
func (l *sessionLimiter) awaitRelease(ctx context.Context, sessionID string) {
	v, ok := l.ends.Load(sessionID)
	if !ok {
		return
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-v.(chan struct{}):
	case <-ctx.Done():
	case <-t.C:
	}
}

// refusal is why a session is refused, and how to answer.
type refusal struct {
	status  int
	message string
	kind    string // the limit, for the log
}

// refusalLogEvery bounds the log lines a flood of refused sessions produces.
const refusalLogEvery = 10 * time.Second

// acquire takes a place for a session of owner, or says why there is none.
func (l *sessionLimiter) acquire(owner string) (*sessionSlot, *refusal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ref *refusal
	if l.pool != nil {
		l.pool.mu.Lock()
		defer l.pool.mu.Unlock()
		// The server's total first: when it is full, that is what a client must hear.
		if ref = l.pool.refusal(owner, "the server"); ref != nil {
			ref.kind = "the server's total (pool)"
		}
	}
	if ref == nil {
		ref = l.refusal(owner, "the server")
	}
	if ref != nil {
		l.refused++
		if now := time.Now(); now.Sub(l.lastLog) >= refusalLogEvery || ref.kind != l.lastKind {
			l.logger.Warn("mcp: refusing new sessions over the limit", "limit", ref.kind, "open", l.total, "refused", l.refused, "owner", truncate(owner, 100))
			l.refused, l.lastLog, l.lastKind = 0, now, ref.kind
		}
		return nil, ref
	}
	l.total++
	l.owners[owner]++
	if l.pool != nil {
		l.pool.total++
	}
	return &sessionSlot{l: l, owner: owner}, nil
}

// refusal says why owner may not open another session here, or nil; l.mu is held.
func (l *sessionLimiter) refusal(owner, who string) *refusal {
	switch {
	case l.max >= 0 && l.total >= l.max:
		where := who
		if l.pool != nil {
			where = "this workspace" // a share of the pool
		}
		return &refusal{http.StatusServiceUnavailable, sessionLimitText(where+" has %d open, its limit", l.total, l.idleText()), "MaxSessions"}
	case l.perOwner >= 0 && l.owners[owner] >= l.perOwner:
		return &refusal{http.StatusTooManyRequests, sessionLimitText(perClient(owner), l.owners[owner], l.idleText()), "MaxSessionsPerOwner"}
	}
	return nil
}

// perClient is how a refusal names an owner's cap.
func perClient(owner string) string {
	return truncate(owner, 100) + " has %d open, the limit per client"
}

// sessionLimitText is the words of a refused session: which cap (what, with a %d for the
// sessions open), and what to do.
func sessionLimitText(what string, open int, idle string) string {
	return fmt.Sprintf("too many MCP sessions: "+what+"; close the sessions you no longer use "+
		"(HTTP DELETE with their Mcp-Session-Id) or retry later: "+idle, open)
}

func (l *sessionLimiter) idleText() string {
	if l.idle <= 0 {
		return "a session closes at the server's shutdown" // no idle timeout
	}
	return idleText(l.idle)
}

// idleText says when a session closes by itself, for a refusal.
func idleText(idle time.Duration) string {
	if idle <= 0 {
		return "sessions here do not close by themselves"
	}
	return fmt.Sprintf("a session closes after %s without a request", idle)
}

// add counts a session whose place was given back too early (see sessionSlot.bind); it may
// take the count over the cap, which it then only delays new sessions.
func (l *sessionLimiter) add(owner string) {
	l.mu.Lock()
	l.total++
	l.owners[owner]++
	if l.pool != nil {
		l.pool.mu.Lock()
		l.pool.total++
		l.pool.mu.Unlock()
	}
	l.mu.Unlock()
}

func (l *sessionLimiter) release(owner string) {
	l.mu.Lock()
	l.total--
	if l.owners[owner]--; l.owners[owner] <= 0 {
		delete(l.owners, owner)
	}
	if l.pool != nil {
		l.pool.mu.Lock()
		l.pool.total--
		l.pool.mu.Unlock()
	}
	l.mu.Unlock()
}

type slotKey struct{}

// sessionSlot is the place a request without a session id takes in the limiter. The SDK
// gives no hook for a session's start or end, but it keeps the values of the context of the
// request that opened a session in the contexts of all its requests: the receiving middleware
// finds the slot there and binds it to the session, which gives the place back when it ends.
// A request that opened no lasting session gives it back when it is answered.
type sessionSlot struct {
	l     *sessionLimiter
	owner string

	bound atomic.Bool // fast path: the middleware looks at every request of the session
	mu    sync.Mutex
	// settled: the request that opened the session was answered; an unbound slot was given
	// back then.
	settled bool
}

// bind ties the slot to its session: the place is given back when the session ends.
func (sl *sessionSlot) bind(ss *sdk.ServerSession) {
	if sl.bound.Load() {
		return
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.bound.Load() {
		return
	}
	sl.bound.Store(true)
	if sl.settled {
		// The opening request was answered before its first message was handled (its client
		// went away): the SDK closes such sessions, but count it until it is gone.
		sl.l.add(sl.owner)
	}
	done := make(chan struct{})
	sl.l.ends.Store(ss.ID(), done)
	go func() {
		_ = ss.Wait()
		sl.l.release(sl.owner)
		sl.l.ends.Delete(ss.ID())
		close(done)
	}()
}

// settle is called once the request that took the slot is answered.
func (sl *sessionSlot) settle() {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.settled = true
	if !sl.bound.Load() {
		sl.l.release(sl.owner)
	}
}
