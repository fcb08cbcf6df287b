package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/platform/entitle"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/store"
)

// DefaultClockSkew is how far a token's exp, nbf and iat may be off the server's clock.
const DefaultClockSkew = 30 * time.Second

// maxTokenBytes bounds the access tokens read: a token is hashed and parsed before it is
// known to be good, and real ones are a few kilobytes.
const maxTokenBytes = 16 << 10

// ErrForbidden is a request whose key or token is good but does not reach what it asks for:
// a workspace its token does not grant, or not the one its key belongs to (403, where
// ErrUnauthorized is 401 and sends the client to sign in again).
var ErrForbidden = errors.New("forbidden")

// WorkspaceHeader names the workspace a request acts in when its token grants several.
const WorkspaceHeader = "Quiver-Workspace"

// TokenAuth accepts access tokens (JWTs) from one OpenID Connect issuer: the signature checked
// with the issuer's keys (fetched from its discovery document, followed when it rotates them),
// the issuer, the audience, the expiry and not-before times, then the rules turn the claims
// into a workspace and a role. Its methods are safe for concurrent use.
type TokenAuth struct {
	// Issuer is the issuer's URL, exactly as its tokens' iss says it.
	Issuer string
	// Audiences are what a token's aud must hold one of, so that a token issued for another
	// service is refused: this server's resource identifier (RFC 8707), or the names the
	// provider gives the audiences it issues tokens for (an API identifier; the client ids of
	// the MCP clients and of the console, for a provider that names the client).
	Audiences []string
	// Resource is this server's resource identifier, which its protected resource metadata
	// names (its public URL's /mcp); empty means the first of Audiences.
	Resource string
	// Rules grant workspaces and roles; a token that matches none is refused.
	Rules []config.ClaimRule
	// Users keeps the people tokens name: each (issuer, subject) is one Quiver user,
	// created the first time it is seen. Required.
	Users TokenUsers
	// RequireATJWT refuses every token whose header does not type it at+jwt: for a provider
	// that types its access tokens so (RFC 9068), whose other tokens are then refused by their
	// type alone. Left unset, tokens typed JWT, or not typed, are accepted too, and told from
	// ID tokens by their claims.
	RequireATJWT bool
	// ClockSkew is how far exp, nbf and iat may be off; zero means DefaultClockSkew.
	ClockSkew time.Duration
	// ConsoleClientID, when set, lets people sign in to the console with the provider: the id
	// of a public client registered there (authorization code with PKCE, no secret), whose
	// redirect URI is the console's address (the server's public URL followed by /). A token
	// whose only audience here it is, and which carries no scope, scp or client_id, is taken
	// for the console's ID token and refused.
	ConsoleClientID string
	// ConsoleScopes are the scopes the console asks for; nil means openid, profile, email.
	ConsoleScopes []string
	// ConsoleParams are more parameters of the console's authorization request, for what a
	// provider asks beyond the standard ones (Auth0's audience). The console asks for a token
	// for this server's resource identifier (RFC 8707's resource parameter); a "resource" of ""
	// here leaves that parameter out, for a provider that refuses it (Entra ID).
	ConsoleParams map[string]string
	// Client fetches the issuer's documents; nil uses a client of its own.
	Client *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	once     sync.Once
	keys     *issuerKeys
	verifier *oidc.IDTokenVerifier

	mu       sync.Mutex
	known    map[string]bool          // user ids stored already
	members  map[string]membersSynced // the memberships last written for each user
	verified recentChecks[*verifiedToken]
}

// TokenUsers is what TokenAuth needs of the store to keep the users tokens name, and their
// memberships of the workspaces the rules name.
type TokenUsers interface {
	User(ctx context.Context, id string) (*store.User, error)
	CreateUser(ctx context.Context, u *store.User) error
	Member(ctx context.Context, workspaceID, userID string) (*store.Membership, error)
	AddMember(ctx context.Context, m *store.Membership) error
	SetMemberRole(ctx context.Context, workspaceID, userID string, role store.MemberRole) error
	RemoveMember(ctx context.Context, workspaceID, userID string) error
}

