package quiver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// A tool that acts as the person who asked (reads their mailbox, opens an issue as them) calls
// UserToken for that person's access token at a provider: the account they connected (see
// platform/connect). The token is the calling user's, or the runtime user's for a tool that runs
// as one; it is masked in the call's result, arguments and messages as a secret variable is.
// A person who has not connected the provider (or not with the scopes asked for) is asked to:
// UserToken returns an *AuthorizationRequiredError, which the tool returns as it is, and the
// call is answered with the code authorization_required and the URL where the person connects.

// CodeAuthorizationRequired: the tool acts as the calling user at a provider the user has not
// connected, or not with the scopes it needs; the result's Meta says where to connect
// ({"provider", "authorization_url"}). Calling again once connected runs the tool.
const CodeAuthorizationRequired Code = "authorization_required"

// UserTokens gives a call the calling user's access token at a provider, with at least the
// scopes; the platform sets it on every call a user makes (WithUserTokens).
type UserTokens func(ctx context.Context, provider string, scopes []string) (string, error)

type userTokensKey struct{}

// WithUserTokens returns ctx carrying the source of the calling user's tokens.
func WithUserTokens(ctx context.Context, src UserTokens) context.Context {
	return context.WithValue(ctx, userTokensKey{}, src)
}

// UserToken returns the calling user's access token at provider, with at least the scopes
// given, fresh. Without a connection it returns an *AuthorizationRequiredError: return it from
// the tool. The token is added to the secrets the call masks; call UserToken from the tool's
// own goroutine, before it reports progress from others.
func UserToken(ctx context.Context, provider string, scopes ...string) (string, error) {
	src, _ := ctx.Value(userTokensKey{}).(UserTokens)
	if src == nil {
		return "", &AuthorizationRequiredError{Provider: provider, Scopes: scopes,
			Reason: "this call has no user whose connections it could use"}
	}
	tok, err := src(ctx, provider, scopes)
	if err != nil {
		return "", err
	}
	if c := CallFrom(ctx); c != nil && tok != "" {
		c.secrets = []*masker{newMasker(c.secrets, []string{tok})}
	}
	return tok, nil
}

// AuthorizationRequiredError is a call that needs the calling user's connection to Provider
// (with Scopes) that they have not made. URL, when set, is where they make it: the provider's
// authorization page, coming back to Quiver, which stores the connection.
type AuthorizationRequiredError struct {
	Provider string
	Scopes   []string
	URL      string
	// Reason says why, when it is not that the user never connected ("the connection lacks
	// the scope repo").
	Reason string
}

// Error says what the person must do, in words a model can pass on.
func (e *AuthorizationRequiredError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "this call acts as you at %s", e.Provider)
	if len(e.Scopes) > 0 {
		fmt.Fprintf(&b, " (scopes %s)", strings.Join(e.Scopes, " "))
	}
	if e.Reason != "" {
		fmt.Fprintf(&b, ", and %s", e.Reason)
	} else {
		b.WriteString(", which you have not connected")
	}
	if e.URL != "" {
		fmt.Fprintf(&b, ": connect it at %s, then call again", e.URL)
	}
	return b.String()
}

// authorizationResult is the result of a call that needs a connection: its Meta says where
// to make it.
func authorizationResult(e *AuthorizationRequiredError) *Result {
	r := &Result{Status: StatusError, Code: CodeAuthorizationRequired, Error: e.Error()}
	meta := map[string]any{"provider": e.Provider}
	if e.URL != "" {
		meta["authorization_url"] = e.URL
	}
	if len(e.Scopes) > 0 {
		meta["scopes"] = e.Scopes
	}
	r.Meta, _ = json.Marshal(meta)
	return r
}
