package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

func testToolRules(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	other := newFixture(t, s, "other")
	f.create(t, f.serverTool("taken"))
	fetch := &store.Function{WorkspaceID: f.ws.ID, Name: "fetch"}
	mustOK(t, "CreateFunction", s.CreateFunction(ctx, fetch))
	past := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name string
		edit func(t *store.Tool)
		want error
	}{
		{"valid server tool", func(*store.Tool) {}, nil},
		{"valid client tool", func(t *store.Tool) { t.Target, t.FunctionID = store.TargetClient, "" }, nil},
		{"pinned version", func(t *store.Tool) { t.FunctionVersionID = f.v1.ID }, nil},
		{"no creator", func(t *store.Tool) { t.CreatedBy = "" }, nil},
		{"empty examples", func(t *store.Tool) { t.Examples = []store.ToolExample{} }, nil},
		{"server tool without function", func(t *store.Tool) { t.FunctionID = "" }, store.ErrInvalid},
		{"client tool with function", func(t *store.Tool) { t.Target = store.TargetClient }, store.ErrInvalid},
		{"client tool with version", func(t *store.Tool) { t.Target, t.FunctionID, t.FunctionVersionID = store.TargetClient, "", f.v1.ID }, store.ErrInvalid},
		{"unknown target", func(t *store.Tool) { t.Target = "edge" }, store.ErrInvalid},
		{"no target", func(t *store.Tool) { t.Target = "" }, store.ErrInvalid},
		{"no name", func(t *store.Tool) { t.Name = "" }, store.ErrInvalid},
		{"space in name: unconventional, not refused", func(t *store.Tool) { t.Name = "find it?" }, nil},
		{"path-like name", func(t *store.Tool) { t.Name = "../../évil/名前" }, nil},
		{"longest name", func(t *store.Tool) { t.Name = strings.Repeat("x", store.MaxToolNameLen) }, nil},
		{"blank name", func(t *store.Tool) { t.Name = " \u00a0 " }, store.ErrInvalid},
		{"newline in name", func(t *store.Tool) { t.Name = "find\n" }, store.ErrInvalid},
		{"escape in name", func(t *store.Tool) { t.Name = "find\x1b[2J" }, store.ErrInvalid},
		{"name not UTF-8", func(t *store.Tool) { t.Name = "find\xff" }, store.ErrInvalid},
		{"long name", func(t *store.Tool) { t.Name = strings.Repeat("x", store.MaxToolNameLen+1) }, store.ErrInvalid},
		{"no input schema", func(t *store.Tool) { t.InputSchemaID = "" }, store.ErrInvalid},
		{"no output schema", func(t *store.Tool) { t.OutputSchemaID = "" }, store.ErrInvalid},
		{"example args not an object", func(t *store.Tool) { t.Examples = []store.ToolExample{{Args: json.RawMessage(`[1]`)}} }, store.ErrInvalid},
		{"example without args", func(t *store.Tool) { t.Examples = []store.ToolExample{{Result: json.RawMessage(`1`)}} }, store.ErrInvalid},
		{"example result not JSON", func(t *store.Tool) {
			t.Examples = []store.ToolExample{{Args: json.RawMessage(`{}`), Result: json.RawMessage(`{`)}}
		}, store.ErrInvalid},
		{"system tool with a workspace", func(t *store.Tool) { t.System = true }, store.ErrInvalid},
		{"workspace tool without a workspace", func(t *store.Tool) { t.WorkspaceID = "" }, store.ErrInvalid},
		{"deleted", func(t *store.Tool) { t.DeletedAt, t.RetentionTier = &past, store.RetentionShort }, store.ErrInvalid},
		{"tier without deletion", func(t *store.Tool) { t.RetentionTier = store.RetentionShort }, store.ErrInvalid},
		{"missing workspace", func(t *store.Tool) { t.WorkspaceID = "wsp_missing" }, store.ErrNotFound},
		{"missing function", func(t *store.Tool) { t.FunctionID = "fun_missing" }, store.ErrNotFound},
		{"function of another workspace", func(t *store.Tool) { t.FunctionID = other.fn.ID }, store.ErrNotFound},
		{"missing version", func(t *store.Tool) { t.FunctionVersionID = "fnv_missing" }, store.ErrNotFound},
		{"version of another workspace", func(t *store.Tool) { t.FunctionVersionID = other.v1.ID }, store.ErrNotFound},
		{"version of another function", func(t *store.Tool) { t.FunctionID = fetch.ID; t.FunctionVersionID = f.v1.ID }, store.ErrInvalid},
		{"missing schema", func(t *store.Tool) { t.InputSchemaID = "sch_missing" }, store.ErrNotFound},
		{"schema of another workspace", func(t *store.Tool) { t.OutputSchemaID = other.out.ID }, store.ErrNotFound},
		{"taken name", func(t *store.Tool) { t.Name = "taken" }, store.ErrConflict},
		{"creator not a member", func(t *store.Tool) { t.CreatedBy = f.outsider.ID }, store.ErrInvalid},
		{"creator of another workspace", func(t *store.Tool) { t.CreatedBy = other.admin.ID }, store.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := f.serverTool("tool_" + strings.NewReplacer(" ", "_").Replace(tc.name))
			tc.edit(tool)
			err := s.CreateTool(ctx, tool)
			wantErr(t, "CreateTool", err, tc.want)
			if err != nil {
				t.Logf("%s: %v", tc.name, err)
				return
			}
			if !strings.HasPrefix(tool.ID, store.PrefixTool+"_") || tool.CreatedAt.IsZero() || !tool.UpdatedAt.Equal(tool.CreatedAt) {
				t.Fatalf("CreateTool did not fill id and times: %+v", tool)
			}
			got, err := s.Tool(ctx, f.ws.ID, tool.ID)
			mustOK(t, "Tool", err)
			sameTool(t, "read back", got, tool)
		})
	}
	_, err := s.Tool(ctx, f.ws.ID, "tol_missing")
	wantErr(t, "missing tool", err, store.ErrNotFound)
}

