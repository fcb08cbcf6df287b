package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// Principal is who a request acts as: the key it carried, and that key's workspace, user and
// role, the role being what the key may do now (store.KeyRole.Effective); or, for an access
// token (TokenAuth), its issuer and subject, the user they are, and the workspace and role the
// rules grant.
type Principal struct {
	KeyID       string
	WorkspaceID string
	UserID      string
	Role        store.KeyRole
	// Issuer and Subject name the person an access token was issued to; empty for a key.
	Issuer, Subject string
	// Claims are an access token's claims, which the workspace's entitlement rules may select
	// callers by (as its sign-in rules do); nil for a key. Shared with the token's cached
	// check: read, never written.
	Claims map[string]any
	// Toolsets are the toolsets the key is bound to (store.APIKey.Toolsets): it may call only
	// their tools. Empty: not bound. Shared with the key's cached check: read, never written.
	Toolsets []string
}

// Who names the principal in refusals: its key, or the user its token names.
func (p Principal) Who() string {
	if p.KeyID != "" || p.Subject == "" {
		return "API key " + p.KeyID
	}
	return "the access token of user " + p.UserID
}

// Owner is who owns the sessions and streams the principal opens: its key, or for a token
// its user (a new token of the same person continues them).
func (p Principal) Owner() string {
	if p.KeyID != "" || p.Subject == "" {
		return p.KeyID
	}
	return "user:" + p.UserID
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal an authenticated request carries.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// ErrUnauthorized is a request without a usable key: none, malformed, unknown, revoked,
// expired, or of a user no longer in the workspace. The error says which.
var ErrUnauthorized = errors.New("unauthorized")

// Bounds of the Authenticator's memory.
const (
	// authCacheTTL is how long a key's check is trusted: a revoked key stops working within it.
	authCacheTTL = time.Second
	// touchEvery is how often a key's LastUsedAt is written while it is in use.
	touchEvery = time.Minute
	// authCacheMax bounds the checks kept, so that a client sending random keys cannot grow
	// the cache: past it, the cache starts again.
	authCacheMax = 10000
)

// Authenticator checks API keys (Authorization: Bearer qvk_...) against the store, keeping
// each check for authCacheTTL so that a busy key costs one read a second, and a revoked one
// stops working within that second. Its methods are safe for concurrent use.
type Authenticator struct {
	// Keys finds the keys. Required.
	Keys store.APIKeys
	// Tokens, when set, also accepts access tokens of an OpenID Connect issuer: any bearer
	// that is not a Quiver key is checked as one.
	Tokens *TokenAuth
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	cache recentChecks[*checked]
}

// recentChecks keeps the outcomes of recent checks (of keys, of tokens) by the SHA-256 of what
// was checked; the caller says how long one holds. Past authCacheMax outcomes it starts again,
// so that a client sending random keys or tokens cannot grow it. Safe for concurrent use.
type recentChecks[V any] struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]V
}

func (c *recentChecks[V]) get(h [sha256.Size]byte) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[h]
}

func (c *recentChecks[V]) put(h [sha256.Size]byte, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= authCacheMax {
		c.m = map[[sha256.Size]byte]V{}
	}
	c.m[h] = v
}

// checked is the outcome of a key's last check.
type checked struct {
	p         Principal
	err       error
	at        time.Time
	touchedAt time.Time
}

func (a *Authenticator) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Authenticate returns who the Authorization header value authorization acts as, or an error
// wrapping ErrUnauthorized that says what is wrong with it (never the key or token).
func (a *Authenticator) Authenticate(ctx context.Context, authorization string) (Principal, error) {
	return a.authenticate(ctx, authorization, "")
}

// AuthenticateRequest is Authenticate for a request: its Authorization header, and the
// workspace its WorkspaceHeader names (which a key's workspace must be, and a token must grant).
func (a *Authenticator) AuthenticateRequest(r *http.Request) (Principal, error) {
	return a.authenticate(r.Context(), r.Header.Get("Authorization"), strings.TrimSpace(r.Header.Get(WorkspaceHeader)))
}

func (a *Authenticator) authenticate(ctx context.Context, authorization, workspace string) (Principal, error) {
	scheme, secret, _ := strings.Cut(strings.TrimSpace(authorization), " ")
	secret = strings.TrimSpace(secret)
	bearer := strings.EqualFold(scheme, "Bearer") && secret != ""
	switch {
	case authorization == "" && a.Tokens != nil:
		return Principal{}, fmt.Errorf("%w: no API key or access token: send the header Authorization: Bearer followed by either", ErrUnauthorized)
	case authorization == "":
		return Principal{}, fmt.Errorf("%w: no API key: send the header Authorization: Bearer %s<key>", ErrUnauthorized, platform.APIKeyPrefix)
	case bearer && a.Tokens != nil && !strings.HasPrefix(secret, platform.APIKeyPrefix):
		return a.Tokens.Authenticate(ctx, secret, workspace)
	case !bearer || !strings.HasPrefix(secret, platform.APIKeyPrefix) || len(secret) != platform.APIKeyLength:
		return Principal{}, fmt.Errorf("%w: the Authorization header is not Bearer followed by a Quiver API key (%s...)", ErrUnauthorized, platform.APIKeyPrefix)
	}
	p, err := a.key(ctx, secret)
	if err == nil && workspace != "" && workspace != p.WorkspaceID {
		return Principal{}, fmt.Errorf("%w: API key %s belongs to another workspace than %q, which the %s header names", ErrForbidden, p.KeyID, workspace, WorkspaceHeader)
	}
	return p, err
}

