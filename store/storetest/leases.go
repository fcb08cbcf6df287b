package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

// RunLeases runs the conformance tests of store.Leases against fresh stores from open. Stores
// that many nodes share (PostgreSQL) prove there that caps hold when nodes acquire at once:
// open may return a different handle on the same database each time it is called with the
// same test, and must return a handle on the same data (see the concurrency case, which
// opens twice).
func RunLeases(t *testing.T, open func(t *testing.T) store.Leases) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open func(t *testing.T) store.Leases)
	}{
		{"AcquireRenewUpdateRelease", testLeaseLife},
		{"CapsByOwnerWorkspaceAndTotal", testLeaseCaps},
		{"ExpiredLeasesFreeTheirPlace", testLeaseExpiry},
		{"LeasesCountWhileTheirHolderLives", testLeaseHolders},
		{"OtherWorkspacesSeeNothing", testLeaseIsolation},
		{"RefusesBadLeases", testLeaseRefusals},
		{"CapsHoldWhenAcquiredAtOnce", testLeaseConcurrency},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open) })
	}
}

// leaseKind is a kind of its own per test, so that tests sharing a database count only their
// own leases.
func leaseKind(t *testing.T) string {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	if len(name) > 30 {
		name = name[len(name)-30:]
	}
	return fmt.Sprintf("k%d-%s", time.Now().UnixNano()%1e9, name)
}

func testLeaseLife(t *testing.T, open func(t *testing.T) store.Leases) {
	ctx := context.Background()
	s := open(t)
	kind := leaseKind(t)
	l := &store.Lease{WorkspaceID: "ws_a", Kind: kind, Owner: "key_1", Data: json.RawMessage(`{"v":1}`)}
	if err := s.AcquireLease(ctx, l, time.Minute, store.NoLeaseLimits); err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if l.ID == "" || l.CreatedAt.IsZero() || l.ExpiresAt.Sub(l.CreatedAt) != time.Minute {
		t.Fatalf("acquired lease = %+v, want an id, a creation time and an expiry a minute later", l)
	}
	got, err := s.RenewLease(ctx, "ws_a", l.ID, time.Hour)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	if got.Owner != "key_1" || string(got.Data) != `{"v":1}` || got.ExpiresAt.Sub(l.CreatedAt) < time.Hour {
		t.Fatalf("renewed lease = %+v, want its owner, data and an expiry an hour on", got)
	}
	upd, err := s.UpdateLease(ctx, "ws_a", l.ID, func(l *store.Lease) error {
		l.Data, l.Owner = json.RawMessage(`{"v":2}`), "someone else"
		return nil
	})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if string(upd.Data) != `{"v":2}` || upd.Owner != "key_1" {
		t.Fatalf("updated lease = %+v, want the new data and the owner unchanged", upd)
	}
	refused := errors.New("refused")
	if _, err := s.UpdateLease(ctx, "ws_a", l.ID, func(*store.Lease) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("update whose fn fails: %v, want fn's error", err)
	}
	if got, err := s.RenewLease(ctx, "ws_a", l.ID, time.Hour); err != nil || string(got.Data) != `{"v":2}` {
		t.Fatalf("after a failed update: %+v, %v; want the data of the last update", got, err)
	}
	if err := s.ReleaseLease(ctx, "ws_a", l.ID); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := s.ReleaseLease(ctx, "ws_a", l.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second release: %v, want ErrNotFound", err)
	}
	if _, err := s.RenewLease(ctx, "ws_a", l.ID, time.Hour); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("renew after release: %v, want ErrNotFound", err)
	}
	again := &store.Lease{ID: "lse_fixed-" + kind, WorkspaceID: "ws_a", Kind: kind}
	if err := s.AcquireLease(ctx, again, time.Minute, store.NoLeaseLimits); err != nil {
		t.Fatalf("acquire with an id: %v", err)
	}
	taken := &store.Lease{ID: again.ID, WorkspaceID: "ws_b", Kind: kind}
	if err := s.AcquireLease(ctx, taken, time.Minute, store.NoLeaseLimits); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("acquire with an id taken: %v, want ErrConflict", err)
	}
}

