package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// listCase is a filter and the tools it must list, in order.
type listCase struct {
	name   string
	filter store.ToolFilter
	keep   func(*store.Tool) bool
}

func testListing(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	other := newFixture(t, s, "other")
	fetch := &store.Function{WorkspaceID: f.ws.ID, Name: "fetch"}
	mustOK(t, "CreateFunction", s.CreateFunction(ctx, fetch))

	// 250 tools with a spread of every filtered field; every 7th deleted.
	var tools []*store.Tool
	for i := range 250 {
		prefix := []string{"alpha", "beta", "gamma"}[i%3]
		var tool *store.Tool
		switch i % 4 {
		case 0, 1:
			tool = f.serverTool(fmt.Sprintf("%s_%03d", prefix, i))
		case 2:
			tool = f.serverTool(fmt.Sprintf("%s_%03d", prefix, i))
			tool.FunctionID = fetch.ID
		case 3:
			tool = f.clientTool(fmt.Sprintf("%s_%03d", prefix, i))
		}
		tool.RequiresConfirmation = i%5 == 0
		f.create(t, tool)
		if i%7 == 0 {
			del, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, store.RetentionShort)
			mustOK(t, "DeleteTool", err)
			tool = del
		}
		tools = append(tools, tool)
	}
	// Tools with the same names elsewhere: another workspace, and system tools.
	for i := range 30 {
		other.create(t, other.serverTool(fmt.Sprintf("alpha_%03d", i)))
	}
	sysSchema := &store.Schema{Content: json.RawMessage(`{}`)}
	mustOK(t, "CreateSchema", s.CreateSchema(ctx, sysSchema))
	var system []*store.Tool
	for i := range 5 {
		sys := &store.Tool{Name: fmt.Sprintf("alpha_%03d", i), Target: store.TargetClient, InputSchemaID: sysSchema.ID,
			OutputSchemaID: sysSchema.ID, System: true, RequiresConfirmation: i%2 == 0}
		mustOK(t, "CreateTool system", s.CreateTool(ctx, sys))
		system = append(system, sys)
	}
	yes, no := true, false
	active := func(t *store.Tool) bool { return t.DeletedAt == nil }
	cases := []listCase{
		{"workspace", store.ToolFilter{}, active},
		{"include deleted", store.ToolFilter{Deleted: store.DeletedInclude}, func(*store.Tool) bool { return true }},
		{"only deleted", store.ToolFilter{Deleted: store.DeletedOnly}, func(t *store.Tool) bool { return t.DeletedAt != nil }},
		{"explicit false", store.ToolFilter{Deleted: store.DeletedExclude}, active},
		{"function", store.ToolFilter{FunctionID: fetch.ID}, func(t *store.Tool) bool { return active(t) && t.FunctionID == fetch.ID }},
		{"function, deleted too", store.ToolFilter{FunctionID: f.fn.ID, Deleted: store.DeletedInclude}, func(t *store.Tool) bool { return t.FunctionID == f.fn.ID }},
		{"function of another workspace", store.ToolFilter{FunctionID: other.fn.ID}, func(*store.Tool) bool { return false }},
		{"server", store.ToolFilter{Target: store.TargetServer}, func(t *store.Tool) bool { return active(t) && t.Target == store.TargetServer }},
		{"client", store.ToolFilter{Target: store.TargetClient}, func(t *store.Tool) bool { return active(t) && t.Target == store.TargetClient }},
		{"name exact", store.ToolFilter{Name: "beta_100"}, func(t *store.Tool) bool { return active(t) && t.Name == "beta_100" }},
		{"name exact, deleted", store.ToolFilter{Name: "alpha_000", Deleted: store.DeletedOnly}, func(t *store.Tool) bool { return t.Name == "alpha_000" }},
		{"name exact, no match", store.ToolFilter{Name: "beta"}, func(*store.Tool) bool { return false }},
		{"name prefix", store.ToolFilter{Name: "beta", NamePrefix: true}, func(t *store.Tool) bool { return active(t) && strings.HasPrefix(t.Name, "beta") }},
		{"name prefix, longer", store.ToolFilter{Name: "gamma_1", NamePrefix: true}, func(t *store.Tool) bool { return active(t) && strings.HasPrefix(t.Name, "gamma_1") }},
		{"name prefix is case-sensitive", store.ToolFilter{Name: "BETA", NamePrefix: true}, func(*store.Tool) bool { return false }},
		{"names: an agent's tools", store.ToolFilter{Names: []string{"alpha_003", "beta_100", "gamma_005", "alpha_000", "nowhere"}},
			func(t *store.Tool) bool {
				return active(t) && slices.Contains([]string{"alpha_003", "beta_100", "gamma_005"}, t.Name)
			}},
		{"names, deleted too", store.ToolFilter{Names: []string{"alpha_000", "beta_007"}, Deleted: store.DeletedInclude},
			func(t *store.Tool) bool { return t.Name == "alpha_000" || t.Name == "beta_007" }},
		{"names, none", store.ToolFilter{Names: []string{}}, func(*store.Tool) bool { return false }},
		{"name prefix, LIKE characters are literal", store.ToolFilter{Name: "b%", NamePrefix: true}, func(*store.Tool) bool { return false }},
		{"requires confirmation", store.ToolFilter{RequiresConfirmation: &yes}, func(t *store.Tool) bool { return active(t) && t.RequiresConfirmation }},
		{"no confirmation", store.ToolFilter{RequiresConfirmation: &no}, func(t *store.Tool) bool { return active(t) && !t.RequiresConfirmation }},
		{"combined", store.ToolFilter{Target: store.TargetServer, FunctionID: f.fn.ID, Name: "alpha", NamePrefix: true, RequiresConfirmation: &no, Deleted: store.DeletedInclude},
			func(t *store.Tool) bool {
				return t.Target == store.TargetServer && t.FunctionID == f.fn.ID && strings.HasPrefix(t.Name, "alpha") && !t.RequiresConfirmation
			}},
	}
	for _, tc := range cases {
		tc.filter.WorkspaceID = f.ws.ID
		var want []*store.Tool
		for _, tool := range tools {
			if tc.keep(tool) {
				want = append(want, tool)
			}
		}
		checkListing(t, s, tc.name, tc.filter, want)
	}
	// With the system tools, created last, so listed after the workspace's.
	var want []*store.Tool
	for _, tool := range tools {
		if active(tool) && strings.HasPrefix(tool.Name, "alpha") && tool.RequiresConfirmation {
			want = append(want, tool)
		}
	}
	for _, sys := range system {
		if sys.RequiresConfirmation {
			want = append(want, sys)
		}
	}
	checkListing(t, s, "with system tools", store.ToolFilter{WorkspaceID: f.ws.ID, IncludeSystem: true, Name: "alpha", NamePrefix: true,
		RequiresConfirmation: &yes}, want)
	checkListing(t, s, "system tools", store.ToolFilter{}, system)
	checkListing(t, s, "no such workspace", store.ToolFilter{WorkspaceID: "wsp_missing"}, nil)
}

