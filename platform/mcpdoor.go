package platform

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
)

// The MCP door is served over HTTP (server/) and over standard input and output (quiver mcp
// stdio); what it serves, whatever the transport, is assembled here once.

// MCPOptions are opts (nil: the defaults) completed for the MCP server of workspace
// workspaceID, at any transport: the catalog's prompts that other prompts may call as tools,
// the threads' files as resources (read as the API reads them, for the call's actor: see
// WithActor), and a thread per session, tagged "mcp", that its calls are recorded on
// (SessionThread). A transport that keeps sessions across requests replaces Session with its
// own, which calls SessionThread once per session.
func (p *Platform) MCPOptions(workspaceID string, opts *mcp.ServerOptions) mcp.ServerOptions {
	o := mcp.ServerOptions{}
	if opts != nil {
		o = *opts
	}
	o.Prompts = append(slices.Clip(o.Prompts), catalogPrompts(p.Catalog())...)
	o.ThreadFiles = func(ctx context.Context, threadID, path string) ([]byte, string, error) {
		return p.threadFileResource(ctx, workspaceID, threadID, path)
	}
	if o.MaxResourceBytes == 0 {
		o.MaxResourceBytes = maxResourceBytes
	}
	o.Session = func(ctx context.Context, info mcp.SessionInfo) (quiver.Scope, error) {
		return p.SessionThread(ctx, workspaceID, info)
	}
	if p.cfg.Resolver != nil && p.cfg.Resolver.Keys != nil {
		// Every node holds the keyring, so any node takes the answer to another's question.
		o.States = workspaceSealer{keys: p.cfg.Resolver.Keys, workspaceID: workspaceID}
	}
	if leases, ok := p.cfg.Store.(store.Leases); ok {
		o.Answers = answerLeases{leases: leases, workspaceID: workspaceID}
	}
	if _, ok := p.cfg.Store.(store.Connections); ok {
		o.AwaitConnection = func(ctx context.Context, provider string, scopes []string) error {
			return p.awaitConnection(ctx, workspaceID, provider, scopes)
		}
	}
	return o
}

// maxResourceBytes is the cap of a file resources/read answers with: the cap of a file in a
// thread's file system, which a file the API serves was held to when it was written.
var maxResourceBytes = store.DefaultFileLimits().MaxFileBytes

// workspaceSealer seals an MCP server's request states with the platform's keyring, bound to
// the server's workspace: one sealed for another workspace does not open.
type workspaceSealer struct {
	keys        *secret.Keyring
	workspaceID string
}

func (w workspaceSealer) Seal(plain []byte, where string) (string, error) {
	return w.keys.Seal(plain, where+":"+w.workspaceID)
}

func (w workspaceSealer) Open(sealed, where string) ([]byte, error) {
	return w.keys.Open(sealed, where+":"+w.workspaceID)
}

// answerLeases takes each answer to an MCP confirmation once across the fleet: a lease named
// after the question, which a second acquisition of the same name finds taken (ErrConflict).
type answerLeases struct {
	leases      store.Leases
	workspaceID string
}

// answerLease is the kind of the leases that mark an answer taken.
const answerLease = "mcp-answer"

// answerSkew outlasts the request state's expiry, which a node's clock set, by more than the
// nodes' and the database's clocks differ: the lease must not lapse while the state opens.
const answerSkew = 5 * time.Minute

func (a answerLeases) Take(ctx context.Context, id string, expires time.Time) (bool, error) {
	ttl := min(max(time.Until(expires)+answerSkew, store.MinLeaseTTL), store.MaxLeaseTTL)
	l := &store.Lease{ID: "mcpans_" + id, WorkspaceID: a.workspaceID, Kind: answerLease}
	err := a.leases.AcquireLease(ctx, l, ttl, store.NoLeaseLimits)
	if errors.Is(err, store.ErrConflict) {
		return false, nil
	}
	return err == nil, err
}

// SessionThread makes the thread of workspace workspaceID that an MCP session's calls are
// recorded on (CallThread), for the call's actor (WithActor; none: an operator of the
// workspace), tagged "mcp" and "mcp-client:" with the name the client gave. A request of the
// sessionless protocol that names a thread (info.ThreadID) is recorded there, when it is one
// of the workspace's; one that names none, on its caller's thread of the day (callerThread).
func (p *Platform) SessionThread(ctx context.Context, workspaceID string, info mcp.SessionInfo) (quiver.Scope, error) {
	tags := []string{"mcp"}
	if info.ClientName != "" {
		tags = append(tags, "mcp-client:"+truncate(info.ClientName, 100))
	}
	if info.Sessionless && info.ThreadID == "" {
		return p.callerThread(ctx, actorIn(ctx, workspaceID), info.ClientName, tags)
	}
	// A session whose first request is cancelled must still get its thread, once.
	scope, err := p.CallThread(context.WithoutCancel(ctx), actorIn(ctx, workspaceID), info.ThreadID, tags...)
	var pe *Error
	if errors.As(err, &pe) && pe.Kind == NotFound && info.ThreadID != "" {
		return quiver.Scope{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("the thread %q, which the request names (_meta %s), is not one of this workspace's", truncate(info.ThreadID, 64), mcp.ThreadMetaKey)}
	}
	if err != nil {
		return quiver.Scope{}, fmt.Errorf("creating the session's thread: %w", causeOf(err))
	}
	return scope, nil
}

