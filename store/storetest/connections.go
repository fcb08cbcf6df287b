package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

// ConnectionStore is what the connections conformance tests need.
type ConnectionStore interface {
	store.Entities
	store.Connections
}

// RunConnections runs the conformance tests of store.Connections against stores returned by
// open.
func RunConnections(t *testing.T, open func(t *testing.T) ConnectionStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s ConnectionStore)
	}{
		{"Providers", testConnectionProviders},
		{"Connections", testConnections},
		{"UpdateOnce", testConnectionUpdateOnce},
		{"Flows", testConnectionFlows},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

func connectionWorkspaces(t *testing.T, s ConnectionStore) {
	t.Helper()
	for _, ws := range []string{"wsp_c1", "wsp_c2"} {
		if err := s.CreateWorkspace(context.Background(), &store.Workspace{ID: ws, Name: ws}); err != nil {
			t.Fatal(err)
		}
	}
}

// The providers document is versioned as the other workspace documents are.
func testConnectionProviders(t *testing.T, s ConnectionStore) {
	ctx := context.Background()
	connectionWorkspaces(t, s)
	got, err := s.WorkspaceConnections(ctx, "wsp_c1")
	if err != nil || got.Version != 0 {
		t.Fatalf("never set: %+v %v", got, err)
	}
	doc := &store.WorkspaceConnections{WorkspaceID: "wsp_c1", Document: []byte(`{"providers":[]}`), UpdatedBy: "usr_a"}
	if err := s.PutWorkspaceConnections(ctx, doc, 0); err != nil || doc.Version != 1 {
		t.Fatalf("first version: %v %d", err, doc.Version)
	}
	if err := s.PutWorkspaceConnections(ctx, &store.WorkspaceConnections{WorkspaceID: "wsp_c1", Document: []byte(`{}`)}, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second writer from version 0: %v", err)
	}
	if err := s.PutWorkspaceConnections(ctx, &store.WorkspaceConnections{WorkspaceID: "wsp_c1", Document: []byte(`[]`)}, 1); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("not an object: %v", err)
	}
	if got, err := s.WorkspaceConnections(ctx, "wsp_c2"); err != nil || got.Version != 0 {
		t.Fatalf("another workspace's: %+v %v", got, err)
	}
	if _, err := s.WorkspaceConnections(ctx, "wsp_none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no such workspace: %v", err)
	}
}

