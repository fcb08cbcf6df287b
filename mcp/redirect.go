package mcp

import (
	"slices"
	"strings"
)

// OAuthCallbackPath is where Quiver receives users back from the authorization servers of
// remote MCP servers: quiver serve mounts [Callbacks] there, and a command that runs no server
// listens there while a user authorizes.
const OAuthCallbackPath = "/oauth/callback"

// WithOAuthRedirect returns remotes with the redirect URL of those with OAuth and none set to
// baseURL + [OAuthCallbackPath]; remotes is not modified.
func WithOAuthRedirect(remotes []Remote, baseURL string) []Remote {
	out := slices.Clone(remotes)
	for i, r := range out {
		if r.OAuth == nil || r.OAuth.RedirectURL != "" {
			continue
		}
		o := *r.OAuth
		o.RedirectURL = strings.TrimSuffix(baseURL, "/") + OAuthCallbackPath
		out[i].OAuth = &o
	}
	return out
}
