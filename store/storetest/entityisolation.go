package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

func testEntityIsolation(t *testing.T, s store.Entities) {
	a := newFixture(t, s, "a")
	b := newFixture(t, s, "b")
	aTool := a.create(t, a.serverTool("search"))
	aClient := a.create(t, a.clientTool("ask"))
	aGone := a.create(t, a.serverTool("gone"))
	_, err := s.DeleteTool(ctx, a.ws.ID, aGone.ID, store.RetentionNone)
	mustOK(t, "DeleteTool", err)
	aGone, _ = s.Tool(ctx, a.ws.ID, aGone.ID)
	bTool := b.create(t, b.serverTool("search"))
	snapshot := func() []string {
		var out []string
		for _, id := range []string{aTool.ID, aClient.ID, aGone.ID} {
			tool, err := s.Tool(ctx, a.ws.ID, id)
			mustOK(t, "Tool", err)
			out = append(out, canonical(t, tool))
		}
		fn, err := s.Function(ctx, a.ws.ID, a.fn.ID)
		mustOK(t, "Function", err)
		vs, err := s.FunctionVersions(ctx, a.ws.ID, a.fn.ID)
		mustOK(t, "FunctionVersions", err)
		ms, err := s.Members(ctx, a.ws.ID)
		mustOK(t, "Members", err)
		w, err := s.Workspace(ctx, a.ws.ID)
		mustOK(t, "Workspace", err)
		out = append(out, fmt.Sprintf("%+v %d %d %+v", *fn, len(vs), len(ms), *w))
		return out
	}
	before := snapshot()

	noop := func(*store.Tool) error { return nil }
	for _, scope := range []string{b.ws.ID, "", "wsp_missing"} {
		for _, tc := range []struct {
			name string
			call func() error
		}{
			{"get tool", func() error { _, err := s.Tool(ctx, scope, aTool.ID); return err }},
			{"get deleted tool", func() error { _, err := s.Tool(ctx, scope, aGone.ID); return err }},
			{"update tool", func() error { _, err := s.UpdateTool(ctx, scope, aTool.ID, b.admin.ID, noop); return err }},
			{"update tool as its admin", func() error { _, err := s.UpdateTool(ctx, scope, aTool.ID, a.admin.ID, noop); return err }},
			{"delete tool", func() error { _, err := s.DeleteTool(ctx, scope, aTool.ID, ""); return err }},
			{"delete client tool", func() error { _, err := s.DeleteTool(ctx, scope, aClient.ID, store.RetentionShort); return err }},
			{"resolve version", func() error { _, err := s.ResolveToolVersion(ctx, scope, aTool.ID); return err }},
			{"get function", func() error { _, err := s.Function(ctx, scope, a.fn.ID); return err }},
			{"list versions", func() error { _, err := s.FunctionVersions(ctx, scope, a.fn.ID); return err }},
			{"get version", func() error { _, err := s.FunctionVersion(ctx, scope, a.v1.ID); return err }},
			{"add version", func() error {
				return s.CreateFunctionVersion(ctx, &store.FunctionVersion{WorkspaceID: scope, FunctionID: a.fn.ID, Code: "evil"})
			}},
			{"set default version", func() error { _, err := s.SetDefaultVersion(ctx, scope, a.fn.ID, a.v1.ID); return err }},
			{"get schema", func() error { _, err := s.Schema(ctx, scope, a.in.ID); return err }},
		} {
			err := tc.call()
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("from %q, %s of workspace a: %v, want ErrNotFound", scope, tc.name, err)
			}
		}
	}
	// Workspace b's own records cannot point into workspace a.
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"tool on a's function", func() error {
			tool := b.serverTool("x1")
			tool.FunctionID = a.fn.ID
			return s.CreateTool(ctx, tool)
		}, store.ErrNotFound},
		{"tool pinned to a's version", func() error {
			tool := b.serverTool("x2")
			tool.FunctionVersionID = a.v1.ID
			return s.CreateTool(ctx, tool)
		}, store.ErrNotFound},
		{"tool with a's input schema", func() error {
			tool := b.serverTool("x3")
			tool.InputSchemaID = a.in.ID
			return s.CreateTool(ctx, tool)
		}, store.ErrNotFound},
		{"tool with a's output schema", func() error {
			tool := b.clientTool("x4")
			tool.OutputSchemaID = a.out.ID
			return s.CreateTool(ctx, tool)
		}, store.ErrNotFound},
		{"tool created by a's member", func() error {
			tool := b.clientTool("x5")
			tool.CreatedBy = a.member.ID
			return s.CreateTool(ctx, tool)
		}, store.ErrInvalid},
		{"version with a's schema", func() error {
			return s.CreateFunctionVersion(ctx, &store.FunctionVersion{WorkspaceID: b.ws.ID, FunctionID: b.fn.ID, InputSchemaID: a.in.ID})
		}, store.ErrNotFound},
		{"default version from a", func() error { _, err := s.SetDefaultVersion(ctx, b.ws.ID, b.fn.ID, a.v1.ID); return err }, store.ErrNotFound},
		{"move b's tool to a's function", func() error {
			_, err := s.UpdateTool(ctx, b.ws.ID, bTool.ID, b.admin.ID, func(t *store.Tool) error { t.FunctionID = a.fn.ID; return nil })
			return err
		}, store.ErrNotFound},
		{"move b's tool into workspace a", func() error {
			_, err := s.UpdateTool(ctx, b.ws.ID, bTool.ID, b.admin.ID, func(t *store.Tool) error { t.WorkspaceID = a.ws.ID; return nil })
			return err
		}, store.ErrInvalid},
		{"a's admin sets b's runtime user", func() error {
			_, err := s.UpdateTool(ctx, b.ws.ID, bTool.ID, a.admin.ID, func(t *store.Tool) error { t.RuntimeUserID = b.member.ID; return nil })
			return err
		}, store.ErrForbidden},
		{"b's tool runs as a's member", func() error {
			_, err := s.UpdateTool(ctx, b.ws.ID, bTool.ID, b.admin.ID, func(t *store.Tool) error { t.RuntimeUserID = a.member.ID; return nil })
			return err
		}, store.ErrInvalid},
		{"b's default runtime user from a", func() error {
			_, err := s.UpdateWorkspace(ctx, b.ws.ID, b.admin.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = a.member.ID; return nil })
			return err
		}, store.ErrInvalid},
		{"a's admin sets b's default runtime user", func() error {
			_, err := s.UpdateWorkspace(ctx, b.ws.ID, a.admin.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = b.member.ID; return nil })
			return err
		}, store.ErrForbidden},
		{"a's member is not b's", func() error { _, err := s.Member(ctx, b.ws.ID, a.member.ID); return err }, store.ErrNotFound},
		{"remove a's member through b", func() error { return s.RemoveMember(ctx, b.ws.ID, a.member.ID) }, store.ErrNotFound},
		{"promote a's member through b", func() error { return s.SetMemberRole(ctx, b.ws.ID, a.member.ID, store.MemberRoleAdmin) }, store.ErrNotFound},
	} {
		wantErr(t, tc.name, tc.call(), tc.want)
	}
	// Listings of b show nothing of a, whatever the filter.
	for _, tc := range []store.ToolFilter{
		{WorkspaceID: b.ws.ID, Deleted: store.DeletedInclude},
		{WorkspaceID: b.ws.ID, FunctionID: a.fn.ID, Deleted: store.DeletedInclude},
		{WorkspaceID: b.ws.ID, Name: "gone", Deleted: store.DeletedOnly},
		{WorkspaceID: b.ws.ID, IncludeSystem: true, Deleted: store.DeletedInclude},
		{Deleted: store.DeletedInclude},
	} {
		tc.Limit = 100
		page, err := s.ListTools(ctx, tc)
		mustOK(t, "ListTools", err)
		for _, tool := range page.Tools {
			if tool.WorkspaceID != b.ws.ID {
				t.Fatalf("listing %+v shows %s of workspace %q", tc, tool.ID, tool.WorkspaceID)
			}
		}
	}
	fns, err := s.Functions(ctx, b.ws.ID)
	mustOK(t, "Functions", err)
	if len(fns) != 1 || fns[0].ID != b.fn.ID {
		t.Fatalf("b's functions: %+v", fns)
	}
	ms, err := s.Members(ctx, b.ws.ID)
	mustOK(t, "Members", err)
	for _, m := range ms {
		if m.UserID == a.admin.ID || m.UserID == a.member.ID {
			t.Fatalf("b's members include a's %s", m.UserID)
		}
	}
	// Purging does not reach a's none-tier tool, nor its active ones.
	if _, err := s.PurgeExpired(ctx, time.Now().Add(1000*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(); !slices.Equal(before, after) {
		t.Fatalf("workspace a changed:\n before %v\n after  %v", before, after)
	}
}
