// Package oauthtest provides, for tests, what stands for third parties in the MCP
// authorization flow: an OAuth 2.1 authorization server with the checks a strict server makes
// (registered redirect URIs, PKCE S256, single-use codes, iss in the response) and hit
// counters, and an MCP server (the go-sdk's) behind its bearer tokens.
package oauthtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// AuthServer stands for a third-party OAuth 2.1 authorization server: what the MCP
// authorization flow uses, with the checks a strict server makes, and hit counters so tests
// can tell which steps Quiver took.
type AuthServer struct {
	*httptest.Server
	ExpiresIn atomic.Int64 // seconds
	Deny      atomic.Bool  // the user refuses: /authorize answers access_denied

	Registers, Authorizes, CodeGrants, RefreshGrants, Revocations atomic.Int64

	mu       sync.Mutex
	clients  map[string][]string // client id -> registered redirect URIs
	codes    map[string]issuedCode
	access   map[string]time.Time // access token -> expiry
	refreshs map[string]string    // refresh token -> client id
}

type issuedCode struct{ client, redirect, challenge string }

func NewAuthServer(t testing.TB) *AuthServer {
	as := &AuthServer{clients: map[string][]string{}, codes: map[string]issuedCode{}, access: map[string]time.Time{}, refreshs: map[string]string{}}
	as.ExpiresIn.Store(3600)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", as.metadata)
	mux.HandleFunc("POST /register", as.register)
	mux.HandleFunc("GET /authorize", as.authorize)
	mux.HandleFunc("POST /token", as.token)
	mux.HandleFunc("POST /revoke", as.revoke)
	as.Server = httptest.NewServer(mux)
	t.Cleanup(as.Close)
	return as
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, code string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code})
}

func (as *AuthServer) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                as.URL,
		"authorization_endpoint":                as.URL + "/authorize",
		"token_endpoint":                        as.URL + "/token",
		"registration_endpoint":                 as.URL + "/register",
		"revocation_endpoint":                   as.URL + "/revoke",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"none", "client_secret_post", "client_secret_basic"},
		// With iss sent back and advertised, the flow fails unless Callbacks forwards it.
		"authorization_response_iss_parameter_supported": true,
	})
}

func (as *AuthServer) register(w http.ResponseWriter, r *http.Request) {
	as.Registers.Add(1)
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.RedirectURIs) == 0 {
		oauthError(w, "invalid_redirect_uri")
		return
	}
	id := "client-" + rand.Text()
	as.mu.Lock()
	as.clients[id] = req.RedirectURIs
	as.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"client_id": id, "redirect_uris": req.RedirectURIs,
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}})
}

