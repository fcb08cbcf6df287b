package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// listAll pages through the threads f keeps with pages of limit, and returns their ids in the
// order listed and the size of each page. It fails the test on an error or a page over limit.
func listAll(t *testing.T, s store.Store, workspace string, f store.ThreadFilter, limit int) (ids []string, sizes []int) {
	t.Helper()
	f.Limit = limit
	for range 100 {
		page, next, err := s.Threads(ctx, workspace, f)
		if err != nil {
			t.Fatalf("Threads(%+v): %v", f, err)
		}
		if len(page) > limit {
			t.Fatalf("Threads(%+v): a page of %d, over its limit", f, len(page))
		}
		sizes = append(sizes, len(page))
		for _, th := range page {
			ids = append(ids, th.ID)
		}
		if next == "" {
			return ids, sizes
		}
		f.Cursor = next
	}
	t.Fatalf("Threads(%+v): no last page after 100 pages", f)
	return nil, nil
}

// keeps reports whether f keeps th.
func keeps(f store.ThreadFilter, th *store.Thread) bool {
	return (f.AgentID == "" || th.AgentID == f.AgentID) && (f.Tag == "" || slices.Contains(th.Tags, f.Tag)) &&
		(f.AlsoTag == "" || slices.Contains(th.Tags, f.AlsoTag)) &&
		(f.Status == "" || th.Status == f.Status) &&
		(f.Name == "" || strings.Contains(strings.ToLower(th.Name()), strings.ToLower(f.Name)))
}

