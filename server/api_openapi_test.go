package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPISourcesAPI: an admin imports a document nobody here wrote into the workspace; its
// operations are the workspace's tools at once, called through the dispatcher by members; a
// re-import replaces them, a deletion removes them; members and viewers read but do not
// import, another workspace sees nothing, and the tools reach no internal address the
// operator did not allow.
func TestOpenAPISourcesAPI(t *testing.T) {
	pets := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var pet map[string]any
		json.NewDecoder(r.Body).Decode(&pet)
		pet["id"] = 7
		json.NewEncoder(w).Encode(pet)
	}))
	defer pets.Close()
	doc, err := os.ReadFile("../openapi/testdata/petstore-expanded.yaml")
	if err != nil {
		t.Fatal(err)
	}
	entEach(t, func(t *testing.T, w *entWorld) {
		type importBody struct {
			Source struct {
				Name       string   `json:"name"`
				Document   *string  `json:"document"`
				Operations []string `json:"operations"`
				CreatedBy  *string  `json:"created_by"`
			} `json:"source"`
			Created bool     `json:"created"`
			Tools   []string `json:"tools"`
		}
		var im importBody
		w.ok(t, "admin", "POST", "/v1/openapi-sources", map[string]any{"name": "pets", "document": string(doc),
			"servers": []string{pets.URL + "/api"}, "operations": []string{"findPets", "addPet"}}, 201, &im)
		if !im.Created || !slices.Equal(im.Tools, []string{"pets.findPets", "pets.addPet"}) || im.Source.Document != nil ||
			im.Source.CreatedBy == nil || *im.Source.CreatedBy != w.admin.ID {
			t.Fatalf("import: %+v", im)
		}
		var call struct {
			Result struct {
				Status string          `json:"status"`
				Value  json.RawMessage `json:"value"`
				Error  string          `json:"error"`
			} `json:"result"`
		}
		w.ok(t, "member", "POST", "/v1/tools/pets.addPet/call", map[string]any{"args": map[string]any{"body": map[string]any{"name": "Rex"}}}, 200, &call)
		if call.Result.Status != "success" || !strings.Contains(string(call.Result.Value), `"id":7`) {
			t.Fatalf("the imported tool's call: %+v", call.Result)
		}
		var got importBody
		w.ok(t, "viewer", "GET", "/v1/openapi-sources/pets", nil, 200, &got)
		if got.Source.Document == nil || *got.Source.Document != string(doc) || len(got.Tools) != 2 {
			t.Errorf("get: %+v", got.Source)
		}
		var list struct {
			Sources []struct{ Name string } `json:"sources"`
		}
		w.ok(t, "viewer", "GET", "/v1/openapi-sources", nil, 200, &list)
		if len(list.Sources) != 1 || list.Sources[0].Name != "pets" {
			t.Errorf("list: %+v", list)
		}
		wantProblem(t, "a viewer imports", w.do(t, "viewer", "POST", "/v1/openapi-sources", map[string]any{"name": "v", "document": string(doc)}), 403, "forbidden", "")
		wantProblem(t, "a member imports", w.do(t, "member", "POST", "/v1/openapi-sources", map[string]any{"name": "v", "document": string(doc)}), 403, "forbidden", "")
		wantProblem(t, "a member deletes", w.do(t, "member", "DELETE", "/v1/openapi-sources/pets", nil), 403, "forbidden", "")
		// Another workspace sees none of it.
		w.ok(t, "b", "GET", "/v1/openapi-sources", nil, 200, &list)
		if len(list.Sources) != 0 {
			t.Errorf("B lists %+v", list.Sources)
		}
		wantProblem(t, "B reads A's source", w.do(t, "b", "GET", "/v1/openapi-sources/pets", nil), 404, "not_found", "")
		wantProblem(t, "B deletes A's source", w.do(t, "b", "DELETE", "/v1/openapi-sources/pets", nil), 404, "not_found", "")
		if r := w.do(t, "b", "POST", "/v1/tools/pets.addPet/call", map[string]any{"args": map[string]any{"body": map[string]any{"name": "x"}}}); !strings.Contains(string(r.body), `"code":"unknown_tool"`) {
			t.Errorf("B calls A's imported tool: %d %s", r.status, r.body)
		}
		// Imported again with fewer operations: replaced.
		im = importBody{}
		w.ok(t, "admin", "POST", "/v1/openapi-sources", map[string]any{"name": "pets", "document": string(doc),
			"servers": []string{pets.URL + "/api"}, "operations": []string{"findPets"}}, 201, &im)
		if im.Created || !slices.Equal(im.Tools, []string{"pets.findPets"}) {
			t.Fatalf("re-import: %+v", im)
		}
		if r := w.do(t, "member", "POST", "/v1/tools/pets.addPet/call", map[string]any{"args": map[string]any{"body": map[string]any{"name": "x"}}}); !strings.Contains(string(r.body), `"code":"unknown_tool"`) {
			t.Errorf("a tool the re-import left out is still called: %d %s", r.status, r.body)
		}
		// An internal address the operator did not allow: imported, but its calls are refused.
		host := strings.TrimPrefix(pets.URL, "http://127.0.0.1")
		w.ok(t, "admin", "POST", "/v1/openapi-sources", map[string]any{"name": "local", "document": string(doc),
			"servers": []string{"http://localhost" + host + "/api"}, "operations": []string{"addPet"}}, 201, &im)
		w.ok(t, "member", "POST", "/v1/tools/local.addPet/call", map[string]any{"args": map[string]any{"body": map[string]any{"name": "x"}}}, 200, &call)
		if call.Result.Status != "error" || !strings.Contains(call.Result.Error, "is not a public address: refused") {
			t.Errorf("a call to localhost: %+v", call.Result)
		}
		for _, tc := range []struct {
			name   string
			body   map[string]any
			status int
			loc    string
		}{
			{"not a document", map[string]any{"name": "x", "document": "hello: ["}, 400, "body.document"},
			{"a selector matching nothing", map[string]any{"name": "x", "document": string(doc), "operations": []string{"nope"}}, 400, "body.document"},
			{"a dotted name", map[string]any{"name": "a.b", "document": string(doc)}, 422, "body.name"},
			{"a timeout over the cap", map[string]any{"name": "x", "document": string(doc), "timeout_ms": 3600000}, 400, "body.timeout_ms"},
			{"a file server", map[string]any{"name": "x", "document": string(doc), "servers": []string{"file:///etc"}}, 400, "body.document"},
		} {
			wantProblem(t, tc.name, w.do(t, "admin", "POST", "/v1/openapi-sources", tc.body), tc.status, "invalid_request", tc.loc)
		}
		if r := w.do(t, "admin", "DELETE", "/v1/openapi-sources/pets", nil); r.status != 204 {
			t.Fatalf("delete: %d %s", r.status, r.body)
		}
		if r := w.do(t, "member", "POST", "/v1/tools/pets.findPets/call", map[string]any{"args": map[string]any{}}); !strings.Contains(string(r.body), `"code":"unknown_tool"`) {
			t.Errorf("a deleted source's tool is still called: %d %s", r.status, r.body)
		}
		wantProblem(t, "a deleted source", w.do(t, "viewer", "GET", "/v1/openapi-sources/pets", nil), 404, "not_found", "")
	})
}
