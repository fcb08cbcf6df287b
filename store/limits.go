package store

import (
	"context"
	"encoding/json"
	"time"
)

// WorkspaceLimits is a workspace's limits document: how often and how much its callers may
// call (see platform/limits). The store keeps Document as the platform encodes it (a JSON
// object) and never reads it. A change to it changes Entities.ToolsStamp, so that every node
// serving the workspace sees it within a recheck.
type WorkspaceLimits struct {
	WorkspaceID string
	// Document is a JSON object, at most MaxLimitsBytes.
	Document json.RawMessage
	// Version counts the workspace's changes to its document: 1, 2, ...; 0 when none was ever
	// stored. Set by the store.
	Version   int64
	UpdatedBy string
	UpdatedAt time.Time
}

// MaxLimitsBytes bounds a workspace's limits document.
const MaxLimitsBytes = 2 << 20

// Limits keeps each workspace's limits document, versioned as its entitlements are.
type Limits interface {
	// WorkspaceLimits returns the workspace's document; Version 0 and no Document when it
	// never stored one. ErrNotFound for no such workspace.
	WorkspaceLimits(ctx context.Context, workspaceID string) (*WorkspaceLimits, error)
	// PutWorkspaceLimits stores l's Document as the workspace's next version when its current
	// version is after (ErrConflict otherwise), setting l's Version and UpdatedAt. A Document
	// that is not a JSON object, or over MaxLimitsBytes, is ErrInvalid; ErrNotFound for no
	// such workspace.
	PutWorkspaceLimits(ctx context.Context, l *WorkspaceLimits, after int64) error
}

// CheckLimits reports, wrapping ErrInvalid, a limits document no store keeps.
func CheckLimits(l *WorkspaceLimits) error {
	if l == nil {
		return checkWorkspaceDocument("the limits document", "", nil, MaxLimitsBytes, '{')
	}
	return checkWorkspaceDocument("the limits document", l.WorkspaceID, l.Document, MaxLimitsBytes, '{')
}

// LimitWindows keeps the counts of rate limits where every node of a fleet finds them (see
// platform/limits.Windows): a store that several processes share implements it (PostgreSQL);
// over one that one process serves (SQLite), the platform counts in the process, exactly.
type LimitWindows interface {
	// TakeLimitWindow counts up to t.Want calls in a lease of the workspace's counter t.Key:
	// t.Slots slots from t.Slot when every window of t.Span slots the lease meets keeps a
	// quarter of t.Max free after it (each window holds every lease that meets it, since a
	// lease's calls may fall in any of its slots); else the slot t.Slot alone, in which it
	// counts up to t.Want/t.Slots, as many as keep those windows within t.Max. It returns how many it counted, the last slot of the lease and the counts of the
	// t.Span slots ending at t.Slot after it, oldest first (want 0 reads them). Counters whose
	// slots have all left their window are dropped as they are next counted in, or by
	// PurgeLimits.
	TakeLimitWindow(ctx context.Context, t LimitTake) (LimitTaken, error)
}

// LimitTake is what a node asks of a counter of a rate limit (see LimitWindows).
type LimitTake struct {
	WorkspaceID, Key string
	// Slot is the node's current slot; Span the slots of a window (at most MaxLimitSpan).
	Slot int64
	Span int
	// Slots is how many slots from Slot the calls taken may be used in (1 to Span).
	Slots int
	// Max is the bound of every window; Want how many calls the node asks for.
	Max, Want int
}

// LimitTaken is what a take counted (see LimitWindows).
type LimitTaken struct {
	// Taken is how many calls were counted; they may be used up to slot Until, inclusive.
	Taken int
	Until int64
	// Counts are the counts of the Span slots ending at the take's slot, oldest first; counts
	// of leases that end later are in the last.
	Counts []int
}

// MaxLimitSpan bounds the slots of a limit's window a take reads.
const MaxLimitSpan = 1000

// LimitCounts reads a fleet's counts of a workspace's limits (what a console shows of how close
// each is): a store that implements LimitWindows and LimitHolds implements it too.
type LimitCounts interface {
	// LimitCounts returns, by counter key, the counts of the slots still in each counter's
	// window by the database's clock, and the places of concurrent calls the nodes hold;
	// at most MaxLimitCounters of them.
	LimitCounts(ctx context.Context, workspaceID string) (map[string]int, error)
}

// MaxLimitCounters bounds what LimitCounts returns: a limit per key of a workspace with many
// keys has as many counters.
const MaxLimitCounters = 10_000

// LimitHolds keeps the places among limits' concurrent calls that each process holds, where
// every node of a fleet finds them (see platform/limits.Holds): a store that several
// processes share implements it (PostgreSQL); over one that one process serves, the platform
// counts concurrent calls in the process.
type LimitHolds interface {
	// HoldLimit sets what node holds of the workspace's counter key: want places, as many of
	// them as the other nodes' live holdings leave within max, for ttl from now; it returns
	// what node holds. A holding not set again within its ttl lapses.
	HoldLimit(ctx context.Context, workspaceID, key, node string, want, max int, ttl time.Duration) (int, error)
}

// LimitPurger drops the counts of limits that no longer count: slots that have left every
// window (a counter no call counts in any more keeps them otherwise) and holdings that lapsed.
// The retention purge runs it.
type LimitPurger interface {
	PurgeLimits(ctx context.Context) (int64, error)
}
