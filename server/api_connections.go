package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/connect"
)

// Users' connections (platform/connections.go): the providers an admin declares, each person's
// connections to them, and the callback a provider sends the person's browser back to, which
// any node serves without a key (the flow's state says whose connection it finishes).

// ConnectionsCallbackPath is where providers send people back: register PublicURL + this path
// as the redirect URI of Quiver's client at each provider.
const ConnectionsCallbackPath = "/connections/callback"

// providerBody is a connect.Provider.
type providerBody struct {
	Name                 string   `json:"name" pattern:"^[a-z0-9_-]{1,64}$" doc:"The provider's name, which tools' requirements and the connections name."`
	Description          string   `json:"description,omitempty" doc:"What the provider is, for the people connecting, up to 1,024 bytes."`
	Issuer               string   `json:"issuer,omitempty" doc:"The authorization server's issuer identifier: the endpoints left out are read from its metadata (RFC 8414 or OpenID Connect discovery), which must name the same issuer, and kept an hour."`
	AuthorizationURL     string   `json:"authorization_url,omitempty" doc:"The authorization endpoint people are sent to: https (http only on loopback). Required without an issuer."`
	TokenURL             string   `json:"token_url,omitempty" doc:"The token endpoint codes and refresh tokens are exchanged at: https (http only on loopback). An internal address is refused unless the operator allows its host (quiver serve --openapi-internal-hosts). Required without an issuer."`
	RevocationURL        string   `json:"revocation_url,omitempty" doc:"The revocation endpoint (RFC 7009) a connection's tokens are revoked at when its user disconnects or leaves the workspace."`
	ClientID             string   `json:"client_id" doc:"Quiver's client id at the provider. Register PublicURL + /connections/callback as its redirect URI."`
	ClientSecretVariable string   `json:"client_secret_variable,omitempty" doc:"The workspace's secret variable holding the client's secret; absent: a public client (PKCE alone)."`
	Scopes               []string `json:"scopes,omitempty" maxItems:"100" doc:"The scopes on offer."`
}

type connectionProvidersBody struct {
	Providers []providerBody `json:"providers,omitempty" maxItems:"100" doc:"The providers, at most 100."`
}

type connectionProvidersOutput struct {
	Body struct {
		Document  connectionProvidersBody `json:"document" doc:"The providers; {} when none were ever declared."`
		Version   int64                   `json:"version" doc:"The version of the document (0: never set); give it back as after to change it."`
		UpdatedBy *string                 `json:"updated_by" nullable:"true"`
		UpdatedAt *time.Time              `json:"updated_at" nullable:"true"`
	}
}

type putConnectionProvidersInput struct {
	Body struct {
		Document connectionProvidersBody `json:"document" doc:"The whole document, replacing the last."`
		After    int64                   `json:"after" minimum:"0" doc:"The version the document is changed from: refused with 409 if another change came first."`
	}
}

// ConnectionBody is a person's connection: never its tokens.
type ConnectionBody struct {
	Provider    string     `json:"provider" doc:"The provider connected."`
	Scopes      []string   `json:"scopes" doc:"The scopes granted."`
	ExpiresAt   *time.Time `json:"expires_at" nullable:"true" doc:"When the access token expires (it is refreshed before), null when the provider did not say."`
	ConnectedAt time.Time  `json:"connected_at"`
	RefreshedAt time.Time  `json:"refreshed_at" doc:"When the tokens last changed."`
}

type connectionsOutput struct {
	Body struct {
		Connections []ConnectionBody `json:"connections" doc:"The caller's own connections in the workspace, by provider."`
	}
}

type startConnectionInput struct {
	Provider string `path:"provider" doc:"The provider to connect."`
	Body     struct {
		Scopes      []string `json:"scopes,omitempty" maxItems:"100" doc:"The scopes to ask for, of those the provider offers; absent: all of them."`
		ReturnTo    string   `json:"return_to,omitempty" maxLength:"2048" doc:"Where the browser goes once connected: a path on this server (/console/...)."`
		BindBrowser bool     `json:"bind_browser,omitempty" doc:"Bind the flow to the browser that makes this request (a cookie): it can be finished in that browser alone. The console sets it."`
	}
}