func testToolRoundTrip(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	addMember(t, s, f.ws.ID, f.outsider.ID, store.MemberRoleMember)
	tool := &store.Tool{
		ID: "tol_chosen", WorkspaceID: f.ws.ID, Name: "search-docs_v2", Description: "Search the docs.\nUse it first.",
		Target: store.TargetServer, FunctionID: f.fn.ID, FunctionVersionID: f.v1.ID, InputSchemaID: f.in.ID,
		OutputSchemaID: f.out.ID,
		Examples: []store.ToolExample{
			{Args: json.RawMessage(`{"q": "naïve \u00e9", "n": [1, 2.5, null]}`), Result: json.RawMessage(`{"hits": 3}`)},
			{Args: json.RawMessage(`{}`)},
		},
		RequiresConfirmation: true, Enabled: false, CreatedBy: f.admin.ID, RuntimeUserID: f.outsider.ID,
	}
	mustOK(t, "CreateTool", s.CreateTool(ctx, tool))
	if tool.ID != "tol_chosen" {
		t.Fatalf("the chosen id was replaced: %s", tool.ID)
	}
	got, err := s.Tool(ctx, f.ws.ID, tool.ID)
	mustOK(t, "Tool", err)
	sameTool(t, "every field", got, tool)
	if got.Examples[1].Result != nil {
		t.Fatalf("an example without result got one: %s", got.Examples[1].Result)
	}
	wantErr(t, "another tool", s.CreateTool(ctx, f.clientTool("another")), nil)
	dup := f.clientTool("yet_another")
	dup.ID = tool.ID
	wantErr(t, "taken id", s.CreateTool(ctx, dup), store.ErrConflict)

	del, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, store.RetentionLong)
	mustOK(t, "DeleteTool", err)
	got, err = s.Tool(ctx, f.ws.ID, tool.ID)
	mustOK(t, "Tool", err)
	sameTool(t, "deleted", got, del)
	if got.DeletedAt == nil || got.RetentionTier != store.RetentionLong {
		t.Fatalf("deleted tool: %+v", got)
	}
}