// Check reports a configuration that cannot work.
func (t *TokenAuth) Check() error {
	u, err := url.Parse(t.Issuer)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname()))):
		return fmt.Errorf("oidc: the issuer %q is not an https URL (http only on loopback)", t.Issuer)
	case len(t.Audiences) == 0 || slices.Contains(t.Audiences, ""):
		return errors.New("oidc: no audience: give the server's resource identifier (its public URL's /mcp), or the audiences the provider's tokens name")
	case len(t.Rules) == 0:
		return errors.New("oidc: no rules: without one, no token grants any workspace")
	case t.Users == nil:
		return errors.New("oidc: TokenAuth.Users is not set")
	case t.ClockSkew < 0:
		return fmt.Errorf("oidc: a negative clock skew (%s)", t.ClockSkew)
	}
	for k := range t.ConsoleParams {
		switch k {
		case "response_type", "client_id", "redirect_uri", "scope", "state", "nonce", "code_challenge", "code_challenge_method":
			return fmt.Errorf("oidc: the console's authorization parameter %q is the sign-in's own: give scopes as scopes", k)
		}
		if k == "" || strings.ContainsAny(k, "&=# ") {
			return fmt.Errorf("oidc: %q is not a parameter name", k)
		}
	}
	if r, err := url.Parse(t.resource()); err != nil || (r.Scheme != "https" && r.Scheme != "http") || r.Host == "" {
		return fmt.Errorf("oidc: the resource identifier %q is not an http or https URL: give the server's public URL followed by /mcp", t.resource())
	}
	for i, r := range t.Rules {
		if err := r.Check(); err != nil {
			return fmt.Errorf("oidc: rule %d: %w", i+1, err)
		}
	}
	return nil
}

func isLoopbackHost(h string) bool { return h == "localhost" || h == "127.0.0.1" || h == "::1" }

func (t *TokenAuth) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func (t *TokenAuth) init() {
	t.once.Do(func() {
		client := t.Client
		if client == nil {
			client = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
				if len(via) >= 5 || origin(req.URL.String()) == "" {
					return fmt.Errorf("the identity provider redirected to %s: only https (http on loopback), at most 5 times", req.URL.Redacted())
				}
				return nil
			}}
		}
		t.keys = &issuerKeys{issuer: t.Issuer, client: client, now: t.now}
		algs := make([]string, len(tokenAlgorithms))
		for i, a := range tokenAlgorithms {
			algs[i] = string(a)
		}
		// Expiry and not-before are checked below, with the stated skew (go-oidc allows five
		// minutes on nbf and none on exp), and so is the audience, which may be one of several
		// (go-oidc takes one).
		t.verifier = oidc.NewVerifier(t.Issuer, t.keys, &oidc.Config{SkipClientIDCheck: true, SupportedSigningAlgs: algs, SkipExpiryCheck: true})
	})
}

// tokenClaims are the registered claims TokenAuth reads itself.
type tokenClaims struct {
	Expiry    *json.Number `json:"exp"`
	NotBefore *json.Number `json:"nbf"`
	IssuedAt  *json.Number `json:"iat"`
	Email     string       `json:"email"`
	Name      string       `json:"name"`
	Username  string       `json:"preferred_username"`
}

// Authenticate returns who the access token acts as in the workspace named by workspace (the
// WorkspaceHeader; empty when the token grants only one), or an error wrapping
// ErrUnauthorized that says what is wrong with it (never the token).
func (t *TokenAuth) Authenticate(ctx context.Context, token, workspace string) (Principal, error) {
	t.init()
	if len(token) > maxTokenBytes {
		return Principal{}, fmt.Errorf("%w: the access token is %d bytes, over the %d this server reads", ErrUnauthorized, len(token), maxTokenBytes)
	}
	// A token's check is kept for a second (never past its expiry), as a key's is: its
	// signature costs a thousand times a key's cached check.
	h := sha256.Sum256([]byte(token))
	now := t.now()
	v := t.verified.get(h)
	if v == nil || !now.Before(v.until) || now.Before(v.at) {
		v = t.verify(ctx, token, now)
		if v.err != nil && !errors.Is(v.err, ErrUnauthorized) {
			return Principal{}, v.err // the store failed: not the token's fault, and not kept
		}
		t.verified.put(h, v)
	}
	if v.err != nil {
		return Principal{}, v.err
	}
	ws, role, err := pickWorkspace(v.grants, workspace)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %v", ErrForbidden, err)
	}
	return Principal{WorkspaceID: ws, UserID: v.userID, Role: role, Issuer: t.Issuer, Subject: v.subject, Claims: v.claims}, nil
}

