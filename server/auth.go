package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// APIKeyPrefix begins every API key (see platform.APIKeyPrefix).
const APIKeyPrefix = platform.APIKeyPrefix

// NewAPIKey makes a new key: the secret, shown once to whoever asked for it and never stored,
// and the Prefix and Hash its record keeps (see platform.NewAPIKey).
func NewAPIKey() (secret, prefix string, hash []byte) { return platform.NewAPIKey() }

// HashAPIKey is the form of a key the store keeps and finds it by: its SHA-256.
func HashAPIKey(secret string) []byte { return platform.HashAPIKey(secret) }

// Principal is who a request acts as: the key it carried, and that key's workspace, user and
// role, the role being what the key may do now (store.KeyRole.Effective).
type Principal struct {
	KeyID       string
	WorkspaceID string
	UserID      string
	Role        store.KeyRole
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
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]*checked
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
// wrapping ErrUnauthorized that says what is wrong with it (never the key).
func (a *Authenticator) Authenticate(ctx context.Context, authorization string) (Principal, error) {
	scheme, secret, _ := strings.Cut(strings.TrimSpace(authorization), " ")
	secret = strings.TrimSpace(secret)
	switch {
	case authorization == "":
		return Principal{}, fmt.Errorf("%w: no API key: send the header Authorization: Bearer %s<key>", ErrUnauthorized, APIKeyPrefix)
	case !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(secret, APIKeyPrefix) ||
		len(secret) != platform.APIKeyLength:
		return Principal{}, fmt.Errorf("%w: the Authorization header is not Bearer followed by a Quiver API key (%s...)", ErrUnauthorized, APIKeyPrefix)
	}
	var h [sha256.Size]byte
	copy(h[:], HashAPIKey(secret))
	now := a.now()
	a.mu.Lock()
	c := a.cache[h]
	a.mu.Unlock()
	if c == nil || now.Sub(c.at) >= authCacheTTL || now.Before(c.at) {
		c = a.check(ctx, h[:], now, c)
		if c.err != nil && !errors.Is(c.err, ErrUnauthorized) {
			return Principal{}, c.err // the store failed: not the key's fault, and not kept
		}
		a.mu.Lock()
		if a.cache == nil || len(a.cache) >= authCacheMax {
			a.cache = map[[sha256.Size]byte]*checked{}
		}
		a.cache[h] = c
		a.mu.Unlock()
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
	c.p = Principal{KeyID: k.ID, WorkspaceID: k.WorkspaceID, UserID: k.UserID, Role: eff}
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
		p, err := a.Authenticate(r.Context(), r.Header.Get("Authorization"))
		switch {
		case errors.Is(err, ErrUnauthorized):
			w.Header().Set("WWW-Authenticate", `Bearer realm="quiver"`)
			writeProblem(w, http.StatusUnauthorized, "unauthorized", err.Error())
			return
		case err != nil:
			writeProblem(w, http.StatusServiceUnavailable, "store_unavailable", "the server could not check the API key; try again shortly")
			return
		case !p.Role.Allows(role):
			writeProblem(w, http.StatusForbidden, "forbidden",
				fmt.Sprintf("API key %s has the role %s in workspace %s; this needs %s", p.KeyID, p.Role, p.WorkspaceID, role))
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(problemf(status, code, detail))
}

// callerMayCall refuses a call whose caller may only read (a viewer key): the dispatcher's
// error result says so, and nothing runs. It sits in the dispatcher, so every door that
// carries a principal is held to it.
func callerMayCall(next quiver.Handler) quiver.Handler {
	return func(ctx context.Context, c *quiver.Call) *quiver.Result {
		if p, ok := PrincipalFrom(ctx); ok && !p.Role.Allows(store.KeyRoleMember) {
			return quiver.Errorf(quiver.CodePolicyDenied, "API key %s is a viewer's: it may list the tools but not call them", p.KeyID)
		}
		return next(ctx, c)
	}
}

// sessionKeys remembers which key opened each MCP session, so that a session answers only that
// key: a session id is not a credential, and another key (a viewer's, say) must not act in a
// member's session. A session's entry goes with a DELETE, or once the session has been idle
// longer than the server closes idle sessions after (twice that, for a margin).
type sessionKeys struct {
	mu   sync.Mutex
	idle time.Duration
	keys map[string]sessionKey
}

type sessionKey struct {
	keyID string
	seen  time.Time
}

// sessionKeyIdleMax is how long a session's key is remembered without a request when sessions
// never expire by idleness: a day.
const sessionKeyIdleMax = 24 * time.Hour

// newSessionKeys remembers the keys of sessions that the server closes after sessionIdle without
// a request (0 or less: never).
func newSessionKeys(sessionIdle time.Duration) *sessionKeys {
	idle := sessionKeyIdleMax
	if sessionIdle > 0 {
		idle = 2 * sessionIdle
	}
	return &sessionKeys{idle: idle, keys: map[string]sessionKey{}}
}

func (sk *sessionKeys) bind(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := PrincipalFrom(r.Context())
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			sk.mu.Lock()
			k, ok := sk.keys[id]
			if ok && k.keyID == p.KeyID {
				sk.keys[id] = sessionKey{p.KeyID, time.Now()}
			}
			sk.mu.Unlock()
			if ok && k.keyID != p.KeyID {
				writeProblem(w, http.StatusForbidden, "forbidden", "this MCP session was opened with another API key")
				return
			}
			if r.Method == http.MethodDelete {
				defer sk.forget(id)
			}
			next.ServeHTTP(w, r)
			return
		}
		// A request without a session may open one: remember the key that did.
		next.ServeHTTP(&sessionRecorder{ResponseWriter: w, sk: sk, keyID: p.KeyID}, r)
	})
}

func (sk *sessionKeys) forget(id string) {
	sk.mu.Lock()
	delete(sk.keys, id)
	sk.mu.Unlock()
}

func (sk *sessionKeys) remember(id, keyID string) {
	now := time.Now()
	sk.mu.Lock()
	defer sk.mu.Unlock()
	for sid, k := range sk.keys {
		if now.Sub(k.seen) > sk.idle {
			delete(sk.keys, sid)
		}
	}
	sk.keys[id] = sessionKey{keyID, now}
}

// sessionRecorder notes the session id an answer gives.
type sessionRecorder struct {
	http.ResponseWriter
	sk    *sessionKeys
	keyID string
	done  bool
}

func (w *sessionRecorder) WriteHeader(code int) {
	if !w.done {
		w.done = true
		if id := w.Header().Get("Mcp-Session-Id"); id != "" {
			w.sk.remember(id, w.keyID)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionRecorder) Write(b []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *sessionRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *sessionRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