func testToolJSON(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	tool := f.create(t, f.clientTool("ask_user"))
	tool.CreatedBy = ""
	b, err := json.Marshal(tool)
	mustOK(t, "Marshal", err)
	var m map[string]any
	mustOK(t, "Unmarshal", json.Unmarshal(b, &m))
	want := []string{"id", "workspace_id", "name", "description", "target", "function_id", "function_version_id", "input_schema_id",
		"output_schema_id", "examples", "requires_confirmation", "enabled", "system", "created_by", "runtime_user_id", "deleted_at",
		"retention_tier", "created_at", "updated_at"}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("JSON fields %v, want the documented %v", keys, want)
	}
	for _, k := range []string{"description", "function_id", "function_version_id", "examples", "created_by", "runtime_user_id", "deleted_at", "retention_tier"} {
		if m[k] != nil {
			t.Errorf("%s = %v, want null", k, m[k])
		}
	}
	if m["workspace_id"] != f.ws.ID || m["target"] != "client" || m["enabled"] != true {
		t.Errorf("JSON: %s", b)
	}
	var back store.Tool
	mustOK(t, "Unmarshal tool", json.Unmarshal(b, &back))
	if !reflect.DeepEqual(&back, tool) {
		t.Fatalf("JSON round trip:\n got  %+v\n want %+v", &back, tool)
	}
	del, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, store.RetentionShort)
	mustOK(t, "DeleteTool", err)
	b, _ = json.Marshal(del)
	if !strings.Contains(string(b), `"retention_tier":"short"`) || strings.Contains(string(b), `"deleted_at":null`) {
		t.Fatalf("deleted tool JSON: %s", b)
	}
}

func testSystemTools(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	in := &store.Schema{Content: json.RawMessage(`{"type":"object"}`)}
	mustOK(t, "CreateSchema", s.CreateSchema(ctx, in))
	fn := &store.Function{Name: "builtin"}
	mustOK(t, "CreateFunction", s.CreateFunction(ctx, fn))
	v := &store.FunctionVersion{FunctionID: fn.ID, Code: "x"}
	mustOK(t, "CreateFunctionVersion", s.CreateFunctionVersion(ctx, v))
	sys := &store.Tool{Name: "read_file", Target: store.TargetServer, FunctionID: fn.ID, InputSchemaID: in.ID, OutputSchemaID: in.ID,
		System: true, Enabled: true}
	mustOK(t, "CreateTool system", s.CreateTool(ctx, sys))
	for _, tc := range []struct {
		name string
		edit func(*store.Tool)
		want error
	}{
		{"same name", func(*store.Tool) {}, store.ErrConflict},
		{"with a creator", func(t *store.Tool) { t.Name, t.CreatedBy = "x1", f.admin.ID }, store.ErrInvalid},
		{"with a runtime user", func(t *store.Tool) { t.Name, t.RuntimeUserID = "x2", f.admin.ID }, store.ErrInvalid},
		{"workspace schema", func(t *store.Tool) { t.Name, t.InputSchemaID = "x3", f.in.ID }, store.ErrNotFound},
		{"workspace function", func(t *store.Tool) { t.Name, t.FunctionID = "x4", f.fn.ID }, store.ErrNotFound},
		{"client", func(t *store.Tool) { t.Name, t.Target, t.FunctionID = "x5", store.TargetClient, "" }, nil},
	} {
		tool := sys.Clone()
		tool.ID = ""
		tc.edit(tool)
		wantErr(t, "CreateTool system "+tc.name, s.CreateTool(ctx, tool), tc.want)
	}
	// A workspace tool may share a system tool's name, and use a system schema.
	wt := f.serverTool("read_file")
	wt.InputSchemaID = in.ID
	f.create(t, wt)

	for _, scope := range []string{"", f.ws.ID} {
		got, err := s.Tool(ctx, scope, sys.ID)
		mustOK(t, "system tool from "+scope, err)
		sameTool(t, "system tool", got, sys)
		_, err = s.UpdateTool(ctx, scope, sys.ID, f.admin.ID, func(t *store.Tool) error { t.Enabled = false; return nil })
		wantErr(t, "edit a system tool from "+scope, err, store.ErrForbidden)
		_, err = s.UpdateTool(ctx, scope, sys.ID, f.admin.ID, func(t *store.Tool) error { return nil })
		wantErr(t, "no-op edit of a system tool from "+scope, err, store.ErrForbidden)
		_, err = s.DeleteTool(ctx, scope, sys.ID, store.RetentionShort)
		wantErr(t, "delete a system tool from "+scope, err, store.ErrForbidden)
	}
	got, _ := s.Tool(ctx, "", sys.ID)
	sameTool(t, "system tool after refused edits", got, sys)
	ver, err := s.ResolveToolVersion(ctx, f.ws.ID, sys.ID)
	mustOK(t, "ResolveToolVersion system", err)
	if ver.ID != v.ID {
		t.Fatalf("system tool runs %s, want %s", ver.ID, v.ID)
	}
	_, err = s.Tool(ctx, "", wt.ID)
	wantErr(t, "workspace tool from the system scope", err, store.ErrNotFound)

	page, err := s.ListTools(ctx, store.ToolFilter{Limit: 100})
	mustOK(t, "ListTools system", err)
	if ids := toolIDs(page.Tools); len(ids) != 2 || ids[0] != sys.ID {
		t.Fatalf("system listing = %v", ids)
	}
	page, err = s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 100})
	mustOK(t, "ListTools", err)
	if ids := toolIDs(page.Tools); !slices.Equal(ids, []string{wt.ID}) {
		t.Fatalf("workspace listing = %v", ids)
	}
	page, err = s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, IncludeSystem: true, Limit: 100})
	mustOK(t, "ListTools", err)
	if len(page.Tools) != 3 {
		t.Fatalf("workspace listing with system tools = %v", toolIDs(page.Tools))
	}
}

