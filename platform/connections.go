package platform

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/netguard"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/platform/connect"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/vars"
)

// Each person connects their own accounts at the providers a workspace declares, and the tools
// that act as them call with their token (quiver.UserToken). The providers are a versioned
// document of the workspace, an admin's; a connection is its user's, in the workspace, its
// tokens sealed with the server's keys like secret variables. A connection is made with the
// authorization code flow and PKCE: the user starts it (the flow's state is one-time, bound to
// the user, and for a flow started in a browser to that browser), the provider sends the
// browser back to the callback any node serves, and the callback exchanges the code. A token
// is refreshed once, fleet-wide, when it is about to expire; a connection is revoked at the
// provider when its user disconnects or leaves the workspace.

// Bounds of connections.
const (
	// connectionFlowTTL is how long a person has to finish a connection they started.
	connectionFlowTTL = 10 * time.Minute
	// refreshAhead is how long before its expiry an access token is refreshed.
	refreshAhead = time.Minute
)

// ConnectionProviders is a workspace's providers document as a door shows it.
type ConnectionProviders struct {
	Document connect.Document
	// Version counts the changes (0: never set); UpdatedBy and UpdatedAt are the last one's.
	Version   int64
	UpdatedBy string
	UpdatedAt time.Time
}

// connections is the store's connections, or an Unavailable error.
func (p *Platform) connections() (store.Connections, error) {
	if c, ok := p.cfg.Store.(store.Connections); ok {
		return c, nil
	}
	return nil, &Error{Kind: Unavailable, Message: "this server's store keeps no connections"}
}

// ConnectionProviders returns the actor's workspace's providers. Every member reads them (they
// connect to them); the client's secret is a variable's name, never a value.
func (p *Platform) ConnectionProviders(ctx context.Context, a Actor) (*ConnectionProviders, error) {
	cs, err := p.connections()
	if err != nil {
		return nil, err
	}
	doc, err := cs.WorkspaceConnections(ctx, a.WorkspaceID)
	if err != nil {
		return nil, storeError(err, "workspace "+a.WorkspaceID, "")
	}
	out := &ConnectionProviders{Version: doc.Version, UpdatedBy: doc.UpdatedBy, UpdatedAt: doc.UpdatedAt}
	if doc.Version == 0 {
		return out, nil
	}
	d, err := connect.Decode(doc.Document)
	if err != nil {
		return nil, &Error{Kind: Internal, Message: "the workspace's connection providers cannot be read: set them again", Cause: err}
	}
	out.Document = *d
	return out, nil
}

// SetConnectionProviders replaces the actor's workspace's providers (admins only) when they are
// at version after (Conflict otherwise). A document that does not check is refused naming the
// part (providers[1].token_url). Connections to a provider no longer declared stay stored, unused,
// until their users disconnect.
func (p *Platform) SetConnectionProviders(ctx context.Context, a Actor, doc connect.Document, after int64) (*ConnectionProviders, error) {
	if err := a.mayAdminister("connect accounts, not declare the providers"); err != nil {
		return nil, err
	}
	cs, err := p.connections()
	if err != nil {
		return nil, err
	}
	if where, err := p.connectionsSource(ctx, a.WorkspaceID); err != nil {
		return nil, storeError(err, "the fleet's configuration", "")
	} else if where != "" {
		return nil, &Error{Kind: Conflict, Field: "document", Message: "the workspace's connection providers are the connections block of " +
			where + ": change them there and run quiver apply, or apply a configuration without the block to manage them here"}
	}
	if err := doc.Check(); err != nil {
		var fe *connect.FieldError
		if errors.As(err, &fe) {
			return nil, invalid(fe.Field, fe.Message)
		}
		return nil, invalid("document", err.Error())
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, &Error{Kind: Internal, Message: "encoding the connection providers", Cause: err}
	}
	if err := cs.PutWorkspaceConnections(ctx, &store.WorkspaceConnections{WorkspaceID: a.WorkspaceID, Document: raw, UpdatedBy: a.UserID}, after); err != nil {
		return nil, storeError(err, "workspace "+a.WorkspaceID, "version")
	}
	return p.ConnectionProviders(ctx, a)
}

