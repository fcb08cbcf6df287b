package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Lease is a place one holder takes among the capped places of a kind that every node of a
// fleet shares: an MCP session, an event stream. It lasts until it is released or until it
// expires without being renewed, so that what a node held when it died frees itself.
type Lease struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	// Kind names the places the lease is one of ("mcp-session", "event-stream"): caps count
	// the live leases of one kind.
	Kind string `json:"kind"`
	// Owner is whom the lease is held for (an API key's id, an IP address), for the cap per
	// owner; at most 200 bytes.
	Owner string `json:"owner"`
	// Holder, when set, is the id of the lease of the node holding this one (kind
	// HolderKind): the lease counts only while its holder's lives, so that what a node held
	// stops counting as soon as the node's own lease lapses, whatever this one's expiry (an
	// event stream, held as long as its connection). Empty: the lease stands on its own.
	Holder string `json:"holder,omitempty"`
	// Data is what the holder keeps with the lease (an MCP session's state), as given; at
	// most MaxLeaseData bytes.
	Data      json.RawMessage `json:"data,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt time.Time       `json:"expires_at"`
}

// MaxLeaseData caps a lease's Data.
const MaxLeaseData = 64 << 10

// HolderKind is the kind of the leases that nodes hold for themselves, renewed while they
// live, which other leases name as their Holder.
const HolderKind = "node"

// LeaseLimits caps the live leases of a kind: in all the workspaces together, in one
// workspace and for one owner (of one workspace). Negative means no cap.
type LeaseLimits struct {
	Total, PerWorkspace, PerOwner int
}

// NoLeaseLimits caps nothing.
var NoLeaseLimits = LeaseLimits{Total: -1, PerWorkspace: -1, PerOwner: -1}

// ErrLeaseLimit is the error of an acquisition beyond a cap; the *LeaseLimitError that wraps
// it says which.
var ErrLeaseLimit = errors.New("store: lease limit reached")

// LeaseLimitError is an acquisition refused because a cap of LeaseLimits was reached.
type LeaseLimitError struct {
	// Cap is the cap reached: "total", "workspace" or "owner".
	Cap string
	// Live is the number of live leases the cap counts, Limit the cap.
	Live, Limit int
}

func (e *LeaseLimitError) Error() string {
	return fmt.Sprintf("store: %d live leases, the limit %s", e.Live, map[string]string{
		"total": "in all", "workspace": "of the workspace", "owner": "of the owner"}[e.Cap])
}

// Unwrap returns ErrLeaseLimit.
func (e *LeaseLimitError) Unwrap() error { return ErrLeaseLimit }

// CheckLease reports, wrapping ErrInvalid, a lease or a time to live that breaks a rule by
// itself; every backend applies it.
func CheckLease(l *Lease, ttl time.Duration) error {
	switch {
	case l == nil:
		return fmt.Errorf("nil lease: %w", ErrInvalid)
	case l.WorkspaceID == "" || l.Kind == "":
		return fmt.Errorf("a lease needs a workspace and a kind: %w", ErrInvalid)
	case len(l.Kind) > 50 || len(l.Owner) > 200 || len(l.ID) > 200 || len(l.Holder) > 200:
		return fmt.Errorf("a lease's kind is at most 50 bytes, its owner, holder and id 200: %w", ErrInvalid)
	case len(l.Data) > MaxLeaseData:
		return fmt.Errorf("a lease's data is %d bytes, more than %d: %w", len(l.Data), MaxLeaseData, ErrInvalid)
	case len(l.Data) > 0 && !json.Valid(l.Data):
		return fmt.Errorf("a lease's data is not JSON: %w", ErrInvalid)
	}
	return CheckLeaseTTL(ttl)
}

// MinLeaseTTL and MaxLeaseTTL bound a lease's time to live.
const (
	MinLeaseTTL = 100 * time.Millisecond
	MaxLeaseTTL = 30 * 24 * time.Hour
)

// CheckLeaseTTL reports a time to live outside MinLeaseTTL to MaxLeaseTTL, wrapping ErrInvalid.
func CheckLeaseTTL(ttl time.Duration) error {
	if ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return fmt.Errorf("a lease lives %s to %s, not %s: %w", MinLeaseTTL, MaxLeaseTTL, ttl, ErrInvalid)
	}
	return nil
}

// Leases are the places that the nodes of a fleet share (see Lease). Times are the store's
// clock (the database's, which every node shares), never a node's.
type Leases interface {
	// AcquireLease stores l for ttl unless a live lease of its kind would then exceed one of
	// limits: that is a *LeaseLimitError, and nothing is stored. A lease is live until it
	// expires, and, when it names a holder, while its holder's lease is live. Acquisitions of a kind take
	// turns across the fleet, so caps hold exactly. The store sets ID (when empty), CreatedAt
	// and ExpiresAt; an ID already taken is ErrConflict. Expired leases of the kind and
	// workspace are removed on the way.
	AcquireLease(ctx context.Context, l *Lease, ttl time.Duration, limits LeaseLimits) error
	// RenewLease makes the lease last ttl from now and returns it; a lease that expired or was
	// released is ErrNotFound (its holder's is not looked at).
	RenewLease(ctx context.Context, workspaceID, id string, ttl time.Duration) (*Lease, error)
	// UpdateLease applies fn to the live lease inside one transaction and stores its Data
	// (nothing else may change); ErrNotFound when it is not live.
	UpdateLease(ctx context.Context, workspaceID, id string, fn func(*Lease) error) (*Lease, error)
	// ReleaseLease ends the lease; releasing one that is not live is ErrNotFound.
	ReleaseLease(ctx context.Context, workspaceID, id string) error
}