// verifiedToken is the outcome of a token's check: who it is and what it grants, or why it
// was refused; kept from at until until.
type verifiedToken struct {
	userID, subject string
	grants          map[string]store.KeyRole
	// claims are the token's, for the entitlement rules that select callers by a claim.
	claims    map[string]any
	err       error
	at, until time.Time
}

// verify checks a token and turns its claims into a user and grants (see Authenticate).
func (t *TokenAuth) verify(ctx context.Context, token string, now time.Time) *verifiedToken {
	v := &verifiedToken{at: now, until: now.Add(authCacheTTL)}
	refuse := func(format string, args ...any) *verifiedToken {
		v.err = fmt.Errorf("%w: "+format, append([]any{ErrUnauthorized}, args...)...)
		return v
	}
	// The keys first: a provider that cannot be read makes the check fail for want of them,
	// which go-oidc would report as a bad signature, and the client would sign in again. The
	// header's type is read here too, and believed once the signature (which covers it) is.
	var typ any
	if jws, err := jose.ParseSignedCompact(token, tokenAlgorithms); err == nil && len(jws.Signatures) == 1 {
		header := jws.Signatures[0].Header
		typ = header.ExtraHeaders[jose.HeaderType]
		if _, err := t.keys.keysFor(ctx, header.KeyID); errors.Is(err, errKeysUnavailable) {
			v.err = err
			return v
		}
	}
	idt, err := t.verifier.Verify(ctx, token)
	if err != nil {
		return refuse("the access token was refused: %s", strings.TrimPrefix(err.Error(), "oidc: "))
	}
	var std tokenClaims
	var all map[string]any
	if err := idt.Claims(&std); err != nil {
		return refuse("the access token's claims: %v", err)
	}
	if err := idt.Claims(&all); err != nil {
		return refuse("the access token's claims: %v", err)
	}
	ours := slices.DeleteFunc(slices.Clone(idt.Audience), func(a string) bool { return !slices.Contains(t.Audiences, a) })
	if len(ours) == 0 {
		return refuse("the access token is for another audience (%s), not this server's", strings.Join(idt.Audience, ", "))
	}
	if why := t.notAccessToken(typ, ours, all); why != "" {
		return refuse("the token is not an access token: %s", why)
	}
	exp, err := t.checkTimes(std, now)
	if err != nil {
		return refuse("the access token %v", err)
	}
	if idt.Subject == "" {
		return refuse("the access token names no subject (sub)")
	}
	if exp.Before(v.until) {
		v.until = exp
	}
	v.subject, v.grants, v.claims = idt.Subject, t.grants(all), all
	if v.userID, err = t.user(ctx, idt.Subject, std); err != nil {
		v.err = err
		return v
	}
	if err := t.syncMembers(ctx, v.userID, v.grants); err != nil {
		v.err = err
	}
	return v
}

