package mcp

import (
	"context"
	"errors"
	"sync"
	"time"
)

// AnswerLedger keeps the answers to multi round-trip requests that were taken, so that a
// user's answer is taken once: a confirmation approves one run of the call, and a client
// that sends the same answer again (a retry, a replay) has its user asked again. Give the
// nodes of a fleet one ledger they share (quiver serve: the store's leases), as they share
// [ServerOptions.States].
type AnswerLedger interface {
	// Take records that the answer to the request state named id is taken, and reports false
	// when it was taken already. The record need not outlive expires, after which the state
	// is refused anyway.
	Take(ctx context.Context, id string, expires time.Time) (bool, error)
}

// maxLocalAnswers bounds the answers a server's own ledger remembers: past it, answers are
// refused (their users asked again) until the oldest expire.
const maxLocalAnswers = 100_000

// errLedgerFull is a server's own ledger holding maxLocalAnswers answers that have not expired.
var errLedgerFull = errors.New("too many confirmations answered in the last minutes to remember another")

// localAnswers is the ledger of a server given none: this process's memory, which is enough
// for a server whose request states no other process opens (see newStateKeys).
type localAnswers struct {
	mu    sync.Mutex
	taken map[string]time.Time // id: when its state expires
	now   func() time.Time
}

func newLocalAnswers() *localAnswers {
	return &localAnswers{taken: map[string]time.Time{}, now: time.Now}
}

func (l *localAnswers) Take(_ context.Context, id string, expires time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.taken[id]; ok {
		return false, nil
	}
	if len(l.taken) >= maxLocalAnswers {
		now := l.now()
		for k, exp := range l.taken {
			if now.After(exp) {
				delete(l.taken, k)
			}
		}
		if len(l.taken) >= maxLocalAnswers {
			return false, errLedgerFull
		}
	}
	l.taken[id] = expires
	return true, nil
}
