package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/internal/oauthtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/connect"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
)

const callbackURI = "https://quiver.example/v1/connections/callback"

// connectWorld is a platform whose workspace declares a provider served by an OAuth server on
// loopback, and a tool that acts as its caller there.
type connectWorld struct {
	p      *platform.Platform
	st     store.Backend
	as     *oauthtest.AuthServer
	ws     string
	key    *secret.Key
	reg    *quiver.Registry
	admin  platform.Actor
	member func(user string) platform.Actor
}

func newConnectWorld(t *testing.T, st store.Backend) *connectWorld {
	t.Helper()
	ctx := context.Background()
	w := &connectWorld{st: st, as: oauthtest.NewAuthServer(t), ws: "wsp_conn"}
	must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: w.ws, Name: "acme"}))
	key, _, err := secret.GenerateKey()
	must(t, err)
	reg := &quiver.Registry{}
	// whoami acts as the caller at the provider: it says whether the provider knows the token,
	// and (to show it is masked) repeats it.
	must(t, reg.Register(quiver.Func("whoami", "Says who the caller is at acme.", func(ctx context.Context, _ struct{}) (string, error) {
		tok, err := quiver.UserToken(ctx, "acme", "read")
		if err != nil {
			return "", err
		}
		_, ok := w.as.Valid(tok)
		return "known=" + map[bool]string{true: "yes", false: "no"}[ok] + " token=" + tok, nil
	})))
	host, _ := url.Parse(w.as.URL)
	w.key, w.reg = key, reg
	w.p, err = platform.New(platform.Config{Store: st, Registry: reg, Resolver: vars.New(st, secret.NewKeyring(key)),
		Logger: slog.New(slog.DiscardHandler), OpenAPIInternal: []string{host.Host}})
	must(t, err)
	t.Cleanup(func() { w.p.Close() })
	w.p.SetConnectLink(func(provider string, scopes []string) string {
		return "https://quiver.example/console/#/connections?connect=" + provider
	})
	w.admin = platform.Actor{WorkspaceID: w.ws, Role: store.KeyRoleAdmin, KeyID: "key_admin", UserID: "usr_admin"}
	w.member = func(user string) platform.Actor {
		return platform.Actor{WorkspaceID: w.ws, Role: store.KeyRoleMember, KeyID: "key_" + user, UserID: user}
	}
	client := w.as.Register(callbackURI)
	_, err = w.p.SetConnectionProviders(ctx, w.admin, connect.Document{Providers: []connect.Provider{{Name: "acme", Description: "Acme's API",
		AuthorizationURL: w.as.URL + "/authorize", TokenURL: w.as.URL + "/token", RevocationURL: w.as.URL + "/revoke", ClientID: client,
		Scopes: []string{"read", "write"}}}}, 0)
	must(t, err)
	return w
}

