package server_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
)

// consoleClient is the console's client id in these tests: a provider that names the client in
// aud puts it in the console's access tokens and in its ID tokens alike.
const consoleClient = "quiver-console"

// TestIDTokensRefused: a token the provider signed for an audience of this server, that is an
// ID token (or a logout token), is refused with 401 saying so, by each of its marks: even when
// its audience is the console's client id named in --oidc-audience, as a provider that names
// the client needs, and it carries neither nonce nor at_hash (the console's sign-in sent no
// nonce before). The access tokens of real providers' shapes are accepted beside them, and,
// where the provider types them at+jwt (RequireATJWT), only tokens so typed.
func TestIDTokensRefused(t *testing.T) {
	is := newTokenIssuer(t)
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	auths := map[bool]*server.Authenticator{}
	for _, typed := range []bool{false, true} {
		ta := newTokenAuth(is, st, func() time.Time { return now })
		ta.Audiences, ta.ConsoleClientID, ta.RequireATJWT = []string{tokenAudience, consoleClient}, consoleClient, typed
		if err := ta.Check(); err != nil {
			t.Fatal(err)
		}
		auths[typed] = &server.Authenticator{Keys: st, Tokens: ta}
	}
	// shape is a token of eng's with claims beside iss, sub, exp, iat and groups.
	shape := func(claims map[string]any) map[string]any {
		c := map[string]any{"iss": is.url, "sub": "ada", "exp": now.Add(5 * time.Minute).Unix(), "iat": now.Unix(), "groups": []string{"eng"}}
		maps.Copy(c, claims)
		return c
	}
	tests := []struct {
		name   string
		atJWT  bool // the provider types its access tokens at+jwt (RequireATJWT)
		typ    any  // the header's type; nil for none
		claims map[string]any
		status int
		says   string
	}{
		// The attack: the console's ID token, sent as an access token.
		{"the console's ID token without nonce or at_hash", false, "JWT", map[string]any{"aud": consoleClient, "azp": consoleClient, "auth_time": now.Unix()},
			401, "it is an ID token (it has azp"},
		// Each mark alone.
		{"the console's client id as its only audience", false, "JWT", map[string]any{"aud": []string{consoleClient, "https://elsewhere.test"}},
			401, "its only audience here is the console's client id"},
		{"ZITADEL-like ID token: client_id beside azp and auth_time", false, "JWT",
			map[string]any{"aud": consoleClient, "azp": consoleClient, "client_id": consoleClient, "auth_time": now.Unix(), "amr": []string{"pwd"}},
			401, "it is an ID token (it has azp, and no scope or scp)"},
		{"azp without a scope", false, "JWT", map[string]any{"aud": tokenAudience, "azp": "some-client"}, 401, "it has azp"},
		{"auth_time without a scope", false, "JWT", map[string]any{"aud": tokenAudience, "auth_time": now.Unix()}, 401, "it has auth_time"},
		{"a nonce, beside a scope", false, "JWT", map[string]any{"aud": tokenAudience, "scope": "openid", "nonce": "n"}, 401, "it is an ID token (it has nonce)"},
		{"an at_hash, beside a scope", false, "JWT", map[string]any{"aud": tokenAudience, "scope": "openid", "at_hash": "h"}, 401, "it is an ID token (it has at_hash)"},
		{"a c_hash", false, "JWT", map[string]any{"aud": tokenAudience, "c_hash": "h"}, 401, "it is an ID token (it has c_hash)"},
		{"Keycloak's ID token (typ claim ID)", false, "JWT", map[string]any{"aud": tokenAudience, "typ": "ID", "scope": "openid"}, 401, `its typ claim says "ID"`},
		{"a logout token", false, "logout+jwt", map[string]any{"aud": consoleClient, "events": map[string]any{"http://schemas.openid.net/event/backchannel-logout": map[string]any{}}},
			401, `its type (typ) is "logout+jwt"`},
		{"a logout token typed JWT", false, "JWT", map[string]any{"aud": tokenAudience, "scope": "openid", "events": map[string]any{}}, 401, "(it has events)"},
		{"a type that is not a string", false, 9068, map[string]any{"aud": tokenAudience, "scope": "openid"}, 401, "its type (typ) is not a string"},
		{"typed JWT where access tokens are typed at+jwt", true, "JWT", map[string]any{"aud": tokenAudience, "scope": "openid", "client_id": consoleClient},
			401, "this provider's access tokens are typed at+jwt"},
		{"untyped where access tokens are typed at+jwt", true, nil, map[string]any{"aud": tokenAudience, "scope": "openid"}, 401, "typed at+jwt"},
		// Access tokens as real providers issue them.
		{"Auth0-like: azp and scope, the API and userinfo as audiences", false, "JWT",
			map[string]any{"aud": []string{tokenAudience, "https://tenant.auth0.test/userinfo"}, "azp": consoleClient, "scope": "openid profile email"}, 200, "wsp_a member"},
		{"Entra-like: scp, the console's own API as audience", false, "JWT",
			map[string]any{"aud": consoleClient, "azp": consoleClient, "scp": "access_as_user", "tid": "t", "oid": "o", "ver": "2.0"}, 200, "wsp_a member"},
		{"Keycloak-like: typ claim Bearer, azp, auth_time and scope", false, "JWT",
			map[string]any{"aud": tokenAudience, "typ": "Bearer", "azp": consoleClient, "auth_time": now.Unix(), "scope": "openid email profile"}, 200, "wsp_a member"},
		{"Okta-like: cid and scp as a list", false, "JWT", map[string]any{"aud": tokenAudience, "cid": "0oa1", "uid": "00u1", "scp": []string{"openid", "quiver"}}, 200, "wsp_a member"},
		{"ZITADEL-like: client_id, the console's client id as audience", false, "JWT", map[string]any{"aud": consoleClient, "client_id": consoleClient, "jti": "j"}, 200, "wsp_a member"},
		{"RFC 9068: typed at+jwt", false, "at+jwt", map[string]any{"aud": tokenAudience, "client_id": "mcp-client", "jti": "j"}, 200, "wsp_a member"},
		{"RFC 9068: typed application/at+jwt", false, "application/at+jwt", map[string]any{"aud": tokenAudience, "azp": "mcp-client"}, 200, "wsp_a member"},
		{"at+jwt where access tokens are typed so", true, "at+jwt", map[string]any{"aud": consoleClient, "client_id": consoleClient, "jti": "j"}, 200, "wsp_a member"},
		{"untyped, for this server's resource", false, nil, map[string]any{"aud": tokenAudience}, 200, "wsp_a member"},
		{"the console's client id beside this server's resource", false, "JWT", map[string]any{"aud": []string{consoleClient, tokenAudience}}, 200, "wsp_a member"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, says, _ := tokenRequest(t, auths[tt.atJWT], is.typedToken(t, tt.typ, shape(tt.claims)), "")
			if status != tt.status || !strings.Contains(says, tt.says) {
				t.Fatalf("%d %q, want %d saying %q", status, says, tt.status, tt.says)
			}
			if status == 401 && !strings.Contains(says, "not an access token") {
				t.Fatalf("the refusal %q does not say the token is not an access token", says)
			}
		})
	}
}

