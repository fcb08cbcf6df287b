// Package connect holds a workspace's providers of user connections: the OAuth 2.0/2.1
// authorization servers through which each person connects an account of their own (a
// mailbox, a code host, a payments dashboard), so that tools call as that person, with their
// consent and their scopes. It checks the providers' document and runs the authorization code
// flow with PKCE against a provider: the URL a person is sent to, the code exchanged for
// tokens, the refresh, the revocation. Keeping the tokens, and whose they are, is the
// platform's.
package connect

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/platform/entitle"
)

// Document is a workspace's providers.
type Document struct {
	// Providers are the providers a workspace's users may connect to.
	Providers []Provider `json:"providers,omitempty" yaml:"providers,omitempty"`
}

// Provider is an OAuth 2.0/2.1 authorization server a workspace's users connect accounts at.
type Provider struct {
	// Name names the provider in tools' requirements and the API: 1 to 64 characters of
	// a-z, 0-9, _ and -.
	Name string `json:"name" yaml:"name"`
	// Description says what the provider is, for the people connecting.
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	// Issuer, when set, is the authorization server's issuer identifier: the endpoints left
	// out are read from its metadata (RFC 8414 or OpenID Connect discovery), and kept an hour.
	Issuer string `json:"issuer,omitempty" yaml:"issuer,omitempty"`
	// AuthorizationURL is the authorization endpoint people are sent to (read from the
	// issuer's metadata when left out).
	AuthorizationURL string `json:"authorization_url,omitempty" yaml:"authorization_url,omitempty"`
	// TokenURL is the token endpoint codes and refresh tokens are exchanged at (read from the
	// issuer's metadata when left out).
	TokenURL string `json:"token_url,omitempty" yaml:"token_url,omitempty"`
	// RevocationURL, when set, is the revocation endpoint (RFC 7009) a connection's tokens are
	// revoked at when its user disconnects or leaves the workspace (read from the issuer's
	// metadata when left out).
	RevocationURL string `json:"revocation_url,omitempty" yaml:"revocation_url,omitempty"`
	// ClientID is Quiver's client id at the provider.
	ClientID string `json:"client_id" yaml:"client_id"`
	// ClientSecretVariable names the workspace's secret variable that holds the client's
	// secret; none: a public client (PKCE alone).
	ClientSecretVariable string `json:"client_secret_variable,omitempty" yaml:"client_secret_variable,omitempty"`
	// Scopes are the scopes on offer: a tool may require some of them, and a connection asks
	// for those its tools need.
	Scopes []string `json:"scopes,omitempty" yaml:"scopes,omitempty"`
}

// Bounds of a Document.
const (
	MaxProviders = 100
	MaxScopes    = 100
	maxURL       = 2048
	maxText      = 1024
)

var (
	providerName = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
	// scopeToken is RFC 6749's scope-token: printable ASCII but space, " and \.
	scopeToken   = regexp.MustCompile(`^[\x21\x23-\x5B\x5D-\x7E]{1,200}$`)
	variableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// FieldError is a Document that does not check: Field says where ("providers[2].token_url").
type FieldError = entitle.FieldError

// Decode reads a Document from JSON, refusing fields it does not know, and checks it.
func Decode(data []byte) (*Document, error) {
	return entitle.DecodeChecked[Document](data, "a connection providers document")
}

// Check reports the first part of d that is malformed or over a bound, naming it.
func (d *Document) Check() error {
	if len(d.Providers) > MaxProviders {
		return &FieldError{Field: "providers", Message: fmt.Sprintf("%d providers are over the %d a workspace may have", len(d.Providers), MaxProviders)}
	}
	for i := range d.Providers {
		field := fmt.Sprintf("providers[%d]", i)
		if err := d.Providers[i].check(field); err != nil {
			return err
		}
		if slices.IndexFunc(d.Providers[:i], func(p Provider) bool { return p.Name == d.Providers[i].Name }) >= 0 {
			return &FieldError{Field: field + ".name", Message: fmt.Sprintf("the provider %q is defined twice", d.Providers[i].Name)}
		}
	}
	return nil
}

// Provider returns d's provider called name.
func (d *Document) Provider(name string) (*Provider, bool) {
	for i := range d.Providers {
		if d.Providers[i].Name == name {
			return &d.Providers[i], true
		}
	}
	return nil, false
}

func (p *Provider) check(field string) error {
	switch {
	case !providerName.MatchString(p.Name):
		return &FieldError{Field: field + ".name", Message: fmt.Sprintf("%q is not 1 to 64 characters of a-z, 0-9, _ and -", clip(p.Name))}
	case len(p.Description) > maxText:
		return &FieldError{Field: field + ".description", Message: fmt.Sprintf("over %d bytes", maxText)}
	case p.ClientID == "" || len(p.ClientID) > maxText:
		return &FieldError{Field: field + ".client_id", Message: fmt.Sprintf("a client id of 1 to %d bytes is needed", maxText)}
	case p.ClientSecretVariable != "" && !variableName.MatchString(p.ClientSecretVariable):
		return &FieldError{Field: field + ".client_secret_variable", Message: fmt.Sprintf("%q is not a variable's name", clip(p.ClientSecretVariable))}
	case len(p.Scopes) > MaxScopes:
		return &FieldError{Field: field + ".scopes", Message: fmt.Sprintf("%d scopes are over the %d a provider may offer", len(p.Scopes), MaxScopes)}
	}
	for _, u := range []struct {
		name, value string
		required    bool
	}{{"issuer", p.Issuer, false}, {"authorization_url", p.AuthorizationURL, p.Issuer == ""}, {"token_url", p.TokenURL, p.Issuer == ""},
		{"revocation_url", p.RevocationURL, false}} {
		if err := checkEndpoint(u.value, u.required); err != nil {
			return &FieldError{Field: field + "." + u.name, Message: err.Error()}
		}
	}
	for i, s := range p.Scopes {
		if !scopeToken.MatchString(s) {
			return &FieldError{Field: fmt.Sprintf("%s.scopes[%d]", field, i), Message: fmt.Sprintf("%q is not a scope (printable ASCII without spaces, \" or \\)", clip(s))}
		}
	}
	return nil
}

// checkEndpoint refuses an endpoint that is not an https URL (http only on loopback, for a
// provider on the same machine), or that carries a fragment or credentials.
func checkEndpoint(s string, required bool) error {
	if s == "" {
		if required {
			return fmt.Errorf("an https URL is needed (or the provider's issuer, to read it from its metadata)")
		}
		return nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || len(s) > maxURL || u.Host == "":
		return fmt.Errorf("%q is not an absolute URL of up to %d bytes", clip(s), maxURL)
	case u.User != nil || u.Fragment != "":
		return fmt.Errorf("%q carries credentials or a fragment", clip(s))
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q is not https (http is allowed only on loopback)", clip(s))
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "…"
}