func testLeaseCaps(t *testing.T, open func(t *testing.T) store.Leases) {
	ctx := context.Background()
	s := open(t)
	kind := leaseKind(t)
	limits := store.LeaseLimits{Total: 5, PerWorkspace: 3, PerOwner: 2}
	acquire := func(ws, owner string) error {
		return s.AcquireLease(ctx, &store.Lease{WorkspaceID: ws, Kind: kind, Owner: owner}, time.Minute, limits)
	}
	steps := []struct {
		ws, owner string
		cap       string // "" when it is granted
	}{
		{"ws_a", "k1", ""}, {"ws_a", "k1", ""}, {"ws_a", "k1", "owner"},
		{"ws_a", "k2", ""}, {"ws_a", "k3", "workspace"},
		{"ws_b", "k1", ""}, {"ws_b", "k2", ""}, {"ws_c", "k1", "total"},
	}
	for i, st := range steps {
		err := acquire(st.ws, st.owner)
		var le *store.LeaseLimitError
		switch {
		case st.cap == "" && err != nil:
			t.Fatalf("step %d (%s, %s): %v, want it granted", i, st.ws, st.owner, err)
		case st.cap != "" && (!errors.As(err, &le) || le.Cap != st.cap || !errors.Is(err, store.ErrLeaseLimit)):
			t.Fatalf("step %d (%s, %s): %v, want a LeaseLimitError on the %s cap", i, st.ws, st.owner, err, st.cap)
		}
	}
	other := &store.Lease{WorkspaceID: "ws_c", Kind: kind + "-other", Owner: "k1"}
	if err := s.AcquireLease(ctx, other, time.Minute, limits); err != nil {
		t.Fatalf("another kind counts apart: %v", err)
	}
}

func testLeaseExpiry(t *testing.T, open func(t *testing.T) store.Leases) {
	ctx := context.Background()
	s := open(t)
	kind := leaseKind(t)
	limits := store.LeaseLimits{Total: -1, PerWorkspace: 1, PerOwner: -1}
	first := &store.Lease{WorkspaceID: "ws_a", Kind: kind}
	if err := s.AcquireLease(ctx, first, time.Second, limits); err != nil {
		t.Fatal(err)
	}
	if err := s.AcquireLease(ctx, &store.Lease{WorkspaceID: "ws_a", Kind: kind}, time.Second, limits); !errors.Is(err, store.ErrLeaseLimit) {
		t.Fatalf("second lease while the first lives: %v, want ErrLeaseLimit", err)
	}
	// The store's clock decides; a little more than the time to live has passed on any clock
	// once the process's has gone past it by a margin.
	time.Sleep(time.Second + 200*time.Millisecond)
	if _, err := s.RenewLease(ctx, "ws_a", first.ID, time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("renew an expired lease: %v, want ErrNotFound", err)
	}
	if _, err := s.UpdateLease(ctx, "ws_a", first.ID, func(*store.Lease) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update an expired lease: %v, want ErrNotFound", err)
	}
	if err := s.AcquireLease(ctx, &store.Lease{WorkspaceID: "ws_a", Kind: kind}, time.Minute, limits); err != nil {
		t.Fatalf("acquire once the holder's lease expired: %v", err)
	}
	if err := s.ReleaseLease(ctx, "ws_a", first.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("release an expired lease: %v, want ErrNotFound", err)
	}
}

func testLeaseIsolation(t *testing.T, open func(t *testing.T) store.Leases) {
	ctx := context.Background()
	s := open(t)
	l := &store.Lease{WorkspaceID: "ws_a", Kind: leaseKind(t), Data: json.RawMessage(`{"secret":true}`)}
	if err := s.AcquireLease(ctx, l, time.Minute, store.NoLeaseLimits); err != nil {
		t.Fatal(err)
	}
	if got, err := s.RenewLease(ctx, "ws_b", l.ID, time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("renew from another workspace: %+v, %v; want ErrNotFound", got, err)
	}
	if got, err := s.UpdateLease(ctx, "ws_b", l.ID, func(*store.Lease) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update from another workspace: %+v, %v; want ErrNotFound", got, err)
	}
	if err := s.ReleaseLease(ctx, "ws_b", l.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("release from another workspace: %v, want ErrNotFound", err)
	}
	if _, err := s.RenewLease(ctx, "ws_a", l.ID, time.Minute); err != nil {
		t.Fatalf("the lease after the other workspace's tries: %v", err)
	}
}

