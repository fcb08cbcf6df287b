package mcp

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// remote is the connection to one remote server.
type remote struct {
	im     *Importer
	cfg    Remote
	logger *slog.Logger

	oauth *auth.AuthorizationCodeHandler // nil without OAuth

	mu      sync.Mutex
	session *sdk.ClientSession
	lastErr string
	lastTry time.Time // when the last connection attempt failed or the connection was lost
	authURL string    // a user must open it to authorize Quiver
	ready   func()    // ends the first connection attempt's wait in Import
	// attempt is open while a connection attempt is under way, or due at once (the first,
	// and one after a lost connection); nil while the remote is connected or waits out a
	// backoff after a failure. A call that finds no connection waits on it (see awaitSession).
	attempt  chan struct{}
	tools    map[string]*importedTool // by Quiver name
	progress sync.Map                 // progress token -> context of the call it belongs to
	syncMu   sync.Mutex               // one tool list synchronisation at a time
	people   people                   // the sessions of people, with a Connection
}

type importedTool struct {
	tool *quiver.Tool
	def  string // the remote definition it was built from, to notice changes
}

func (r *remote) loop(ctx context.Context, first chan struct{}) {
	backoff := r.im.opts.MinBackoff
	signal := sync.OnceFunc(func() { close(first) })
	defer signal()
	r.mu.Lock()
	r.ready = signal
	r.mu.Unlock()
	defer r.endAttempt()
	for ctx.Err() == nil {
		r.beginAttempt()
		cs, err := r.connect(ctx)
		r.endAttempt()
		if err != nil {
			r.setLastErr(err.Error())
			r.logger.Warn("mcp: cannot connect to the MCP server; retrying", "err", err, "retry_in", backoff)
			signal()
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, r.im.opts.MaxBackoff)
			continue
		}
		backoff = r.im.opts.MinBackoff
		r.logger.Info("mcp: connected to the MCP server")
		signal()
		r.lost(ctx, cs, cs.Wait())
	}
}

// setLastErr records why the last connection attempt failed, or the connection was lost, and
// when.
func (r *remote) setLastErr(msg string) {
	r.mu.Lock()
	r.lastErr, r.lastTry = msg, time.Now()
	r.mu.Unlock()
}

// lost takes note of a connection that ended, with waitErr: the remote reconnects at once.
func (r *remote) lost(ctx context.Context, cs *sdk.ClientSession, waitErr error) {
	r.mu.Lock()
	if r.session == cs {
		r.session = nil
	}
	if r.attempt == nil {
		r.attempt = make(chan struct{}) // reconnecting at once: calls wait for it
	}
	if ctx.Err() == nil {
		r.lastErr, r.lastTry = closedWhy(waitErr), time.Now()
	}
	r.mu.Unlock()
	if ctx.Err() == nil {
		r.logger.Warn("mcp: the MCP server disconnected; reconnecting", "err", waitErr)
	}
}

// closedWhy says why a connection closed.
func closedWhy(waitErr error) string {
	if waitErr == nil {
		return "the connection closed"
	}
	return "the connection closed: " + waitErr.Error()
}

// beginAttempt marks a connection attempt under way, so that calls wait for its end.
func (r *remote) beginAttempt() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.attempt == nil {
		r.attempt = make(chan struct{})
	}
}

// endAttempt wakes the calls waiting for the attempt: connected (the session and the tools
// are in place by then) or not (lastErr says why, once the caller has set it).
func (r *remote) endAttempt() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.attempt != nil {
		close(r.attempt)
		r.attempt = nil
	}
}

// connecting is the end of the connection attempt under way, or nil when none is.
func (r *remote) connecting() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.attempt == nil {
		return nil
	}
	return r.attempt
}