// actorIn is the actor ctx carries, or an operator when it carries none, acting in
// workspaceID: an MCP server is a workspace's, and never reaches another's.
func actorIn(ctx context.Context, workspaceID string) Actor {
	a, ok := ActorFrom(ctx)
	if !ok {
		a = Operator(workspaceID, "")
	}
	a.WorkspaceID = workspaceID
	return a
}

// causeOf is what failed underneath an Error, whose words are for a client (an internal
// failure's say nothing of it), for a door that logs it.
func causeOf(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Cause != nil {
		return e.Cause
	}
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// threadFileResource reads a thread's file for the MCP resource template of a workspace's MCP
// server (mcp.ThreadFileTemplate), as GET /v1/threads/{id}/files/{path} does: the same read
// (ThreadFile), authorized the same way, the thread being one of the workspace's. A thread of
// another workspace, or a missing thread or file, is mcp.ErrResourceNotFound, which says
// nothing more; a path the file system refuses (or a directory) is invalid params.
func (p *Platform) threadFileResource(ctx context.Context, workspaceID, threadID, path string) ([]byte, string, error) {
	data, fi, err := p.ThreadFile(ctx, actorIn(ctx, workspaceID), threadID, path)
	var pe *Error
	switch {
	case err == nil:
		return data, cmp.Or(fi.MimeType, "application/octet-stream"), nil
	case errors.As(err, &pe) && pe.Kind == NotFound:
		return nil, "", mcp.ErrResourceNotFound
	case errors.As(err, &pe) && pe.Kind == Invalid:
		return nil, "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: pe.Error()}
	}
	return nil, "", err
}

// catalogPrompts are the catalog's prompts that other prompts may call as tools
// (expose_as_tool: true), sorted by name, as every workspace's MCP server serves them: each
// with its definition's system text (never resolved: no variable's value leaves Quiver) and
// its argument schema.
func catalogPrompts(c *agent.Catalog) []mcp.Prompt {
	if c == nil {
		return nil
	}
	var out []mcp.Prompt
	for name, p := range c.Prompts {
		if p == nil || !p.ExposeAsTool {
			continue
		}
		out = append(out, mcp.Prompt{Name: cmp.Or(p.Name, name), Description: p.Description, System: p.System, Args: p.Args})
	}
	slices.SortFunc(out, func(a, b mcp.Prompt) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// callerThread is where the calls of a client of the sessionless MCP protocol that name no
// thread are recorded: one thread per caller (its key, or its user), client name and day (UTC),
// tagged as a session's. Its id is derived from them, so every node records on the same thread
// without asking another: the first call of the day makes it, and a node that has seen it
// since writes nothing more for it. (A thread per request would cost each call a write, and
// leave a workspace with a thread per call.)
func (p *Platform) callerThread(ctx context.Context, a Actor, client string, tags []string) (quiver.Scope, error) {
	day := stamp.Now(ctx).UTC().Truncate(24 * time.Hour)
	seed := strings.Join([]string{a.WorkspaceID, a.KeyID, a.UserID, a.Who, client, day.Format(time.DateOnly)}, "\x00")
	id := ids.Derived(store.PrefixThread, day, []byte(seed))
	scope := quiver.Scope{WorkspaceID: a.WorkspaceID, UserID: a.UserID, ThreadID: id}
	if p.callerThreads.seen(id) {
		return scope, nil
	}
	th := &store.Thread{ID: id, WorkspaceID: a.WorkspaceID, UserID: a.UserID, Tags: slices.Concat(tags, []string{"mcp-sessionless"})}
	// Made once, whoever asks first (another node, or another call here, may have made it).
	if err := p.cfg.Store.CreateThread(context.WithoutCancel(ctx), th); err != nil {
		if _, lookErr := p.cfg.Store.Thread(ctx, a.WorkspaceID, id); lookErr != nil {
			return quiver.Scope{}, fmt.Errorf("creating the caller's thread: %w", err)
		}
	}
	p.callerThreads.add(id)
	return scope, nil
}

// threadSet remembers the caller threads a node knows exist, up to a bound (then it forgets
// them all, and each is looked up again once).
type threadSet struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

const maxKnownCallerThreads = 10000

func (s *threadSet) seen(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ids[id]
	return ok
}

func (s *threadSet) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil || len(s.ids) >= maxKnownCallerThreads {
		s.ids = map[string]struct{}{}
	}
	s.ids[id] = struct{}{}
}
