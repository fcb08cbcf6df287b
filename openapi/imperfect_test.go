package openapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/openapi"
)

// imperfect serves what testdata/imperfect.yaml describes, and answers as real services do
// where the document is wrong (an environment_url of "", an item that is not a URL).
func imperfect(t *testing.T, strict bool) (*quiver.Dispatcher, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/incoming-payments":
			w.Write([]byte(`{"result":[{"id":"https://imperfect.example/p/1","completed":false}]}`))
		case r.URL.Query().Get("instanceRef") == "broken":
			w.Write([]byte(`[{"id":"one","environment_url":""}]`))
		default:
			w.Write([]byte(`[{"id":7,"state":"success","environment_url":""}]`))
		}
	}))
	t.Cleanup(srv.Close)
	im, err := openapi.Tools(context.Background(), openapi.Source{Name: "imp", Document: readDoc(t, "imperfect.yaml"),
		Servers: []string{srv.URL}, Strict: strict})
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Skipped) > 0 || len(im.Tools) != 4 {
		t.Fatalf("tools %d, skipped %+v", len(im.Tools), im.Skipped)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(im.Tools...); err != nil {
		t.Fatal(err)
	}
	return &quiver.Dispatcher{Registry: reg}, &queries
}

// TestImperfectDocuments: what real documents get wrong costs no tool. An item
// {$ref, additionalProperties: false} accepts the referred schema's properties; a default
// that does not satisfy its own format is said, not checked nor sent; an answer that does not
// match the document's schema is passed through with a warning (an error in strict mode); a
// required query parameter given as "" or [] is refused before anything is sent, unless the
// document allows an empty value (a list's schema says it takes one item at least), and so is
// a path parameter given as "" (it would leave an empty segment, naming another resource).
func TestImperfectDocuments(t *testing.T) {
	tests := []struct {
		name    string
		strict  bool
		tool    string
		args    string
		err     string // "" for a success
		warning string // in the result's meta
		query   string // what the service was sent
	}{
		{"a closed $ref item", false, "imp.list-incoming-payments", `{"wallet-address":"https://w.example/alice"}`, "", "", "wallet-address=https%3A%2F%2Fw.example%2Falice"},
		{"a closed $ref item, strict", true, "imp.list-incoming-payments", `{"wallet-address":"https://w.example/alice"}`, "", "", "wallet-address=https%3A%2F%2Fw.example%2Falice"},
		{"a default of the service's is not sent", false, "imp.repos_list-deployment-statuses", `{"deployment_id":1,"instanceRef":"a","note":""}`, "", "environment_url", "instanceRef=a&note="},
		{"an answer the document does not describe, strict", true, "imp.repos_list-deployment-statuses", `{"deployment_id":1,"instanceRef":"a","note":"x"}`, "does not match its output schema", "", "instanceRef=a&note=x"},
		{"another answer the document does not describe", false, "imp.repos_list-deployment-statuses", `{"deployment_id":1,"instanceRef":"broken","note":"x"}`, "", "/0/id", "instanceRef=broken&note=x"},
		{"a required query parameter given empty", false, "imp.repos_list-deployment-statuses", `{"deployment_id":1,"instanceRef":"","note":"x"}`, "the query parameter instanceRef is required and may not be empty", "", ""},
		{"another required query parameter given empty", true, "imp.list-incoming-payments", `{"wallet-address":""}`, "the query parameter wallet-address is required", "", ""},
		{"a required query list", false, "imp.search-parties", `{"party":["a","b"],"ref":["c"]}`, "", "", "party=a&party=b&ref=c"},
		{"a required query list given empty", false, "imp.search-parties", `{"party":[],"ref":["c"]}`, "party", "", ""},
		{"a required query list of a component given empty", false, "imp.search-parties", `{"party":["a"],"ref":[]}`, "the query parameter ref is required and may not be empty", "", ""},
		{"path parameters", false, "imp.repos_get", `{"owner":"octo","repo":"quiver"}`, "", "", ""},
		{"a path parameter given empty", false, "imp.repos_get", `{"owner":"","repo":"quiver"}`, "the path parameter owner): an empty value cannot be a part of a path", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, queries := imperfect(t, tc.strict)
			r, err := d.Dispatch(context.Background(), quiver.Call{Name: tc.tool, Args: json.RawMessage(tc.args)})
			if err != nil {
				t.Fatal(err)
			}
			if tc.err != "" {
				if !r.IsError() || !strings.Contains(r.Error, tc.err) {
					t.Fatalf("%s %s, want an error saying %q", r.Status, r.ModelText(), tc.err)
				}
				if tc.query == "" && len(*queries) > 0 {
					t.Errorf("sent %q though refused", *queries)
				}
				return
			}
			if r.IsError() {
				t.Fatalf("error: %s", r.Error)
			}
			var meta map[string]any
			json.Unmarshal(r.Meta, &meta)
			warning, _ := meta[quiver.OutputWarningMeta].(string)
			if tc.warning == "" && warning != "" || !strings.Contains(warning, tc.warning) {
				t.Errorf("warning %q, want %q", warning, tc.warning)
			}
			if len(*queries) != 1 || (*queries)[0] != tc.query {
				t.Errorf("sent %q, want %q", *queries, tc.query)
			}
		})
	}
}

// TestAnnotationsAreSaid: a default is left out of what a tool takes, and said in its
// description; an example is left out.
func TestAnnotationsAreSaid(t *testing.T) {
	im, err := openapi.Tools(context.Background(), openapi.Source{Name: "imp", Document: readDoc(t, "imperfect.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*quiver.Tool{}
	for _, tl := range im.Tools {
		byName[tl.Name()] = tl
	}
	in := mustJSON(byName["imp.list-incoming-payments"].Spec().InputSchema)
	if strings.Contains(in, `"default"`) || !strings.Contains(in, `"description":"Default (the service's): 10."`) {
		t.Errorf("input schema: %s", in)
	}
	out := mustJSON(byName["imp.repos_list-deployment-statuses"].Spec().OutputSchema)
	if strings.Contains(out, `"default"`) || strings.Contains(out, `"example"`) {
		t.Errorf("output schema: %s", out)
	}
}
