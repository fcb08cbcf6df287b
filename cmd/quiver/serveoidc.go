package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/quiverhq/quiver/config"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
)

// oidcFlags are quiver serve's flags for access tokens of an OpenID Connect issuer.
type oidcFlags struct {
	issuer, audience, rules, consoleClient, consoleScopes string
	consoleParams                                         []string
	requireATJWT                                          bool
}

func addOIDCFlags(fs *flag.FlagSet) *oidcFlags {
	f := &oidcFlags{}
	fs.StringVar(&f.issuer, "oidc-issuer", "", "also accept access tokens (JWTs) of this OpenID Connect issuer on every door, beside API keys; needs --oidc-rules")
	fs.StringVar(&f.audience, "oidc-audience", "", "what a token's aud must hold one of, comma-separated: the audiences the provider issues tokens for (default: the server's resource identifier, --public-url followed by /mcp)")
	fs.StringVar(&f.consoleClient, "oidc-console-client-id", "", "let people sign in to the console with the provider: a public client registered there "+
		"(authorization code with PKCE, no secret) whose redirect URI is the console's address, --public-url followed by /")
	fs.StringVar(&f.consoleScopes, "oidc-console-scopes", "", "the scopes the console asks for, space-separated (default: openid profile email)")
	fs.Func("oidc-console-param", "NAME=VALUE: one more parameter of the console's authorization request (audience=... for Auth0); "+
		"resource= leaves out the resource parameter the console sends by default (Entra ID refuses it); repeatable", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("%q is not NAME=VALUE", v)
		}
		f.consoleParams = append(f.consoleParams, v)
		return nil
	})
	fs.BoolVar(&f.requireATJWT, "oidc-require-at-jwt", false, "the provider types its access tokens at+jwt (RFC 9068): refuse every token not so typed, "+
		"so that none of its other tokens (an ID token) is taken for one")
	fs.StringVar(&f.rules, "oidc-rules", "", "a YAML file of the rules that turn a token's claims into a workspace and a role (see docs/guides/identity-providers.md)")
	return f
}

// rulesFile is the form of --oidc-rules.
type rulesFile struct {
	Rules []config.ClaimRule `yaml:"rules"`
}

// tokenAuth returns the access-token check the flags and the configuration file's oidc block
// ask for (nil for none; a flag wins over the file), its rules checked against the workspaces
// of db.
func (f *oidcFlags) tokenAuth(ctx context.Context, db store.Backend, publicURL string, insecure bool, file *config.File) (*server.TokenAuth, error) {
	var fromFile config.OIDC
	if file != nil && file.OIDC != nil {
		fromFile = *file.OIDC
	}
	issuer := cmp.Or(f.issuer, fromFile.Issuer)
	if err := f.checkIssuer(issuer, insecure, fromFile); err != nil || issuer == "" {
		return nil, err
	}
	rules, where, err := f.readRules(fromFile)
	if err != nil {
		return nil, err
	}
	if u, err := url.Parse(publicURL); err != nil || u.Hostname() == "" || net.ParseIP(u.Hostname()) != nil && net.ParseIP(u.Hostname()).IsUnspecified() {
		return nil, usagef("--oidc-issuer needs --public-url (or $%s): tokens are issued for the server's address as clients reach it, which %q is not", publicURLEnv, publicURL)
	}
	resource := strings.TrimSuffix(publicURL, "/") + "/mcp"
	ta := &server.TokenAuth{Issuer: issuer, Audiences: f.audiences(fromFile, resource), Resource: resource, Rules: rules, Users: db,
		RequireATJWT: f.requireATJWT || fromFile.RequireATJWT}
	f.setConsole(ta, fromFile)
	if err := ta.Check(); err != nil {
		return nil, usagef("%v", err)
	}
	for i, r := range rules {
		if _, err := db.Workspace(ctx, r.Workspace); errors.Is(err, store.ErrNotFound) {
			return nil, usagef("%s: rule %d names workspace %q, which this database does not have", where, i+1, r.Workspace)
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	return ta, nil
}

// checkIssuer refuses --oidc-* flags without an issuer, an issuer beside --insecure-local, and
// one without rules. No issuer at all is no error: tokens are not taken.
func (f *oidcFlags) checkIssuer(issuer string, insecure bool, fromFile config.OIDC) error {
	others := f.rules != "" || f.audience != "" || f.consoleClient != "" || f.consoleScopes != "" || len(f.consoleParams) > 0 || f.requireATJWT
	switch {
	case issuer == "" && others:
		return usagef("--oidc-rules, --oidc-audience, --oidc-require-at-jwt and --oidc-console-* need --oidc-issuer")
	case issuer == "":
		return nil
	case insecure:
		return usagef("--oidc-issuer (or the configuration's oidc block) checks tokens, --insecure-local checks nothing: give one of them")
	case f.rules == "" && len(fromFile.Rules) == 0:
		return usagef("--oidc-issuer needs --oidc-rules FILE (or rules in the configuration's oidc block): without rules no token grants any workspace")
	}
	return nil
}

// readRules returns the rules of --oidc-rules, else of the configuration's oidc block, and
// where they were read, for the errors that name them.
func (f *oidcFlags) readRules(fromFile config.OIDC) ([]config.ClaimRule, string, error) {
	if f.rules == "" {
		return fromFile.Rules, "the configuration's oidc block", nil
	}
	data, err := os.ReadFile(f.rules)
	if err != nil {
		return nil, "", usagef("--oidc-rules: %v", err)
	}
	var rf rulesFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		return nil, "", usagef("--oidc-rules %s: %v (want rules: a list of {claim, value, workspace, role})", f.rules, err)
	}
	return rf.Rules, "--oidc-rules " + f.rules, nil
}

// audiences are --oidc-audience's, else the block's, else the server's resource identifier.
func (f *oidcFlags) audiences(fromFile config.OIDC, resource string) []string {
	audiences := fromFile.Audiences
	if f.audience != "" {
		audiences = strings.Split(f.audience, ",")
		for i := range audiences {
			audiences[i] = strings.TrimSpace(audiences[i])
		}
	}
	if len(audiences) == 0 {
		audiences = []string{resource}
	}
	return audiences
}

// setConsole sets the console's sign-in: the flags', else the block's.
func (f *oidcFlags) setConsole(ta *server.TokenAuth, fromFile config.OIDC) {
	ta.ConsoleClientID, ta.ConsoleScopes, ta.ConsoleParams = cmp.Or(f.consoleClient, fromFile.ConsoleClientID), fromFile.ConsoleScopes, fromFile.ConsoleParams
	if f.consoleScopes != "" {
		ta.ConsoleScopes = strings.Fields(f.consoleScopes)
	}
	if len(f.consoleParams) > 0 {
		ta.ConsoleParams = map[string]string{}
		for _, p := range f.consoleParams {
			name, value, _ := strings.Cut(p, "=")
			ta.ConsoleParams[strings.TrimSpace(name)] = value
		}
	}
}
