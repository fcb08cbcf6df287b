package server_test

import (
	"context"
	"errors"
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
