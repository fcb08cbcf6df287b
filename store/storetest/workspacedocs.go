package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

// workspaceDocs is one kind of a workspace's versioned documents (its governance rules, its
// entitlements) as testWorkspaceDocs drives it: the store keeps both alike.
type workspaceDocs struct {
	what string
	get  func(s store.Entities, workspaceID string) (stored, error)
	put  func(s store.Entities, d stored, after int64) (stored, error)
	// first and second are two documents of the kind; invalid are ones a store refuses (of
	// the wrong JSON kind, over the bound).
	first, second []byte
	invalid       map[string][]byte
}

// stored is a version of a workspace's document, whichever its kind.
type stored struct {
	WorkspaceID string
	Doc         []byte
	Version     int64
	UpdatedBy   string
	UpdatedAt   time.Time
}

// testWorkspaceDocs: a workspace's document is versioned, read back as stored, kept apart from
// another workspace's, changes ToolsStamp, and a writer that read an older version stores
// nothing (of two concurrent writers from one version, exactly one wins).
func testWorkspaceDocs(t *testing.T, s store.Entities, k workspaceDocs) {
	a, b := newFixture(t, s, "a"), newFixture(t, s, "b")
	none, err := k.get(s, a.ws.ID)
	mustOK(t, "get "+k.what, err)
	if none.Version != 0 || len(none.Doc) != 0 {
		t.Fatalf("%s of a workspace that stored none: %+v", k.what, none)
	}
	before, err := s.ToolsStamp(ctx, a.ws.ID)
	mustOK(t, "ToolsStamp", err)
	put, err := k.put(s, stored{WorkspaceID: a.ws.ID, Doc: k.first, UpdatedBy: a.admin.ID}, 0)
	mustOK(t, "put "+k.what, err)
	if put.Version != 1 || put.UpdatedAt.IsZero() {
		t.Fatalf("stored %+v", put)
	}
	after, err := s.ToolsStamp(ctx, a.ws.ID)
	mustOK(t, "ToolsStamp", err)
	if after == before {
		t.Errorf("ToolsStamp did not change with the workspace's %s", k.what)
	}
	got, err := k.get(s, a.ws.ID)
	mustOK(t, "get "+k.what, err)
	if got.Version != 1 || string(got.Doc) != string(k.first) || got.UpdatedBy != a.admin.ID || !got.UpdatedAt.Equal(put.UpdatedAt) {
		t.Fatalf("read back %+v, stored %+v", got, put)
	}
	if other, err := k.get(s, b.ws.ID); err != nil || other.Version != 0 {
		t.Fatalf("another workspace's %s: %+v, %v", k.what, other, err)
	}
	if _, err := k.put(s, stored{WorkspaceID: a.ws.ID, Doc: k.second}, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a write from version 0 over version 1: %v, want ErrConflict", err)
	}
	for name, bad := range k.invalid {
		if _, err := k.put(s, stored{WorkspaceID: a.ws.ID, Doc: bad}, 1); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s %s: %v, want ErrInvalid", k.what, name, err)
		}
	}
	if _, err := k.put(s, stored{Doc: k.second}, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("%s without a workspace: %v, want ErrInvalid", k.what, err)
	}
	if _, err := k.get(s, "wsp_nosuch"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("%s of no workspace: %v, want ErrNotFound", k.what, err)
	}
	if _, err := k.put(s, stored{WorkspaceID: "wsp_nosuch", Doc: k.second}, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("%s for no workspace: %v, want ErrNotFound", k.what, err)
	}
	if got, err := k.get(s, a.ws.ID); err != nil || got.Version != 1 || string(got.Doc) != string(k.first) {
		t.Fatalf("after the refused writes: %+v, %v; want version 1 as stored", got, err)
	}

	var wins, conflicts int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_, err := k.put(s, stored{WorkspaceID: a.ws.ID, Doc: k.second}, 1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, store.ErrConflict):
				conflicts++
			default:
				t.Errorf("concurrent write: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || conflicts != 3 {
		t.Errorf("four writers from version 1: %d won, %d conflicted; want 1 and 3", wins, conflicts)
	}
	got, err = k.get(s, a.ws.ID)
	mustOK(t, "get "+k.what, err)
	if got.Version != 2 || string(got.Doc) != string(k.second) {
		t.Errorf("after the concurrent writers: %+v, want version 2 of the second document", got)
	}
	last, err := s.ToolsStamp(ctx, a.ws.ID)
	mustOK(t, "ToolsStamp", err)
	if last == after {
		t.Errorf("ToolsStamp did not change with version 2 of the workspace's %s", k.what)
	}
}
