package server

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// A node holds a lease of its own (store.HolderKind), renewed while it serves: the leases it
// takes for what it holds as long as a connection lasts (an event stream) name it as their
// holder, so that they stop counting against the fleet's caps as soon as the node's own lease
// lapses, within nodeLeaseTTL of its death, rather than each at its own expiry.

const (
	// nodeLeaseTTL is how long a node's lease outlives its last renewal; nodeLeaseEvery how
	// often a live node renews it: a renewal can fail a few times (a database restarting)
	// before the node's streams stop counting.
	nodeLeaseTTL   = 10 * time.Second
	nodeLeaseEvery = 2 * time.Second
	// nodeLeaseWorkspace is the workspace node leases are kept under: they are no tenant's.
	nodeLeaseWorkspace = "_fleet"
)

// nodeLease is this node's lease, kept alive until close.
type nodeLease struct {
	leases store.Leases
	id     string
	logger *slog.Logger
	stop   chan struct{}
	done   chan struct{}
}

// startNodeLease takes the node's lease and keeps it alive; a store that does not answer is
// tried again at each renewal (until it does, what the node holds is not counted).
func startNodeLease(ctx context.Context, leases store.Leases, logger *slog.Logger) *nodeLease {
	n := &nodeLease{leases: leases, id: stamp.ID(ctx, "node"), logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
	n.acquire(ctx)
	go n.keep(context.WithoutCancel(ctx))
	return n
}

func (n *nodeLease) acquire(ctx context.Context) {
	host, _ := os.Hostname()
	l := &store.Lease{ID: n.id, WorkspaceID: nodeLeaseWorkspace, Kind: store.HolderKind, Owner: host}
	if err := n.leases.AcquireLease(ctx, l, nodeLeaseTTL, store.NoLeaseLimits); err != nil {
		n.logger.Warn("server: taking the node's lease; the event streams it holds do not count against the fleet's caps until it is taken", "err", err)
	}
}

func (n *nodeLease) keep(ctx context.Context) {
	defer close(n.done)
	t := time.NewTicker(nodeLeaseEvery)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		_, err := n.leases.RenewLease(ctx, nodeLeaseWorkspace, n.id, nodeLeaseTTL)
		switch {
		case errors.Is(err, store.ErrNotFound):
			n.acquire(ctx) // lapsed (the store was away longer than its life): take it again
		case err != nil:
			n.logger.Warn("server: renewing the node's lease", "err", err)
		}
	}
}

// close stops renewing the lease and gives it back: what the node held stops counting now.
func (n *nodeLease) close() {
	select {
	case <-n.stop:
		return
	default:
	}
	close(n.stop)
	<-n.done
	if err := n.leases.ReleaseLease(context.Background(), nodeLeaseWorkspace, n.id); err != nil && !errors.Is(err, store.ErrNotFound) {
		n.logger.Warn("server: giving back the node's lease", "err", err)
	}
}
