package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/store"
)

// TestHiddenStoredToolIsNotFound: a key bound to the support toolset is not shown the stored
// record of a tool outside it: GET /v1/tools leaves it out, and GET, PATCH and DELETE
// /v1/tools/{id} answer 404 with the body of a tool that does not exist, the id aside; the
// admin still has it.
func TestHiddenStoredToolIsNotFound(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		w := newEntitleWorld(t, st.(store.Backend))
		if status, body := w.putDocument(t, entitleDocument, 0); status != 200 {
			t.Fatalf("setting the document: %d %s", status, body)
		}
		support := w.bindKeys(t)
		ids := map[string]string{}
		for _, name := range []string{"support_notes", "billing_notes"} {
			status, body := w.send(t, "POST", "/v1/tools", "admin", map[string]any{"name": name, "target": "client",
				"input_schema": map[string]any{"type": "object", "description": "The " + name + " tool."}})
			var made struct {
				ID string `json:"id"`
			}
			if status != 201 || json.Unmarshal(body, &made) != nil {
				t.Fatalf("storing %s: %d %s", name, status, body)
			}
			ids[name] = made.ID
		}
		status, body := w.send(t, "GET", "/v1/tools", support, nil)
		if status != 200 || !strings.Contains(string(body), ids["support_notes"]) || strings.Contains(string(body), ids["billing_notes"]) {
			t.Errorf("the support key's stored tools: %d %s", status, body)
		}
		if status, body := w.send(t, "GET", "/v1/tools/"+ids["support_notes"], support, nil); status != 200 {
			t.Errorf("the support key reading its toolset's tool: %d %s", status, body)
		}
		hidden := ids["billing_notes"]
		for _, c := range []struct {
			method string
			body   any
		}{{"GET", nil}, {"PATCH", map[string]any{"description": "Changed."}}, {"DELETE", nil}} {
			status, body := w.send(t, c.method, "/v1/tools/"+hidden, support, c.body)
			wantStatus, want := w.send(t, c.method, "/v1/tools/tol_nope", support, c.body)
			if status != 404 || wantStatus != 404 || strings.ReplaceAll(string(body), hidden, "tol_nope") != string(want) {
				t.Errorf("%s of the hidden tool: %d %s\na missing one: %d %s", c.method, status, body, wantStatus, want)
			}
		}
		status, body = w.send(t, "GET", "/v1/tools/"+hidden, "admin", nil)
		if status != 200 || strings.Contains(string(body), "Changed.") || !strings.Contains(string(body), `"deleted_at":null`) {
			t.Errorf("the admin's view of the tool after the refusals: %d %s", status, body)
		}
	})
}