type startConnectionOutput struct {
	SetCookie http.Cookie `header:"Set-Cookie"`
	Body      struct {
		AuthorizationURL string    `json:"authorization_url" doc:"The provider's page to send the person to. It is good once, for ten minutes."`
		ExpiresAt        time.Time `json:"expires_at"`
	}
}

type providerPath struct {
	Provider string `path:"provider" doc:"The provider."`
}

// registerConnections adds the providers and the caller's connections.
func (s *Server) registerConnections(api huma.API) {
	register(api, huma.Operation{OperationID: "get-connection-providers", Method: http.MethodGet, Path: "/v1/connection-providers",
		Summary: "The providers the workspace's people connect their own accounts at"},
		func(ctx context.Context, _ *struct{}) (*connectionProvidersOutput, error) {
			d, err := s.p.ConnectionProviders(ctx, s.actor(ctx))
			if err != nil {
				return nil, problem(err, "query")
			}
			return providersOutputOf(d), nil
		})
	register(api, huma.Operation{OperationID: "put-connection-providers", Method: http.MethodPut, Path: "/v1/connection-providers",
		Summary: "Replace the workspace's connection providers (an admin's)"},
		func(ctx context.Context, in *putConnectionProvidersInput) (*connectionProvidersOutput, error) {
			d, err := s.p.SetConnectionProviders(ctx, s.actor(ctx), in.Body.Document.document(), in.Body.After)
			if err != nil {
				return nil, documentProblem(err)
			}
			return providersOutputOf(d), nil
		})
	register(api, huma.Operation{OperationID: "list-connections", Method: http.MethodGet, Path: "/v1/connections",
		Summary: "The caller's own connections"},
		func(ctx context.Context, _ *struct{}) (*connectionsOutput, error) {
			list, err := s.p.Connections(ctx, s.actor(ctx))
			if err != nil {
				return nil, problem(err, "query")
			}
			out := &connectionsOutput{}
			out.Body.Connections = make([]ConnectionBody, len(list))
			for i, c := range list {
				out.Body.Connections[i] = ConnectionBody{Provider: c.Provider, Scopes: c.Scopes, ConnectedAt: c.ConnectedAt, RefreshedAt: c.RefreshedAt}
				if !c.ExpiresAt.IsZero() {
					out.Body.Connections[i].ExpiresAt = &c.ExpiresAt
				}
			}
			return out, nil
		})
	register(api, huma.Operation{OperationID: "start-connection", Method: http.MethodPost, Path: "/v1/connections/{provider}",
		Summary: "Start connecting the caller's account at a provider: the page to send them to"},
		func(ctx context.Context, in *startConnectionInput) (*startConnectionOutput, error) {
			started, err := s.p.StartConnection(ctx, s.actor(ctx), platform.NewConnection{Provider: in.Provider, Scopes: in.Body.Scopes,
				RedirectURI: s.connectionsRedirect(ctx), ReturnTo: in.Body.ReturnTo, BindBrowser: in.Body.BindBrowser})
			if err != nil {
				return nil, problem(err, "body")
			}
			out := &startConnectionOutput{}
			out.Body.AuthorizationURL, out.Body.ExpiresAt = started.URL, started.ExpiresAt
			if started.Nonce != "" {
				out.SetCookie = s.flowCookie(started)
			}
			return out, nil
		})
	register(api, huma.Operation{OperationID: "delete-connection", Method: http.MethodDelete, Path: "/v1/connections/{provider}",
		Summary: "Disconnect the caller's account at a provider: its tokens are revoked there", DefaultStatus: http.StatusNoContent},
		func(ctx context.Context, in *providerPath) (*struct{}, error) {
			if err := s.p.Disconnect(ctx, s.actor(ctx), in.Provider); err != nil {
				return nil, problem(err, "path")
			}
			return nil, nil
		})
}

