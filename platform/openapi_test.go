package platform_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
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
