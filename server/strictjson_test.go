package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// A body is decoded exactly as it was validated: a key given twice, or a key that names a
// field only up to case, is refused with a 400 naming it, on every operation. Before,
// {"role":"viewer","Role":"admin"} passed validation as a viewer key and made an admin key,
// and an "Email" of 1,005 characters was stored despite the 254 allowed.
func TestBodiesWithAmbiguousKeysAreRefused(t *testing.T) {
	entEach(t, func(t *testing.T, w *entWorld) {
		long := strings.Repeat("e", 1000) + "@x.io"
		tests := []struct {
			name, method, path, body, loc string
		}{
			{"a role in another case", "POST", "/v1/keys", `{"name":"x","role":"viewer","Role":"admin"}`, "body.Role"},
			{"a role given twice", "POST", "/v1/keys", `{"name":"x","role":"viewer","role":"admin"}`, "body.role"},
			{"a key only in another case", "POST", "/v1/keys", `{"name":"x","ROLE":"admin"}`, "body.ROLE"},
			{"the Kelvin sign for a k", "POST", "/v1/members", `{"email":"a@b.io","role":"member","\u212aey":"x","key":"y"}`, "body.key"},
			{"an email past its limit in another case", "POST", "/v1/members", `{"email":"a@b.io","Email":"` + long + `"}`, "body.Email"},
			{"a repeated key in a tool's arguments", "POST", "/v1/tools/echo/call", `{"args":{"text":"a","text":"b"}}`, "body.args.text"},
			{"a repeated key deep in an array", "POST", "/v1/tools/echo/call", `{"args":{"text":"a","list":[{},{"x":1,"x":2}]}}`, "body.args.list[1].x"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				wantProblem(t, tt.name, w.do(t, "admin", tt.method, tt.path, tt.body), 400, "invalid_request", tt.loc)
			})
		}
		// Nothing was made by the refused bodies.
		keys, err := w.st.APIKeys(context.Background(), w.a.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k.Name == "x" {
				t.Errorf("a refused body made key %s with role %s", k.ID, k.Role)
			}
		}
		if _, err := w.st.UserByEmail(context.Background(), long); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a refused body stored the long email: %v", err)
		}
		// A body nested deeper than the decoder reads is refused by it, not walked to the end:
		// an answer, not a crash or a hang.
		deep := strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)
		if r := w.do(t, "member", "POST", "/v1/tools/echo/call", `{"args":`+deep+`}`); r.status < 400 || r.status >= 500 {
			t.Errorf("a body nested 20,000 deep: %d %.200s, want a 4xx", r.status, r.body)
		}
		// Free-form values keep their keys as given: "text" and "Text" are two arguments.
		w.ok(t, "member", "POST", "/v1/tools/echo/call", `{"args":{"text":"a"}}`, 200, nil)
		var out struct {
			Result struct {
				Status string `json:"status"`
			} `json:"result"`
		}
		w.ok(t, "member", "POST", "/v1/tools/echo/call", `{"args":{"text":"a","Text":"b"}}`, 200, &out)
	})
}

// Every JSON body of /v1 is checked for ambiguous keys whatever its Content-Type says: huma
// reads "application/json; x" as JSON, which once skipped the check and made an admin key of
// {"role":"viewer","Role":"admin"}. A body of a JSON media type is checked (a 400 naming the
// key); one of any other type is refused before it is read (415). Each operation of the API's
// document that takes a body is tried with each type.
func TestEveryJSONBodyIsCheckedWhateverItsMediaType(t *testing.T) {
	entEach(t, func(t *testing.T, w *entWorld) {
		r := w.do(t, "admin", "GET", "/v1/openapi.json", nil)
		var doc struct {
			Paths map[string]map[string]struct {
				RequestBody *struct {
					Content map[string]any `json:"content"`
				} `json:"requestBody"`
			} `json:"paths"`
		}
		if err := json.Unmarshal(r.body, &doc); err != nil || len(doc.Paths) == 0 {
			t.Fatalf("the API's document: %v %.200s", err, r.body)
		}
		mediaTypes := []struct {
			contentType string
			want        int
		}{
			{"", 400},
			{"application/json", 400},
			{"application/*+json", 400},
			{"application/json; charset=utf-8", 400},
			{"application/json; x", 415},
			{"application/json;charset=", 415},
			{"text/plain", 415},
		}
		operations := 0
		for path, methods := range doc.Paths {
			for method, op := range methods {
				if op.RequestBody == nil || op.RequestBody.Content["application/json"] == nil {
					continue
				}
				operations++
				url := w.url + pathParams.ReplaceAllString(path, "x")
				for _, mt := range mediaTypes {
					got := sendWithType(t, strings.ToUpper(method), url, w.key["admin"], mt.contentType, `{"a":1,"a":2}`)
					// An operation that reads its body itself (a variable's value) checks its
					// keys whatever the type: a 400 is as good as a 415 there.
					if got.status != mt.want && !(mt.want == 415 && got.status == 400) {
						t.Errorf("%s %s with %q: %d %.300s, want %d", method, path, mt.contentType, got.status, got.body, mt.want)
						continue
					}
					if got.status == 400 && !strings.Contains(string(got.body), `"body.a"`) {
						t.Errorf("%s %s with %q: %.300s names no key body.a", method, path, mt.contentType, got.body)
					}
				}
			}
		}
		if operations < 10 {
			t.Fatalf("only %d operations take a JSON body", operations)
		}
		// The attack itself: a viewer's key asked for, an admin's in another case.
		got := sendWithType(t, "POST", w.url+"/v1/keys", w.key["admin"], "application/json; x", `{"name":"x","role":"viewer","Role":"admin"}`)
		if got.status != 415 {
			t.Errorf("the case-folded role with application/json; x: %d %.300s, want 415", got.status, got.body)
		}
		keys, err := w.st.APIKeys(context.Background(), w.a.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k.Name == "x" {
				t.Errorf("a refused body made key %s with role %s", k.ID, k.Role)
			}
		}
	})
}

// pathParams are the parameters of a path of the API's document.
var pathParams = regexp.MustCompile(`\{[^}]+\}`)

// sendWithType sends body with the Content-Type given (none when empty).
func sendWithType(t *testing.T, method, url, key, contentType, body string) entResp {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return entResp{status: res.StatusCode, ctype: res.Header.Get("Content-Type"), body: data}
}