// connect takes user through the flow as a browser would: the provider's page, and the
// callback with what it sent back. It returns the callback's parameters.
func (w *connectWorld) authorize(t *testing.T, user string, bind bool) (platform.ConnectionCallback, *platform.StartedConnection) {
	t.Helper()
	started, err := w.p.StartConnection(context.Background(), w.member(user), platform.NewConnection{Provider: "acme", Scopes: []string{"read"},
		RedirectURI: callbackURI, ReturnTo: "/console/#/connections", BindBrowser: bind})
	must(t, err)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Get(started.URL)
	must(t, err)
	res.Body.Close()
	back, err := url.Parse(res.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(back.String(), callbackURI) {
		t.Fatalf("the provider sent the browser to %q", res.Header.Get("Location"))
	}
	q := back.Query()
	return platform.ConnectionCallback{State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error"), RedirectURI: callbackURI, Nonce: started.Nonce}, started
}

func (w *connectWorld) call(t *testing.T, user string) *quiver.Result {
	t.Helper()
	r, err := w.p.Workspace(context.Background(), w.ws).Dispatcher().Call(platform.WithActor(context.Background(), w.member(user)), "whoami", nil)
	must(t, err)
	return r
}

// TestConnections: a person connects their account at a provider (the authorization code flow
// with PKCE against an OAuth server on loopback), and a tool that acts as them calls with their
// token, masked in its result; another person is asked to connect, with the link; a token about
// to expire is refreshed once however many calls want it; disconnecting and leaving the
// workspace revoke; a state is good once, in the browser that started it.
func TestConnections(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, bs backendtest.Store) {
		ctx := context.Background()
		w := newConnectWorld(t, bs.(store.Backend))
		cs := w.st.(store.Connections)

		// Ada connects; the token her call uses is hers, and never shown.
		w.as.ExpiresIn.Store(30) // under a minute: her first call refreshes it
		cb, _ := w.authorize(t, "usr_ada", false)
		done, err := w.p.FinishConnection(ctx, cb)
		if err != nil || done.UserID != "usr_ada" || done.Provider != "acme" || done.ReturnTo != "/console/#/connections" {
			t.Fatalf("finishing ada's connection: %+v %v", done, err)
		}
		stored, err := cs.Connection(ctx, w.ws, "usr_ada", "acme")
		if err != nil || strings.HasPrefix(stored.AccessToken, "at-") || strings.Contains(stored.RefreshToken, "rt-") {
			t.Fatalf("the stored connection is not sealed: %+v %v", stored, err)
		}
		if _, err := w.p.FinishConnection(ctx, cb); !isKind(err, platform.NotFound) {
			t.Fatalf("the same state again: %v", err)
		}

		w.as.ExpiresIn.Store(3600)
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				r := w.call(t, "usr_ada")
				if r.IsError() || !strings.Contains(r.Text, "known=yes") || strings.Contains(r.Text, "at-") || !strings.Contains(r.Text, "[REDACTED]") {
					t.Errorf("ada's call: %+v", r)
				}
			})
		}
		wg.Wait()
		if n := w.as.RefreshGrants.Load(); n != 1 {
			t.Errorf("five calls of a token about to expire refreshed it %d times, want once", n)
		}

		// The server's key is rotated: the tokens are sealed again with the new one, and a
		// node that holds only the new key calls as Ada.
		next, _, err := secret.GenerateKey()
		must(t, err)
		n, err := vars.Rewrap(ctx, w.st, secret.NewKeyring(next, w.key))
		if err != nil || n < 2 {
			t.Fatalf("rotating the key re-sealed %d values: %v", n, err)
		}
		host, _ := url.Parse(w.as.URL)
		rotated, err := platform.New(platform.Config{Store: w.st, Registry: w.reg, Resolver: vars.New(w.st, secret.NewKeyring(next)),
			Logger: slog.New(slog.DiscardHandler), OpenAPIInternal: []string{host.Host}})
		must(t, err)
		defer rotated.Close()
		if r, err := rotated.Workspace(ctx, w.ws).Dispatcher().Call(platform.WithActor(ctx, w.member("usr_ada")), "whoami", nil); err != nil || r.IsError() {
			t.Fatalf("ada's call on a node with the new key alone: %+v %v", r, err)
		}

		// Bob has not connected: he is told where to.
		r := w.call(t, "usr_bob")
		var meta map[string]any
		_ = json.Unmarshal(r.Meta, &meta)
		if r.Code != quiver.CodeAuthorizationRequired || meta["authorization_url"] != "https://quiver.example/console/#/connections?connect=acme" ||
			meta["provider"] != "acme" || !strings.Contains(r.Error, "connect it at https://quiver.example/console/") {
			t.Fatalf("bob's call: %+v", r)
		}

		// A flow bound to a browser is finished only with that browser's nonce; a code is
		// exchanged once.
		cb, _ = w.authorize(t, "usr_bob", true)
		stolen := cb
		stolen.Nonce = "another browser's"
		if _, err := w.p.FinishConnection(ctx, stolen); !isKind(err, platform.Forbidden) {
			t.Fatalf("bob's flow finished in another browser: %v", err)
		}
		cb2, _ := w.authorize(t, "usr_bob", false)
		cb2.Code = cb.Code // a code of a flow that was used up, with a live state
		if _, err := w.p.FinishConnection(ctx, cb2); !isKind(err, platform.Unavailable) || !strings.Contains(err.Error(), "invalid_grant") {
			t.Fatalf("a code replayed: %v", err)
		}
		if _, err := cs.Connection(ctx, w.ws, "usr_bob", "acme"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("bob has a connection after refused flows: %v", err)
		}
		cb, _ = w.authorize(t, "usr_bob", true)
		if _, err := w.p.FinishConnection(ctx, cb); err != nil {
			t.Fatal(err)
		}
		if r := w.call(t, "usr_bob"); r.IsError() {
			t.Fatalf("bob's call once connected: %+v", r)
		}
		list, err := w.p.Connections(ctx, w.member("usr_bob"))
		if err != nil || len(list) != 1 || list[0].Provider != "acme" || list[0].Scopes[0] != "read" {
			t.Fatalf("bob's connections: %+v %v", list, err)
		}

		// Bob disconnects: his tokens are revoked at the provider, and he is asked again.
		before := w.as.Revocations.Load()
		must(t, w.p.Disconnect(ctx, w.member("usr_bob"), "acme"))
		if w.as.Revocations.Load() != before+2 {
			t.Errorf("disconnecting revoked %d tokens, want the refresh and the access token", w.as.Revocations.Load()-before)
		}
		if r := w.call(t, "usr_bob"); r.Code != quiver.CodeAuthorizationRequired {
			t.Fatalf("bob's call after disconnecting: %+v", r)
		}
		// Ada leaves the workspace: her connection goes with her, revoked.
		must(t, w.st.CreateUser(ctx, &store.User{ID: "usr_ada", Email: "ada@acme.test", Name: "Ada"}))
		must(t, w.st.AddMember(ctx, &store.Membership{WorkspaceID: w.ws, UserID: "usr_ada", Role: store.MemberRoleMember}))
		must(t, w.p.RemoveMember(ctx, w.admin, "usr_ada"))
		if _, err := cs.Connection(ctx, w.ws, "usr_ada", "acme"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("ada's connection after she left: %v", err)
		}
	})
}