// awaitSession is the remote's connection, waiting for it while an attempt to connect is
// under way, at most quiver.DefaultToolWait and within ctx (as a call made at start-up waits
// in Import): nil when the remote stays unconnected.
func (r *remote) awaitSession(ctx context.Context) *sdk.ClientSession {
	deadline := time.NewTimer(quiver.DefaultToolWait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		cs, attempt := r.session, r.attempt
		r.mu.Unlock()
		if cs != nil || attempt == nil {
			return cs
		}
		select {
		case <-attempt:
		case <-deadline.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

func (r *remote) connect(ctx context.Context) (*sdk.ClientSession, error) {
	client := sdk.NewClient(r.implementation(), r.clientOptions(ctx))
	// The attempt's timeout stops while a user authorizes (OAuth), which takes minutes.
	cctx, cancel := withPausableTimeout(ctx, r.im.opts.ConnectTimeout)
	defer cancel()
	cs, err := client.Connect(cctx, r.transport(), nil)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), context.DeadlineExceeded) {
		return nil, fmt.Errorf("connecting: no answer within %s", r.im.opts.ConnectTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	if err := r.sync(cctx, cs); err != nil {
		_ = cs.Close()
		if ctx.Err() == nil && errors.Is(context.Cause(cctx), context.DeadlineExceeded) {
			return nil, fmt.Errorf("listing tools: no answer within %s", r.im.opts.ConnectTimeout)
		}
		return nil, err
	}
	r.mu.Lock()
	r.session = cs
	r.lastErr, r.lastTry = "", time.Time{}
	r.mu.Unlock()
	r.im.changed()
	return cs, nil
}

// implementation is how Quiver names itself to the remote.
func (r *remote) implementation() *sdk.Implementation {
	return &sdk.Implementation{Name: cmp.Or(r.im.opts.ClientName, "quiver"), Version: cmp.Or(r.im.opts.ClientVersion, "dev")}
}

// clientOptions are the options of the client that connects to the remote: its handlers of
// what the server sends (tool list changes, log messages, progress), and its keep-alive.
func (r *remote) clientOptions(ctx context.Context) *sdk.ClientOptions {
	copts := &sdk.ClientOptions{
		Logger:             nil,
		ElicitationHandler: r.im.opts.Elicit,
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			// Not on the connection's goroutine: listing needs it to read the answer.
			go r.resync(ctx)
		},
		//lint:ignore SA1019 servers of the protocol versions before 2026-07-28 still log this way
		LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) {
			r.logger.Info("mcp: log message from the MCP server", "level", req.Params.Level, "logger", req.Params.Logger, "data", req.Params.Data)
		},
		ProgressNotificationHandler: r.progressed,
	}
	if r.im.opts.KeepAlive > 0 {
		copts.KeepAlive = r.im.opts.KeepAlive
	}
	return copts
}

// progressed reports a call's progress to the caller of the call it belongs to.
func (r *remote) progressed(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
	if callCtx, ok := r.progress.Load(req.Params.ProgressToken); ok {
		quiver.ReportProgress(callCtx.(context.Context), req.Params.Progress, req.Params.Total, req.Params.Message)
	}
}

// transport is how the remote is reached: its command's stdio, or streamable HTTP with its
// headers and OAuth.
func (r *remote) transport() sdk.Transport {
	if r.cfg.Command == "" {
		hc := &http.Client{Transport: headerTransport{headers: r.cfg.Headers, next: http.DefaultTransport}}
		t := &sdk.StreamableClientTransport{Endpoint: r.cfg.URL, HTTPClient: hc, MaxRetries: 2}
		if r.oauth != nil {
			t.OAuthHandler = r.oauth
		}
		return t
	}
	cmd := exec.Command(r.cfg.Command, r.cfg.Args...)
	cmd.Dir = r.cfg.Dir
	cmd.Stderr = r.cfg.Stderr
	if len(r.cfg.Env) > 0 {
		cmd.Env = os.Environ()
		for k, v := range r.cfg.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
}

// notConnected is the error result of a call to the remote while it has no connection: what
// went wrong last and when, so that a caller can tell a remote that is down from a tool that
// does not exist. name is the tool as the caller named it.
func (r *remote) notConnected(name string) error {
	r.mu.Lock()
	lastErr, lastTry, authURL := r.lastErr, r.lastTry, r.authURL
	r.mu.Unlock()
	why := lastErr
	switch {
	case why == "" && authURL != "":
		why = "it waits for a user to authorize Quiver at " + authURL
	case why == "":
		why = "it is connecting"
	}
	if !lastTry.IsZero() {
		why += " (last tried " + lastTry.UTC().Format(time.RFC3339) + ")"
	}
	return quiver.Fail(quiver.CodeToolError, "the tool %q is on the MCP server %q, which is not connected: %s; Quiver keeps reconnecting, so try again shortly",
		truncate(name, 128), r.cfg.Name, why)
}

// explain is the Importer's Registry.Explain function: a tool named under a remote's prefix
// that the registry does not hold is missing because its remote is not connected (its tools
// are registered when it connects); a connected remote knows nothing of it.
func (im *Importer) explain(name string) error {
	for _, r := range im.remotes {
		if !strings.HasPrefix(name, r.cfg.Name+".") {
			continue
		}
		r.mu.Lock()
		connected := r.session != nil
		r.mu.Unlock()
		if connected {
			return nil
		}
		if attempt := r.connecting(); attempt != nil {
			return &quiver.ToolPending{Err: r.notConnected(name), Ready: attempt}
		}
		return r.notConnected(name)
	}
	return nil
}

func hasHeader(h map[string]string, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

type headerTransport struct {
	headers map[string]string
	next    http.RoundTripper
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	return t.next.RoundTrip(req)
}

func (r *remote) resync(ctx context.Context) {
	r.mu.Lock()
	cs := r.session
	r.mu.Unlock()
	if cs == nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, r.im.opts.ConnectTimeout)
	defer cancel()
	if err := r.sync(sctx, cs); err != nil {
		r.logger.Warn("mcp: re-listing the tools of the MCP server failed", "err", err)
	}
}

// sync lists the remote's tools and brings the registry in line: new tools registered,
// changed ones replaced, vanished ones removed.
func (r *remote) sync(ctx context.Context, cs *sdk.ClientSession) error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	var remoteTools []*sdk.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing tools: %w", err)
		}
		remoteTools = append(remoteTools, t)
	}
	if r.register(r.wanted(remoteTools)) && r.im.opts.OnChange != nil {
		r.im.opts.OnChange()
	}
	return nil
}