// provider returns the workspace's provider called name, NotFound naming field when it has
// none.
func (p *Platform) provider(ctx context.Context, workspaceID, name, field string) (*connect.Provider, error) {
	cs, err := p.connections()
	if err != nil {
		return nil, err
	}
	doc, err := cs.WorkspaceConnections(ctx, workspaceID)
	if err != nil {
		return nil, storeError(err, "workspace "+workspaceID, "")
	}
	var d *connect.Document
	if doc.Version > 0 {
		if d, err = connect.Decode(doc.Document); err != nil {
			return nil, &Error{Kind: Internal, Message: "the workspace's connection providers cannot be read: set them again", Cause: err}
		}
	}
	if d != nil {
		if pr, ok := d.Provider(name); ok {
			resolved, err := p.discovery.Resolve(ctx, p.connectClient(), pr, p.now())
			if err != nil {
				return nil, &Error{Kind: Unavailable, Field: field, Message: err.Error()}
			}
			return resolved, nil
		}
	}
	return nil, &Error{Kind: NotFound, Field: field, Message: fmt.Sprintf("the workspace declares no provider %q", clipText(name))}
}

// NewConnection is a connection a user starts.
type NewConnection struct {
	Provider string
	// Scopes are those asked for, of the provider's; none: every scope it offers.
	Scopes []string
	// RedirectURI is the callback the provider sends the browser back to: the door's, exactly
	// as registered at the provider.
	RedirectURI string
	// ReturnTo is where the browser goes once connected: a path on this server, or "".
	ReturnTo string
	// BindBrowser binds the flow to the browser that starts it: StartedConnection.Nonce is
	// to be kept in a cookie, and the callback must bring it.
	BindBrowser bool
}

// StartedConnection is a connection under way.
type StartedConnection struct {
	// URL is the provider's authorization page to send the user to.
	URL       string
	ExpiresAt time.Time
	// Nonce is what the starting browser keeps (BindBrowser), "" otherwise.
	Nonce string
}

// StartConnection starts the actor's connection to a provider: the user's own (an actor
// without a user, an operator's key, has no connections to make).
func (p *Platform) StartConnection(ctx context.Context, a Actor, in NewConnection) (*StartedConnection, error) {
	if a.UserID == "" {
		return nil, &Error{Kind: Forbidden, Message: "a connection is a person's: this key belongs to no user"}
	}
	if err := a.mayChange("read, not connect accounts"); err != nil {
		return nil, err
	}
	pr, err := p.provider(ctx, a.WorkspaceID, in.Provider, "provider")
	if err != nil {
		return nil, err
	}
	scopes := in.Scopes
	if len(scopes) == 0 {
		scopes = pr.Scopes
	}
	for i, s := range scopes {
		if !slices.Contains(pr.Scopes, s) {
			return nil, invalid(fmt.Sprintf("scopes[%d]", i), fmt.Sprintf("%q is not a scope %s offers (%s)", clipText(s), pr.Name, strings.Join(pr.Scopes, " ")))
		}
	}
	if in.ReturnTo != "" && (!strings.HasPrefix(in.ReturnTo, "/") || strings.HasPrefix(in.ReturnTo, "//") || strings.ContainsAny(in.ReturnTo, "\\\r\n")) {
		return nil, invalid("return_to", "a path on this server (/console/...) is needed: the browser goes nowhere else")
	}
	state, verifier := randomText(), connect.Verifier()
	sealed, err := p.seal([]byte(verifier), flowWhere(a.WorkspaceID, hashText(state)))
	if err != nil {
		return nil, err
	}
	f := &store.ConnectionFlow{StateHash: hashText(state), WorkspaceID: a.WorkspaceID, UserID: a.UserID, Provider: pr.Name, Verifier: sealed,
		Scopes: scopes, ReturnTo: in.ReturnTo, ExpiresAt: p.now().Add(connectionFlowTTL)}
	out := &StartedConnection{URL: connect.AuthURL(pr, in.RedirectURI, state, verifier, scopes), ExpiresAt: f.ExpiresAt}
	if in.BindBrowser {
		out.Nonce = randomText()
		f.BrowserHash = hashText(out.Nonce)
	}
	cs, _ := p.connections()
	if err := cs.StartConnectionFlow(ctx, f); err != nil {
		return nil, storeError(err, "connection to "+pr.Name, "")
	}
	return out, nil
}

