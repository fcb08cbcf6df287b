package mcp

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
)

// A remote with a Connection is called as the person who calls: each call carries that
// person's token at the provider (quiver.UserToken) as its bearer token. MCP servers bind a
// session to the user of its first request (the go-sdk refuses a session whose requests
// change user), so each token has a session of its own, opened at its first call and closed
// when idle; the remote's own session (its headers or OAuth) lists the tools. Sessions are
// keyed by the token's hash: a refreshed token opens a new session, and no call reaches a
// session opened with another person's token.

// Bounds of a remote's sessions of people.
const (
	// maxPeopleSessions is how many sessions of people a remote keeps open: past it, the one
	// used least recently is closed.
	maxPeopleSessions = 256
	// personIdle is how long a person's session stays open unused.
	personIdle = 5 * time.Minute
)

// people are a remote's sessions of people, by the hash of their token.
type people struct {
	mu       sync.Mutex
	sessions map[[32]byte]*personSession
	closed   bool
}

// personSession is one token's session: ready is closed once the session is connected (cs)
// or failed to (err).
type personSession struct {
	ready chan struct{}
	cs    *sdk.ClientSession
	err   error
	used  time.Time
}

// personalSession is the session of the person calling (their token at the remote's
// provider), opened if need be: an *quiver.AuthorizationRequiredError when they have not
// connected the provider.
func (r *remote) personalSession(ctx context.Context) (*sdk.ClientSession, error) {
	need := r.cfg.Connection
	tok, err := quiver.UserToken(ctx, need.Provider, need.Scopes...)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256([]byte(tok))
	s, opener := r.people.take(key)
	if opener {
		s.cs, s.err = r.connectPerson(ctx, tok)
		close(s.ready)
		if s.err != nil {
			r.people.drop(key, s)
		} else {
			go r.watchPerson(key, s)
		}
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if s.err != nil {
		return nil, quiver.Fail(quiver.CodeToolError, "the MCP server %q did not open a session with your %s connection: %v", r.cfg.Name, need.Provider, s.err)
	}
	return s.cs, nil
}

// take returns key's session, and whether the caller is to open it (it is new). Making room
// closes the sessions idle too long, then the one used least recently.
func (pp *people) take(key [32]byte) (s *personSession, opener bool) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	now := time.Now()
	if s := pp.sessions[key]; s != nil {
		s.used = now
		return s, false
	}
	if pp.sessions == nil {
		pp.sessions = map[[32]byte]*personSession{}
	}
	var oldest [32]byte
	var oldestUsed time.Time
	for k, o := range pp.sessions {
		if now.Sub(o.used) > personIdle {
			pp.closeLocked(k, o)
			continue
		}
		if oldestUsed.IsZero() || o.used.Before(oldestUsed) {
			oldest, oldestUsed = k, o.used
		}
	}
	if len(pp.sessions) >= maxPeopleSessions {
		pp.closeLocked(oldest, pp.sessions[oldest])
	}
	s = &personSession{ready: make(chan struct{}), used: now}
	if pp.closed {
		s.err = fmt.Errorf("the server is shutting down")
		close(s.ready)
		return s, false
	}
	pp.sessions[key] = s
	return s, true
}

// drop forgets key's session s (not a newer one of the same key).
func (pp *people) drop(key [32]byte, s *personSession) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.sessions[key] == s {
		delete(pp.sessions, key)
	}
}

// closeLocked forgets key's session and closes it, once it is connected.
func (pp *people) closeLocked(key [32]byte, s *personSession) {
	delete(pp.sessions, key)
	go func() {
		<-s.ready
		if s.cs != nil {
			_ = s.cs.Close()
		}
	}()
}

// closeAll closes every session, and opens no more.
func (pp *people) closeAll() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.closed = true
	for k, s := range pp.sessions {
		pp.closeLocked(k, s)
	}
}

// watchPerson forgets a person's session once it ends, closed or lost: their next call opens
// another.
func (r *remote) watchPerson(key [32]byte, s *personSession) {
	_ = s.cs.Wait()
	r.people.drop(key, s)
}

// connectPerson opens a session with the person's token, within the remote's connection
// timeout and the call's time. The session outlives the call: it is not bound to ctx.
func (r *remote) connectPerson(ctx context.Context, token string) (*sdk.ClientSession, error) {
	cctx, cancel := context.WithTimeout(context.Background(), r.im.opts.ConnectTimeout)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	opts := r.clientOptions(cctx)
	opts.KeepAlive = 0 // an idle session is closed, a lost one reopened by the next call
	opts.ToolListChangedHandler = nil
	client := sdk.NewClient(r.implementation(), opts)
	headers := withoutAuthorization(r.cfg.Headers)
	if headers == nil {
		headers = map[string]string{}
	}
	headers["Authorization"] = "Bearer " + token
	hc := &http.Client{Transport: headerTransport{headers: headers, next: http.DefaultTransport}}
	cs, err := client.Connect(cctx, &sdk.StreamableClientTransport{Endpoint: r.cfg.URL, HTTPClient: hc, MaxRetries: 2}, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return cs, nil
}

// withoutAuthorization is headers without an Authorization header.
func withoutAuthorization(headers map[string]string) map[string]string {
	out := maps.Clone(headers)
	for k := range out {
		if strings.EqualFold(k, "Authorization") {
			delete(out, k)
		}
	}
	return out
}
