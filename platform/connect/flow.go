package connect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// Client makes a provider's requests: the token exchange, the refresh and the revocation.
// golang.org/x/oauth2 speaks the protocol (and reads at most 1 MiB of a token answer); Client
// gives it an HTTP client whose transport the platform guards (internal addresses refused)
// and whose requests end after Timeout.
type Client struct {
	// Transport carries the requests; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Timeout bounds each request, the answer read included; 0 means DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout bounds a request to a provider.
const DefaultTimeout = 10 * time.Second

// Token is what a provider granted a connection.
type Token struct {
	Access  string
	Refresh string
	// Expiry is when Access expires; zero when the provider did not say.
	Expiry time.Time
	// Scopes are the scopes granted: the provider's answer's, else those asked for.
	Scopes []string
}

// Verifier returns a new PKCE code verifier.
func Verifier() string { return oauth2.GenerateVerifier() }

// AuthURL is the URL a person is sent to, to connect p: for the scopes, coming back to
// redirectURI with state, the code bound to verifier's S256 challenge.
func AuthURL(p *Provider, redirectURI, state, verifier string, scopes []string) string {
	c := config(p, "", redirectURI, scopes)
	return c.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))
}

// Exchange trades the code the provider sent back for tokens.
func (c *Client) Exchange(ctx context.Context, p *Provider, secret, redirectURI, code, verifier string, scopes []string) (*Token, error) {
	ctx, cancel := c.context(ctx)
	defer cancel()
	tok, err := config(p, secret, redirectURI, scopes).Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, providerError(p, "the code could not be exchanged for tokens", err)
	}
	return tokenOf(tok, scopes)
}

// Refresh asks for a new access token with a refresh token. A provider that sends no new
// refresh token keeps the old one valid: Token.Refresh is then refresh.
func (c *Client) Refresh(ctx context.Context, p *Provider, secret, refresh string, scopes []string) (*Token, error) {
	ctx, cancel := c.context(ctx)
	defer cancel()
	tok, err := config(p, secret, "", scopes).TokenSource(ctx, &oauth2.Token{RefreshToken: refresh}).Token()
	if err != nil {
		return nil, providerError(p, "the access token could not be refreshed", err)
	}
	t, err := tokenOf(tok, scopes)
	if err == nil && t.Refresh == "" {
		t.Refresh = refresh
	}
	return t, err
}

// Revoke revokes a token at the provider's revocation endpoint (RFC 7009), hint saying which
// ("refresh_token", "access_token"); a provider without one revokes nothing.
func (c *Client) Revoke(ctx context.Context, p *Provider, secret, token, hint string) error {
	if p.RevocationURL == "" || token == "" {
		return nil
	}
	ctx, cancel := c.context(ctx)
	defer cancel()
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	if secret == "" {
		form.Set("client_id", p.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.RevocationURL, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if secret != "" {
		req.SetBasicAuth(url.QueryEscape(p.ClientID), url.QueryEscape(secret))
	}
	res, err := c.httpClient().Do(req)
	if err != nil {
		return providerError(p, "the token could not be revoked", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("connect: provider %s: the token could not be revoked: the revocation endpoint answered %d", p.Name, res.StatusCode)
	}
	return nil
}

// context is ctx carrying the HTTP client oauth2 uses, ending after the timeout.
func (c *Client) context(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	return context.WithValue(ctx, oauth2.HTTPClient, c.httpClient()), cancel
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

func (c *Client) httpClient() *http.Client {
	return &http.Client{Transport: c.Transport, Timeout: c.timeout(),
		// A provider's endpoints answer; they do not send the server elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func config(p *Provider, secret, redirectURI string, scopes []string) *oauth2.Config {
	style := oauth2.AuthStyleInParams
	if secret != "" {
		style = oauth2.AuthStyleInHeader
	}
	return &oauth2.Config{ClientID: p.ClientID, ClientSecret: secret, RedirectURL: redirectURI, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: p.AuthorizationURL, TokenURL: p.TokenURL, AuthStyle: style}}
}

// tokenOf is what oauth2 got, checked: a bearer access token, of a sane size.
func tokenOf(tok *oauth2.Token, asked []string) (*Token, error) {
	switch {
	case tok.AccessToken == "" || len(tok.AccessToken) > maxToken || len(tok.RefreshToken) > maxToken:
		return nil, errors.New("connect: the provider's answer holds no access token, or one over 16 KiB")
	case tok.TokenType != "" && !strings.EqualFold(tok.TokenType, "bearer"):
		return nil, fmt.Errorf("connect: the provider's token is of type %q, not bearer", clip(tok.TokenType))
	}
	t := &Token{Access: tok.AccessToken, Refresh: tok.RefreshToken, Expiry: tok.Expiry, Scopes: asked}
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		t.Scopes = strings.Fields(s)
	}
	return t, nil
}

// maxToken bounds a token Quiver keeps.
const maxToken = 16 << 10

// providerError says what failed at p without the provider's answer, which may repeat what
// was sent (a code, a token): its error code alone, when it gave one.
func providerError(p *Provider, what string, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code := re.ErrorCode
		if code == "" {
			code = fmt.Sprintf("HTTP %d", re.Response.StatusCode)
		}
		return fmt.Errorf("connect: provider %s: %s: %s", p.Name, what, clip(code))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL may carry nothing secret, but its query is the provider's business
	}
	return fmt.Errorf("connect: provider %s: %s: %w", p.Name, what, err)
}