// notAccessToken says why a token the provider signed for one of this server's audiences is
// another of its tokens, not an access token ("" when nothing says so). An ID token says who
// signed in to a client, for that client; one that reached this server (a client that sent
// it on, or named in --oidc-audience) must not act as the person. The marks, in order:
//   - the header's type (typ) is other than at+jwt (RFC 9068), JWT or none; with RequireATJWT,
//     other than at+jwt;
//   - a claim only ID tokens carry: nonce, at_hash, c_hash; a logout or security event
//     token's events; Keycloak's typ claim saying ID, Refresh, Offline or Logout;
//   - unless the token is typed at+jwt or carries a scope or scp claim (the scopes granted,
//     which access tokens carry and ID tokens do not): an azp or auth_time claim; or, without
//     a client_id claim either, no audience of this server but the console's client id, which
//     is the audience of the console's ID tokens.
func (t *TokenAuth) notAccessToken(typ any, ours []string, claims map[string]any) string {
	typed, why := t.headerType(typ)
	if why != "" {
		return why
	}
	for _, c := range []string{"nonce", "at_hash", "c_hash"} {
		if _, has := claims[c]; has {
			return fmt.Sprintf("it is an ID token (it has %s)", c)
		}
	}
	if _, has := claims["events"]; has {
		return "it is a logout or security event token (it has events)"
	}
	if kind, _ := claims["typ"].(string); slices.Contains([]string{"id", "refresh", "offline", "logout"}, strings.ToLower(kind)) {
		return fmt.Sprintf("its typ claim says %q, not Bearer", kind)
	}
	if typed == "at+jwt" || hasValue(claims["scope"]) || hasValue(claims["scp"]) {
		return ""
	}
	for _, c := range []string{"azp", "auth_time"} {
		if _, has := claims[c]; has {
			return fmt.Sprintf("it is an ID token (it has %s, and no scope or scp)", c)
		}
	}
	// client_id counts here only: ZITADEL puts it in its ID tokens too, beside azp.
	if t.ConsoleClientID != "" && !hasValue(claims["client_id"]) && !slices.ContainsFunc(ours, func(a string) bool { return a != t.ConsoleClientID }) {
		return "it is an ID token (its only audience here is the console's client id, and it has no scope, scp or client_id)"
	}
	return ""
}

// headerType returns the token's header type (typ) lowercased, without RFC 7515's optional
// "application/", or why it is no access token's.
func (t *TokenAuth) headerType(typ any) (string, string) {
	s, ok := typ.(string)
	if typ != nil && !ok {
		return "", "its type (typ) is not a string"
	}
	typed := strings.TrimPrefix(strings.ToLower(s), "application/")
	switch {
	case typed != "" && typed != "jwt" && typed != "at+jwt":
		return "", fmt.Sprintf("its type (typ) is %q, where an access token's is at+jwt or JWT", s)
	case t.RequireATJWT && typed != "at+jwt":
		return "", fmt.Sprintf("its type (typ) is %q, and this provider's access tokens are typed at+jwt", s)
	}
	return typed, ""
}

// hasValue says whether a claim's value holds something: not absent, null, "" or [].
func hasValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case string:
		return strings.TrimSpace(v) != ""
	case []any:
		return len(v) > 0
	}
	return true
}

// checkTimes checks exp (required), nbf and iat against now, with the skew, and returns when
// the token stops being accepted.
func (t *TokenAuth) checkTimes(c tokenClaims, now time.Time) (time.Time, error) {
	skew := t.ClockSkew
	if skew == 0 {
		skew = DefaultClockSkew
	}
	at := func(n *json.Number) (time.Time, error) {
		f, err := n.Float64()
		if err != nil {
			return time.Time{}, err
		}
		return time.Unix(int64(f), 0), nil
	}
	if c.Expiry == nil {
		return time.Time{}, errors.New("has no expiry (exp)")
	}
	exp, err := at(c.Expiry)
	if err != nil {
		return time.Time{}, errors.New("has an expiry (exp) that is not a number")
	}
	if !now.Before(exp.Add(skew)) {
		return time.Time{}, fmt.Errorf("expired at %s", exp.UTC().Format(time.RFC3339))
	}
	for _, claim := range []struct {
		name string
		n    *json.Number
	}{{"not valid before (nbf)", c.NotBefore}, {"issued (iat)", c.IssuedAt}} {
		if claim.n == nil {
			continue
		}
		when, err := at(claim.n)
		if err != nil {
			return time.Time{}, fmt.Errorf("has a %s time that is not a number", claim.name)
		}
		if when.After(now.Add(skew)) {
			return time.Time{}, fmt.Errorf("is %s %s, in the future", claim.name, when.UTC().Format(time.RFC3339))
		}
	}
	return exp.Add(skew), nil
}