func toolIDs(tools []*store.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.ID
	}
	return out
}

func testUpdateTool(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	tool := f.create(t, f.serverTool("search"))
	f.create(t, f.serverTool("taken"))
	gone := f.create(t, f.serverTool("gone"))
	_, err := s.DeleteTool(ctx, f.ws.ID, gone.ID, "")
	mustOK(t, "DeleteTool", err)
	v2 := &store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: f.fn.ID, Code: "v2"}
	mustOK(t, "CreateFunctionVersion", s.CreateFunctionVersion(ctx, v2))
	time.Sleep(2 * time.Millisecond)

	other := newFixture(t, s, "other")
	later := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name string
		fn   func(*store.Tool) error
		want error
	}{
		{"id", func(t *store.Tool) error { t.ID = "tol_x"; return nil }, store.ErrInvalid},
		{"workspace", func(t *store.Tool) error { t.WorkspaceID = other.ws.ID; return nil }, store.ErrInvalid},
		{"system", func(t *store.Tool) error { t.System = true; return nil }, store.ErrInvalid},
		{"creator", func(t *store.Tool) error { t.CreatedBy = f.admin.ID; return nil }, store.ErrInvalid},
		{"deleted at", func(t *store.Tool) error { t.DeletedAt, t.RetentionTier = &later, store.RetentionShort; return nil }, store.ErrInvalid},
		{"retention tier", func(t *store.Tool) error { t.RetentionTier = store.RetentionShort; return nil }, store.ErrInvalid},
		{"created at", func(t *store.Tool) error { t.CreatedAt = later; return nil }, store.ErrInvalid},
		{"updated at", func(t *store.Tool) error { t.UpdatedAt = later; return nil }, store.ErrInvalid},
		{"client with a function", func(t *store.Tool) error { t.Target = store.TargetClient; return nil }, store.ErrInvalid},
		{"server without a function", func(t *store.Tool) error { t.FunctionID = ""; return nil }, store.ErrInvalid},
		{"empty name", func(t *store.Tool) error { t.Name = ""; return nil }, store.ErrInvalid},
		{"taken name", func(t *store.Tool) error { t.Name = "taken"; return nil }, store.ErrConflict},
		{"function of another workspace", func(t *store.Tool) error { t.FunctionID = other.fn.ID; return nil }, store.ErrNotFound},
		{"version of another workspace", func(t *store.Tool) error { t.FunctionVersionID = other.v1.ID; return nil }, store.ErrNotFound},
		{"schema of another workspace", func(t *store.Tool) error { t.InputSchemaID = other.in.ID; return nil }, store.ErrNotFound},
		{"bad example", func(t *store.Tool) error { t.Examples = []store.ToolExample{{Args: json.RawMessage(`1`)}}; return nil }, store.ErrInvalid},
		{"fn fails", func(t *store.Tool) error { t.Name = "lost"; return errSentinel }, errSentinel},
	} {
		_, err := s.UpdateTool(ctx, f.ws.ID, tool.ID, f.admin.ID, tc.fn)
		wantErr(t, "UpdateTool "+tc.name, err, tc.want)
	}
	got, _ := s.Tool(ctx, f.ws.ID, tool.ID)
	sameTool(t, "after refused updates", got, tool)

	// Every editable field, by a plain member: the runtime user does not change.
	updated, err := s.UpdateTool(ctx, f.ws.ID, tool.ID, f.member.ID, func(t *store.Tool) error {
		t.Name, t.Description = "gone", "reuses a deleted tool's name"
		t.FunctionVersionID = v2.ID
		t.InputSchemaID, t.OutputSchemaID = f.out.ID, f.in.ID
		t.Examples = []store.ToolExample{{Args: json.RawMessage(`{"q":"x"}`), Result: json.RawMessage(`"ok"`)}}
		t.RequiresConfirmation, t.Enabled = true, false
		return nil
	})
	mustOK(t, "UpdateTool", err)
	if !updated.UpdatedAt.After(tool.UpdatedAt) || !updated.CreatedAt.Equal(tool.CreatedAt) {
		t.Fatalf("times after update: %v -> %v", tool.UpdatedAt, updated.UpdatedAt)
	}
	got, _ = s.Tool(ctx, f.ws.ID, tool.ID)
	sameTool(t, "after update", got, updated)
	if got.Name != "gone" || got.FunctionVersionID != v2.ID || !got.RequiresConfirmation || got.Enabled || len(got.Examples) != 1 {
		t.Fatalf("after update: %+v", got)
	}
	// Server to client and back.
	updated, err = s.UpdateTool(ctx, f.ws.ID, tool.ID, f.member.ID, func(t *store.Tool) error {
		t.Target, t.FunctionID, t.FunctionVersionID, t.Examples, t.Description = store.TargetClient, "", "", nil, ""
		return nil
	})
	mustOK(t, "UpdateTool to client", err)
	got, _ = s.Tool(ctx, f.ws.ID, tool.ID)
	sameTool(t, "client", got, updated)
	if got.FunctionID != "" || got.Examples != nil || got.Description != "" {
		t.Fatalf("after clearing: %+v", got)
	}
	_, err = s.UpdateTool(ctx, f.ws.ID, gone.ID, f.admin.ID, func(t *store.Tool) error { return nil })
	wantErr(t, "UpdateTool deleted", err, store.ErrNotFound)
	_, err = s.UpdateTool(ctx, f.ws.ID, "tol_missing", f.admin.ID, func(t *store.Tool) error { return nil })
	wantErr(t, "UpdateTool missing", err, store.ErrNotFound)
}

