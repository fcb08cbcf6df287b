package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/quiverhq/quiver/server"
)

// The server's own OpenAPI document, loaded once for every test that checks its answers.
var contract = sync.OnceValues(func() (routers.Router, error) {
	b, err := server.OpenAPI()
	if err != nil {
		return nil, err
	}
	// huma writes patternDescription beside a pattern, an annotation JSON Schema allows and
	// kin-openapi's router refuses: left out here.
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return nil, err
	}
	if b, err = json.Marshal(without(generic, "patternDescription")); err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		return nil, err
	}
	// The document itself is checked by CI's independent validator (swagger-parser); here it
	// is the answers that are checked against it.
	return legacy.NewRouter(doc)
})

// without removes every member named key from the objects of v.
func without(v any, key string) any {
	switch v := v.(type) {
	case map[string]any:
		delete(v, key)
		for k, x := range v {
			v[k] = without(x, key)
		}
	case []any:
		for i, x := range v {
			v[i] = without(x, key)
		}
	}
	return v
}

// checked serves h, and checks every /v1 answer it gives against the server's OpenAPI
// document (kin-openapi's response validation): a status the operation does not document, or
// a body that breaks its schema, fails t. The API tests serve through it, so the document
// cannot drift from the server again: a generated client reads answers by it.
func checked(t testing.TB, h http.Handler) http.Handler {
	router, err := contract()
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") || strings.HasPrefix(r.URL.Path, "/v1/openapi") || strings.HasSuffix(r.URL.Path, "/events") {
			h.ServeHTTP(w, r) // the document itself, and event streams (checked by their own test)
			return
		}
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		if err := checkAnswer(router, r, rec.status, rec.Header(), rec.body.Bytes()); err != nil {
			t.Errorf("%v\nbody: %.500s", err, rec.body.String())
		}
	})
}

// checkAnswer checks one answer to r against the document: an operation must describe it
// (unless the answer is an error for a path that names none), with its status and body.
func checkAnswer(router routers.Router, r *http.Request, status int, header http.Header, body []byte) error {
	// The router matches the escaped path, as the server's mux does (a %2F stays in its
	// segment), and only the path: the document names no servers.
	req := r.Clone(context.Background())
	req.URL.Scheme, req.URL.Host, req.Host = "", "", ""
	req.URL.Path, req.URL.RawPath = r.URL.EscapedPath(), ""
	// A thread's file path is one parameter that spans segments ({path...}); the document
	// describes it as one segment, which a generated client sends with its slashes escaped.
	if before, file, ok := strings.Cut(req.URL.Path, "/files/"); ok && strings.HasPrefix(before, "/v1/threads/") {
		req.URL.Path = before + "/files/" + url.PathEscape(file)
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		if status >= 300 {
			return nil // refused before any operation: a path the document does not describe
		}
		return fmt.Errorf("%s %s answered %d, but the document has no such operation: %v", r.Method, r.URL.Path, status, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s answered %d, which breaks the OpenAPI document: %v", r.Method, r.URL.Path, status, err)
	}
	return nil
}

// The check itself: an answer that breaks the document is caught, one that keeps it is not.
func TestContractCheckCatchesDrift(t *testing.T) {
	router, err := contract()
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/v1/tools/served", nil)
	json := http.Header{"Content-Type": {"application/json"}}
	for _, tt := range []struct {
		name, body string
		status     int
		ok         bool
	}{
		{"a tool as documented, its schema refusing other properties", `{"tools":[{"name":"a","description":"d","input_schema":{"type":"object","additionalProperties":false}}]}`, 200, true},
		{"a schema that is a boolean", `{"tools":[{"name":"a","description":"d","output_schema":true}]}`, 200, true},
		{"a name that is a number", `{"tools":[{"name":1,"description":"d"}]}`, 200, false},
		{"a field the document does not have", `{"tools":[{"name":"a","description":"d","secret":"x"}]}`, 200, false},
		{"a status the operation does not document", `{"tools":[]}`, 418, false},
	} {
		err := checkAnswer(router, req, tt.status, json, []byte(tt.body))
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// recorder passes an answer through and keeps a copy of it.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// The event stream keeps its description too: each event's name is one the document names,
// and its data is valid against that event's component.
func TestEventStreamKeepsItsDocument(t *testing.T) {
	b, err := server.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var generic any
	mustDo(t, json.Unmarshal(b, &generic))
	b, err = json.Marshal(without(generic, "patternDescription"))
	mustDo(t, err)
	doc, err := openapi3.NewLoader().LoadFromData(b)
	mustDo(t, err)
	stream := doc.Paths.Find("/v1/threads/{id}/events").Get.Responses.Status(200).Value.Content.Get("text/event-stream").Schema.Value
	schemas := map[string]*openapi3.Schema{}
	for _, ev := range stream.Items.Value.OneOf {
		name := ev.Value.Properties["event"].Value.Enum[0].(string)
		schemas[name] = ev.Value.Properties["data"].Value
	}

	w := newTenantWorld(t)
	_, out := w.api(t, "POST", "/v1/tools/echo/call", w.keyA, `{"args":{"text":"hi"}}`)
	threadID, _ := out["thread_id"].(string)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", w.url+"/v1/threads/"+threadID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+w.keyA)
	resp, err := http.DefaultClient.Do(req)
	mustDo(t, err)
	defer resp.Body.Close()
	seen := map[string]int{}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	var event string
	for lines.Scan() && (seen["state"] < 1 || seen["message"] < 2) {
		line := lines.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			s, ok := schemas[event]
			if !ok {
				t.Fatalf("event %q is not one the document names (%v)", event, slices.Collect(maps.Keys(schemas)))
			}
			var data any
			mustDo(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data))
			if err := s.VisitJSON(data); err != nil {
				t.Errorf("event %s: its data breaks the document: %v\n%s", event, err, line)
			}
			seen[event]++
		}
	}
	if seen["state"] < 1 || seen["message"] < 2 {
		t.Fatalf("the stream ended after %v: %v", seen, lines.Err())
	}
}