// grants returns the role each workspace's rules give the claims: the highest of them.
func (t *TokenAuth) grants(claims map[string]any) map[string]store.KeyRole {
	out := map[string]store.KeyRole{}
	for _, r := range t.Rules {
		if !entitle.ClaimHolds(claims, r.Claim, r.Value) {
			continue
		}
		if have, ok := out[r.Workspace]; !ok || r.Role.Allows(have) {
			out[r.Workspace] = r.Role
		}
	}
	return out
}

// pickWorkspace returns the workspace a request acts in, and the role there: the one named,
// which the token must grant, or the token's only one.
func pickWorkspace(grants map[string]store.KeyRole, named string) (string, store.KeyRole, error) {
	if named != "" {
		role, ok := grants[named]
		if !ok {
			return "", "", fmt.Errorf("the access token grants no access to workspace %q", named)
		}
		return named, role, nil
	}
	switch len(grants) {
	case 0:
		return "", "", errors.New("the access token's claims match no rule of this server: it grants no workspace")
	case 1:
		for ws, role := range grants {
			return ws, role, nil
		}
	}
	return "", "", fmt.Errorf("the access token grants %d workspaces: name one with the %s header", len(grants), WorkspaceHeader)
}

// user returns the id of the Quiver user the token's subject is, storing the user the first
// time: derived from the issuer and subject, so every node of a fleet finds the same one.
func (t *TokenAuth) user(ctx context.Context, subject string, c tokenClaims) (string, error) {
	sum := sha256.Sum256([]byte(t.Issuer + "\x00" + subject))
	id := store.PrefixUser + "_" + ids.Encode(sum[:16])
	t.mu.Lock()
	known := t.known[id]
	t.mu.Unlock()
	if known {
		return id, nil
	}
	_, err := t.Users.User(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		// The address is the user's own and unique: the token's email could belong to a user
		// made for API keys, and a provider need not say whether it verified it.
		host := "oidc"
		if u, perr := url.Parse(t.Issuer); perr == nil && u.Hostname() != "" {
			host = u.Hostname()
		}
		name := firstNonEmpty(c.Name, c.Username, c.Email, subject)
		err = t.Users.CreateUser(ctx, &store.User{ID: id, Email: strings.ToLower(ids.Encode(sum[16:26])) + "@" + host, Name: name})
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrIDTaken) {
			err = nil // another request or node stored it first
		}
	}
	if err != nil {
		return "", fmt.Errorf("storing the user of the access token: %w", err)
	}
	t.mu.Lock()
	if t.known == nil || len(t.known) >= authCacheMax {
		t.known = map[string]bool{}
	}
	t.known[id] = true
	t.mu.Unlock()
	return id, nil
}

// syncMembers makes the user a member of the workspaces the token grants as admin or member,
// at least in that role: what the store checks of a member (that whoever creates a tool is
// one) then holds for a person who signs in with the provider. It only adds and raises: a
// person may hold tokens that say different things at once (the console's without the groups
// claim, an MCP client's with it), and lowering on each would flap; what a token may do
// follows its own claims anyway. An admin lowers or removes a membership. Written when the
// grants change or a minute has passed, not on every request.
func (t *TokenAuth) syncMembers(ctx context.Context, userID string, grants map[string]store.KeyRole) error {
	want := map[string]store.MemberRole{}
	for ws, role := range grants {
		switch role {
		case store.KeyRoleAdmin:
			want[ws] = store.MemberRoleAdmin
		case store.KeyRoleMember:
			want[ws] = store.MemberRoleMember
		}
	}
	wsIDs := slices.Sorted(maps.Keys(want))
	var key strings.Builder
	for _, ws := range wsIDs {
		key.WriteString(ws + "=" + string(want[ws]) + ";")
	}
	now := t.now()
	t.mu.Lock()
	last, seen := t.members[userID]
	t.mu.Unlock()
	if seen && last.key == key.String() && now.Sub(last.at) < membersTTL && !now.Before(last.at) {
		return nil
	}
	for _, ws := range wsIDs {
		role := want[ws]
		m, err := t.Users.Member(ctx, ws, userID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			err = t.Users.AddMember(ctx, &store.Membership{WorkspaceID: ws, UserID: userID, Role: role})
			if errors.Is(err, store.ErrConflict) {
				err = nil // another request or node added it first
			}
		case err != nil:
		case role == store.MemberRoleAdmin && m.Role != store.MemberRoleAdmin:
			err = t.Users.SetMemberRole(ctx, ws, userID, role)
		}
		// ErrNotFound: a workspace since deleted.
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("keeping the membership of workspace %s of the access token's user: %w", ws, err)
		}
	}
	t.mu.Lock()
	if t.members == nil || len(t.members) >= authCacheMax {
		t.members = map[string]membersSynced{}
	}
	t.members[userID] = membersSynced{key: key.String(), at: now}
	t.mu.Unlock()
	return nil
}