// checkListing pages through a listing with several page sizes and compares it with want.
func checkListing(t *testing.T, s store.Entities, name string, filter store.ToolFilter, want []*store.Tool) {
	t.Helper()
	for _, limit := range []int{1, 7, 100} {
		if limit == 1 && len(want) > 60 {
			continue // one tool a page: only for the short listings
		}
		f := filter
		f.Limit = limit
		var got []*store.Tool
		pages := 0
		for {
			page, err := s.ListTools(ctx, f)
			if err != nil {
				t.Fatalf("%s, limit %d, page %d: %v", name, limit, pages, err)
			}
			pages++
			if len(page.Tools) > limit {
				t.Fatalf("%s: a page of %d tools, limit %d", name, len(page.Tools), limit)
			}
			if page.NextCursor != "" && len(page.Tools) != limit {
				t.Fatalf("%s: a short page (%d of %d) with a next cursor", name, len(page.Tools), limit)
			}
			got = append(got, page.Tools...)
			if page.NextCursor == "" {
				break
			}
			if pages > 300 {
				t.Fatalf("%s: paging does not end", name)
			}
			f.Cursor = page.NextCursor
		}
		if wantPages := max(1, (len(want)+limit-1)/limit); pages != wantPages && pages != wantPages+1 {
			t.Fatalf("%s, limit %d: %d pages for %d tools", name, limit, pages, len(want))
		}
		if len(got) != len(want) {
			t.Fatalf("%s, limit %d: %d tools, want %d:\n got  %v\n want %v", name, limit, len(got), len(want), toolIDs(got), toolIDs(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID {
				t.Fatalf("%s, limit %d: tool %d is %s (%s), want %s (%s)", name, limit, i, got[i].ID, got[i].Name, want[i].ID, want[i].Name)
			}
			if i > 0 && (got[i].CreatedAt.Before(got[i-1].CreatedAt) || got[i].CreatedAt.Equal(got[i-1].CreatedAt) && got[i].ID < got[i-1].ID) {
				t.Fatalf("%s: not in (created_at, id) order at %d", name, i)
			}
		}
		if len(got) > 0 {
			sameTool(t, name+": listed tool", got[0], want[0])
		}
	}
}

func testListingArguments(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	other := newFixture(t, s, "other")
	for i := range 5 {
		f.create(t, f.serverTool(fmt.Sprintf("t%d", i)))
	}
	base := store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 2}
	first, err := s.ListTools(ctx, base)
	mustOK(t, "ListTools", err)
	if len(first.Tools) != 2 || first.NextCursor == "" {
		t.Fatalf("first page: %d tools, cursor %q", len(first.Tools), first.NextCursor)
	}
	withCursor := func(f store.ToolFilter, c string) store.ToolFilter { f.Cursor = c; return f }
	for _, tc := range []struct {
		name string
		f    store.ToolFilter
		want error
	}{
		{"limit 0", store.ToolFilter{WorkspaceID: f.ws.ID}, store.ErrInvalid},
		{"limit -1", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: -1}, store.ErrInvalid},
		{"limit 101", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 101}, store.ErrInvalid},
		{"limit 1", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 1}, nil},
		{"limit 100", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 100}, nil},
		{"unknown target", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 5, Target: "edge"}, store.ErrInvalid},
		{"unknown deleted filter", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 5, Deleted: "maybe"}, store.ErrInvalid},
		{"empty name prefix", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 5, NamePrefix: true}, store.ErrInvalid},
		{"garbage cursor", withCursor(base, "not a cursor!"), store.ErrInvalid},
		{"truncated cursor", withCursor(base, first.NextCursor[:10]), store.ErrInvalid},
		{"cursor with another filter", withCursor(store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 2, Target: store.TargetClient}, first.NextCursor), store.ErrInvalid},
		{"cursor in another workspace", withCursor(store.ToolFilter{WorkspaceID: other.ws.ID, Limit: 2}, first.NextCursor), store.ErrInvalid},
		{"cursor with another page size", withCursor(store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 3}, first.NextCursor), nil},
		{"cursor with other names", withCursor(store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 2, Names: []string{"t1"}}, first.NextCursor), store.ErrInvalid},
		{"too many names", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 5, Names: make([]string, store.MaxFilterNames+1)}, store.ErrInvalid},
		{"the most names", store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 5, Names: make([]string, store.MaxFilterNames)}, nil},
	} {
		_, err := s.ListTools(ctx, tc.f)
		wantErr(t, "ListTools "+tc.name, err, tc.want)
	}
	// A tool created while paging shows up at the end, and nothing is listed twice.
	late := f.create(t, f.serverTool("late"))
	var got []string
	for f2 := withCursor(base, first.NextCursor); ; {
		page, err := s.ListTools(ctx, f2)
		mustOK(t, "ListTools", err)
		got = append(got, toolIDs(page.Tools)...)
		if page.NextCursor == "" {
			break
		}
		f2.Cursor = page.NextCursor
	}
	if len(got) != 4 || got[3] != late.ID {
		t.Fatalf("after a tool was created while paging: %v", got)
	}
	// Exactly a page full: no cursor to an empty page.
	page, err := s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 6})
	mustOK(t, "ListTools", err)
	if len(page.Tools) != 6 || page.NextCursor != "" {
		t.Fatalf("a full last page: %d tools, cursor %q", len(page.Tools), page.NextCursor)
	}
}