// A connection is stored, replaced, listed, kept apart from other users and workspaces, and
// deleted with what it held returned.
func testConnections(t *testing.T, s ConnectionStore) {
	ctx := context.Background()
	connectionWorkspaces(t, s)
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	for _, c := range []*store.Connection{
		{WorkspaceID: "wsp_c1", UserID: "usr_1", Provider: "github", AccessToken: "sealed-a1", RefreshToken: "sealed-r1", Scopes: []string{"repo", "read:user"}, ExpiresAt: exp},
		{WorkspaceID: "wsp_c1", UserID: "usr_1", Provider: "google", AccessToken: "sealed-g1"},
		{WorkspaceID: "wsp_c1", UserID: "usr_2", Provider: "github", AccessToken: "sealed-a2"},
		{WorkspaceID: "wsp_c2", UserID: "usr_1", Provider: "github", AccessToken: "sealed-b1"},
	} {
		if err := s.PutConnection(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Connection(ctx, "wsp_c1", "usr_1", "github")
	if err != nil || c.AccessToken != "sealed-a1" || c.RefreshToken != "sealed-r1" || !slices.Equal(c.Scopes, []string{"repo", "read:user"}) ||
		!c.ExpiresAt.Equal(exp) || c.CreatedAt.IsZero() {
		t.Fatalf("read back: %+v %v", c, err)
	}
	if c, err := s.Connection(ctx, "wsp_c1", "usr_1", "google"); err != nil || !c.ExpiresAt.IsZero() {
		t.Fatalf("without an expiry: %+v %v", c, err)
	}
	if err := s.PutConnection(ctx, &store.Connection{WorkspaceID: "wsp_c1", UserID: "usr_1", Provider: "github", AccessToken: "sealed-a1b"}); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.Connection(ctx, "wsp_c1", "usr_1", "github"); c.AccessToken != "sealed-a1b" || c.RefreshToken != "" {
		t.Fatalf("replaced: %+v", c)
	}
	list, err := s.UserConnections(ctx, "wsp_c1", "usr_1")
	if err != nil || len(list) != 2 || list[0].Provider != "github" || list[1].Provider != "google" {
		t.Fatalf("usr_1's in wsp_c1: %+v %v", list, err)
	}
	if _, err := s.Connection(ctx, "wsp_c2", "usr_2", "github"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("usr_2 in wsp_c2: %v", err)
	}
	if err := s.PutConnection(ctx, &store.Connection{WorkspaceID: "wsp_c1", UserID: "usr_1", Provider: "x"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("no access token: %v", err)
	}
	gone, err := s.DeleteConnections(ctx, "wsp_c1", "usr_1", "")
	if err != nil || len(gone) != 2 {
		t.Fatalf("deleting usr_1's: %+v %v", gone, err)
	}
	if list, _ := s.UserConnections(ctx, "wsp_c1", "usr_1"); len(list) != 0 {
		t.Fatalf("after deletion: %+v", list)
	}
	if c, err := s.Connection(ctx, "wsp_c2", "usr_1", "github"); err != nil || c.AccessToken != "sealed-b1" {
		t.Fatalf("the other workspace's connection of usr_1: %+v %v", c, err)
	}
	if gone, err := s.DeleteConnections(ctx, "wsp_c1", "usr_2", "google"); err != nil || len(gone) != 0 {
		t.Fatalf("deleting a connection usr_2 does not have: %+v %v", gone, err)
	}
}

// UpdateConnection runs one at a time: ten updates at once, each reading the count in the
// access token and writing it plus one, end at ten; one that returns nil deletes.
func testConnectionUpdateOnce(t *testing.T, s ConnectionStore) {
	ctx := context.Background()
	connectionWorkspaces(t, s)
	if err := s.PutConnection(ctx, &store.Connection{WorkspaceID: "wsp_c1", UserID: "usr_1", Provider: "p", AccessToken: "0"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 10 {
		wg.Go(func() {
			_, err := s.UpdateConnection(ctx, "wsp_c1", "usr_1", "p", func(c *store.Connection) (*store.Connection, error) {
				var n int
				fmt.Sscan(c.AccessToken, &n)
				time.Sleep(time.Millisecond)
				return &store.Connection{AccessToken: fmt.Sprint(n + 1), Scopes: c.Scopes}, nil
			})
			if err != nil {
				failed.Add(1)
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if c, err := s.Connection(ctx, "wsp_c1", "usr_1", "p"); err != nil || c.AccessToken != "10" {
		t.Fatalf("after ten updates: %+v %v", c, err)
	}
	if _, err := s.UpdateConnection(ctx, "wsp_c1", "usr_1", "p", func(*store.Connection) (*store.Connection, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Connection(ctx, "wsp_c1", "usr_1", "p"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after an update that deletes: %v", err)
	}
	if _, err := s.UpdateConnection(ctx, "wsp_c1", "usr_1", "p", func(c *store.Connection) (*store.Connection, error) { return c, nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("updating none: %v", err)
	}
}

// A flow is taken once; an expired one is not there; a user's open flows are bounded.
func testConnectionFlows(t *testing.T, s ConnectionStore) {
	ctx := context.Background()
	connectionWorkspaces(t, s)
	now := time.Now()
	flow := func(hash string, expires time.Time) *store.ConnectionFlow {
		return &store.ConnectionFlow{StateHash: hash, WorkspaceID: "wsp_c1", UserID: "usr_1", Provider: "github", Verifier: "sealed-v",
			Scopes: []string{"repo"}, ReturnTo: "/console/#/connections", BrowserHash: "bh", ExpiresAt: expires}
	}
	if err := s.StartConnectionFlow(ctx, flow("h1", now.Add(10*time.Minute))); err != nil {
		t.Fatal(err)
	}
	f, err := s.TakeConnectionFlow(ctx, "h1", now)
	if err != nil || f.UserID != "usr_1" || f.Verifier != "sealed-v" || !slices.Equal(f.Scopes, []string{"repo"}) || f.ReturnTo != "/console/#/connections" || f.BrowserHash != "bh" {
		t.Fatalf("taken: %+v %v", f, err)
	}
	if _, err := s.TakeConnectionFlow(ctx, "h1", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("taken twice: %v", err)
	}
	if err := s.StartConnectionFlow(ctx, flow("h2", now.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeConnectionFlow(ctx, "h2", now.Add(2*time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("taken expired: %v", err)
	}
	if _, err := s.TakeConnectionFlow(ctx, "h2", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an expired flow stays: %v", err)
	}
	for i := range store.MaxConnectionFlows + 5 {
		if err := s.StartConnectionFlow(ctx, flow(fmt.Sprintf("m%02d", i), now.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // created_at orders them
	}
	kept := 0
	for i := range store.MaxConnectionFlows + 5 {
		if _, err := s.TakeConnectionFlow(ctx, fmt.Sprintf("m%02d", i), now); err == nil {
			kept++
			if i < 5 {
				t.Errorf("flow %d of %d, among the oldest, was kept", i, store.MaxConnectionFlows+5)
			}
		}
	}
	if kept != store.MaxConnectionFlows {
		t.Errorf("%d flows kept, want %d", kept, store.MaxConnectionFlows)
	}
	if err := s.StartConnectionFlow(ctx, &store.ConnectionFlow{StateHash: "x", WorkspaceID: "wsp_c1", UserID: "usr_1", Provider: "p"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a flow without a verifier: %v", err)
	}
}