func providersOutputOf(d *platform.ConnectionProviders) *connectionProvidersOutput {
	out := &connectionProvidersOutput{}
	for _, p := range d.Document.Providers {
		out.Body.Document.Providers = append(out.Body.Document.Providers, providerBody(p))
	}
	out.Body.Version = d.Version
	if d.Version > 0 {
		out.Body.UpdatedBy, out.Body.UpdatedAt = orNull(d.UpdatedBy), &d.UpdatedAt
	}
	return out
}

func (b connectionProvidersBody) document() connect.Document {
	var d connect.Document
	for _, p := range b.Providers {
		d.Providers = append(d.Providers, connect.Provider(p))
	}
	return d
}

// publicBase is the server's URL as browsers reach it: PublicURL, else the listening address.
func (s *Server) publicBase() string {
	if s.cfg.PublicURL != "" {
		return strings.TrimSuffix(s.cfg.PublicURL, "/")
	}
	return "http://" + s.cfg.Addr
}

// connectionsRedirect is the redirect URI providers send people back to.
func (s *Server) connectionsRedirect(context.Context) string {
	return s.publicBase() + ConnectionsCallbackPath
}

// connectLink is where a person connects a provider: the console's connections page, which
// starts the flow in their browser.
func (s *Server) connectLink(provider string, scopes []string) string {
	q := url.Values{"connect": {provider}}
	if len(scopes) > 0 {
		q.Set("scopes", strings.Join(scopes, " "))
	}
	return s.publicBase() + "/console/#/connections?" + q.Encode()
}

// flowCookie is the cookie that binds a flow to its browser: named after the flow's state, so
// that flows in one browser do not overwrite each other, sent back to the callback alone.
func (s *Server) flowCookie(started *platform.StartedConnection) http.Cookie {
	u, _ := url.Parse(started.URL)
	return http.Cookie{Name: flowCookieName(u.Query().Get("state")), Value: started.Nonce, Path: ConnectionsCallbackPath,
		MaxAge: int(time.Until(started.ExpiresAt).Seconds()), HttpOnly: true, Secure: strings.HasPrefix(s.publicBase(), "https:"),
		SameSite: http.SameSiteLaxMode}
}

func flowCookieName(state string) string {
	h := sha256.Sum256([]byte("cookie/" + state))
	return "quiver_connect_" + hex.EncodeToString(h[:8])
}

// connectionsCallback finishes a connection: the provider's redirect, with its code and the
// flow's state. It answers the browser, not a program: a page, or the way back to the console.
func (s *Server) connectionsCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	in := platform.ConnectionCallback{State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error"),
		ErrorDescription: q.Get("error_description"), RedirectURI: s.connectionsRedirect(r.Context())}
	if c, err := r.Cookie(flowCookieName(in.State)); err == nil {
		in.Nonce = c.Value
		http.SetCookie(w, &http.Cookie{Name: c.Name, Path: ConnectionsCallbackPath, MaxAge: -1, HttpOnly: true})
	}
	done, err := s.p.FinishConnection(r.Context(), in)
	if err != nil {
		s.logger.InfoContext(r.Context(), "server: a connection could not be finished", "err", err)
		callbackPage(w, statusOf(err), "Not connected", err.Error())
		return
	}
	if done.ReturnTo != "" {
		http.Redirect(w, r, done.ReturnTo+returnMark(done.ReturnTo, done.Provider), http.StatusSeeOther)
		return
	}
	callbackPage(w, http.StatusOK, "Connected", fmt.Sprintf("Your account at %s is connected. You can close this window.", done.Provider))
}

// returnMark tells the page returned to which provider was connected.
func returnMark(returnTo, provider string) string {
	sep := "?"
	if strings.Contains(returnTo, "?") {
		sep = "&"
	}
	return sep + "connected=" + url.QueryEscape(provider)
}

// statusOf is the HTTP status of a platform error, for the callback's page.
func statusOf(err error) int {
	if p, ok := problem(err, "query").(huma.StatusError); ok {
		return p.GetStatus()
	}
	return http.StatusInternalServerError
}

// callbackPage answers the browser with a page that says what happened, and runs nothing.
func callbackPage(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<!doctype html><meta charset="utf-8"><title>%s</title><body style="font-family:sans-serif;max-width:40em;margin:3em auto"><h1>%s</h1><p>%s</p>`,
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(text))
}
