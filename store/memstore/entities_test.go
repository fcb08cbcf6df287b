package memstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
	"github.com/quiverhq/quiver/store/storetest"
)

func TestEntities(t *testing.T) {
	storetest.RunEntities(t, func(t *testing.T) store.Entities {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestAPIKeys(t *testing.T) {
	storetest.RunAPIKeys(t, func(t *testing.T) storetest.APIKeysStore {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestEntityStamps: the entity records' ids and times come from the context, so a run replayed
// on a fresh store leaves identical records.
func TestEntityStamps(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	n := 0
	ctx := stamp.WithClock(context.Background(), func() time.Time { return at })
	ctx = stamp.WithIDs(ctx, func(prefix string) string { n++; return fmt.Sprintf("%s_%d", prefix, n) })
	s := memstore.New()
	ws := &store.Workspace{Name: "w"}
	u := &store.User{Email: "a@example.com"}
	entityOK(t, s.CreateWorkspace(ctx, ws), s.CreateUser(ctx, u),
		s.AddMember(ctx, &store.Membership{WorkspaceID: ws.ID, UserID: u.ID, Role: store.MemberRoleAdmin}))
	sc := &store.Schema{WorkspaceID: ws.ID, Content: json.RawMessage(`{}`)}
	fn := &store.Function{WorkspaceID: ws.ID, Name: "f"}
	entityOK(t, s.CreateSchema(ctx, sc), s.CreateFunction(ctx, fn))
	v := &store.FunctionVersion{WorkspaceID: ws.ID, FunctionID: fn.ID}
	tool := &store.Tool{WorkspaceID: ws.ID, Name: "t", Target: store.TargetServer, FunctionID: fn.ID,
		InputSchemaID: sc.ID, OutputSchemaID: sc.ID}
	key := &store.APIKey{WorkspaceID: ws.ID, UserID: u.ID, Name: "k", Role: store.KeyRoleAdmin, Prefix: "qvk_",
		Hash: make([]byte, store.APIKeyHashSize)}
	entityOK(t, s.CreateFunctionVersion(ctx, v), s.CreateTool(ctx, tool), s.CreateAPIKey(ctx, key))
	ids := []string{ws.ID, u.ID, sc.ID, fn.ID, v.ID, tool.ID, key.ID}
	want := []string{"wsp_1", "usr_2", "sch_3", "fun_4", "fnv_5", "tol_6", "key_7"}
	if !slices.Equal(ids, want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
	for _, got := range []time.Time{ws.CreatedAt, u.CreatedAt, sc.CreatedAt, fn.CreatedAt, v.CreatedAt, tool.CreatedAt, key.CreatedAt} {
		if !got.Equal(at) {
			t.Errorf("a record made at %v, want the context's %v", got, at)
		}
	}
}

// TestEntityCopies: what a caller hands in or gets back shares nothing with the stored records.
func TestEntityCopies(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	ws := &store.Workspace{Name: "w"}
	entityOK(t, s.CreateWorkspace(ctx, ws))
	sc := &store.Schema{WorkspaceID: ws.ID, Content: json.RawMessage(`{"a":1}`)}
	entityOK(t, s.CreateSchema(ctx, sc))
	tool := &store.Tool{WorkspaceID: ws.ID, Name: "t", Target: store.TargetClient, InputSchemaID: sc.ID, OutputSchemaID: sc.ID,
		Examples: []store.ToolExample{{Args: json.RawMessage(`{"q":1}`)}}}
	entityOK(t, s.CreateTool(ctx, tool))
	sc.Content[2], tool.Examples[0].Args[2] = 'X', 'X'
	got, err := s.Tool(ctx, ws.ID, tool.ID)
	entityOK(t, err)
	got.Examples[0].Args[2] = 'Y'
	var kept *store.Tool
	_, err = s.UpdateTool(ctx, ws.ID, tool.ID, "", func(t *store.Tool) error { kept = t; t.Description = "d"; return nil })
	entityOK(t, err)
	kept.Examples[0].Args[2] = 'Z'
	del, err := s.DeleteTool(ctx, ws.ID, tool.ID, "")
	entityOK(t, err)
	*del.DeletedAt = time.Time{}
	got, err = s.Tool(ctx, ws.ID, tool.ID)
	entityOK(t, err)
	if string(got.Examples[0].Args) != `{"q":1}` || got.DeletedAt.IsZero() || got.Description != "d" {
		t.Errorf("the stored tool changed with a caller's copy: %+v", got)
	}
	if got, err := s.Schema(ctx, ws.ID, sc.ID); err != nil || string(got.Content) != `{"a":1}` {
		t.Errorf("the stored schema changed with the caller's: %s, %v", got.Content, err)
	}
}

func entityOK(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