func testSoftDelete(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	for _, tc := range []struct {
		name      string
		wsTier    store.RetentionTier
		tier      store.RetentionTier
		wantTier  store.RetentionTier
		wantError error
	}{
		{"workspace default", "", "", store.DefaultRetentionTier, nil},
		{"workspace short", store.RetentionShort, "", store.RetentionShort, nil},
		{"workspace none", store.RetentionNone, "", store.RetentionNone, nil},
		{"parameter long over workspace short", store.RetentionShort, store.RetentionLong, store.RetentionLong, nil},
		{"parameter medium", store.RetentionNone, store.RetentionMedium, store.RetentionMedium, nil},
		{"parameter none", store.RetentionLong, store.RetentionNone, store.RetentionNone, nil},
		{"unknown tier", "", "weekly", "", store.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wsTier != "" {
				_, err := s.UpdateWorkspace(ctx, f.ws.ID, f.member.ID, func(w *store.Workspace) error { w.RetentionTier = tc.wsTier; return nil })
				mustOK(t, "UpdateWorkspace", err)
			}
			tool := f.create(t, f.serverTool("tool"))
			before := time.Now().Add(-time.Second)
			del, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, tc.tier)
			wantErr(t, "DeleteTool", err, tc.wantError)
			if err != nil {
				_, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, store.RetentionShort)
				mustOK(t, "DeleteTool", err)
				return
			}
			if del.DeletedAt == nil || del.DeletedAt.Before(before) || del.RetentionTier != tc.wantTier {
				t.Fatalf("DeleteTool = %+v, want tier %s", del, tc.wantTier)
			}
			got, err := s.Tool(ctx, f.ws.ID, tool.ID)
			mustOK(t, "Tool after delete", err)
			sameTool(t, "deleted tool", got, del)
			if !got.DeletedAt.Equal(*del.DeletedAt) || got.RetentionTier != tc.wantTier {
				t.Fatalf("deleted tool read back: %+v", got)
			}
			_, err = s.DeleteTool(ctx, f.ws.ID, tool.ID, "")
			wantErr(t, "delete twice", err, store.ErrNotFound)
			// The name is free again: the next case creates "tool" once more.
		})
	}
	_, err := s.DeleteTool(ctx, f.ws.ID, "tol_missing", "")
	wantErr(t, "delete missing", err, store.ErrNotFound)
	page, err := s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, Deleted: store.DeletedOnly, Limit: 100})
	mustOK(t, "ListTools", err)
	if len(page.Tools) != 7 {
		t.Fatalf("%d deleted tools named tool, want 7", len(page.Tools))
	}
}