// newestFirst sorts threads as the list does: creation time, then id, both descending.
func newestFirst(ths []*store.Thread) []string {
	ths = slices.Clone(ths)
	slices.SortFunc(ths, func(a, b *store.Thread) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	ids := make([]string, len(ths))
	for i, th := range ths {
		ids[i] = th.ID
	}
	return ids
}

// testThreadListFilters lists a workspace's threads by agent, tag and status, alone and
// together, in pages smaller than the result: exactly the threads the filter keeps, each once,
// newest first, none of another workspace; and a cursor serves only the listing that returned
// it.
func testThreadListFilters(t *testing.T, s store.Store) {
	specs := []struct {
		agent  string
		tags   []string
		status store.ThreadStatus
	}{
		{"agent_a", []string{"red"}, ""},
		{"agent_a", []string{"red", "blue"}, store.StatusRunning},
		{"agent_b", []string{"red"}, store.StatusRunning},
		{"agent_a", nil, store.StatusTerminated},
		{"", []string{"blue", "name:x"}, ""},
		{"agent_a", []string{"red", "red"}, ""}, // a tag given twice is listed once
		{"agent_b", []string{"blue"}, store.StatusTerminated},
		{"agent_a", []string{"red"}, store.StatusRunning},
		{"agent_a", []string{"red", "blue"}, ""},
		{"agent_b", nil, ""},
		{"agent_a", []string{"red"}, store.StatusTerminated},
		{"agent_a", []string{"name:Report_Q3", "red"}, ""},
		{"agent_b", []string{"name:the 100% plan"}, store.StatusRunning},
		{"agent_a", []string{"name:reportq3"}, ""},
	}
	var threads []*store.Thread
	for _, sp := range specs {
		th := &store.Thread{WorkspaceID: ws, AgentID: sp.agent, Tags: sp.tags}
		if err := s.CreateThread(ctx, th); err != nil {
			t.Fatal(err)
		}
		if sp.status != "" { // the status a run gives a thread, as it changes
			if _, err := s.UpdateThread(ctx, ws, th.ID, func(th *store.Thread) error { th.Status = sp.status; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		stored, err := s.Thread(ctx, ws, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		threads = append(threads, stored)
	}
	// The same agent, tag and status in another workspace: never listed here.
	other := &store.Thread{WorkspaceID: "wsp_other", AgentID: "agent_a", Tags: []string{"red", "blue"}, Status: store.StatusRunning}
	if err := s.CreateThread(ctx, other); err != nil {
		t.Fatal(err)
	}

	filters := []store.ThreadFilter{
		{},
		{AgentID: "agent_a"},
		{Tag: "red"},
		{Tag: "blue"},
		{Tag: "name:x"},
		{Status: store.StatusRunning},
		{Status: store.StatusIdle},
		{Status: store.StatusTerminated},
		{AgentID: "agent_a", Tag: "red"},
		{AgentID: "agent_a", Status: store.StatusRunning},
		{Tag: "red", Status: store.StatusTerminated},
		{AgentID: "agent_a", Tag: "blue", Status: store.StatusIdle},
		{Tag: "green"},
		{AgentID: "agent_nobody"},
		// Names: a substring in any case, LIKE's wildcards literal.
		{Name: "report"},
		{Name: "RT_q"},
		{Name: "100%"},
		{Name: "%"},
		{Name: "_"},
		{Name: "x"},
		{Name: "report", Tag: "red"},
		{Name: "plan", Status: store.StatusRunning},
		{Name: "name:"},
		// A second tag, alone or with the others.
		{Tag: "red", AlsoTag: "blue"},
		{AlsoTag: "blue"},
		{AlsoTag: "red", Status: store.StatusIdle},
		{Tag: "blue", AlsoTag: "green"},
	}
	for _, f := range filters {
		var kept []*store.Thread
		for _, th := range threads {
			if keeps(f, th) {
				kept = append(kept, th)
			}
		}
		want := newestFirst(kept)
		for _, limit := range []int{1, 2, 3, store.MaxThreadPage} {
			got, sizes := listAll(t, s, ws, f, limit)
			if !slices.Equal(got, want) {
				t.Errorf("Threads(%+v) in pages of %d: %v, want %v", f, limit, got, want)
			}
			// Full pages, then the rest: a last page is empty only when nothing matched.
			for i, n := range sizes {
				if i < len(sizes)-1 && n != limit || i == len(sizes)-1 && n == 0 && len(want) > 0 {
					t.Errorf("Threads(%+v) in pages of %d: pages of %v", f, limit, sizes)
					break
				}
			}
		}
	}
	if got, _ := listAll(t, s, "wsp_other", store.ThreadFilter{AgentID: "agent_a", Tag: "red", Status: store.StatusRunning}, 2); !slices.Equal(got, []string{other.ID}) {
		t.Errorf("the other workspace lists %v, want only its own %s", got, other.ID)
	}

	// A cursor serves the listing that returned it: same workspace, same filter.
	red := store.ThreadFilter{Tag: "red", Limit: 2}
	_, next, err := s.Threads(ctx, ws, red)
	if err != nil || next == "" {
		t.Fatalf("first page by tag: next %q, %v", next, err)
	}
	flipped := []byte(next)
	flipped[len(flipped)/2] ^= 1
	for name, bad := range map[string]struct {
		workspace string
		f         store.ThreadFilter
	}{
		"another tag":                  {ws, store.ThreadFilter{Tag: "blue", Cursor: next}},
		"no filter":                    {ws, store.ThreadFilter{Cursor: next}},
		"a filter added":               {ws, store.ThreadFilter{Tag: "red", Status: store.StatusIdle, Cursor: next}},
		"a second tag added":           {ws, store.ThreadFilter{Tag: "red", AlsoTag: "blue", Cursor: next}},
		"another workspace":            {"wsp_other", store.ThreadFilter{Tag: "red", Cursor: next}},
		"altered":                      {ws, store.ThreadFilter{Tag: "red", Cursor: string(flipped)}},
		"cut short":                    {ws, store.ThreadFilter{Tag: "red", Cursor: next[:len(next)-2]}},
		"made up":                      {ws, store.ThreadFilter{Tag: "red", Cursor: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}},
		"the format before v1":         {ws, store.ThreadFilter{Tag: "red", Cursor: "1700000000000000000.thr_1"}},
		"an unknown status":            {ws, store.ThreadFilter{Status: "paused"}},
		"a tag that is no text":        {ws, store.ThreadFilter{Tag: "\xff"}},
		"a second tag that is no text": {ws, store.ThreadFilter{AlsoTag: "a\x00b"}},
		"an agent with NUL":            {ws, store.ThreadFilter{AgentID: "a\x00b"}},
		"a limit over the max":         {ws, store.ThreadFilter{Limit: store.MaxThreadPage + 1}},
	} {
		if _, _, err := s.Threads(ctx, bad.workspace, bad.f); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if bad.f.Cursor != "" {
			if err := store.CheckThreadCursor(bad.workspace, bad.f); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("CheckThreadCursor, %s: %v, want ErrInvalid", name, err)
			}
		}
	}
	if err := store.CheckThreadCursor(ws, store.ThreadFilter{Tag: "red", Cursor: next}); err != nil {
		t.Errorf("CheckThreadCursor of a good cursor: %v", err)
	}

	// Keyset paging: a thread created between two pages is not listed on the later one (it is
	// newer than the cursor), and nothing is listed twice or skipped.
	first, next, err := s.Threads(ctx, ws, red)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateThread(ctx, &store.Thread{WorkspaceID: ws, Tags: []string{"red"}}); err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, th := range first {
		ids = append(ids, th.ID)
	}
	rest, _ := listAll(t, s, ws, store.ThreadFilter{Tag: "red", Cursor: next}, 2)
	var kept []*store.Thread
	for _, th := range threads {
		if slices.Contains(th.Tags, "red") {
			kept = append(kept, th)
		}
	}
	if got, want := append(ids, rest...), newestFirst(kept); !slices.Equal(got, want) {
		t.Errorf("by tag across an insert: %v, want %v", got, want)
	}

	// Tags are capped, so that the list by tag can index every one.
	long := strings.Repeat("t", store.MaxTagBytes)
	th := &store.Thread{WorkspaceID: ws, Tags: []string{long}}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatalf("a tag of %d bytes: %v", store.MaxTagBytes, err)
	}
	if got, _ := listAll(t, s, ws, store.ThreadFilter{Tag: long}, 5); !slices.Equal(got, []string{th.ID}) {
		t.Errorf("by the longest tag: %v, want [%s]", got, th.ID)
	}
	if err := s.CreateThread(ctx, &store.Thread{WorkspaceID: ws, Tags: []string{long + "t"}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a tag of %d bytes: %v, want ErrInvalid", store.MaxTagBytes+1, err)
	}
}

// testThreadListFollowsUpdates changes a thread's tags and status and finds it by the new
// ones only, still in its place by creation time.
func testThreadListFollowsUpdates(t *testing.T, s store.Store) {
	var ths []*store.Thread
	for range 3 {
		th := &store.Thread{WorkspaceID: ws, AgentID: "agent_1", Tags: []string{"red", "name:keep"}}
		if err := s.CreateThread(ctx, th); err != nil {
			t.Fatal(err)
		}
		ths = append(ths, th)
	}
	mid := ths[1]
	if _, err := s.UpdateThread(ctx, ws, mid.ID, func(th *store.Thread) error {
		th.Tags = []string{"name:keep", "blue", "green", "blue"}
		th.Status = store.StatusRunning
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    store.ThreadFilter
		want []*store.Thread
	}{
		{store.ThreadFilter{Tag: "red"}, []*store.Thread{ths[0], ths[2]}},
		{store.ThreadFilter{Tag: "blue"}, []*store.Thread{mid}},
		{store.ThreadFilter{Tag: "green"}, []*store.Thread{mid}},
		{store.ThreadFilter{Tag: "name:keep"}, ths},
		{store.ThreadFilter{Status: store.StatusRunning}, []*store.Thread{mid}},
		{store.ThreadFilter{Status: store.StatusIdle}, []*store.Thread{ths[0], ths[2]}},
		{store.ThreadFilter{Tag: "name:keep", Status: store.StatusIdle}, []*store.Thread{ths[0], ths[2]}},
	} {
		if got, want := func() []string { ids, _ := listAll(t, s, ws, c.f, 1); return ids }(), newestFirst(c.want); !slices.Equal(got, want) {
			t.Errorf("after the update, Threads(%+v): %v, want %v", c.f, got, want)
		}
	}
	// Dropping every tag drops the thread from every list by tag.
	if _, err := s.UpdateThread(ctx, ws, mid.ID, func(th *store.Thread) error { th.Tags = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"blue", "green"} {
		if got, _ := listAll(t, s, ws, store.ThreadFilter{Tag: tag}, 2); len(got) != 0 {
			t.Errorf("tag %s after the thread lost it: %v", tag, got)
		}
	}
	// A refused update changes no list.
	if _, err := s.UpdateThread(ctx, ws, ths[0].ID, func(th *store.Thread) error {
		th.Tags = []string{"purple", ""}
		return nil
	}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("an empty tag: %v, want ErrInvalid", err)
	}
	if got, _ := listAll(t, s, ws, store.ThreadFilter{Tag: "purple"}, 2); len(got) != 0 {
		t.Errorf("a refused update's tag is listed: %v", got)
	}
}