// TestTokensWaitForTheKeys: tokens that arrive while the provider's keys are being fetched, at
// a cold start or after a rotation, wait for that fetch and get its answer: 200 once it brings
// their key, 503 when it fails (the client keeps its token), never 401; one fetch serves them
// all. A request that ends while it waits gets 503, and leaves no refusal kept: its token is
// then checked afresh. In a synctest bubble, the key set held until every request waits.
func TestTokensWaitForTheKeys(t *testing.T) {
	tests := []struct {
		name           string
		rotated, fails bool
		status         int
	}{
		{"cold start, the keys come", false, false, 200},
		{"cold start, the fetch fails", false, true, 503},
		{"a rotated key, the new set comes", true, false, 200},
		{"a rotated key, the fetch fails", true, true, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := newTokenIssuer(t)
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				ta := newTokenAuth(is, st, time.Now)
				ta.Client = is.inProcessClient()
				auth := &server.Authenticator{Keys: st, Tokens: ta}
				h := auth.Require(store.KeyRoleViewer, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
				send := func(ctx context.Context, token string) int {
					req := httptest.NewRequestWithContext(ctx, "GET", "/v1/anything", nil)
					req.Header.Set("Authorization", "Bearer "+token)
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					return rec.Code
				}
				// Each request its own token, so that none is answered from another's check.
				token := func(i int) string {
					c := is.claims(time.Now(), "eng")
					c["jti"] = fmt.Sprint(i)
					return is.token(t, c)
				}
				if tt.rotated {
					if status := send(t.Context(), token(-1)); status != 200 {
						t.Fatalf("before the rotation: %d", status)
					}
					is.rotate(t)
					time.Sleep(time.Minute) // the bubble's clock: past the interval between fetches
				}
				hold := make(chan struct{})
				is.holdKeys.Store(&hold)
				defer is.holdKeys.Store(nil)
				fetchesBefore := is.keyFetchs.Load()

				statuses := make([]int, 20)
				var answered atomic.Int32
				var wg sync.WaitGroup
				// The first request starts the fetch; the others come once it is under way.
				for i := range statuses {
					tok := token(i)
					wg.Go(func() { statuses[i] = send(t.Context(), tok); answered.Add(1) })
					if i == 0 {
						synctest.Wait()
					}
				}
				leaving, leave := context.WithCancel(t.Context())
				leaver := token(len(statuses))
				var leaverStatus int
				wg.Go(func() { leaverStatus = send(leaving, leaver) })
				synctest.Wait()
				// Errorf, not Fatalf, until the key set is let go: the bubble's goroutines must end.
				if n := answered.Load(); n != 0 {
					t.Errorf("%d of %d requests were answered while the keys were being fetched, want all waiting", n, len(statuses))
				}
				leave()
				synctest.Wait()
				if leaverStatus != 503 {
					t.Errorf("a request that ended while it waited: %d, want 503", leaverStatus)
				}

				is.failKeys.Store(tt.fails)
				close(hold)
				wg.Wait()
				for i, status := range statuses {
					if status != tt.status {
						t.Fatalf("request %d: %d, want %d", i, status, tt.status)
					}
				}
				if n := is.keyFetchs.Load() - fetchesBefore; n != 1 {
					t.Fatalf("the key set was fetched %d times for %d tokens, want once", n, len(statuses))
				}
				// Once the provider answers, a token refused while it did not is checked afresh.
				if tt.fails {
					is.failKeys.Store(false)
					time.Sleep(time.Minute)
				}
				if status := send(t.Context(), leaver); status != 200 {
					t.Fatalf("the token of the request that left, once the keys are there: %d, want 200", status)
				}
			})
		})
	}
}

// TestColdStartTokens: many good tokens at once at a server that has not read the provider's
// keys yet, over a real connection: every one gets 200, none a 401 told to throw it away.
func TestColdStartTokens(t *testing.T) {
	is := newTokenIssuer(t)
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	auth := &server.Authenticator{Keys: st, Tokens: newTokenAuth(is, st, nil)}
	refusals := make([]error, 50)
	var wg sync.WaitGroup
	for i := range refusals {
		c := is.claims(time.Now(), "eng")
		c["jti"] = fmt.Sprint(i)
		tok := is.token(t, c)
		wg.Go(func() { _, refusals[i] = auth.Authenticate(context.Background(), "Bearer "+tok) })
	}
	wg.Wait()
	for i, err := range refusals {
		if err != nil {
			t.Errorf("token %d at a cold start: %v", i, err)
		}
	}
}