func testPurge(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "w")
	other := newFixture(t, s, "other")
	tiers := []store.RetentionTier{store.RetentionShort, store.RetentionMedium, store.RetentionLong, store.RetentionNone}
	deleted := map[store.RetentionTier]*store.Tool{}
	for _, tier := range tiers {
		tool := f.create(t, f.serverTool("tool_"+string(tier)))
		del, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, tier)
		mustOK(t, "DeleteTool", err)
		deleted[tier] = del
	}
	// The other workspace's default tier is short: its tool is due with the short one.
	_, err := s.UpdateWorkspace(ctx, other.ws.ID, other.admin.ID, func(w *store.Workspace) error { w.RetentionTier = store.RetentionShort; return nil })
	mustOK(t, "UpdateWorkspace", err)
	otherTool := other.create(t, other.serverTool("other_short"))
	otherDel, err := s.DeleteTool(ctx, other.ws.ID, otherTool.ID, "")
	mustOK(t, "DeleteTool", err)
	active := f.create(t, f.serverTool("active"))

	present := func(ws string, tool *store.Tool) bool {
		t.Helper()
		_, err := s.Tool(ctx, ws, tool.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	day := 24 * time.Hour
	at := func(tool *store.Tool, d time.Duration) time.Time { return tool.DeletedAt.Add(d) }
	for _, step := range []struct {
		name string
		now  time.Time
		want int
		gone []*store.Tool
	}{
		{"in the past", time.Now().Add(-48 * time.Hour), 0, nil},
		{"at deletion", at(deleted[store.RetentionShort], 0), 0, nil},
		{"a day later", at(deleted[store.RetentionShort], day), 0, nil},
		{"just before 7 days", at(deleted[store.RetentionShort], 7*day-time.Millisecond), 0, nil},
		{"7 days: short", at(otherDel, 7*day), 2, []*store.Tool{deleted[store.RetentionShort], otherDel}},
		{"7 days again", at(otherDel, 7*day), 0, nil},
		{"just before 30 days", at(deleted[store.RetentionMedium], 30*day-time.Millisecond), 0, nil},
		{"30 days: medium", at(deleted[store.RetentionMedium], 30*day), 1, []*store.Tool{deleted[store.RetentionMedium]}},
		{"just before 90 days", at(deleted[store.RetentionLong], 90*day-time.Millisecond), 0, nil},
		{"90 days: long", at(deleted[store.RetentionLong], 90*day), 1, []*store.Tool{deleted[store.RetentionLong]}},
		{"a century later: none stays", at(deleted[store.RetentionNone], 100*365*day), 0, nil},
	} {
		purged, err := s.PurgeExpired(ctx, step.now)
		mustOK(t, "PurgeExpired "+step.name, err)
		if len(purged) != step.want {
			t.Fatalf("PurgeExpired %s: %d purged, want %d", step.name, len(purged), step.want)
		}
		for _, tool := range step.gone {
			if !slices.ContainsFunc(purged, func(p *store.Tool) bool { return p.ID == tool.ID && p.Name == tool.Name && p.DeletedAt != nil }) {
				t.Fatalf("PurgeExpired %s: %s is not among the tools it returned", step.name, tool.ID)
			}
		}
		for _, tool := range step.gone {
			if present(tool.WorkspaceID, tool) {
				t.Fatalf("%s: %s (%s) is still there", step.name, tool.Name, tool.RetentionTier)
			}
		}
	}
	if !present(f.ws.ID, deleted[store.RetentionNone]) || !present(f.ws.ID, active) {
		t.Fatal("the none-tier tool or the active tool was purged")
	}
	page, err := s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, Deleted: store.DeletedInclude, Limit: 100})
	mustOK(t, "ListTools", err)
	if ids := toolIDs(page.Tools); !slices.Equal(ids, []string{deleted[store.RetentionNone].ID, active.ID}) {
		t.Fatalf("after purging: %v", ids)
	}
	// A purged tool's name and id are gone for good; the name can be used again.
	f.create(t, f.serverTool("tool_short"))
}