// TestConnectionRefusals: what a connection refuses, naming the part: an unknown provider or
// scope, a return path off the server, a key of no user, a viewer, a member declaring
// providers, a provider's endpoint on an address the operator did not allow.
func TestConnectionRefusals(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, bs backendtest.Store) {
		ctx := context.Background()
		w := newConnectWorld(t, bs.(store.Backend))
		for _, c := range []struct {
			name  string
			a     platform.Actor
			in    platform.NewConnection
			kind  platform.Kind
			field string
		}{
			{"an unknown provider", w.member("usr_ada"), platform.NewConnection{Provider: "nope", RedirectURI: callbackURI}, platform.NotFound, "provider"},
			{"a scope not offered", w.member("usr_ada"), platform.NewConnection{Provider: "acme", Scopes: []string{"admin"}, RedirectURI: callbackURI}, platform.Invalid, "scopes[0]"},
			{"a return off the server", w.member("usr_ada"), platform.NewConnection{Provider: "acme", ReturnTo: "//evil.example/", RedirectURI: callbackURI}, platform.Invalid, "return_to"},
			{"a return to a URL", w.member("usr_ada"), platform.NewConnection{Provider: "acme", ReturnTo: "https://evil.example/", RedirectURI: callbackURI}, platform.Invalid, "return_to"},
			{"a key of no user", platform.Actor{WorkspaceID: w.ws, Role: store.KeyRoleMember, KeyID: "key_x"}, platform.NewConnection{Provider: "acme"}, platform.Forbidden, ""},
			{"a viewer", platform.Actor{WorkspaceID: w.ws, Role: store.KeyRoleViewer, KeyID: "key_v", UserID: "usr_v"}, platform.NewConnection{Provider: "acme"}, platform.Forbidden, ""},
		} {
			_, err := w.p.StartConnection(ctx, c.a, c.in)
			refusal(t, c.name, err, c.kind, c.field)
		}
		_, err := w.p.SetConnectionProviders(ctx, w.member("usr_ada"), connect.Document{}, 1)
		refusal(t, "a member declaring providers", err, platform.Forbidden, "")
		_, err = w.p.SetConnectionProviders(ctx, w.admin, connect.Document{Providers: []connect.Provider{{Name: "x", ClientID: "c",
			AuthorizationURL: "http://auth.example/a", TokenURL: "https://auth.example/t"}}}, 1)
		refusal(t, "an authorization endpoint over plain http", err, platform.Invalid, "providers[0].authorization_url")

		// A provider whose token endpoint is an internal address the operator did not allow:
		// the exchange never reaches it.
		_, err = w.p.SetConnectionProviders(ctx, w.admin, connect.Document{Providers: []connect.Provider{{Name: "acme", ClientID: "c",
			AuthorizationURL: w.as.URL + "/authorize", TokenURL: "http://localhost:9/token", Scopes: []string{"read"}}}}, 1)
		must(t, err)
		started, err := w.p.StartConnection(ctx, w.member("usr_ada"), platform.NewConnection{Provider: "acme", RedirectURI: callbackURI})
		must(t, err)
		u, _ := url.Parse(started.URL)
		_, err = w.p.FinishConnection(ctx, platform.ConnectionCallback{State: u.Query().Get("state"), Code: "c", RedirectURI: callbackURI})
		if !isKind(err, platform.Unavailable) || !strings.Contains(err.Error(), "not allowed") {
			t.Fatalf("a token endpoint on an internal address: %v", err)
		}
	})
}

