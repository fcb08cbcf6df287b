package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/store"
)

// TestHiddenFunctionIsNotFound: a key bound to the support toolset is not shown the function
// behind a stored tool outside it: GET /v1/functions leaves it out, and GET
// /v1/functions/{id} and its versions answer 404 with the body of a function that does not
// exist, the id aside; the function of a tool in the toolset is the key's to read; the admin
// reads both.
func TestHiddenFunctionIsNotFound(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		w := newEntitleWorld(t, st.(store.Backend))
		if status, body := w.putDocument(t, entitleDocument, 0); status != 200 {
			t.Fatalf("setting the document: %d %s", status, body)
		}
		support := w.bindKeys(t)
		fns := map[string]string{}
		for _, tool := range []string{"support_notes", "billing_notes"} {
			var made struct {
				ID string `json:"id"`
			}
			status, body := w.send(t, "POST", "/v1/functions", "admin", map[string]any{"name": tool + "_fn"})
			if status != 201 || json.Unmarshal(body, &made) != nil {
				t.Fatalf("creating %s's function: %d %s", tool, status, body)
			}
			fns[tool] = made.ID
			if status, body := w.send(t, "POST", "/v1/functions/"+made.ID+"/versions", "admin", map[string]any{"code": "export default () => 1"}); status != 201 {
				t.Fatalf("a version of %s's function: %d %s", tool, status, body)
			}
			if status, body := w.send(t, "POST", "/v1/tools", "admin", map[string]any{"name": tool, "target": "server", "function_id": made.ID,
				"input_schema": map[string]any{"type": "object", "description": "The " + tool + " tool."}}); status != 201 {
				t.Fatalf("storing %s: %d %s", tool, status, body)
			}
		}
		hidden, seen := fns["billing_notes"], fns["support_notes"]
		status, body := w.send(t, "GET", "/v1/functions", support, nil)
		if status != 200 || !strings.Contains(string(body), seen) || strings.Contains(string(body), hidden) {
			t.Errorf("the support key's functions: %d %s", status, body)
		}
		for _, path := range []string{"/v1/functions/%s", "/v1/functions/%s/versions"} {
			status, body := w.send(t, "GET", strings.Replace(path, "%s", seen, 1), support, nil)
			if status != 200 {
				t.Errorf("the support key reading %s of its toolset's function: %d %s", path, status, body)
			}
			status, body = w.send(t, "GET", strings.Replace(path, "%s", hidden, 1), support, nil)
			wantStatus, want := w.send(t, "GET", strings.Replace(path, "%s", "fun_nope", 1), support, nil)
			if status != 404 || wantStatus != 404 || strings.ReplaceAll(string(body), hidden, "fun_nope") != string(want) {
				t.Errorf("GET %s of the hidden function: %d %s\na missing one: %d %s", path, status, body, wantStatus, want)
			}
			if status, body := w.send(t, "GET", strings.Replace(path, "%s", hidden, 1), "admin", nil); status != 200 {
				t.Errorf("the admin reading %s of the function: %d %s", path, status, body)
			}
		}
	})
}
