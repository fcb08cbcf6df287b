package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/config"

	"github.com/chromedp/chromedp"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
)

// nonceProvider is an identity provider for the console's sign-in: it signs the person in at
// once (no login page), keeps the nonce of the last authorization request, and answers the
// code with an access token and an ID token whose nonce is that one, or wrongNonce when set.
type nonceProvider struct {
	url, resource string
	key           *rsa.PrivateKey
	wrongNonce    string

	mu    sync.Mutex
	nonce string
}

func (p *nonceProvider) lastNonce() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nonce
}

func (p *nonceProvider) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: p.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := jws.CompactSerialize()
	return out
}

func (p *nonceProvider) handler(t testing.TB) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": p.url, "jwks_uri": p.url + "/keys",
			"authorization_endpoint": p.url + "/authorize", "token_endpoint": p.url + "/token"})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"keys": []jose.JSONWebKey{{Key: &p.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		p.mu.Lock()
		p.nonce = q.Get("nonce")
		p.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		back.RawQuery = url.Values{"code": {"the-code"}, "state": {q.Get("state")}}.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		now := time.Now()
		nonce := p.lastNonce()
		if p.wrongNonce != "" {
			nonce = p.wrongNonce
		}
		json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "expires_in": 300,
			"access_token": p.sign(t, map[string]any{"iss": p.url, "sub": "ada", "aud": p.resource, "azp": "quiver-console",
				"scope": "openid profile email", "groups": []string{"eng"}, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}),
			"id_token": p.sign(t, map[string]any{"iss": p.url, "sub": "ada", "aud": "quiver-console", "azp": "quiver-console",
				"nonce": nonce, "auth_time": now.Unix(), "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}),
		})
	})
	return mux
}

// startNonceSite serves the console, taking the tokens of a nonceProvider whose rule makes eng
// members of its workspace, and returns the console's origin and the provider.
func startNonceSite(t testing.TB, wrongNonce string) (string, *nonceProvider) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	origin := "http://" + ln.Addr().String()
	p := &nonceProvider{resource: origin + "/mcp", key: key, wrongNonce: wrongNonce}
	idp := httptest.NewServer(p.handler(t))
	t.Cleanup(idp.Close)
	p.url = idp.URL

	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	ws := &store.Workspace{Name: "a"}
	if err := st.CreateWorkspace(ctx, ws); err != nil {
		t.Fatal(err)
	}
	ta := &server.TokenAuth{Issuer: p.url, Audiences: []string{p.resource}, Users: st, ConsoleClientID: "quiver-console",
		Rules: []config.ClaimRule{{Claim: "groups", Value: "eng", Workspace: ws.ID, Role: store.KeyRoleMember}}}
	if err := ta.Check(); err != nil {
		t.Fatal(err)
	}
	pl, err := platform.New(platform.Config{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(ctx, server.Config{Platform: pl, Auth: &server.Authenticator{Keys: st, Tokens: ta}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	site := httptest.NewUnstartedServer(srv.Handler())
	site.Listener.Close()
	site.Listener = ln
	site.Start()
	t.Cleanup(func() { site.Close(); srv.Close() })
	return origin, p
}

// TestConsoleSignInNonce: the console's authorization request carries a nonce, a new one at
// each sign-in, which marks the ID token the provider issues as one (the server refuses it as
// an access token); the ID token that comes back beside the access token must carry it, else
// the sign-in is refused, saying why, and no token is kept.
func TestConsoleSignInNonce(t *testing.T) {
	timed(t)
	chromiumPath(t)
	tests := []struct {
		name, wrongNonce string
		signedIn         bool
	}{
		{"the ID token carries the sign-in's nonce", "", true},
		{"the ID token carries another nonce", "another sign-in's", false},
	}
	var nonces []string
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			origin, idp := startNonceSite(t, tt.wrongNonce)
			tab := newBrowser(t)
			tab.do("opening the console", chromedp.Navigate(origin+"/"))
			tab.click("the provider's button", `document.getElementById("signin-provider")`)
			if tt.signedIn {
				tab.waitFor("signed in as a member", signedIn+` && document.getElementById("who").textContent.includes("member")`, 0)
			} else {
				tab.waitFor("the refusal", `document.querySelector("form.signin [role=alert]")?.textContent.includes("nonce differs")`, 0)
				if kept := tab.string(`String(sessionStorage.getItem("quiver.key"))`); kept != "null" {
					t.Errorf("a refused sign-in kept a token: %q", kept)
				}
			}
			nonce := idp.lastNonce()
			if len(nonce) < 16 {
				t.Fatalf("the authorization request's nonce is %q, want a random one", nonce)
			}
			nonces = append(nonces, nonce)
		})
	}
	if len(nonces) == 2 && nonces[0] == nonces[1] {
		t.Errorf("two sign-ins sent the same nonce %q", nonces[0])
	}
}