// membersTTL is how long a user's memberships, once written, are taken to be still so: an
// admin's change, on this node or another, is made good again within it.
const membersTTL = time.Minute

// membersSynced is what syncMembers last wrote for a user, and when.
type membersSynced struct {
	key string
	at  time.Time
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// MetadataPath is where the protected resource metadata of the resource identifier audience
// is served (RFC 9728 section 3.1: the well-known path, then the identifier's own path).
func MetadataPath(audience string) string {
	path := "/.well-known/oauth-protected-resource"
	if u, err := url.Parse(audience); err == nil && strings.Trim(u.Path, "/") != "" {
		path += "/" + strings.Trim(u.Path, "/")
	}
	return path
}

// resource is the server's resource identifier.
func (t *TokenAuth) resource() string {
	if t.Resource != "" || len(t.Audiences) == 0 {
		return t.Resource
	}
	return t.Audiences[0]
}

// MetadataPath is where this server serves its protected resource metadata.
func (t *TokenAuth) MetadataPath() string { return MetadataPath(t.resource()) }

// MetadataURL is the URL of the protected resource metadata, which 401 answers point to.
func (t *TokenAuth) MetadataURL() string {
	u, err := url.Parse(t.resource())
	if err != nil || u.Host == "" {
		return t.MetadataPath()
	}
	return u.Scheme + "://" + u.Host + t.MetadataPath()
}

// ConsoleSignIn is what the console needs to sign people in with the provider (nil when it
// may not): the client, the scopes, the resource to ask a token for and the provider's
// endpoints, from its discovery document.
func (t *TokenAuth) ConsoleSignIn(ctx context.Context) (map[string]any, error) {
	if t.ConsoleClientID == "" {
		return nil, nil
	}
	t.init()
	ends, err := t.keys.endpoints(ctx)
	if err != nil {
		return nil, err
	}
	if ends.Authorization == "" || ends.Token == "" {
		return nil, fmt.Errorf("the discovery document of %s names no authorization or token endpoint", t.Issuer)
	}
	scopes := t.ConsoleScopes
	if scopes == nil {
		scopes = []string{"openid", "profile", "email"}
	}
	params := map[string]string{"resource": t.resource()}
	for k, v := range t.ConsoleParams {
		if v == "" {
			delete(params, k)
		} else {
			params[k] = v
		}
	}
	return map[string]any{"issuer": t.Issuer, "client_id": t.ConsoleClientID, "scopes": scopes, "params": params,
		"authorization_endpoint": ends.Authorization, "token_endpoint": ends.Token}, nil
}

// ConsoleOrigins are the origins the console's page fetches from when it signs in with the
// provider: the token endpoint's (none until the discovery document was read).
func (t *TokenAuth) ConsoleOrigins(ctx context.Context) []string {
	if t.ConsoleClientID == "" {
		return nil
	}
	t.init()
	ends, err := t.keys.endpoints(ctx)
	if err != nil {
		return nil
	}
	if o := origin(ends.Token); o != "" {
		return []string{o}
	}
	return nil
}

// ResourceMetadata is this server's OAuth protected resource metadata (RFC 9728): where
// clients find the issuer to get tokens from.
func (t *TokenAuth) ResourceMetadata() map[string]any {
	return map[string]any{
		"resource":                 t.resource(),
		"authorization_servers":    []string{t.Issuer},
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "Quiver",
	}
}
