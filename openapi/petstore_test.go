package openapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/openapi"
	"github.com/quiverhq/quiver/schema"
)

// petstore is a stub of the service testdata/petstore-expanded.yaml describes, answering as
// the document says: pets in memory, 200 with a Pet or a list, 204 on delete, an Error object
// with any other status.
type petstore struct {
	mu       sync.Mutex
	pets     []map[string]any
	next     int
	requests []*http.Request
}

func (p *petstore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, r.Clone(context.Background()))
	fail := func(code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]any{"code": code, "message": msg})
	}
	ok := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	rest, found := strings.CutPrefix(r.URL.EscapedPath(), "/api/pets")
	switch {
	case !found:
		fail(404, "no such path")
	case rest == "" && r.Method == http.MethodGet:
		tags := r.URL.Query()["tags"]
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		out := []map[string]any{}
		for _, pet := range p.pets {
			if len(tags) > 0 && !slices.Contains(tags, pet["tag"].(string)) {
				continue
			}
			if limit > 0 && len(out) == limit {
				break
			}
			out = append(out, pet)
		}
		ok(out)
	case rest == "" && r.Method == http.MethodPost:
		var pet map[string]any
		if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&pet) != nil || pet["name"] == nil {
			fail(400, "a NewPet in JSON, please")
			return
		}
		p.next++
		pet["id"] = p.next
		p.pets = append(p.pets, pet)
		ok(pet)
	case strings.HasPrefix(rest, "/"):
		id, err := strconv.Atoi(rest[1:])
		if err != nil {
			fail(400, "id is an integer")
			return
		}
		i := slices.IndexFunc(p.pets, func(pet map[string]any) bool { return pet["id"] == id })
		switch {
		case i < 0:
			fail(404, "no pet "+rest[1:])
		case r.Method == http.MethodGet:
			ok(p.pets[i])
		case r.Method == http.MethodDelete:
			p.pets = slices.Delete(p.pets, i, i+1)
			w.WriteHeader(http.StatusNoContent)
		default:
			fail(405, "method")
		}
	default:
		fail(405, "method")
	}
}

func (p *petstore) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.requests)
}

