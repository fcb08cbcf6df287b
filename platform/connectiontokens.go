package platform

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform/connect"
	"github.com/quiverhq/quiver/store"
)

// The tokens of people's connections as their calls use them: read, refreshed when about to
// expire, and given to the tools that act as the caller.

// userToken is a user's access token at a provider with at least the scopes (see
// quiver.UserToken): refreshed first when it is about to expire, once however many calls ask.
func (w *Workspace) userToken(ctx context.Context, userID, provider string, scopes []string) (string, error) {
	p := w.p
	cs, err := p.connections()
	if err != nil {
		return "", err
	}
	c, err := cs.Connection(ctx, w.id, userID, provider)
	if errors.Is(err, store.ErrNotFound) {
		return "", p.authorizationRequired(provider, scopes, "")
	}
	if err != nil {
		return "", err
	}
	if missing := missingScopes(c.Scopes, scopes); len(missing) > 0 {
		return "", p.authorizationRequired(provider, scopes, "your connection lacks the scopes "+strings.Join(missing, " "))
	}
	if !c.ExpiresAt.IsZero() && c.ExpiresAt.Before(p.now().Add(refreshAhead)) {
		if c, err = w.refresh(ctx, userID, provider, scopes); err != nil {
			return "", err
		}
	}
	tok, err := p.open(c.AccessToken, connectionWhere(w.id, userID, provider, "access"))
	return string(tok), err
}

// refresh refreshes the user's connection to provider, unless another call did while this one
// waited for it; a connection the provider no longer refreshes is deleted, and the user asked
// to connect again. The calls of this process that want the same connection refreshed wait
// for one refresh (p.refreshes); those of other nodes wait for its row's lock.
func (w *Workspace) refresh(ctx context.Context, userID, provider string, scopes []string) (*store.Connection, error) {
	p := w.p
	// What the refresh needs from the store is read before the row is locked: read through the
	// pool inside the row's transaction, it waited for ever once the calls waiting for the row
	// held every connection of the pool.
	pr, err := p.provider(ctx, w.id, provider, "")
	if err != nil {
		return nil, err
	}
	secret, err := p.clientSecret(ctx, w.id, pr)
	if err != nil {
		return nil, err
	}
	key := w.id + "\x00" + userID + "\x00" + provider
	v, err, _ := p.refreshes.Do(key, func() (any, error) {
		// Shared by every call waiting for it: no one caller's end stops it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
		defer cancel()
		return w.refreshRow(ctx, userID, provider, pr, secret)
	})
	if errors.Is(err, errConnectionGone) {
		return nil, p.authorizationRequired(provider, scopes, "your connection has expired and cannot be renewed")
	}
	if err != nil {
		return nil, err
	}
	return v.(*store.Connection), nil
}

// refreshTimeout bounds a refresh: the row's lock, the provider's answer and the write.
const refreshTimeout = 30 * time.Second

// errConnectionGone is a connection the provider no longer refreshes, now deleted.
var errConnectionGone = errors.New("platform: the connection cannot be renewed")

// refreshRow refreshes the connection with its row locked, unless another call did while this
// one waited for the lock; nothing in it reads the store but through the row's transaction.
func (w *Workspace) refreshRow(ctx context.Context, userID, provider string, pr *connect.Provider, secret string) (*store.Connection, error) {
	p := w.p
	cs, _ := p.connections()
	var gone bool
	c, err := cs.UpdateConnection(ctx, w.id, userID, provider, func(cur *store.Connection) (*store.Connection, error) {
		if cur.ExpiresAt.IsZero() || !cur.ExpiresAt.Before(p.now().Add(refreshAhead)) {
			return cur, nil // refreshed by another call meanwhile
		}
		if cur.RefreshToken == "" {
			gone = true
			return nil, nil
		}
		refresh, err := p.open(cur.RefreshToken, connectionWhere(w.id, userID, provider, "refresh"))
		if err != nil {
			return nil, err
		}
		tok, err := p.connectClient().Refresh(ctx, pr, secret, string(refresh), cur.Scopes)
		if err != nil {
			if strings.Contains(err.Error(), "invalid_grant") {
				gone = true
				return nil, nil
			}
			return nil, err
		}
		return p.sealedConnection(w.id, userID, provider, tok)
	})
	if gone {
		return nil, errConnectionGone
	}
	return c, err
}

// withUserTokens is the workspace dispatcher's middleware that gives a user's call their
// tokens (quiver.UserToken).
func (w *Workspace) withUserTokens(next quiver.Handler) quiver.Handler {
	return func(ctx context.Context, c *quiver.Call) *quiver.Result {
		if a, ok := ActorFrom(ctx); ok && a.UserID != "" {
			ctx = quiver.WithUserTokens(ctx, w.tokensOf(a.UserID))
		}
		return next(ctx, c)
	}
}

// tokensOf are the tokens of a call by caller: theirs, or, for a tool that runs as a user
// (its runtime user), that user's, as it resolves that user's variables.
func (w *Workspace) tokensOf(caller string) quiver.UserTokens {
	return func(ctx context.Context, provider string, scopes []string) (string, error) {
		user := caller
		if c := quiver.CallFrom(ctx); c != nil && c.Tool() != nil && c.Tool().Spec().RunAs != "" {
			user = c.Tool().Spec().RunAs
		}
		return w.userToken(ctx, user, provider, scopes)
	}
}
