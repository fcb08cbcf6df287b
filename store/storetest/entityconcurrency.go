package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/quiverhq/quiver/store"
)

func testConcurrentSameName(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	const rounds, racers = 10, 4
	for round := range rounds {
		name := fmt.Sprintf("racy_%d", round)
		var (
			wg            sync.WaitGroup
			mu            sync.Mutex
			wins, clashes int
			other         []error
		)
		start := make(chan struct{})
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var tool *store.Tool
				if i%2 == 0 {
					tool = f.serverTool(name)
				} else {
					tool = f.clientTool(name)
				}
				<-start
				err := s.CreateTool(ctx, tool)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, store.ErrConflict):
					clashes++
				default:
					other = append(other, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins != 1 || clashes != racers-1 || len(other) > 0 {
			t.Fatalf("round %d: %d created, %d conflicts, other errors %v; want exactly one winner", round, wins, clashes, other)
		}
		page, err := s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, Name: name, Limit: 10})
		mustOK(t, "ListTools", err)
		if len(page.Tools) != 1 {
			t.Fatalf("round %d: %d tools named %s", round, len(page.Tools), name)
		}
	}
	// Two renames to one free name: one wins.
	x, y := f.create(t, f.serverTool("x")), f.create(t, f.serverTool("y"))
	errs := make(chan error, 2)
	for _, id := range []string{x.ID, y.ID} {
		go func() {
			_, err := s.UpdateTool(ctx, f.ws.ID, id, f.member.ID, func(t *store.Tool) error { t.Name = "z"; return nil })
			errs <- err
		}()
	}
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), store.ErrConflict) {
		t.Fatalf("two renames to one name: %v, %v; want one success and one ErrConflict", e1, e2)
	}
}

func testConcurrentVersions(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	const n = 12
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.CreateFunctionVersion(ctx, &store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: f.fn.ID, Code: fmt.Sprint(i)})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		mustOK(t, "CreateFunctionVersion", err)
	}
	vs, err := s.FunctionVersions(ctx, f.ws.ID, f.fn.ID)
	mustOK(t, "FunctionVersions", err)
	if len(vs) != n+1 {
		t.Fatalf("%d versions, want %d", len(vs), n+1)
	}
	for i, v := range vs {
		if v.Version != i+1 {
			t.Fatalf("version numbers %v: want 1 to %d without gaps", versionNumbers(vs), n+1)
		}
	}
}

func versionNumbers(vs []*store.FunctionVersion) []int {
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = v.Version
	}
	return out
}

// testConcurrentMembership races writes whose rules depend on each other: two admins demoting
// each other (one admin must remain), and removing a member while an admin makes them a tool's
// runtime user (the removal always happens; the change, which needs a member, happens before
// it or is refused after it).
func testConcurrentMembership(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	tool := f.create(t, f.serverTool("search"))
	race := func(a, b func() error) (error, error) {
		var wg sync.WaitGroup
		var ea, eb error
		start := make(chan struct{})
		wg.Add(2)
		go func() { defer wg.Done(); <-start; ea = a() }()
		go func() { defer wg.Done(); <-start; eb = b() }()
		close(start)
		wg.Wait()
		return ea, eb
	}
	for round := range 8 {
		second := newUser(t, s, fmt.Sprintf("admin%d", round))
		addMember(t, s, f.ws.ID, second.ID, store.MemberRoleAdmin)
		ea, eb := race(
			func() error { return s.SetMemberRole(ctx, f.ws.ID, f.admin.ID, store.MemberRoleMember) },
			func() error { return s.SetMemberRole(ctx, f.ws.ID, second.ID, store.MemberRoleMember) },
		)
		if (ea == nil) == (eb == nil) {
			t.Fatalf("round %d: two admins demoting themselves at once: %v, %v; want exactly one to succeed", round, ea, eb)
		}
		// Back to one admin, f.admin, for the next round.
		if ea == nil {
			mustOK(t, "promote", s.SetMemberRole(ctx, f.ws.ID, f.admin.ID, store.MemberRoleAdmin))
		}
		mustOK(t, "demote", s.SetMemberRole(ctx, f.ws.ID, second.ID, store.MemberRoleMember))
		mustOK(t, "remove", s.RemoveMember(ctx, f.ws.ID, second.ID))

		runner := newUser(t, s, fmt.Sprintf("runner%d", round))
		addMember(t, s, f.ws.ID, runner.ID, store.MemberRoleMember)
		ea, eb = race(
			func() error { return s.RemoveMember(ctx, f.ws.ID, runner.ID) },
			func() error {
				_, err := s.UpdateTool(ctx, f.ws.ID, tool.ID, f.admin.ID, func(t *store.Tool) error { t.RuntimeUserID = runner.ID; return nil })
				return err
			},
		)
		if ea != nil {
			t.Fatalf("round %d: removing a member who was becoming a tool's runtime user: %v", round, ea)
		}
		if eb != nil && !errors.Is(eb, store.ErrInvalid) {
			t.Fatalf("round %d: making a member being removed a tool's runtime user: %v; want success or ErrInvalid", round, eb)
		}
		got, err := s.Tool(ctx, f.ws.ID, tool.ID)
		mustOK(t, "Tool", err)
		if want := map[bool]string{true: runner.ID, false: ""}[eb == nil]; got.RuntimeUserID != want {
			t.Fatalf("round %d: the runtime user is %q, want %q", round, got.RuntimeUserID, want)
		}
		_, err = s.UpdateTool(ctx, f.ws.ID, tool.ID, f.admin.ID, func(t *store.Tool) error { t.RuntimeUserID = ""; return nil })
		mustOK(t, "clear runtime user", err)
	}
	ms, err := s.Members(ctx, f.ws.ID)
	mustOK(t, "Members", err)
	admins := 0
	for _, m := range ms {
		if m.Role == store.MemberRoleAdmin {
			admins++
		}
	}
	if admins != 1 {
		t.Fatalf("%d admins at the end, want 1", admins)
	}
}