// ConnectionCallback is what the provider's redirect brings back to the door's callback.
type ConnectionCallback struct {
	State, Code string
	// Error and ErrorDescription are the provider's refusal (the user said no).
	Error, ErrorDescription string
	// RedirectURI is the callback's own URI, as the flow was started with.
	RedirectURI string
	// Nonce is the browser's cookie, for a flow bound to a browser.
	Nonce string
}

// FinishedConnection is a connection made.
type FinishedConnection struct {
	WorkspaceID, UserID, Provider string
	Scopes                        []string
	ReturnTo                      string
}

// FinishConnection finishes a connection: the flow of the state, once, in the browser that
// started it when it was bound to one; the code exchanged at the provider, and the tokens
// sealed and stored as the flow's user's. Anyone may bring a callback: what it finishes is
// the flow's, and a state is good for one try.
func (p *Platform) FinishConnection(ctx context.Context, in ConnectionCallback) (*FinishedConnection, error) {
	cs, err := p.connections()
	if err != nil {
		return nil, err
	}
	if in.State == "" || len(in.State) > 200 {
		return nil, invalid("state", "the provider's answer carries no state of a connection under way")
	}
	f, err := cs.TakeConnectionFlow(ctx, hashText(in.State), p.now())
	if err != nil {
		return nil, storeError(err, "the connection under way (start it again)", "state")
	}
	if f.BrowserHash != "" && hashText(in.Nonce) != f.BrowserHash {
		return nil, &Error{Kind: Forbidden, Field: "state", Message: "this connection was started in another browser: start it again here"}
	}
	if in.Error != "" {
		return nil, &Error{Kind: Forbidden, Field: "error", Message: fmt.Sprintf("the provider did not connect the account: %s %s", clipText(in.Error), clipText(in.ErrorDescription))}
	}
	pr, err := p.provider(ctx, f.WorkspaceID, f.Provider, "state")
	if err != nil {
		return nil, err
	}
	verifier, err := p.open(f.Verifier, flowWhere(f.WorkspaceID, f.StateHash))
	if err != nil {
		return nil, err
	}
	secret, err := p.clientSecret(ctx, f.WorkspaceID, pr)
	if err != nil {
		return nil, err
	}
	tok, err := p.connectClient().Exchange(ctx, pr, secret, in.RedirectURI, in.Code, string(verifier), f.Scopes)
	if err != nil {
		return nil, &Error{Kind: Unavailable, Field: "code", Message: err.Error()}
	}
	c, err := p.sealedConnection(f.WorkspaceID, f.UserID, pr.Name, tok)
	if err != nil {
		return nil, err
	}
	waiting := p.waitingFor(ctx, f.WorkspaceID, f.UserID, pr.Name)
	if err := cs.PutConnection(ctx, c); err != nil {
		return nil, storeError(err, "connection to "+pr.Name, "")
	}
	p.resumeAuthorized(ctx, waiting)
	return &FinishedConnection{WorkspaceID: f.WorkspaceID, UserID: f.UserID, Provider: pr.Name, Scopes: tok.Scopes, ReturnTo: f.ReturnTo}, nil
}

// UserConnection is a connection as its user sees it: never its tokens.
type UserConnection struct {
	Provider    string
	Scopes      []string
	ExpiresAt   time.Time
	ConnectedAt time.Time
	RefreshedAt time.Time
}

