package server_test

import (
	"strings"
	"testing"
)

// Every error answer is one shape with a stable code; a request that breaks the API's rules
// names the field at fault, a missing one included.
func TestProblemsNameTheField(t *testing.T) {
	w := newTenantWorld(t)
	for _, tt := range []struct {
		name, method, path, body string
		status                   int
		code, location           string
	}{
		{"a missing field", "POST", "/v1/tools", `{"name":"x","target":"client"}`, 422, "invalid_request", "body.input_schema"},
		{"a wrong type", "POST", "/v1/tools", `{"name":5,"target":"client","input_schema":{"type":"object"}}`, 422, "invalid_request", "body.name"},
		{"an unknown field", "POST", "/v1/tools", `{"name":"x","target":"client","input_schema":{"type":"object"},"colour":"red"}`, 422, "invalid_request", "body.colour"},
		{"a limit out of range", "GET", "/v1/tools?limit=1000", "", 422, "invalid_request", "query.limit"},
		{"malformed JSON", "POST", "/v1/tools", `{"name":`, 400, "invalid_request", ""},
		{"a broken body holding a secret", "POST", "/v1/tools/echo/call", `{"args":{"text":"hunter2-secret"}`, 400, "invalid_request", ""},
		{"a wrong type holding a secret", "POST", "/v1/tools", `{"name":"hunter2-secret","target":7,"input_schema":{}}`, 422, "invalid_request", "body.target"},
		{"another workspace's thread", "GET", "/v1/threads/thr_nope", "", 404, "not_found", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, p := w.api(t, tt.method, tt.path, w.keyA, tt.body)
			if strings.Contains(toJSON(p), "hunter2") {
				t.Fatalf("the problem repeats what the body held: %v", p)
			}
			if status != tt.status || p["code"] != tt.code || p["status"] != float64(tt.status) || p["detail"] == "" {
				t.Fatalf("%d %v, want %d with code %s", status, p, tt.status, tt.code)
			}
			if tt.location == "" {
				return
			}
			errs, _ := p["errors"].([]any)
			for _, e := range errs {
				if e.(map[string]any)["location"] == tt.location {
					return
				}
			}
			t.Fatalf("no error at %s: %v", tt.location, p)
		})
	}
}
