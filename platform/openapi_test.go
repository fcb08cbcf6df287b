package platform_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/openapi"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// openAPIDoc is a document of one operation, named op.
func openAPIDoc(op string) []byte {
	return []byte(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"https://svc.example"}],` +
		`"paths":{"/` + op + `":{"get":{"operationId":"` + op + `","responses":{"200":{"description":"ok"}}}}}}`)
}

// TestOpenAPISourceRules: an admin imports; a source never takes a shared tool's place or a
// stored tool's; a replacement made within the same tick of the clock is served (the tools are
// kept by the source's content, not its time).
func TestOpenAPISourceRules(t *testing.T) {
	w := newToolWorld(t)
	ctx := context.Background()
	served := func() []string {
		var names []string
		for _, tl := range w.p.Workspace(ctx, "wsp_a").Registry().Tools() {
			names = append(names, tl.Name())
		}
		return names
	}
	_, err := w.p.ImportOpenAPI(ctx, w.member, platform.NewOpenAPISource{Name: "svc", Document: openAPIDoc("first")})
	refusal(t, "a member imports", err, platform.Forbidden, "")

	// A shared tool named as a source's tool would be (a remote server's, say).
	shared := w.p.Workspace(ctx, "wsp_a").Registry().Base
	must(t, shared.Register(mustTool(t, "gh.create_issue")))
	_, err = w.p.ImportOpenAPI(ctx, w.admin, platform.NewOpenAPISource{Name: "gh", Document: openAPIDoc("create_issue")})
	refusal(t, "a source taking a shared tool's name", err, platform.Conflict, "name")
	if _, err := w.p.CreateTool(ctx, w.member, platform.NewTool{Name: "st.mine", Description: "Mine.", Target: "client",
		InputSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	_, err = w.p.ImportOpenAPI(ctx, w.admin, platform.NewOpenAPISource{Name: "st", Document: openAPIDoc("mine")})
	refusal(t, "a source taking a stored tool's name", err, platform.Conflict, "name")

	fixed := quiver.WithClock(ctx, func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) })
	if _, err := w.p.ImportOpenAPI(fixed, w.admin, platform.NewOpenAPISource{Name: "svc", Document: openAPIDoc("first")}); err != nil {
		t.Fatal(err)
	}
	if got := served(); !slices.Contains(got, "svc.first") {
		t.Fatalf("after the import: %v", got)
	}
	// A member's stored tool cannot take an imported tool's name.
	_, err = w.p.CreateTool(ctx, w.member, platform.NewTool{Name: "svc.first", Description: "Mine.", Target: "client",
		InputSchema: json.RawMessage(`{"type":"object"}`)})
	refusal(t, "a stored tool taking an imported tool's name", err, platform.Conflict, "name")
	im, err := w.p.ImportOpenAPI(fixed, w.admin, platform.NewOpenAPISource{Name: "svc", Document: openAPIDoc("second")})
	if err != nil || im.Created {
		t.Fatalf("the replacement: %+v %v", im, err)
	}
	if got := served(); !slices.Contains(got, "svc.second") || slices.Contains(got, "svc.first") {
		t.Fatalf("after a replacement in the same tick: %v", got)
	}
	got, err := w.p.OpenAPISource(ctx, w.viewer, "svc")
	if err != nil || len(got.Tools) != 1 || got.Tools[0].Name() != "svc.second" {
		t.Fatalf("the source read back: %+v %v", got, err)
	}
	refusal(t, "a member deletes", w.p.DeleteOpenAPISource(ctx, w.member, "svc"), platform.Forbidden, "")
	must(t, w.p.DeleteOpenAPISource(ctx, w.admin, "svc"))
	if got := served(); slices.Contains(got, "svc.second") {
		t.Fatalf("after the deletion: %v", got)
	}
}

func mustTool(t *testing.T, name string) *quiver.Tool {
	t.Helper()
	tl, err := quiver.NewTool(quiver.Spec{Name: name, Description: "A shared tool.", Imported: true}, func(context.Context, json.RawMessage) (any, error) {
		return "shared", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// manyOperations is a document of n operations, op0 to op(n-1), each answering a pet object.
func manyOperations(n int) []byte {
	var paths []string
	for i := range n {
		paths = append(paths, fmt.Sprintf(`"/op%d":{"get":{"operationId":"op%d","responses":{"200":{"description":"ok",`+
			`"content":{"application/json":{"schema":{"type":"object","properties":{"id":{"type":"integer"}}}}}}}}}`, i, i))
	}
	return []byte(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"https://svc.example"}],` +
		`"paths":{` + strings.Join(paths, ",") + `}}`)
}

