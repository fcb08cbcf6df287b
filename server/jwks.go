package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
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

// issuerKeys verifies the signatures of an issuer's tokens with the keys its discovery document
// names (jwks_uri), fetched when first needed and again when they are old or a token names a
// key id they lack (a rotation). It implements go-oidc's KeySet: go-oidc's own RemoteKeySet
// fetches the keys again for every token whose key id it does not know, with no bound, which
// lets anyone make the server hammer the provider with made-up key ids.
type issuerKeys struct {
	issuer string
	client *http.Client
	now    func() time.Time

	mu      sync.Mutex
	jwksURI string
	ends    providerEndpoints // from the discovery document
	keys    jose.JSONWebKeySet
	fetched time.Time // zero: never
	lastErr error     // of the last fetch, reported while keysMinRefetch has not passed
	// discoveryTried is when endpoints last read the discovery document.
	discoveryTried time.Time
}

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
// none), fetching the set again when it is old, or lacks kid and was not fetched just now.
func (k *issuerKeys) keysFor(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	age := now.Sub(k.fetched)
	match := k.match(kid)
	if k.fetched.IsZero() || age >= keysMaxAge || (len(match) == 0 && age >= keysMinRefetch) {
		if err := k.fetch(ctx); err != nil {
			k.lastErr = err
			k.fetched = now // a provider that fails is asked again after keysMinRefetch
			if len(k.keys.Keys) == 0 {
				return nil, err
			}
		} else {
			k.lastErr = nil
			k.fetched = now
		}
		match = k.match(kid)
	}
	if len(match) == 0 {
		if k.lastErr != nil {
			return nil, k.lastErr
		}
		return nil, fmt.Errorf("the issuer has no key %q", kid)
	}
	return match, nil
}

// match returns the signing keys of the set that kid names (all of them for an empty kid).
func (k *issuerKeys) match(kid string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, key := range k.keys.Keys {
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
	defer k.mu.Unlock()
	if k.jwksURI == "" {
		if now := k.now(); k.discoveryTried.IsZero() || now.Sub(k.discoveryTried) >= keysMinRefetch {
			k.discoveryTried = now
			if err := k.discover(ctx); err != nil {
				return providerEndpoints{}, err
			}
		} else {
			return providerEndpoints{}, fmt.Errorf("the discovery document of %s could not be read a moment ago", k.issuer)
		}
	}
	return k.ends, nil
}

// discover reads the discovery document, with k.mu held.
func (k *issuerKeys) discover(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
		providerEndpoints
	}
	if err := k.getJSON(ctx, strings.TrimSuffix(k.issuer, "/")+"/.well-known/openid-configuration", &doc); err != nil {
		return fmt.Errorf("the issuer's discovery document: %w", err)
	}
	if doc.Issuer != k.issuer {
		return fmt.Errorf("the discovery document of %s names the issuer %q", k.issuer, doc.Issuer)
	}
	if doc.JWKSURI == "" {
		return fmt.Errorf("the discovery document of %s names no jwks_uri", k.issuer)
	}
	k.jwksURI, k.ends = doc.JWKSURI, doc.providerEndpoints
	return nil
}

// fetch reads the discovery document (once) and the key set, with k.mu held.
func (k *issuerKeys) fetch(ctx context.Context) error {
	if k.jwksURI == "" {
		if err := k.discover(ctx); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var set jose.JSONWebKeySet
	if err := k.getJSON(ctx, k.jwksURI, &set); err != nil {
		return fmt.Errorf("the issuer's keys: %w", err)
	}
	k.keys = set
	return nil
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
