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

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
)

// oidcFlags are quiver serve's flags for access tokens of an OpenID Connect issuer.
type oidcFlags struct {
	issuer, audience, rules, consoleClient, consoleScopes string
	consoleParams                                         []string
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
	fs.StringVar(&f.rules, "oidc-rules", "", "a YAML file of the rules that turn a token's claims into a workspace and a role (see README, Sign-in with an identity provider)")
	return f
}

// rulesFile is the form of --oidc-rules.
type rulesFile struct {
	Rules []server.ClaimRule `yaml:"rules"`
}

// tokenAuth returns the access-token check the flags and the configuration file's oidc block
// ask for (nil for none; a flag wins over the file), its rules checked against the workspaces
// of db.
func (f *oidcFlags) tokenAuth(ctx context.Context, db store.Backend, publicURL string, insecure bool, file *server.File) (*server.TokenAuth, error) {
	var fromFile server.OIDCConfig
	if file != nil && file.OIDC != nil {
		fromFile = *file.OIDC
	}
	issuer := cmp.Or(f.issuer, fromFile.Issuer)
	switch {
	case issuer == "" && (f.rules != "" || f.audience != "" || f.consoleClient != "" || f.consoleScopes != "" || len(f.consoleParams) > 0):
		return nil, usagef("--oidc-rules, --oidc-audience and --oidc-console-* need --oidc-issuer")
	case issuer == "":
		return nil, nil
	case insecure:
		return nil, usagef("--oidc-issuer (or the configuration's oidc block) checks tokens, --insecure-local checks nothing: give one of them")
	case f.rules == "" && len(fromFile.Rules) == 0:
		return nil, usagef("--oidc-issuer needs --oidc-rules FILE (or rules in the configuration's oidc block): without rules no token grants any workspace")
	}
	rules, where := fromFile.Rules, "the configuration's oidc block"
	if f.rules != "" {
		data, err := os.ReadFile(f.rules)
		if err != nil {
			return nil, usagef("--oidc-rules: %v", err)
		}
		var rf rulesFile
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&rf); err != nil {
			return nil, usagef("--oidc-rules %s: %v (want rules: a list of {claim, value, workspace, role})", f.rules, err)
		}
		rules, where = rf.Rules, "--oidc-rules "+f.rules
	}
	if u, err := url.Parse(publicURL); err != nil || u.Hostname() == "" || net.ParseIP(u.Hostname()) != nil && net.ParseIP(u.Hostname()).IsUnspecified() {
		return nil, usagef("--oidc-issuer needs --public-url (or $%s): tokens are issued for the server's address as clients reach it, which %q is not", publicURLEnv, publicURL)
	}
	resource := strings.TrimSuffix(publicURL, "/") + "/mcp"
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
	ta := &server.TokenAuth{Issuer: issuer, Audiences: audiences, Resource: resource, Rules: rules, Users: db,
		ConsoleClientID: cmp.Or(f.consoleClient, fromFile.ConsoleClientID), ConsoleScopes: fromFile.ConsoleScopes, ConsoleParams: fromFile.ConsoleParams}
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
