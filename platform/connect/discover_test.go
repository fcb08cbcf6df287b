package connect

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// metadataServer serves issuer metadata made by meta (given the server's own URL) at the
// well-known URL of RFC 8414, counting the requests.
func metadataServer(t *testing.T, meta func(self string) map[string]any) (*httptest.Server, *int) {
	t.Helper()
	var hits int
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.URL.Path != "/.well-known/oauth-authorization-server" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(meta(srv.URL))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func goodMetadata(self string) map[string]any {
	return map[string]any{"issuer": self, "authorization_endpoint": self + "/authorize", "token_endpoint": self + "/token",
		"revocation_endpoint": self + "/revoke", "code_challenge_methods_supported": []string{"S256"}}
}

// TestDiscovery: a provider that names its issuer gets the endpoints it leaves out from the
// issuer's metadata, read once an hour; the endpoints it sets are its own. Metadata of another
// issuer, without PKCE, with an endpoint that is not https, or slow, is refused, and a refusal
// is kept 30 seconds rather than asked again by every call.
func TestDiscovery(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := &Client{Timeout: 500 * time.Millisecond}

	srv, hits := metadataServer(t, goodMetadata)
	var d Discovery
	p := &Provider{Name: "acme", Issuer: srv.URL, ClientID: "c", TokenURL: "https://own.example/token"}
	got, err := d.Resolve(ctx, c, p, now)
	if err != nil || got.AuthorizationURL != srv.URL+"/authorize" || got.TokenURL != "https://own.example/token" || got.RevocationURL != srv.URL+"/revoke" {
		t.Fatalf("resolved: %+v %v", got, err)
	}
	if p.AuthorizationURL != "" {
		t.Fatal("Resolve changed the document's provider")
	}
	asked := *hits
	if _, err := d.Resolve(ctx, c, p, now.Add(59*time.Minute)); err != nil || *hits != asked {
		t.Fatalf("within the hour the metadata was read again: %d requests, %v", *hits-asked, err)
	}
	if _, err := d.Resolve(ctx, c, p, now.Add(61*time.Minute)); err != nil || *hits == asked {
		t.Fatalf("after the hour the metadata was not read again: %v", err)
	}

	for _, h := range []struct {
		name string
		meta func(string) map[string]any
		want string
	}{
		{"another issuer's metadata", func(self string) map[string]any {
			m := goodMetadata(self)
			m["issuer"] = "https://evil.example"
			return m
		}, "does not match"},
		{"no PKCE", func(self string) map[string]any {
			m := goodMetadata(self)
			delete(m, "code_challenge_methods_supported")
			return m
		}, "PKCE"},
		{"a token endpoint over plain http", func(self string) map[string]any {
			m := goodMetadata(self)
			m["token_endpoint"] = "http://auth.example/token"
			return m
		}, "token_endpoint"},
		{"no token endpoint", func(self string) map[string]any {
			m := goodMetadata(self)
			delete(m, "token_endpoint")
			return m
		}, "gives no token_endpoint"},
	} {
		srv, hits := metadataServer(t, h.meta)
		var d Discovery
		p := &Provider{Name: "acme", Issuer: srv.URL, ClientID: "c"}
		_, err := d.Resolve(ctx, c, p, now)
		if err == nil || !strings.Contains(err.Error(), h.want) || !strings.Contains(err.Error(), "provider acme") {
			t.Errorf("%s: %v", h.name, err)
			continue
		}
		asked := *hits
		if _, err2 := d.Resolve(ctx, c, p, now.Add(10*time.Second)); err2 == nil || *hits != asked {
			t.Errorf("%s: asked again within 30 s (%d requests)", h.name, *hits-asked)
		}
	}

	// An endless answer: read up to the go-sdk's 1 MiB, then refused, never held whole.
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"issuer":"`))
		chunk := []byte(strings.Repeat("a", 64<<10))
		for range 1024 { // 64 MiB, if it were all read
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(endless.Close)
	if _, err := d.Resolve(ctx, c, &Provider{Name: "endless", Issuer: endless.URL, ClientID: "c"}, now); err == nil || !strings.Contains(err.Error(), "could not be read") {
		t.Errorf("an endless issuer: %v", err)
	}

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	start := time.Now()
	if _, err := d.Resolve(ctx, c, &Provider{Name: "slow", Issuer: slow.URL, ClientID: "c"}, now); err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("a slow issuer: %v after %s", err, time.Since(start))
	}
}

// TestIssuerInTheDocument: a provider may give its issuer in place of its endpoints, which
// must then be https or loopback like the endpoints.
func TestIssuerInTheDocument(t *testing.T) {
	for _, c := range []struct {
		p     Provider
		field string
	}{
		{Provider{Name: "a", ClientID: "c", Issuer: "https://id.example"}, ""},
		{Provider{Name: "a", ClientID: "c", Issuer: "http://id.example"}, "providers[0].issuer"},
		{Provider{Name: "a", ClientID: "c"}, "providers[0].authorization_url"},
		{Provider{Name: "a", ClientID: "c", AuthorizationURL: "https://id.example/a"}, "providers[0].token_url"},
	} {
		d := Document{Providers: []Provider{c.p}}
		err := d.Check()
		fe, _ := err.(*FieldError)
		if (c.field == "" && err != nil) || (c.field != "" && (fe == nil || fe.Field != c.field)) {
			t.Errorf("%+v: %v, want the field %q", c.p, err, c.field)
		}
	}
}