func testLeaseRefusals(t *testing.T, open func(t *testing.T) store.Leases) {
	ctx := context.Background()
	s := open(t)
	kind := leaseKind(t)
	cases := []struct {
		name string
		l    *store.Lease
		ttl  time.Duration
	}{
		{"nil", nil, time.Minute},
		{"no workspace", &store.Lease{Kind: kind}, time.Minute},
		{"no kind", &store.Lease{WorkspaceID: "ws_a"}, time.Minute},
		{"data not JSON", &store.Lease{WorkspaceID: "ws_a", Kind: kind, Data: json.RawMessage(`{`)}, time.Minute},
		{"data too large", &store.Lease{WorkspaceID: "ws_a", Kind: kind, Data: json.RawMessage(`"` + strings.Repeat("x", store.MaxLeaseData) + `"`)}, time.Minute},
		{"owner too long", &store.Lease{WorkspaceID: "ws_a", Kind: kind, Owner: strings.Repeat("o", 201)}, time.Minute},
		{"ttl too short", &store.Lease{WorkspaceID: "ws_a", Kind: kind}, time.Millisecond},
		{"ttl too long", &store.Lease{WorkspaceID: "ws_a", Kind: kind}, 31 * 24 * time.Hour},
	}
	for _, c := range cases {
		if err := s.AcquireLease(ctx, c.l, c.ttl, store.NoLeaseLimits); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
	l := &store.Lease{WorkspaceID: "ws_a", Kind: kind}
	if err := s.AcquireLease(ctx, l, time.Minute, store.NoLeaseLimits); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateLease(ctx, "ws_a", l.ID, func(l *store.Lease) error { l.Data = json.RawMessage(`nope`); return nil }); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("update to data that is not JSON: %v, want ErrInvalid", err)
	}
	if _, err := s.RenewLease(ctx, "ws_a", l.ID, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("renew for 0s: %v, want ErrInvalid", err)
	}
}

// testLeaseConcurrency acquires from two handles at once (two nodes, where the store is shared)
// and checks that the caps granted exactly their number.
func testLeaseConcurrency(t *testing.T, open func(t *testing.T) store.Leases) {
	ctx := context.Background()
	nodes := []store.Leases{open(t), open(t)}
	kind := leaseKind(t)
	const attempts, perWorkspace = 40, 7
	limits := store.LeaseLimits{Total: -1, PerWorkspace: perWorkspace, PerOwner: -1}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
		other   []error
	)
	for i := range attempts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := nodes[i%2].AcquireLease(ctx, &store.Lease{WorkspaceID: "ws_a", Kind: kind, Owner: fmt.Sprint(i)}, time.Minute, limits)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				granted++
			case !errors.Is(err, store.ErrLeaseLimit):
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("acquisitions failed otherwise than on the cap: %v", other)
	}
	if granted != perWorkspace {
		t.Fatalf("%d of %d acquisitions at once were granted, want exactly the cap, %d", granted, attempts, perWorkspace)
	}
}

// testLeaseHolders: a lease that names a holder counts while the holder's lease lives, however
// long its own time to live, and stops counting (freeing its place) once the holder's lapses.
func testLeaseHolders(t *testing.T, open func(t *testing.T) store.Leases) {
	ctx := context.Background()
	s := open(t)
	kind := leaseKind(t)
	node := &store.Lease{WorkspaceID: "fleet", Kind: store.HolderKind, Owner: kind}
	if err := s.AcquireLease(ctx, node, time.Second, store.NoLeaseLimits); err != nil {
		t.Fatal(err)
	}
	limits := store.LeaseLimits{Total: -1, PerWorkspace: 1, PerOwner: -1}
	held := &store.Lease{WorkspaceID: "ws_a", Kind: kind, Holder: node.ID}
	if err := s.AcquireLease(ctx, held, time.Hour, limits); err != nil {
		t.Fatal(err)
	}
	if got, err := s.RenewLease(ctx, "ws_a", held.ID, time.Hour); err != nil || got.Holder != node.ID {
		t.Fatalf("the held lease: %+v, %v; want it with its holder", got, err)
	}
	if err := s.AcquireLease(ctx, &store.Lease{WorkspaceID: "ws_a", Kind: kind}, time.Minute, limits); !errors.Is(err, store.ErrLeaseLimit) {
		t.Fatalf("a second lease while the holder lives: %v, want ErrLeaseLimit", err)
	}
	time.Sleep(time.Second + 200*time.Millisecond) // the holder's lease lapses
	if err := s.AcquireLease(ctx, &store.Lease{WorkspaceID: "ws_a", Kind: kind}, time.Minute, limits); err != nil {
		t.Fatalf("a lease once the holder's lapsed: %v; want the held one no longer counted", err)
	}
}
