package connect

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A provider's token endpoint is a third party's: whatever it answers, the exchange ends in
// bounded time and memory with an error that repeats nothing it was sent.
func TestHostileTokenEndpoints(t *testing.T) {
	const code = "the-code-0123456789"
	for _, c := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"an endless answer", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"access_token":"`))
			chunk := []byte(strings.Repeat("a", 64<<10))
			for range 1024 { // 64 MiB, if it were all read
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, "could not be exchanged"},
		{"a slow answer", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		}, "could not be exchanged"},
		{"a huge token", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"access_token":"` + strings.Repeat("t", 20<<10) + `","token_type":"bearer"}`))
		}, "over 16 KiB"},
		{"a token of another type", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"access_token":"x","token_type":"mac"}`))
		}, `of type "mac"`},
		{"a redirect elsewhere", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data", http.StatusTemporaryRedirect)
		}, "HTTP 307"},
		{"an error that repeats the code", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":"invalid_grant","error_description":"bad code ` + code + `"}`))
		}, "invalid_grant"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			p := &Provider{Name: "evil", AuthorizationURL: srv.URL + "/a", TokenURL: srv.URL + "/t", ClientID: "quiver"}
			client := &Client{Timeout: 300 * time.Millisecond}
			start := time.Now()
			_, err := client.Exchange(context.Background(), p, "", "https://quiver.example/connections/callback", code, Verifier(), nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("the exchange: %v, want an error saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), code) {
				t.Errorf("the error repeats the code: %v", err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("the exchange took %s", took)
			}
		})
	}
}

// The document's checks name the part at fault.
func TestProviderChecks(t *testing.T) {
	for _, c := range []struct{ name, doc, field string }{
		{"no name", `{"providers":[{"name":"","authorization_url":"https://a/x","token_url":"https://a/t","client_id":"c"}]}`, "providers[0].name"},
		{"plain http", `{"providers":[{"name":"p","authorization_url":"http://a.example/x","token_url":"https://a/t","client_id":"c"}]}`, "providers[0].authorization_url"},
		{"credentials in a URL", `{"providers":[{"name":"p","authorization_url":"https://a/x","token_url":"https://u:p@a/t","client_id":"c"}]}`, "providers[0].token_url"},
		{"no client", `{"providers":[{"name":"p","authorization_url":"https://a/x","token_url":"https://a/t"}]}`, "providers[0].client_id"},
		{"a secret in place of a variable", `{"providers":[{"name":"p","authorization_url":"https://a/x","token_url":"https://a/t","client_id":"c","client_secret_variable":"s3cr3t value"}]}`, "providers[0].client_secret_variable"},
		{"a scope with a space", `{"providers":[{"name":"p","authorization_url":"https://a/x","token_url":"https://a/t","client_id":"c","scopes":["a b"]}]}`, "providers[0].scopes[0]"},
		{"twice", `{"providers":[{"name":"p","authorization_url":"https://a/x","token_url":"https://a/t","client_id":"c"},{"name":"p","authorization_url":"https://a/x","token_url":"https://a/t","client_id":"c"}]}`, "providers[1].name"},
		{"an unknown field", `{"providers":[{"name":"p","client_secret":"s"}]}`, "document"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.doc))
			fe, ok := err.(*FieldError)
			if !ok || fe.Field != c.field {
				t.Fatalf("Decode: %v, want a field error at %s", err, c.field)
			}
		})
	}
	if _, err := Decode([]byte(`{"providers":[{"name":"local","authorization_url":"http://127.0.0.1:8080/a","token_url":"http://localhost:8080/t","client_id":"c"}]}`)); err != nil {
		t.Errorf("a provider on loopback over http: %v", err)
	}
}