func isKind(err error, kind platform.Kind) bool {
	var e *platform.Error
	return errors.As(err, &e) && e.Kind == kind
}

// TestConnectionsThroughTheIssuer: a provider declared by its issuer alone is connected, called
// and revoked at the endpoints of the issuer's metadata; an issuer on an internal address the
// operator did not allow is never asked.
func TestConnectionsThroughTheIssuer(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, bs backendtest.Store) {
		ctx := context.Background()
		w := newConnectWorld(t, bs.(store.Backend))
		client := w.as.Register(callbackURI)
		_, err := w.p.SetConnectionProviders(ctx, w.admin, connect.Document{Providers: []connect.Provider{{Name: "acme", Issuer: w.as.URL,
			ClientID: client, Scopes: []string{"read"}}}}, 1)
		must(t, err)
		cb, _ := w.authorize(t, "usr_ada", false)
		if _, err := w.p.FinishConnection(ctx, cb); err != nil {
			t.Fatalf("finishing through the issuer's endpoints: %v", err)
		}
		if r := w.call(t, "usr_ada"); r.IsError() || !strings.Contains(r.Text, "known=yes") {
			t.Fatalf("ada's call: %+v", r)
		}
		before := w.as.Revocations.Load()
		must(t, w.p.Disconnect(ctx, w.member("usr_ada"), "acme"))
		if got := w.as.Revocations.Load() - before; got != 2 {
			t.Errorf("disconnecting revoked %d tokens at the issuer's revocation endpoint", got)
		}

		_, err = w.p.SetConnectionProviders(ctx, w.admin, connect.Document{Providers: []connect.Provider{{Name: "acme", Issuer: "http://localhost:9",
			ClientID: client, Scopes: []string{"read"}}}}, 2)
		must(t, err)
		_, err = w.p.StartConnection(ctx, w.member("usr_ada"), platform.NewConnection{Provider: "acme", RedirectURI: callbackURI})
		if !isKind(err, platform.Unavailable) || !strings.Contains(err.Error(), "not allowed") {
			t.Fatalf("an issuer on an internal address: %v", err)
		}
	})
}
