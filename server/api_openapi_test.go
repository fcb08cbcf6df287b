package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
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
		if call.Result.Status != "error" || !strings.Contains(call.Result.Error, "the server localhost"+host+" is not allowed") {
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
		// A document over the cap is refused in the cap's words, whether the body is within
		// the request's limit (5 MiB) or past it (9 MiB), where huma named only its limit.
		for _, tc := range []struct {
			size   int
			status int
			code   string
		}{{5 << 20, 400, "invalid_request"}, {9 << 20, 413, "too_large"}} {
			big := map[string]any{"name": "x", "document": strings.Repeat("#", tc.size)}
			p := wantProblem(t, fmt.Sprintf("a document of %d MiB", tc.size>>20), w.do(t, "admin", "POST", "/v1/openapi-sources", big), tc.status, tc.code, "body.document")
			if !strings.Contains(p.Detail+fmt.Sprint(p.Errors), "the document is larger than 4194304 bytes (4 MiB), the most a workspace imports") {
				t.Errorf("a document of %d MiB: %+v", tc.size>>20, p)
			}
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

// TestOpenAPIRefusalsNameNoAddress: a call over the API of an imported tool whose server is
// internal, by name, by address or by a name that does not resolve, is refused naming the host
// as the document wrote it and nothing the server's resolver made of it (the address a name
// resolved to, the resolver it asked), the same way for each: an admin cannot tell which
// names the server's network has.
func TestOpenAPIRefusalsNameNoAddress(t *testing.T) {
	pets := httptest.NewServer(http.NotFoundHandler())
	defer pets.Close()
	_, port, _ := strings.Cut(strings.TrimPrefix(pets.URL, "http://"), ":")
	doc, err := os.ReadFile("../openapi/testdata/petstore-expanded.yaml")
	if err != nil {
		t.Fatal(err)
	}
	address := regexp.MustCompile(`\d+\.\d+\.\d+\.\d+|::1|lookup| on `)
	entEach(t, func(t *testing.T, w *entWorld) {
		// The world allows 127.0.0.1 (where pets listens), and no other internal host.
		for i, host := range []string{"localhost:" + port, "127.0.0.2:" + port, "[::1]:" + port, "nonexistent.invalid:" + port} {
			name := fmt.Sprintf("internal%d", i)
			w.ok(t, "admin", "POST", "/v1/openapi-sources", map[string]any{"name": name, "document": string(doc),
				"servers": []string{"http://" + host + "/api"}, "operations": []string{"addPet"}}, 201, nil)
			r := w.do(t, "member", "POST", "/v1/tools/"+name+".addPet/call", map[string]any{"args": map[string]any{"body": map[string]any{"name": "x"}}})
			var call struct {
				Result struct{ Status, Error string } `json:"result"`
			}
			if err := json.Unmarshal(r.body, &call); err != nil || r.status != 200 {
				t.Fatalf("%s: %d %s", host, r.status, r.body)
			}
			want := "the server " + host + " is not allowed: it is not a public address, or its name does not resolve"
			if call.Result.Status != "error" || !strings.Contains(call.Result.Error, want) {
				t.Errorf("%s: %+v, want %q", host, call.Result, want)
			}
			if leak := address.FindString(strings.ReplaceAll(string(r.body), host, "")); leak != "" {
				t.Errorf("%s: the answer says %q, which the document did not: %s", host, leak, r.body)
			}
		}
	})
}

// heldStore holds the write of each OpenAPI source whose name starts with "held" until release
// is closed, saying its name on held first: an import holds its place while it is held.
type heldStore struct {
	store.Backend
	held    chan string
	release chan struct{}
}

func (s *heldStore) PutOpenAPISource(ctx context.Context, src *store.OpenAPISource) (bool, error) {
	if strings.HasPrefix(src.Name, "held") {
		s.held <- src.Name
		<-s.release
	}
	return s.Backend.PutOpenAPISource(ctx, src)
}

// TestOpenAPIImportsAtOnce: the server reads two OpenAPI documents at once and one a workspace
// (reading one holds its memory until the import ends); another import is refused at once,
// 503, rather than queued with its body, and goes through once one ends.
func TestOpenAPIImportsAtOnce(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		ctx := context.Background()
		held := &heldStore{Backend: st.(entStore), held: make(chan string), release: make(chan struct{})}
		var once sync.Once
		release := func() { once.Do(func() { close(held.release) }) }
		t.Cleanup(release)
		w := newEntWorld(t, &schemaCounter{entStore: held})
		// A third workspace, C, with an admin key of its own.
		c, admin := &store.Workspace{Name: "initech"}, &store.User{Email: "pat@initech.test", Name: "Pat"}
		if err := held.CreateWorkspace(ctx, c); err != nil {
			t.Fatal(err)
		}
		if err := held.CreateUser(ctx, admin); err != nil {
			t.Fatal(err)
		}
		if err := held.AddMember(ctx, &store.Membership{WorkspaceID: c.ID, UserID: admin.ID, Role: store.MemberRoleAdmin}); err != nil {
			t.Fatal(err)
		}
		secret, err := platform.IssueAPIKey(ctx, held, &store.APIKey{WorkspaceID: c.ID, UserID: admin.ID, Name: "c", Role: store.KeyRoleAdmin})
		if err != nil {
			t.Fatal(err)
		}
		w.key["c"] = secret
		doc := `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"https://svc.example"}],` +
			`"paths":{"/a":{"get":{"operationId":"a","responses":{"200":{"description":"ok"}}}}}}`
		body := func(name string) map[string]any { return map[string]any{"name": name, "document": doc} }
		// Sent from other goroutines, which may not end the test: the status, or 0.
		send := func(who, name string) int {
			b, _ := json.Marshal(body(name))
			req, _ := http.NewRequest(http.MethodPost, w.url+"/v1/openapi-sources", bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+w.key[who])
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0
			}
			res.Body.Close()
			return res.StatusCode
		}
		done := make(chan int, 2)
		go func() { done <- send("admin", "heldA") }()
		<-held.held // A's import holds a place
		wantProblem(t, "a second import into A", w.do(t, "admin", "POST", "/v1/openapi-sources", body("second")), 503, "unavailable", "")
		go func() { done <- send("b", "heldB") }()
		<-held.held // B's holds the other
		wantProblem(t, "an import into C", w.do(t, "c", "POST", "/v1/openapi-sources", body("third")), 503, "unavailable", "")
		release()
		for range 2 {
			if status := <-done; status != http.StatusCreated {
				t.Errorf("a held import answered %d", status)
			}
		}
		w.ok(t, "c", "POST", "/v1/openapi-sources", body("third"), 201, nil)
		w.ok(t, "admin", "POST", "/v1/openapi-sources", body("second"), 201, nil)
	})
}
