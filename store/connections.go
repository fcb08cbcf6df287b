package store

import (
	"context"
	"encoding/json"
	"time"
)

// WorkspaceConnections is a workspace's document of connection providers: the OAuth
// authorization servers its users connect their own accounts at (see platform/connect). The
// store keeps Document as the platform encodes it (a JSON object) and never reads it.
type WorkspaceConnections struct {
	WorkspaceID string
	// Document is a JSON object, at most MaxConnectionsBytes.
	Document json.RawMessage
	// Version counts the workspace's changes to its document: 1, 2, ...; 0 when none was ever
	// stored. Set by the store.
	Version   int64
	UpdatedBy string
	UpdatedAt time.Time
}

// MaxConnectionsBytes bounds a workspace's document of connection providers.
const MaxConnectionsBytes = 1 << 20

// Connection is a user's connection to a provider: the tokens the provider granted, which
// the platform seals before they reach the store (the store never opens them).
type Connection struct {
	WorkspaceID string
	UserID      string
	Provider    string
	// AccessToken and RefreshToken are sealed (see store/secret); RefreshToken is "" when the
	// provider granted none.
	AccessToken  string
	RefreshToken string
	// Scopes are the scopes granted.
	Scopes []string
	// ExpiresAt is when the access token expires; zero when the provider did not say.
	ExpiresAt time.Time
	// CreatedAt is when the user connected; UpdatedAt when the tokens last changed. Set by the
	// store.
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ConnectionFlow is a connection being made, between the user's start and the provider's
// callback: what the callback needs to finish it, found by its state.
type ConnectionFlow struct {
	// StateHash is the SHA-256 of the flow's state, in hex: the state itself, which the
	// provider's callback brings back, is not kept.
	StateHash   string
	WorkspaceID string
	UserID      string
	Provider    string
	// Verifier is the PKCE code verifier, sealed.
	Verifier string
	// Scopes are the scopes asked for.
	Scopes []string
	// ReturnTo is where the user goes once connected: a path of the console, or "".
	ReturnTo string
	// BrowserHash, when set, is the SHA-256 (hex) of a nonce the browser that started the flow
	// holds in a cookie: the flow is finished only in that browser.
	BrowserHash string
	// ExpiresAt is when the flow can no longer be finished.
	ExpiresAt time.Time
}

// MaxConnectionFlows bounds the flows a user has open in a workspace: a new one past it ends
// the oldest.
const MaxConnectionFlows = 20

// Connections keeps workspaces' connection providers and their users' connections. A store
// that keeps them implements it (both databases do).
type Connections interface {
	// WorkspaceConnections returns the workspace's providers document; Version 0 and no
	// Document when it never stored one. ErrNotFound for no such workspace.
	WorkspaceConnections(ctx context.Context, workspaceID string) (*WorkspaceConnections, error)
	// PutWorkspaceConnections stores c's Document as the workspace's next version when its
	// current version is after (ErrConflict otherwise); ErrInvalid for a Document that is not a
	// JSON object or is over MaxConnectionsBytes.
	PutWorkspaceConnections(ctx context.Context, c *WorkspaceConnections, after int64) error
	// PutConnection stores the user's connection to the provider, replacing the one it had.
	PutConnection(ctx context.Context, c *Connection) error
	// Connection returns the user's connection to the provider; ErrNotFound when none.
	Connection(ctx context.Context, workspaceID, userID, provider string) (*Connection, error)
	// UpdateConnection runs fn on the user's connection to the provider while no other
	// UpdateConnection of it runs, on any node, and stores what fn returns (nil: deletes it).
	// It is how a connection is refreshed once however many calls find it expired.
	// ErrNotFound when there is none.
	UpdateConnection(ctx context.Context, workspaceID, userID, provider string, fn func(*Connection) (*Connection, error)) (*Connection, error)
	// UserConnections returns the user's connections in the workspace, by provider.
	UserConnections(ctx context.Context, workspaceID, userID string) ([]*Connection, error)
	// DeleteConnections deletes the user's connections in the workspace, to provider or, for
	// provider "", to every one, and returns what was deleted (its tokens to revoke).
	DeleteConnections(ctx context.Context, workspaceID, userID, provider string) ([]*Connection, error)
	// StartConnectionFlow stores a flow, ending those of the user in the workspace that have
	// expired and, past MaxConnectionFlows, the oldest.
	StartConnectionFlow(ctx context.Context, f *ConnectionFlow) error
	// TakeConnectionFlow returns the flow of the state's hash and deletes it, so that a flow
	// is finished once; ErrNotFound when there is none, or it expired before now.
	TakeConnectionFlow(ctx context.Context, stateHash string, now time.Time) (*ConnectionFlow, error)
}

// The tokens of connections and the verifiers of flows are sealed as secret variables are, and
// re-sealed with them by a key rotation (Variables.RewriteSecrets), which hands each to its
// function as a Variable of one of these layers: a connection's token as
// {WorkspaceID, LayerConnection, "USER/PROVIDER", "access" or "refresh"}, a flow's verifier as
// {WorkspaceID, LayerConnectionFlow, "", StateHash}. The platform seals them at those places.
const (
	LayerConnection     VariableLayer = "connection"
	LayerConnectionFlow VariableLayer = "connection-flow"
)

// CheckConnections reports, wrapping ErrInvalid, a providers document no store keeps.
func CheckConnections(c *WorkspaceConnections) error {
	if c == nil {
		return checkWorkspaceDocument("the connection providers document", "", nil, MaxConnectionsBytes, '{')
	}
	return checkWorkspaceDocument("the connection providers document", c.WorkspaceID, c.Document, MaxConnectionsBytes, '{')
}