// TestOpenAPISourceSettings: an admin raises a source's cap of operations and makes it strict;
// the settings are checked, stored with the source, and every node builds the tools with them
// (a second platform over the same store, as another node of a fleet is).
func TestOpenAPISourceSettings(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_a", Name: "a"}))
	must(t, st.CreateUser(ctx, &store.User{ID: "usr_a", Email: "a@example.com"}))
	must(t, st.AddMember(ctx, &store.Membership{WorkspaceID: "wsp_a", UserID: "usr_a", Role: store.MemberRoleAdmin}))
	admin := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_a", KeyID: "key_a", Role: store.KeyRoleAdmin}
	member := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_a", KeyID: "key_m", Role: store.KeyRoleMember}
	node := func() *platform.Platform {
		p, err := platform.New(platform.Config{Store: st, Registry: &quiver.Registry{}})
		must(t, err)
		return p
	}
	one, two := node(), node()
	doc := manyOperations(openapi.MaxOperations + 1)
	for _, tc := range []struct {
		name    string
		actor   platform.Actor
		in      platform.NewOpenAPISource
		kind    platform.Kind
		field   string
		message string
	}{
		{"the default cap", admin, platform.NewOpenAPISource{Name: "big", Document: doc}, platform.Invalid, "document", "raise the cap with max_operations"},
		{"a cap under the document's", admin, platform.NewOpenAPISource{Name: "big", Document: doc, MaxOperations: 10}, platform.Invalid, "document", "max_operations"},
		{"a negative cap", admin, platform.NewOpenAPISource{Name: "big", Document: doc, MaxOperations: -1}, platform.Invalid, "max_operations", "a cap from 0"},
		{"a cap over the most", admin, platform.NewOpenAPISource{Name: "big", Document: doc, MaxOperations: openapi.MaxDocumentOperations + 1},
			platform.Invalid, "max_operations", "to 10000"},
		{"a member raising the cap", member, platform.NewOpenAPISource{Name: "big", Document: doc, MaxOperations: 2000}, platform.Forbidden, "", "an admin"},
	} {
		_, err := one.ImportOpenAPI(ctx, tc.actor, tc.in)
		refusal(t, tc.name, err, tc.kind, tc.field)
		if err != nil && !strings.Contains(err.Error(), tc.message) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.message)
		}
	}
	im, err := one.ImportOpenAPI(ctx, admin, platform.NewOpenAPISource{Name: "big", Document: doc, MaxOperations: 2000, Strict: true})
	if err != nil || len(im.Tools) != openapi.MaxOperations+1 || im.Source.MaxOperations != 2000 || !im.Source.Strict {
		t.Fatalf("the import with the cap raised: %v", err)
	}
	stored, err := st.OpenAPISource(ctx, "wsp_a", "big")
	if err != nil || stored.MaxOperations != 2000 || !stored.Strict {
		t.Fatalf("stored: %+v %v", stored, err)
	}
	// The other node builds the tools from the stored source: all of them, strict.
	tl, ok := two.Workspace(ctx, "wsp_a").Registry().Lookup(fmt.Sprintf("big.op%d", openapi.MaxOperations))
	if !ok || tl.Spec().OutputAdvisory {
		t.Fatalf("the other node's tool: found %v, advisory %v", ok, ok && tl.Spec().OutputAdvisory)
	}
	// Imported again without the settings: the cap refuses the document on every node.
	if _, err := one.ImportOpenAPI(ctx, admin, platform.NewOpenAPISource{Name: "big", Document: openAPIDoc("one")}); err != nil {
		t.Fatal(err)
	}
	two.ToolsChanged(ctx, "wsp_a") // as a fleet's notice of the change, rather than its next recheck
	tl, ok = two.Workspace(ctx, "wsp_a").Registry().Lookup("big.one")
	if !ok || !tl.Spec().OutputAdvisory {
		t.Fatalf("the replacement on the other node: found %v", ok)
	}
}
