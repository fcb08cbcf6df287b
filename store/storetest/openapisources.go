package storetest

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

// testOpenAPISources: a workspace's OpenAPI documents are stored, replaced by name (keeping
// who created them and when), listed by name, deleted, kept apart from other workspaces, and
// every change moves the workspace's ToolsStamp.
func testOpenAPISources(t *testing.T, s store.Entities) {
	a, b := newFixture(t, s, "a"), newFixture(t, s, "b")
	stamp := func() string {
		st, err := s.ToolsStamp(ctx, a.ws.ID)
		mustOK(t, "ToolsStamp", err)
		return st
	}
	before := stamp()
	src := &store.OpenAPISource{WorkspaceID: a.ws.ID, Name: "pets", Document: []byte("openapi: 3.0.3\n"), Servers: []string{"https://p.example/api"},
		Operations: []string{"findPets"}, Credentials: map[string]string{"api_key": "PETS_KEY"}, Timeout: 5 * time.Second,
		MaxResponseBytes: 1000, MaxOperations: 1500, Strict: true, CreatedBy: a.member.ID}
	created, err := s.PutOpenAPISource(ctx, src)
	mustOK(t, "PutOpenAPISource", err)
	if !created || src.CreatedAt.IsZero() || src.UpdatedAt.IsZero() {
		t.Fatalf("created %v, times %v %v", created, src.CreatedAt, src.UpdatedAt)
	}
	afterPut := stamp()
	if afterPut == before {
		t.Error("ToolsStamp did not change when a source was added")
	}
	got, err := s.OpenAPISource(ctx, a.ws.ID, "pets")
	mustOK(t, "OpenAPISource", err)
	if !bytes.Equal(got.Document, src.Document) || !slices.Equal(got.Servers, src.Servers) || !slices.Equal(got.Operations, src.Operations) ||
		got.Credentials["api_key"] != "PETS_KEY" || got.Timeout != 5*time.Second || got.MaxResponseBytes != 1000 || got.MaxOperations != 1500 || !got.Strict || got.CreatedBy != a.member.ID ||
		!got.CreatedAt.Equal(src.CreatedAt) {
		t.Fatalf("read back %+v, stored %+v", got, src)
	}
	again := &store.OpenAPISource{WorkspaceID: a.ws.ID, Name: "pets", Document: []byte("openapi: 3.1.0\n"), CreatedBy: a.admin.ID}
	created, err = s.PutOpenAPISource(ctx, again)
	mustOK(t, "PutOpenAPISource again", err)
	if created || again.CreatedBy != a.member.ID || !again.CreatedAt.Equal(src.CreatedAt) || !again.UpdatedAt.After(src.UpdatedAt) {
		t.Fatalf("replaced: created %v, %+v", created, again)
	}
	if got, _ := s.OpenAPISource(ctx, a.ws.ID, "pets"); string(got.Document) != "openapi: 3.1.0\n" || len(got.Servers) != 0 || len(got.Credentials) != 0 ||
		got.MaxOperations != 0 || got.Strict {
		t.Fatalf("after the replacement: %+v", got)
	}
	if stamp() == afterPut {
		t.Error("ToolsStamp did not change when a source was replaced")
	}
	mustOK(t, "PutOpenAPISource", func() error {
		_, err := s.PutOpenAPISource(ctx, &store.OpenAPISource{WorkspaceID: a.ws.ID, Name: "api-2", Document: []byte("{}")})
		return err
	}())
	list, err := s.OpenAPISources(ctx, a.ws.ID)
	mustOK(t, "OpenAPISources", err)
	if len(list) != 2 || list[0].Name != "api-2" || list[1].Name != "pets" {
		t.Fatalf("listed %d sources", len(list))
	}
	// Another workspace sees none of them, and cannot delete them.
	if list, _ := s.OpenAPISources(ctx, b.ws.ID); len(list) != 0 {
		t.Errorf("workspace b lists %d of a's sources", len(list))
	}
	_, err = s.OpenAPISource(ctx, b.ws.ID, "pets")
	wantErr(t, "b reads a's source", err, store.ErrNotFound)
	wantErr(t, "b deletes a's source", s.DeleteOpenAPISource(ctx, b.ws.ID, "pets"), store.ErrNotFound)
	beforeDelete := stamp()
	mustOK(t, "DeleteOpenAPISource", s.DeleteOpenAPISource(ctx, a.ws.ID, "pets"))
	if stamp() == beforeDelete {
		t.Error("ToolsStamp did not change when a source was deleted")
	}
	_, err = s.OpenAPISource(ctx, a.ws.ID, "pets")
	wantErr(t, "a deleted source", err, store.ErrNotFound)
	wantErr(t, "deleting it again", s.DeleteOpenAPISource(ctx, a.ws.ID, "pets"), store.ErrNotFound)
	for name, bad := range map[string]*store.OpenAPISource{
		"no workspace":              {Name: "x", Document: []byte("{}")},
		"a dotted name":             {WorkspaceID: a.ws.ID, Name: "a.b", Document: []byte("{}")},
		"no document":               {WorkspaceID: a.ws.ID, Name: "x"},
		"a large document":          {WorkspaceID: a.ws.ID, Name: "x", Document: make([]byte, store.MaxOpenAPIDocumentBytes+1)},
		"a negative cap":            {WorkspaceID: a.ws.ID, Name: "x", Document: []byte("{}"), MaxResponseBytes: -1},
		"a negative operations cap": {WorkspaceID: a.ws.ID, Name: "x", Document: []byte("{}"), MaxOperations: -1},
		"unknown workspace":         {WorkspaceID: "wsp_nope", Name: "x", Document: []byte("{}")},
	} {
		_, err := s.PutOpenAPISource(ctx, bad)
		kind := store.ErrInvalid
		if name == "unknown workspace" {
			kind = store.ErrNotFound
		}
		wantErr(t, name, err, kind)
	}
}