// wanted are the tools the remote's list makes, by Quiver name: those unchanged kept as they
// are, the others made anew.
func (r *remote) wanted(remoteTools []*sdk.Tool) map[string]*importedTool {
	want := map[string]*importedTool{}
	for _, rt := range remoteTools {
		def, _ := json.Marshal(rt)
		name := r.quiverName(rt.Name)
		if _, dup := want[name]; dup {
			r.logger.Warn("mcp: two remote tools map to one name; keeping the first", "tool", rt.Name, "name", name)
			continue
		}
		r.mu.Lock()
		old := r.tools[name]
		r.mu.Unlock()
		if old != nil && old.def == string(def) {
			want[name] = old
			continue
		}
		t, err := r.toolFor(name, rt)
		if err != nil {
			r.logger.Warn("mcp: cannot import a remote tool", "tool", rt.Name, "err", err)
			continue
		}
		want[name] = &importedTool{tool: t, def: string(def)}
	}
	return want
}

// register brings the registry in line with the tools wanted, and reports whether it changed.
func (r *remote) register(want map[string]*importedTool) (changed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, old := range r.tools {
		if nt, ok := want[name]; !ok || nt != old {
			r.im.reg.Unregister(name)
			changed = true
		}
	}
	for name, nt := range want {
		if old := r.tools[name]; old == nt {
			continue
		}
		if err := r.im.reg.Register(nt.tool); err != nil {
			r.logger.Warn("mcp: cannot register an imported tool", "name", name, "err", err)
			delete(want, name)
			continue
		}
		changed = true
	}
	r.tools = want
	return changed
}

var unsafeNameChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// quiverName maps a remote tool name to the name it is imported as: the remote's name, a dot,
// and the tool's name with characters MCP clients and providers reject replaced by _, cut to
// MCP's 128 characters (with a hash of the original to keep cut names apart).
func (r *remote) quiverName(remoteName string) string {
	safe := unsafeNameChars.ReplaceAllString(remoteName, "_")
	if safe == "" {
		safe = "_"
	}
	name := r.cfg.Name + "." + safe
	if len(name) > 128 {
		sum := sha256.Sum256([]byte(remoteName))
		name = name[:119] + "_" + hex.EncodeToString(sum[:4])
	}
	return name
}

func (r *remote) toolFor(name string, rt *sdk.Tool) (*quiver.Tool, error) {
	spec := quiver.Spec{Name: name, Description: strings.TrimSpace(rt.Description), Timeout: r.cfg.Timeout, Imported: true,
		Annotations: importedAnnotations(rt), Source: quiver.SourceMCP + ":" + r.cfg.Name}
	if need := r.cfg.Connection; need != nil {
		spec.Connections = []quiver.ConnectionNeed{*need}
	}
	if spec.Description == "" {
		spec.Description = fmt.Sprintf("The tool %s of the MCP server %s.", rt.Name, r.cfg.Name)
	}
	var err error
	if spec.InputSchema, err = toSchema(rt.InputSchema); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	if spec.OutputSchema, err = toSchema(rt.OutputSchema); err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	remoteName := rt.Name
	return quiver.NewTool(spec, func(ctx context.Context, args json.RawMessage) (any, error) {
		return r.call(ctx, remoteName, args)
	})
}

// importedAnnotations are a remote tool's MCP annotations as Quiver keeps them, so that the
// tool is served (and listed) with the remote server's hints. The SDK reads readOnlyHint and
// idempotentHint as plain booleans, so false is kept as unset (MCP's default for both, so
// the two mean the same); the title is the annotations', else the tool's own.
func importedAnnotations(rt *sdk.Tool) quiver.Annotations {
	var a quiver.Annotations
	if ra := rt.Annotations; ra != nil {
		a.Title, a.DestructiveHint, a.OpenWorldHint = ra.Title, ra.DestructiveHint, ra.OpenWorldHint
		if ra.ReadOnlyHint {
			a.ReadOnlyHint = quiver.Hint(true)
		}
		if ra.IdempotentHint {
			a.IdempotentHint = quiver.Hint(true)
		}
	}
	if a.Title == "" {
		a.Title = rt.Title
	}
	return a.Clone()
}

func toSchema(v any) (*schema.Schema, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if string(b) == "null" {
		return nil, nil
	}
	var s schema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
