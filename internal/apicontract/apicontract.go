// Package apicontract checks answers of Quiver's /v1 API against the OpenAPI document the
// server serves, with kin-openapi's response validation. The API tests (server's, and the
// CLI's against quiver serve) send every answer they get through it, so that the document
// cannot drift from the server: a generated client reads answers by it.
package apicontract

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/quiverhq/quiver/server"
)

// Document is the server's OpenAPI document as kin-openapi reads it, loaded once.
var Document = sync.OnceValues(func() (*openapi3.T, error) {
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
	// The document itself is checked by CI's independent validator (swagger-parser); here it
	// is the answers that are checked against it.
	return openapi3.NewLoader().LoadFromData(b)
})

var router = sync.OnceValues(func() (routers.Router, error) {
	doc, err := Document()
	if err != nil {
		return nil, err
	}
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

// Skip reports whether an answer to a request for path is not checked here: the document
// itself, and event streams (checked event by event by their own test).
func Skip(path string) bool {
	return !strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/v1/openapi") || strings.HasSuffix(path, "/events")
}

// Check checks one answer to r against the document: an operation must describe it (unless
// the answer is an error for a path that names none), with its status and body.
func Check(r *http.Request, status int, header http.Header, body []byte) error {
	rt, err := router()
	if err != nil {
		return fmt.Errorf("the OpenAPI document: %w", err)
	}
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
	route, params, err := rt.FindRoute(req)
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

// Errorer is what Handler reports mismatches to (a *testing.T).
type Errorer interface {
	Errorf(format string, args ...any)
}

// Handler serves h and checks every /v1 answer it gives; a mismatch is reported to t.
func Handler(t Errorer, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Skip(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		if err := Check(r, rec.status, rec.Header(), rec.body.Bytes()); err != nil {
			t.Errorf("%v\nbody: %.500s", err, rec.body.String())
		}
	})
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