func (as *AuthServer) authorize(w http.ResponseWriter, r *http.Request) {
	as.Authorizes.Add(1)
	q := r.URL.Query()
	as.mu.Lock()
	uris, known := as.clients[q.Get("client_id")]
	as.mu.Unlock()
	// An unknown client or redirect URI is never redirected to (RFC 6749 4.1.2.1).
	if !known || !slices.Contains(uris, q.Get("redirect_uri")) {
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	back, _ := url.Parse(q.Get("redirect_uri"))
	v := back.Query()
	v.Set("state", q.Get("state"))
	v.Set("iss", as.URL)
	switch {
	case q.Get("response_type") != "code" || q.Get("state") == "" || q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		v.Set("error", "invalid_request")
	case as.Deny.Load():
		v.Set("error", "access_denied")
		v.Set("error_description", "the user said no")
	default:
		code := rand.Text()
		as.mu.Lock()
		as.codes[code] = issuedCode{client: q.Get("client_id"), redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge")}
		as.mu.Unlock()
		v.Set("code", code)
	}
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (as *AuthServer) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f, client := r.PostForm, r.PostForm.Get("client_id")
	if u, _, ok := r.BasicAuth(); ok {
		client = u
	}
	switch f.Get("grant_type") {
	case "authorization_code":
		as.CodeGrants.Add(1)
		as.mu.Lock()
		c, ok := as.codes[f.Get("code")]
		delete(as.codes, f.Get("code")) // codes are single-use
		as.mu.Unlock()
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		if !ok || c.client != client || c.redirect != f.Get("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
			oauthError(w, "invalid_grant")
			return
		}
		access, refresh := as.Mint(client)
		writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": as.ExpiresIn.Load(), "refresh_token": refresh})
	case "refresh_token":
		as.RefreshGrants.Add(1)
		as.mu.Lock()
		owner, ok := as.refreshs[f.Get("refresh_token")]
		as.mu.Unlock()
		if !ok || owner != client {
			oauthError(w, "invalid_grant")
			return
		}
		// The refresh token is not rotated, and not sent again: the client must keep it.
		access, _ := as.Mint(client)
		writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": as.ExpiresIn.Load()})
	default:
		oauthError(w, "unsupported_grant_type")
	}
}

// revoke is RFC 7009's revocation endpoint: the token, access or refresh, is no longer valid.
func (as *AuthServer) revoke(w http.ResponseWriter, r *http.Request) {
	as.Revocations.Add(1)
	_ = r.ParseForm()
	tok := r.PostForm.Get("token")
	as.mu.Lock()
	delete(as.access, tok)
	delete(as.refreshs, tok)
	as.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// Register registers a client with redirect URIs, as dynamic registration does, and returns
// its id.
func (as *AuthServer) Register(redirectURIs ...string) string {
	id := "client-" + rand.Text()
	as.mu.Lock()
	as.clients[id] = redirectURIs
	as.mu.Unlock()
	return id
}

// Mint issues an access token and a refresh token to client.
func (as *AuthServer) Mint(client string) (access, refresh string) {
	access, refresh = "at-"+rand.Text(), "rt-"+rand.Text()
	as.mu.Lock()
	defer as.mu.Unlock()
	as.access[access] = time.Now().Add(time.Duration(as.ExpiresIn.Load()) * time.Second)
	as.refreshs[refresh] = client
	return access, refresh
}

// Issued returns every access and refresh token the server issued and still knows: what a test
// looks for where no token may appear (logs, answers).
func (as *AuthServer) Issued() []string {
	as.mu.Lock()
	defer as.mu.Unlock()
	var out []string
	for t := range as.access {
		out = append(out, t)
	}
	for t := range as.refreshs {
		out = append(out, t)
	}
	return out
}

// Valid reports whether the access token is one the server issued and when it expires.
func (as *AuthServer) Valid(token string) (time.Time, bool) {
	as.mu.Lock()
	defer as.mu.Unlock()
	exp, ok := as.access[token]
	return exp, ok
}

// ProtectedServer is an MCP server behind bearer tokens of an AuthServer, as the go-sdk
// serves one; it records every bearer token presented to it.
type ProtectedServer struct {
	URL  string // the MCP endpoint, the OAuth resource
	mu   sync.Mutex
	seen map[string]bool
}

func NewProtectedServer(t testing.TB, as *AuthServer) *ProtectedServer {
	srv := sdk.NewServer(&sdk.Implementation{Name: "protected", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "whoami", Description: "Says whose token called.", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "you are " + req.Extra.TokenInfo.UserID}}}, nil
		})
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		exp, ok := as.Valid(token)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "alice", Expiration: exp}, nil
	}
	ps := &ProtectedServer{seen: map[string]bool{}}
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close) // registered before any importer's cleanup, so it runs after
	ps.URL = ts.URL + "/mcp"
	prm := ts.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle(prm[len(ts.URL):], auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: ps.URL, AuthorizationServers: []string{as.URL}}))
	mcp := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prm})(
		sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			ps.mu.Lock()
			ps.seen[tok] = true
			ps.mu.Unlock()
		}
		mcp.ServeHTTP(w, r)
	})
	return ps
}

// Saw reports whether token was presented to the server.
func (ps *ProtectedServer) Saw(token string) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.seen[token]
}

// Hits counts the requests each step of the flow received.
type Hits struct{ Registers, Authorizes, Codes, Refreshes int64 }

// Hits returns the counts so far.
func (as *AuthServer) Hits() Hits {
	return Hits{as.Registers.Load(), as.Authorizes.Load(), as.CodeGrants.Load(), as.RefreshGrants.Load()}
}

// RevokeAccessTokens forgets every access token issued; refresh tokens stay valid.
func (as *AuthServer) RevokeAccessTokens() {
	as.mu.Lock()
	defer as.mu.Unlock()
	clear(as.access)
}
