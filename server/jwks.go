package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"
)

// tokenAlgorithms are the signatures an access token may carry: asymmetric ones only, so that
// neither "none" nor a switch to an HMAC keyed with the issuer's public key gets a token in.
var tokenAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// Bounds of the issuer's keys as the server keeps them.
const (
	// keysMaxAge is how long fetched keys are used before they are fetched again.
	keysMaxAge = time.Hour
	// keysMinRefetch is how soon after a fetch a token signed with an unknown key id may cause
	// another: a provider that rotated its keys is followed within it, and a client sending
	// made-up key ids costs the provider one request per interval, not one per token.
	keysMinRefetch = 30 * time.Second
	// maxDocumentBytes bounds the discovery document and the key set read from the provider.
	maxDocumentBytes = 1 << 20
)

// errKeysUnavailable is a token that could not be checked because the provider's discovery
// document or keys could not be read: not the token's fault (503, not 401).
var errKeysUnavailable = errors.New("the identity provider's keys could not be read")

// issuerKeys verifies the signatures of an issuer's tokens with the keys its discovery document
// names (jwks_uri), fetched when first needed and again when they are old or a token names a
// key id they lack (a rotation). It implements go-oidc's KeySet: go-oidc's own RemoteKeySet
// fetches the keys again for every token whose key id it does not know, with no bound, which
// lets anyone make the server hammer the provider with made-up key ids. One fetch at a time,
// outside its lock: a token whose key the set lacks waits for the fetch under way, and checks
// of tokens whose key it holds go on meanwhile.
type issuerKeys struct {
	issuer string
	client *http.Client
	now    func() time.Time
	group  singleflight.Group // the discovery document read for the console's endpoints

	mu      sync.Mutex
	jwksURI string
	ends    providerEndpoints // from the discovery document
	keys    []jose.JSONWebKey
	tried   time.Time // when the last fetch of the keys began; zero: never
	lastErr error     // of the last fetch that ended
	// fetching is the fetch of the keys under way, nil when none is.
	fetching *keyFetch
	// discoveryTried is when the discovery document was last read for endpoints.
	discoveryTried time.Time
}

// keyFetch is one fetch of the key set: done is closed when it ends, err set before.
type keyFetch struct {
	done chan struct{}
	err  error
}

// keyFetchTimeout bounds a fetch of the discovery document and the key set, and so how long a
// token waits for one.
const keyFetchTimeout = 10 * time.Second

// VerifySignature returns the payload of a compact JWS signed by one of the issuer's keys.
func (k *issuerKeys) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, tokenAlgorithms)
	if err != nil {
		return nil, fmt.Errorf("not a token signed with an asymmetric algorithm (%v)", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("a token carries one signature, this one %d", len(jws.Signatures))
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, err := k.keysFor(ctx, kid)
	if err != nil {
		return nil, err
	}
	for _, key := range keys {
		if payload, err := jws.Verify(key); err == nil {
			return payload, nil
		}
	}
	if kid == "" {
		return nil, errors.New("the signature matches none of the issuer's keys")
	}
	return nil, fmt.Errorf("the signature does not match the issuer's key %q", kid)
}

// keysFor returns the keys that may have signed a token naming kid (every signing key for
// none). An old set is fetched again, the keys it has serving meanwhile. When the set lacks
// kid, the token waits for a fetch: the one under way, or one it starts unless the last began
// under keysMinRefetch ago. Only a fetch that ended well says a key id is unknown; one that
// failed, or a request that ended while it waited, gives an error wrapping errKeysUnavailable
// (503: the client keeps its token).
func (k *issuerKeys) keysFor(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	match := k.match(kid)
	age := k.now().Sub(k.tried)
	fetch := k.fetching
	if fetch == nil && (k.tried.IsZero() || age >= keysMaxAge || (len(match) == 0 && age >= keysMinRefetch)) {
		fetch = k.startFetch(ctx)
	}
	lastErr := k.lastErr
	k.mu.Unlock()
	if len(match) > 0 {
		return match, nil // an old set's fetch goes on beside: its keys serve until it ends
	}
	if fetch == nil { // the last fetch began just now: its outcome stands
		if lastErr != nil {
			return nil, fmt.Errorf("%w: %v", errKeysUnavailable, lastErr)
		}
		return nil, fmt.Errorf("the issuer has no key %q", kid)
	}
	select {
	case <-fetch.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: the request ended while they were fetched (%v)", errKeysUnavailable, ctx.Err())
	}
	if fetch.err != nil {
		return nil, fmt.Errorf("%w: %v", errKeysUnavailable, fetch.err)
	}
	k.mu.Lock()
	match = k.match(kid)
	k.mu.Unlock()
	if len(match) == 0 {
		return nil, fmt.Errorf("the issuer has no key %q", kid)
	}
	return match, nil
}

// startFetch begins a fetch of the key set, on its own deadline (keyFetchTimeout) rather than
// the request's: the tokens that wait for it need it whether or not the first one is still
// there. k.mu is held.
func (k *issuerKeys) startFetch(ctx context.Context) *keyFetch {
	fetch := &keyFetch{done: make(chan struct{})}
	k.fetching, k.tried = fetch, k.now() // a provider that fails is asked again after keysMinRefetch
	ctx = context.WithoutCancel(ctx)
	go func() {
		fctx, cancel := context.WithTimeout(ctx, keyFetchTimeout)
		defer cancel()
		keys, err := k.fetchSet(fctx)
		k.mu.Lock()
		k.lastErr, k.fetching = err, nil
		if err == nil {
			k.keys = keys
		}
		k.mu.Unlock()
		fetch.err = err
		close(fetch.done)
	}()
	return fetch
}

// fetchSet reads the key set, and the discovery document first when it was not read yet.
func (k *issuerKeys) fetchSet(ctx context.Context) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	uri := k.jwksURI
	k.mu.Unlock()
	if uri == "" {
		var err error
		if uri, err = k.discover(ctx); err != nil {
			return nil, err
		}
	}
	return k.fetchKeys(ctx, uri)
}