// Connections returns the actor's own connections in the workspace.
func (p *Platform) Connections(ctx context.Context, a Actor) ([]UserConnection, error) {
	cs, err := p.connections()
	if err != nil {
		return nil, err
	}
	if a.UserID == "" {
		return []UserConnection{}, nil
	}
	list, err := cs.UserConnections(ctx, a.WorkspaceID, a.UserID)
	if err != nil {
		return nil, storeError(err, "connections", "")
	}
	out := make([]UserConnection, len(list))
	for i, c := range list {
		out[i] = UserConnection{Provider: c.Provider, Scopes: c.Scopes, ExpiresAt: c.ExpiresAt, ConnectedAt: c.CreatedAt, RefreshedAt: c.UpdatedAt}
	}
	return out, nil
}

// Disconnect deletes the actor's connection to the provider and revokes its tokens at the
// provider (a provider that cannot be reached is logged: the connection is gone from Quiver
// all the same).
func (p *Platform) Disconnect(ctx context.Context, a Actor, provider string) error {
	if a.UserID == "" {
		return &Error{Kind: Forbidden, Message: "a connection is a person's: this key belongs to no user"}
	}
	if err := a.mayChange("read, not disconnect accounts"); err != nil {
		return err
	}
	gone, err := p.dropConnections(ctx, a.WorkspaceID, a.UserID, provider)
	if err != nil {
		return err
	}
	if len(gone) == 0 {
		return &Error{Kind: NotFound, Field: "provider", Message: fmt.Sprintf("you have no connection to %q", clipText(provider))}
	}
	return nil
}

// dropConnections deletes the user's connections (to provider, or all for "") and revokes
// their tokens at the providers.
func (p *Platform) dropConnections(ctx context.Context, workspaceID, userID, provider string) ([]*store.Connection, error) {
	cs, err := p.connections()
	if err != nil {
		return nil, err
	}
	gone, err := cs.DeleteConnections(ctx, workspaceID, userID, provider)
	if err != nil {
		return nil, storeError(err, "connections", "")
	}
	for _, c := range gone {
		p.revoke(context.WithoutCancel(ctx), c)
	}
	return gone, nil
}

// revoke revokes a deleted connection's tokens at its provider, the refresh token first (it
// revokes the access tokens it granted, at most providers).
func (p *Platform) revoke(ctx context.Context, c *store.Connection) {
	pr, err := p.provider(ctx, c.WorkspaceID, c.Provider, "")
	if err != nil || pr.RevocationURL == "" {
		return
	}
	secret, err := p.clientSecret(ctx, c.WorkspaceID, pr)
	if err != nil {
		p.logger.WarnContext(ctx, "platform: a connection's tokens could not be revoked", "provider", c.Provider, "err", err)
		return
	}
	for _, t := range []struct{ sealed, hint, what string }{{c.RefreshToken, "refresh_token", "refresh"}, {c.AccessToken, "access_token", "access"}} {
		if t.sealed == "" {
			continue
		}
		tok, err := p.open(t.sealed, connectionWhere(c.WorkspaceID, c.UserID, c.Provider, t.what))
		if err == nil {
			err = p.connectClient().Revoke(ctx, pr, secret, string(tok), t.hint)
		}
		if err != nil {
			p.logger.WarnContext(ctx, "platform: a connection's token could not be revoked at its provider", "provider", c.Provider, "token", t.hint, "err", err)
		}
	}
}

// authorizationRequired is the error of a call that needs the user's connection: it says where
// to make it, on the console's connections page, which starts the flow in the user's browser.
func (p *Platform) authorizationRequired(provider string, scopes []string, reason string) error {
	e := &quiver.AuthorizationRequiredError{Provider: provider, Scopes: scopes, Reason: reason}
	if link := p.connectLink.Load(); link != nil {
		e.URL = (*link)(provider, scopes)
	}
	return e
}

// SetConnectLink sets where the platform sends a person to connect a provider (the console's
// connections page, which the door that serves it knows).
func (p *Platform) SetConnectLink(link func(provider string, scopes []string) string) {
	p.connectLink.Store(&link)
}