// key returns who an API key acts as.
func (a *Authenticator) key(ctx context.Context, secret string) (Principal, error) {
	var h [sha256.Size]byte
	copy(h[:], platform.HashAPIKey(secret))
	now := a.now()
	c := a.cache.get(h)
	if c == nil || now.Sub(c.at) >= authCacheTTL || now.Before(c.at) {
		c = a.check(ctx, h[:], now, c)
		if c.err != nil && !errors.Is(c.err, ErrUnauthorized) {
			return Principal{}, c.err // the store failed: not the key's fault, and not kept
		}
		a.cache.put(h, c)
	}
	return c.p, c.err
}

// check reads the key's record and decides; prev is the last check of the same key, if any.
func (a *Authenticator) check(ctx context.Context, hash []byte, now time.Time, prev *checked) *checked {
	c := &checked{at: now}
	if prev != nil {
		c.touchedAt = prev.touchedAt
	}
	k, role, err := a.Keys.APIKeyByHash(ctx, hash)
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.err = fmt.Errorf("%w: unknown API key", ErrUnauthorized)
		return c
	case err != nil:
		c.err = fmt.Errorf("checking the API key: %w", err)
		return c
	case k.RevokedAt != nil:
		c.err = fmt.Errorf("%w: API key %s was revoked at %s", ErrUnauthorized, k.ID, k.RevokedAt.UTC().Format(time.RFC3339))
		return c
	case !k.Usable(now):
		c.err = fmt.Errorf("%w: API key %s expired at %s", ErrUnauthorized, k.ID, k.ExpiresAt.UTC().Format(time.RFC3339))
		return c
	}
	eff := k.Role.Effective(role)
	if eff == "" {
		c.err = fmt.Errorf("%w: API key %s belongs to a user who is no longer a member of workspace %s", ErrUnauthorized, k.ID, k.WorkspaceID)
		return c
	}
	c.p = Principal{KeyID: k.ID, WorkspaceID: k.WorkspaceID, UserID: k.UserID, Role: eff, Toolsets: slices.Clone(k.Toolsets)}
	if now.Sub(c.touchedAt) >= touchEvery {
		c.touchedAt = now
		// Recorded beside the request, at most once a minute per key: the request does not
		// wait for it, and a failure costs only the record of one use.
		go func() { _ = a.Keys.TouchAPIKey(context.WithoutCancel(ctx), k.ID, now) }()
	}
	return c
}

// Require serves next only to requests whose key may act as role: 401 for a request without a
// usable key, 403 for one whose key's role is below role, each with a problem (RFC 9457)
// saying why. next finds the principal with PrincipalFrom.
func (a *Authenticator) Require(role store.KeyRole, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.AuthenticateRequest(r)
		switch {
		case errors.Is(err, ErrUnauthorized):
			w.Header().Set("WWW-Authenticate", a.challenge(r))
			writeProblem(w, http.StatusUnauthorized, "unauthorized", err.Error())
			return
		case errors.Is(err, ErrForbidden):
			if a.Tokens != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="quiver", error="insufficient_scope", resource_metadata="`+a.Tokens.MetadataURL()+`"`)
			}
			writeProblem(w, http.StatusForbidden, "forbidden", err.Error())
			return
		case errors.Is(err, errKeysUnavailable):
			writeProblem(w, http.StatusServiceUnavailable, "identity_provider_unavailable",
				"the server could not read the identity provider's keys to check the token; try again shortly")
			return
		case err != nil:
			writeProblem(w, http.StatusServiceUnavailable, "store_unavailable", "the server could not check the API key or token; try again shortly")
			return
		case !p.Role.Allows(role):
			writeProblem(w, http.StatusForbidden, "forbidden",
				fmt.Sprintf("%s has the role %s in workspace %s; this needs %s", p.Who(), p.Role, p.WorkspaceID, role))
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// challenge is the WWW-Authenticate header of a 401: with tokens accepted, it points to the
// protected resource metadata (RFC 9728), where an MCP client finds the issuer to sign in with.
func (a *Authenticator) challenge(r *http.Request) string {
	if a.Tokens == nil {
		return `Bearer realm="quiver"`
	}
	c := `Bearer realm="quiver", resource_metadata="` + a.Tokens.MetadataURL() + `"`
	if scheme, _, _ := strings.Cut(r.Header.Get("Authorization"), " "); strings.EqualFold(scheme, "Bearer") {
		c += `, error="invalid_token"`
	}
	return c
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(problemf(status, code, detail))
}