// fetchKeys reads the key set at uri. A key this server cannot use (an encryption key, a curve
// go-jose lacks) is skipped, as RFC 7517 section 5 asks, instead of failing the whole set.
func (k *issuerKeys) fetchKeys(ctx context.Context, uri string) ([]jose.JSONWebKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := k.getJSON(ctx, uri, &set); err != nil {
		return nil, fmt.Errorf("the issuer's keys: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(raw); err != nil || !key.Valid() || !key.IsPublic() {
			continue
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("the issuer's key set at %s has no public key this server can use", uri)
	}
	return keys, nil
}

// match returns the signing keys of the set that kid names (all of them for an empty kid).
func (k *issuerKeys) match(kid string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, key := range k.keys {
		if key.Use != "" && key.Use != "sig" {
			continue
		}
		if kid == "" || key.KeyID == kid {
			out = append(out, key)
		}
	}
	return out
}

// providerEndpoints are the endpoints of the discovery document a browser signing in uses.
type providerEndpoints struct {
	Authorization string `json:"authorization_endpoint"`
	Token         string `json:"token_endpoint"`
}

// endpoints returns the provider's endpoints, reading its discovery document when it was not
// read yet (and not tried in the last keysMinRefetch).
func (k *issuerKeys) endpoints(ctx context.Context) (providerEndpoints, error) {
	k.mu.Lock()
	known, ends := k.jwksURI != "", k.ends
	now := k.now()
	try := !known && (k.discoveryTried.IsZero() || now.Sub(k.discoveryTried) >= keysMinRefetch)
	if try {
		k.discoveryTried = now
	}
	k.mu.Unlock()
	switch {
	case known:
		return ends, nil
	case !try:
		return providerEndpoints{}, fmt.Errorf("the discovery document of %s could not be read a moment ago", k.issuer)
	}
	_, err, _ := k.group.Do("discovery", func() (any, error) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyFetchTimeout)
		defer cancel()
		_, err := k.discover(dctx)
		return nil, err
	})
	if err != nil {
		return providerEndpoints{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ends, nil
}

// discover reads the discovery document and keeps its endpoints, checked: the issuer its
// own, every endpoint https (http only on loopback). It returns the key set's URI.
func (k *issuerKeys) discover(ctx context.Context) (string, error) {
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
		providerEndpoints
	}
	if err := k.getJSON(ctx, strings.TrimSuffix(k.issuer, "/")+"/.well-known/openid-configuration", &doc); err != nil {
		return "", fmt.Errorf("the issuer's discovery document: %w", err)
	}
	if doc.Issuer != k.issuer {
		return "", fmt.Errorf("the discovery document of %s names the issuer %q", k.issuer, doc.Issuer)
	}
	for name, u := range map[string]string{"jwks_uri": doc.JWKSURI, "authorization_endpoint": doc.Authorization, "token_endpoint": doc.Token} {
		if u == "" && name != "jwks_uri" {
			continue // a provider for tokens only: the console cannot sign in with it
		}
		if origin(u) == "" {
			return "", fmt.Errorf("the discovery document of %s names %s %q, not an https URL (http only on loopback)", k.issuer, name, u)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.jwksURI, k.ends = doc.JWKSURI, doc.providerEndpoints
	return doc.JWKSURI, nil
}

func (k *issuerKeys) getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxDocumentBytes {
		return fmt.Errorf("GET %s: over %d bytes", url, maxDocumentBytes)
	}
	return json.Unmarshal(body, v)
}

// hostName is a DNS name: letters, digits, hyphens and dots.
var hostName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

// origin is the scheme://host[:port] of an https URL (or an http one on loopback), "" for
// anything else: what a Content-Security-Policy may name, and what the provider's endpoints
// must be, without letting a document widen the policy (a wildcard, a quote, a space) or send
// tokens in the clear.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Opaque != "" {
		return ""
	}
	host, port := u.Hostname(), u.Port()
	ip := net.ParseIP(host)
	switch {
	case host == "" || (ip == nil && !hostName.MatchString(host)):
		return ""
	case port != "" && !regexp.MustCompile(`^[0-9]{1,5}$`).MatchString(port):
		return ""
	case u.Scheme == "https":
	case u.Scheme == "http" && (host == "localhost" || ip != nil && ip.IsLoopback()):
	default:
		return ""
	}
	return u.Scheme + "://" + u.Host
}