// unconnected is a run's CallerRules.Unconnected: the first connection a call of t needs that
// its person (the caller, or the tool's runtime user) has not made, with where to make it.
func (w *Workspace) unconnected(caller string) func(ctx context.Context, t *quiver.Tool) (*agent.Authorization, error) {
	return func(ctx context.Context, t *quiver.Tool) (*agent.Authorization, error) {
		cs, err := w.p.connections()
		if err != nil {
			return nil, nil // no connections kept: the tool's own UserToken says so
		}
		user := cmp.Or(t.Spec().RunAs, caller)
		for _, need := range t.Spec().Connections {
			c, err := cs.Connection(ctx, w.id, user, need.Provider)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
			if err != nil || len(missingScopes(c.Scopes, need.Scopes)) > 0 {
				auth := &agent.Authorization{Provider: need.Provider, Scopes: need.Scopes}
				if link := w.p.connectLink.Load(); link != nil {
					auth.URL = (*link)(need.Provider, need.Scopes)
				}
				return auth, nil
			}
		}
		return nil, nil
	}
}

// waitingFor lists the runs of the workspace that wait for user to connect provider, and
// queues for each the watch that runs it once the connection is stored (jobs.Watch: it goes on
// even when this node dies before it queues the run itself).
func (p *Platform) waitingFor(ctx context.Context, workspaceID, userID, provider string) []*store.Thread {
	j := p.Jobs()
	if j == nil {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	var out []*store.Thread
	f := store.ThreadFilter{Tag: agent.AuthorizationTag, Status: store.StatusIdle, Limit: store.MaxThreadPage}
	for n := 0; n < maxBudgetResumes; {
		threads, next, err := p.cfg.Store.Threads(ctx, workspaceID, f)
		if err != nil {
			p.logger.WarnContext(ctx, "platform: the runs waiting for a connection could not be listed", "workspace", workspaceID, "err", err)
			return out
		}
		for _, t := range threads {
			if !waitsFor(t, userID, provider) {
				continue
			}
			if _, err := j.Watch(ctx, jobs.RunArgs{WorkspaceID: workspaceID, ThreadID: t.ID, Agent: agent.CurrentAgent(t)}, answerWatch); err != nil {
				p.logger.WarnContext(ctx, "platform: a run waiting for a connection could not be watched", "thread", t.ID, "err", err)
			}
			out = append(out, t)
		}
		if n += len(threads); next == "" {
			return out
		}
		f.Cursor = next
	}
	return out
}

// resumeAuthorized has the runs that waited for a connection, now made, go on: each runs the
// call it waited with, once.
func (p *Platform) resumeAuthorized(ctx context.Context, threads []*store.Thread) {
	j := p.Jobs()
	for _, t := range threads {
		if _, err := j.Continue(context.WithoutCancel(ctx), jobs.RunArgs{WorkspaceID: t.WorkspaceID, ThreadID: t.ID, Agent: agent.CurrentAgent(t)}); err != nil {
			p.logger.WarnContext(ctx, "platform: a run waiting for a connection could not be queued; its watch queues it", "thread", t.ID, "err", err)
		}
	}
}

// waitsFor reports whether thread t's last run waits for user to connect provider.
func waitsFor(t *store.Thread, userID, provider string) bool {
	st := agent.ReadState(t)
	if st.Outcome == nil || st.Outcome.Pending == nil || st.Outcome.Pending.Authorization == nil ||
		st.Outcome.Pending.Authorization.Provider != provider {
		return false
	}
	var c caller
	_ = json.Unmarshal(st.Caller, &c)
	return c.User == userID || (c.User == "" && t.UserID == userID)
}

// awaitConnection waits until the caller of ctx has connected provider with the scopes, or ctx
// ends: the connection is stored by whichever node served the callback, so the store is asked,
// every connectionPoll.
func (p *Platform) awaitConnection(ctx context.Context, workspaceID, provider string, scopes []string) error {
	a, ok := ActorFrom(ctx)
	if !ok || a.UserID == "" {
		return &Error{Kind: Forbidden, Message: "a connection is a person's: this call belongs to no user"}
	}
	cs, err := p.connections()
	if err != nil {
		return err
	}
	tick := time.NewTicker(connectionPoll)
	defer tick.Stop()
	for {
		c, err := cs.Connection(ctx, workspaceID, a.UserID, provider)
		if err == nil && len(missingScopes(c.Scopes, scopes)) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// connectionPoll is how often a call waiting for its person's connection asks the store.
const connectionPoll = 500 * time.Millisecond

func missingScopes(granted, wanted []string) []string {
	var out []string
	for _, s := range wanted {
		if !slices.Contains(granted, s) {
			out = append(out, s)
		}
	}
	return out
}

// sealedConnection is tok as the store keeps it: its tokens sealed.
func (p *Platform) sealedConnection(workspaceID, userID, provider string, tok *connect.Token) (*store.Connection, error) {
	access, err := p.seal([]byte(tok.Access), connectionWhere(workspaceID, userID, provider, "access"))
	if err != nil {
		return nil, err
	}
	c := &store.Connection{WorkspaceID: workspaceID, UserID: userID, Provider: provider, AccessToken: access, Scopes: tok.Scopes, ExpiresAt: tok.Expiry}
	if tok.Refresh != "" {
		if c.RefreshToken, err = p.seal([]byte(tok.Refresh), connectionWhere(workspaceID, userID, provider, "refresh")); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// connectionWhere is what a connection's token is sealed for: a token sealed for one user's
// connection does not open as another's. A key rotation re-seals it there (see
// store.LayerConnection).
func connectionWhere(workspaceID, userID, provider, which string) string {
	return vars.Where(workspaceID, store.LayerConnection, userID+"/"+provider, which)
}

// flowWhere is what a flow's verifier is sealed for.
func flowWhere(workspaceID, stateHash string) string {
	return vars.Where(workspaceID, store.LayerConnectionFlow, "", stateHash)
}

// clientSecret is the provider's client secret: the workspace's secret variable it names, or
// "" for a public client.
func (p *Platform) clientSecret(ctx context.Context, workspaceID string, pr *connect.Provider) (string, error) {
	if pr.ClientSecretVariable == "" {
		return "", nil
	}
	if p.cfg.Resolver == nil {
		return "", &Error{Kind: Unavailable, Message: "this server keeps no variables: the client secret of " + pr.Name + " cannot be read"}
	}
	v := quiver.Variable{Name: pr.ClientSecretVariable, Type: quiver.VarSecret}
	val, ok, err := p.cfg.Resolver.ResolveVariable(ctx, quiver.Scope{WorkspaceID: workspaceID}, v)
	if err != nil || !ok || val == "" {
		return "", &Error{Kind: Unavailable, Message: fmt.Sprintf("the client secret of %s, the workspace's secret variable %s, is not set", pr.Name, pr.ClientSecretVariable), Cause: err}
	}
	return val, nil
}

// connectClient makes the providers' requests, off the networks behind the server but for the
// hosts the operator allows.
func (p *Platform) connectClient() *connect.Client {
	return &connect.Client{Transport: netguard.Transport(p.cfg.OpenAPIInternal, "quiver serve --openapi-internal-hosts")}
}

func (p *Platform) seal(plain []byte, where string) (string, error) {
	if p.cfg.Resolver == nil || p.cfg.Resolver.Keys == nil {
		return "", &Error{Kind: Unavailable, Message: "this server has no secret keys: connections cannot be kept"}
	}
	return p.cfg.Resolver.Keys.Seal(plain, where)
}

func (p *Platform) open(sealed, where string) ([]byte, error) {
	if p.cfg.Resolver == nil || p.cfg.Resolver.Keys == nil {
		return nil, &Error{Kind: Unavailable, Message: "this server has no secret keys: connections cannot be read"}
	}
	b, err := p.cfg.Resolver.Keys.Open(sealed, where)
	if err != nil {
		return nil, &Error{Kind: Internal, Message: "a connection's token cannot be opened with this server's keys", Cause: err}
	}
	return b, nil
}

// randomText is 32 random bytes, base64url: a state or a nonce.
func randomText() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// hashText is the SHA-256 of s, hex: what is stored of a state or a nonce.
func hashText(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func clipText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