func readDoc(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startPetstore serves the stub on loopback and imports the document's tools pointed at it.
func startPetstore(t *testing.T) (*petstore, *quiver.Dispatcher, *openapi.Import) {
	t.Helper()
	ps := &petstore{}
	srv := httptest.NewServer(ps)
	t.Cleanup(srv.Close)
	im, err := openapi.Tools(context.Background(), openapi.Source{Name: "petstore", Document: readDoc(t, "petstore-expanded.yaml"),
		Servers: []string{srv.URL + "/api"}})
	if err != nil {
		t.Fatal(err)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(im.Tools...); err != nil {
		t.Fatal(err)
	}
	return ps, &quiver.Dispatcher{Registry: reg}, im
}

func TestPetstoreTools(t *testing.T) {
	_, _, im := startPetstore(t)
	var names []string
	for _, tool := range im.Tools {
		names = append(names, tool.Name())
	}
	want := []string{"petstore.findPets", "petstore.addPet", "petstore.find_pet_by_id", "petstore.deletePet"}
	if !slices.Equal(names, want) || len(im.Skipped) != 0 {
		t.Fatalf("tools %v, skipped %v; want %v", names, im.Skipped, want)
	}
	byName := map[string]quiver.Spec{}
	for _, tool := range im.Tools {
		byName[tool.Name()] = tool.Spec()
	}
	find := byName["petstore.findPets"]
	if p := find.InputSchema.Properties; p["tags"] == nil || p["tags"].Type != "array" || p["limit"].Type != "integer" ||
		p["limit"].Description != "maximum number of results to return" || len(find.InputSchema.Required) != 0 {
		t.Errorf("findPets input: %s", mustJSON(find.InputSchema))
	}
	if find.Annotations.ReadOnlyHint == nil || !*find.Annotations.ReadOnlyHint || find.Annotations.OpenWorldHint == nil {
		t.Errorf("findPets annotations: %+v", find.Annotations)
	}
	add := byName["petstore.addPet"]
	if got := mustJSON(add.InputSchema); !strings.Contains(got, `"body":{"$ref":"#/$defs/NewPet","description":"Pet to add to the store"}`) ||
		!slices.Equal(add.InputSchema.Required, []string{"body"}) || add.InputSchema.Defs["NewPet"] == nil {
		t.Errorf("addPet input: %s", got)
	}
	if add.OutputSchema != nil {
		t.Errorf("addPet (a POST) declares an output schema: %s", mustJSON(add.OutputSchema))
	}
	// A GET's answer is declared; its components are its own $defs, though another tool
	// (findPets) converted them first.
	byID := byName["petstore.find_pet_by_id"]
	if got := mustJSON(byID.OutputSchema); !strings.Contains(got, `"allOf":[{"$ref":"#/$defs/NewPet"}`) ||
		byID.OutputSchema.Defs["NewPet"] == nil || byID.OutputSchema.Defs["Error"] != nil {
		t.Errorf("find_pet_by_id output: %s", got)
	}
	del := byName["petstore.deletePet"]
	if del.OutputSchema != nil || del.Annotations.DestructiveHint == nil || !*del.Annotations.DestructiveHint {
		t.Errorf("deletePet: output %s, annotations %+v", mustJSON(del.OutputSchema), del.Annotations)
	}
	// Every tool renders for every provider's dialect.
	for _, d := range []schema.Dialect{schema.OpenAI, schema.OpenAIStrict, schema.Anthropic, schema.Gemini, schema.MCP} {
		if _, err := schema.Render(d, quiver.ToolSchemas(nil, im.Tools)); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}

func TestPetstoreCalls(t *testing.T) {
	ps, d, _ := startPetstore(t)
	ctx := context.Background()
	call := func(name, args string) *quiver.Result {
		t.Helper()
		res, err := d.Dispatch(ctx, quiver.Call{ID: "c", Name: name, Args: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, pet := range []string{`{"name":"Rex","tag":"dog"}`, `{"name":"Tom","tag":"cat"}`, `{"name":"Fido","tag":"dog"}`} {
		if res := call("petstore.addPet", `{"body":`+pet+`}`); res.IsError() || !strings.Contains(string(res.Value), `"id":`) {
			t.Fatalf("addPet: %+v", res)
		}
	}
	tests := []struct {
		name, tool, args string
		want             string // in the value (success) or the error
		isError          bool
		code             quiver.Code
	}{
		{"list filtered by tag", "petstore.findPets", `{"tags":["dog"]}`, `[{"id":1,"name":"Rex","tag":"dog"},{"id":3,"name":"Fido","tag":"dog"}]`, false, ""},
		{"list limited", "petstore.findPets", `{"limit":1}`, `[{"id":1,"name":"Rex","tag":"dog"}]`, false, ""},
		{"one by id", "petstore.find_pet_by_id", `{"id":2}`, `{"id":2,"name":"Tom","tag":"cat"}`, false, ""},
		{"delete", "petstore.deletePet", `{"id":2}`, `204 No Content`, false, ""},
		{"deleted is gone", "petstore.find_pet_by_id", `{"id":2}`, `the service answered 404 Not Found: {"code":404,"message":"no pet 2"}`, true, quiver.CodeToolError},
		{"a string for an integer is refused before any request", "petstore.findPets", `{"limit":"many"}`, "limit", true, quiver.CodeInvalidArguments},
		{"an unknown argument is refused", "petstore.findPets", `{"owner":"me"}`, "owner", true, quiver.CodeInvalidArguments},
		{"a body without the required name is refused", "petstore.addPet", `{"body":{"tag":"x"}}`, "name", true, quiver.CodeInvalidArguments},
		{"the path id is required", "petstore.deletePet", `{}`, "id", true, quiver.CodeInvalidArguments},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := ps.count()
			res := call(tc.tool, tc.args)
			if res.IsError() != tc.isError {
				t.Fatalf("result %+v", res)
			}
			got := strings.TrimSpace(string(res.Value)) + res.Text
			if tc.isError {
				got = res.Error
				if res.Code != tc.code {
					t.Errorf("code %s, want %s", res.Code, tc.code)
				}
				if tc.code == quiver.CodeInvalidArguments && ps.count() != before {
					t.Errorf("an invalid call reached the service")
				}
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