// testToolsStamp: a workspace's stamp changes with every change to its tools and functions
// and to who they run as (the default runtime user, the members), and with nothing else: not
// another workspace's changes, not a read.
func testToolsStamp(t *testing.T, s store.Entities) {
	f := newFixture(t, s, "stamped")
	other := newFixture(t, s, "other")
	stamp := func() string {
		t.Helper()
		st, err := s.ToolsStamp(ctx, f.ws.ID)
		mustOK(t, "ToolsStamp", err)
		return st
	}
	last := stamp()
	step := func(what string, change func()) {
		t.Helper()
		// Timestamps have a resolution: a change in the same tick as the last would not show.
		time.Sleep(2 * time.Millisecond)
		change()
		now := stamp()
		if now == last {
			t.Fatalf("%s: the stamp stayed %s", what, now)
		}
		last = now
	}
	var tool *store.Tool
	step("create a tool", func() { tool = f.create(t, f.serverTool("stamped_tool")) })
	step("update it", func() {
		_, err := s.UpdateTool(ctx, f.ws.ID, tool.ID, f.admin.ID, func(tl *store.Tool) error { tl.Description = "changed"; return nil })
		mustOK(t, "UpdateTool", err)
	})
	step("a new default version", func() {
		v := &store.FunctionVersion{WorkspaceID: f.ws.ID, FunctionID: f.fn.ID, Code: "export default () => 2"}
		mustOK(t, "CreateFunctionVersion", s.CreateFunctionVersion(ctx, v))
		_, err := s.SetDefaultVersion(ctx, f.ws.ID, f.fn.ID, v.ID)
		mustOK(t, "SetDefaultVersion", err)
	})
	step("delete the tool", func() {
		_, err := s.DeleteTool(ctx, f.ws.ID, tool.ID, store.RetentionShort)
		mustOK(t, "DeleteTool", err)
	})
	step("purge it", func() {
		_, err := s.PurgeExpired(ctx, time.Now().Add(8*24*time.Hour))
		mustOK(t, "PurgeExpired", err)
	})
	step("a default runtime user", func() {
		_, err := s.UpdateWorkspace(ctx, f.ws.ID, f.admin.ID, func(w *store.Workspace) error { w.DefaultRuntimeUserID = f.member.ID; return nil })
		mustOK(t, "UpdateWorkspace", err)
	})
	newcomer := newUser(t, s, "newcomer")
	step("a member added", func() { addMember(t, s, f.ws.ID, newcomer.ID, store.MemberRoleMember) })
	step("a member removed", func() { mustOK(t, "RemoveMember", s.RemoveMember(ctx, f.ws.ID, f.member.ID)) })
	step("one removed, another added", func() {
		mustOK(t, "RemoveMember", s.RemoveMember(ctx, f.ws.ID, newcomer.ID))
		time.Sleep(2 * time.Millisecond)
		addMember(t, s, f.ws.ID, f.outsider.ID, store.MemberRoleMember)
	})
	other.create(t, other.serverTool("elsewhere"))
	addMember(t, s, other.ws.ID, newcomer.ID, store.MemberRoleMember)
	_, err := s.ListTools(ctx, store.ToolFilter{WorkspaceID: f.ws.ID, Limit: 10})
	mustOK(t, "ListTools", err)
	if now := stamp(); now != last {
		t.Fatalf("another workspace's tool or a read changed the stamp: %s, was %s", now, last)
	}
}
