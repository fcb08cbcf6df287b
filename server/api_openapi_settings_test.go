package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// TestOpenAPISourceSettingsAPI: POST /v1/openapi-sources takes max_operations and strict, an
// admin's settings, answers them and reads them back; a document over the default cap is
// imported once the cap is raised; an answer that does not match the document's schema is
// passed through with a warning in the result's meta, and fails the call once the source is
// strict; settings out of range are refused naming the field.
func TestOpenAPISourceSettingsAPI(t *testing.T) {
	// It answers findPets with pets whose id is a string, where the document says an integer.
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[{"id":"seven","name":"Rex"}]`)
	}))
	defer liar.Close()
	doc, err := os.ReadFile("../openapi/testdata/petstore-expanded.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := range 1001 {
		paths = append(paths, fmt.Sprintf(`"/op%d":{"get":{"operationId":"op%d","responses":{"200":{"description":"ok"}}}}`, i, i))
	}
	big := `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"https://svc.example"}],"paths":{` + strings.Join(paths, ",") + `}}`
	type source struct {
		MaxOperations int  `json:"max_operations"`
		Strict        bool `json:"strict"`
	}
	type importBody struct {
		Source source   `json:"source"`
		Tools  []string `json:"tools"`
	}
	type callBody struct {
		Result struct {
			Status string         `json:"status"`
			Error  string         `json:"error"`
			Meta   map[string]any `json:"meta"`
		} `json:"result"`
	}
	entEach(t, func(t *testing.T, w *entWorld) {
		p := wantProblem(t, "the default cap", w.do(t, "admin", "POST", "/v1/openapi-sources", map[string]any{"name": "big", "document": big}),
			400, "invalid_request", "body.document")
		if !strings.Contains(p.Detail+fmt.Sprint(p.Errors), "raise the cap with max_operations") {
			t.Errorf("the default cap's refusal: %+v", p)
		}
		var im importBody
		w.ok(t, "admin", "POST", "/v1/openapi-sources", map[string]any{"name": "big", "document": big, "max_operations": 1500}, 201, &im)
		if len(im.Tools) != 1001 || im.Source.MaxOperations != 1500 || im.Source.Strict {
			t.Fatalf("the cap raised: %d tools, %+v", len(im.Tools), im.Source)
		}
		var got importBody
		w.ok(t, "viewer", "GET", "/v1/openapi-sources/big", nil, 200, &got)
		if got.Source.MaxOperations != 1500 || len(got.Tools) != 1001 {
			t.Errorf("read back: %d tools, %+v", len(got.Tools), got.Source)
		}
		for _, tc := range []struct {
			strict bool
			status string
			says   string
		}{
			{false, "success", "does not match the output schema"},
			{true, "error", "does not match"},
		} {
			w.ok(t, "admin", "POST", "/v1/openapi-sources", map[string]any{"name": "pets", "document": string(doc),
				"servers": []string{liar.URL + "/api"}, "operations": []string{"findPets"}, "strict": tc.strict}, 201, &im)
			if im.Source.Strict != tc.strict {
				t.Errorf("strict %v answered as %v", tc.strict, im.Source.Strict)
			}
			var call callBody
			w.ok(t, "member", "POST", "/v1/tools/pets.findPets/call", map[string]any{"args": map[string]any{}}, 200, &call)
			said := call.Result.Error
			if warn, ok := call.Result.Meta["output_warning"].(string); ok {
				said = warn
			}
			if call.Result.Status != tc.status || !strings.Contains(said, tc.says) {
				t.Errorf("strict %v: a non-matching answer gave %+v", tc.strict, call.Result)
			}
		}
		for _, tc := range []struct {
			name   string
			body   map[string]any
			status int
			loc    string
		}{
			{"a negative cap", map[string]any{"name": "x", "document": string(doc), "max_operations": -1}, 422, "body.max_operations"},
			{"a cap over the most", map[string]any{"name": "x", "document": string(doc), "max_operations": 10001}, 400, "body.max_operations"},
			{"strict as text", map[string]any{"name": "x", "document": string(doc), "strict": "yes"}, 422, "body.strict"},
		} {
			wantProblem(t, tc.name, w.do(t, "admin", "POST", "/v1/openapi-sources", tc.body), tc.status, "invalid_request", tc.loc)
		}
		wantProblem(t, "a member raising the cap", w.do(t, "member", "POST", "/v1/openapi-sources",
			map[string]any{"name": "big", "document": big, "max_operations": 1500}), 403, "forbidden", "")
	})
}
