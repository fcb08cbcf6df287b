package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// Remote is a remote MCP server whose tools are imported: either a command that speaks MCP
// over stdio, or a streamable HTTP URL.
type Remote struct {
	// Name prefixes its tools: with Name "everything", the remote tool echo is imported as
	// everything.echo. 1 to 32 characters of [a-zA-Z0-9_-].
	Name string
	// Command and Args start a server speaking MCP on its standard input and output; Env adds
	// to the environment it inherits, Dir is its working directory. Stderr, when set, receives
	// its standard error.
	Command string
	Args    []string
	Env     map[string]string
	Dir     string
	Stderr  io.Writer
	// URL is the endpoint of a server speaking streamable HTTP; Headers are sent with every
	// request (an Authorization header, say).
	URL     string
	Headers map[string]string
	// OAuth, when set, authorizes Quiver with the remote's authorization server (URL remotes
	// only); see [OAuth].
	OAuth *OAuth
	// Timeout bounds one call of an imported tool; zero means 60 seconds. A call that runs
	// longer is cancelled (the remote is told) and gets a timeout error result.
	Timeout time.Duration
}

// ImportOptions configures [Import]. The zero value is usable.
type ImportOptions struct {
	// Logger receives connection events and the remotes' log messages; nil discards them.
	Logger *slog.Logger
	// ClientName and ClientVersion identify Quiver to the remotes; "quiver" and "dev" when
	// empty.
	ClientName, ClientVersion string
	// Elicit answers elicitation requests of the remotes (asking a user for input during a
	// call). Nil declares no elicitation support, so remotes do not ask.
	Elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)
	// OnChange is called after the set of imported tools changed: a remote connected,
	// reconnected with different tools, or announced a new list. A [Server] passes
	// [Server.ToolsChanged] here.
	OnChange func()
	// ConnectTimeout bounds one connection attempt (start, handshake and tool listing); zero
	// means 30 seconds.
	ConnectTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnection attempts, which doubles
	// after each failure; zero means 250 milliseconds and 30 seconds.
	MinBackoff, MaxBackoff time.Duration
	// KeepAlive is how often a connected remote is pinged to notice it went away; zero means
	// 30 seconds, negative never.
	KeepAlive time.Duration
	// Authorizer takes a user through the OAuth authorization of remotes configured with
	// [Remote.OAuth] (a [Callbacks] served at their redirect URL, typically). Without it such
	// remotes can only use saved grants.
	Authorizer Authorizer
	// Tokens keeps OAuth grants across restarts; nil keeps them in memory only.
	Tokens TokenStore
	// AuthorizeTimeout bounds how long a connection attempt waits for a user to authorize;
	// zero means 15 minutes. That wait does not count against ConnectTimeout.
	AuthorizeTimeout time.Duration
}

// Importer keeps remote MCP servers connected and their tools registered. Close it to
// disconnect and unregister the tools.
type Importer struct {
	reg     *quiver.Registry
	opts    ImportOptions
	logger  *slog.Logger
	remotes []*remote
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	changeMu sync.Mutex
	change   chan struct{} // closed and replaced when a remote connects
}

// RemoteStatus is the state of one remote, for health reports.
type RemoteStatus struct {
	Name      string `json:"name"`
	Connected bool   `json:"connected"`
	Tools     int    `json:"tools"`
	// LastError is the most recent connection failure ("" when none).
	LastError string `json:"last_error,omitempty"`
	// AuthorizationURL is set while the remote waits for a user to open it and authorize
	// Quiver (OAuth).
	AuthorizationURL string `json:"authorization_url,omitempty"`
}

var remoteNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)

// Validate checks a remote's configuration.
func (r *Remote) Validate() error {
	switch {
	case !remoteNameRE.MatchString(r.Name):
		return fmt.Errorf("MCP server name %q must be 1 to 32 characters of a-z, A-Z, 0-9, _ and - (it prefixes the tool names)", truncate(r.Name, 40))
	case r.Command == "" && r.URL == "":
		return fmt.Errorf("MCP server %q needs a command (stdio) or a url (streamable HTTP)", r.Name)
	case r.Command != "" && r.URL != "":
		return fmt.Errorf("MCP server %q has both a command and a url; give one", r.Name)
	case r.URL != "" && !strings.HasPrefix(r.URL, "http://") && !strings.HasPrefix(r.URL, "https://"):
		return fmt.Errorf("MCP server %q: url %q must start with http:// or https://", r.Name, truncate(r.URL, 80))
	case r.Timeout < 0:
		return fmt.Errorf("MCP server %q: timeout must not be negative", r.Name)
	case r.OAuth != nil && r.URL == "":
		return fmt.Errorf("MCP server %q: oauth applies to servers reached by url, not to a command", r.Name)
	case r.OAuth != nil && hasHeader(r.Headers, "Authorization"):
		return fmt.Errorf("MCP server %q has both oauth and an Authorization header; give one", r.Name)
	case r.OAuth != nil:
		return r.OAuth.Validate(r.Name)
	}
	return nil
}

// Import connects to the remotes and registers their tools in reg, each under its remote's
// name as prefix. It returns once every remote has had a first connection attempt, so the
// tools of reachable servers can be called at once; a remote that is down is not an error (its
// tools appear when it comes up: the Importer keeps trying in the background until Close).
// A configuration error (see [Remote.Validate], or two remotes with one name) is an error.
func Import(ctx context.Context, reg *quiver.Registry, remotes []Remote, opts *ImportOptions) (*Importer, error) {
	im := &Importer{reg: reg}
	if opts != nil {
		im.opts = *opts
	}
	o := &im.opts
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 250 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 30 * time.Second
	}
	if o.AuthorizeTimeout <= 0 {
		o.AuthorizeTimeout = 15 * time.Minute
	}
	im.logger = o.Logger
	if im.logger == nil {
		im.logger = slog.New(slog.DiscardHandler)
	}
	seen := map[string]bool{}
	for i := range remotes {
		r := remotes[i]
		if err := r.Validate(); err != nil {
			return nil, err
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("two MCP servers are named %q; names must be unique", r.Name)
		}
		seen[r.Name] = true
		if r.Timeout == 0 {
			r.Timeout = 60 * time.Second
		}
		rm := &remote{im: im, cfg: r, tools: map[string]*importedTool{}, logger: im.logger.With("mcp_server", r.Name)}
		if r.OAuth != nil {
			h, err := rm.newOAuthHandler(ctx)
			if err != nil {
				return nil, fmt.Errorf("MCP server %q: oauth: %w", r.Name, err)
			}
			rm.oauth = h
		}
		im.remotes = append(im.remotes, rm)
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	im.cancel = cancel
	firsts := make([]chan struct{}, len(im.remotes))
	for i, r := range im.remotes {
		firsts[i] = make(chan struct{})
		im.wg.Go(func() { r.loop(loopCtx, firsts[i]) })
	}
	for _, f := range firsts {
		select {
		case <-f:
		case <-ctx.Done():
			im.Close()
			return nil, ctx.Err()
		}
	}
	return im, nil
}

// Status reports the state of each remote, in configuration order.
func (im *Importer) Status() []RemoteStatus {
	out := make([]RemoteStatus, 0, len(im.remotes))
	for _, r := range im.remotes {
		r.mu.Lock()
		out = append(out, RemoteStatus{Name: r.cfg.Name, Connected: r.session != nil, Tools: len(r.tools), LastError: r.lastErr, AuthorizationURL: r.authURL})
		r.mu.Unlock()
	}
	return out
}

// changed wakes [Importer.WaitConnected].
func (im *Importer) changed() {
	im.changeMu.Lock()
	defer im.changeMu.Unlock()
	if im.change != nil {
		close(im.change)
		im.change = nil
	}
}

// WaitConnected waits until every remote is connected, for commands that cannot do without
// them (a remote waiting for a user to authorize Quiver connects once they have). It returns
// ctx's error, with the remotes still missing and why, when ctx ends first.
func (im *Importer) WaitConnected(ctx context.Context) error {
	for {
		im.changeMu.Lock()
		if im.change == nil {
			im.change = make(chan struct{})
		}
		ch := im.change
		im.changeMu.Unlock()
		var missing []string
		for _, st := range im.Status() {
			if !st.Connected {
				missing = append(missing, fmt.Sprintf("%s (%s)", st.Name, st.LastError))
			}
		}
		if missing == nil {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("MCP servers not connected: %s: %w", strings.Join(missing, ", "), ctx.Err())
		}
	}
}

// Close disconnects every remote, stops reconnecting and unregisters the imported tools.
func (im *Importer) Close() error {
	im.cancel()
	for _, r := range im.remotes {
		r.mu.Lock()
		cs := r.session
		r.mu.Unlock()
		if cs != nil {
			_ = cs.Close()
		}
	}
	im.wg.Wait()
	for _, r := range im.remotes {
		r.mu.Lock()
		for _, t := range r.tools {
			im.reg.Unregister(t.tool.Name())
		}
		r.tools = map[string]*importedTool{}
		r.mu.Unlock()
	}
	return nil
}

// remote is the connection to one remote server.
type remote struct {
	im     *Importer
	cfg    Remote
	logger *slog.Logger

	oauth *auth.AuthorizationCodeHandler // nil without OAuth

	mu       sync.Mutex
	session  *sdk.ClientSession
	lastErr  string
	authURL  string                   // a user must open it to authorize Quiver
	ready    func()                   // ends the first connection attempt's wait in Import
	tools    map[string]*importedTool // by Quiver name
	progress sync.Map                 // progress token -> context of the call it belongs to
	syncMu   sync.Mutex               // one tool list synchronisation at a time
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
	for ctx.Err() == nil {
		cs, err := r.connect(ctx)
		if err != nil {
			r.mu.Lock()
			r.lastErr = err.Error()
			r.mu.Unlock()
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
		waitErr := cs.Wait()
		r.mu.Lock()
		if r.session == cs {
			r.session = nil
		}
		if ctx.Err() == nil {
			r.lastErr = "the connection closed"
			if waitErr != nil {
				r.lastErr += ": " + waitErr.Error()
			}
		}
		r.mu.Unlock()
		if ctx.Err() == nil {
			r.logger.Warn("mcp: the MCP server disconnected; reconnecting", "err", waitErr)
		}
	}
}

func (r *remote) connect(ctx context.Context) (*sdk.ClientSession, error) {
	name, version := r.im.opts.ClientName, r.im.opts.ClientVersion
	if name == "" {
		name = "quiver"
	}
	if version == "" {
		version = "dev"
	}
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
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			if callCtx, ok := r.progress.Load(req.Params.ProgressToken); ok {
				quiver.ReportProgress(callCtx.(context.Context), req.Params.Progress, req.Params.Total, req.Params.Message)
			}
		},
	}
	if r.im.opts.KeepAlive > 0 {
		copts.KeepAlive = r.im.opts.KeepAlive
	}
	client := sdk.NewClient(&sdk.Implementation{Name: name, Version: version}, copts)
	var transport sdk.Transport
	if r.cfg.Command != "" {
		cmd := exec.Command(r.cfg.Command, r.cfg.Args...)
		cmd.Dir = r.cfg.Dir
		cmd.Stderr = r.cfg.Stderr
		if len(r.cfg.Env) > 0 {
			cmd.Env = os.Environ()
			for k, v := range r.cfg.Env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
		transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	} else {
		hc := &http.Client{Transport: headerTransport{headers: r.cfg.Headers, next: http.DefaultTransport}}
		transport = &sdk.StreamableClientTransport{Endpoint: r.cfg.URL, HTTPClient: hc, MaxRetries: 2}
		if r.oauth != nil {
			transport.(*sdk.StreamableClientTransport).OAuthHandler = r.oauth
		}
	}
	// The attempt's timeout stops while a user authorizes (OAuth), which takes minutes.
	cctx, cancel := withPausableTimeout(ctx, r.im.opts.ConnectTimeout)
	defer cancel()
	cs, err := client.Connect(cctx, transport, nil)
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
	r.lastErr = ""
	r.mu.Unlock()
	r.im.changed()
	return cs, nil
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
	changed := false
	r.mu.Lock()
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
	r.mu.Unlock()
	if changed && r.im.opts.OnChange != nil {
		r.im.opts.OnChange()
	}
	return nil
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
	spec := quiver.Spec{Name: name, Description: strings.TrimSpace(rt.Description), Timeout: r.cfg.Timeout, Imported: true}
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

// progressLinger is how long progress notifications are still forwarded after a call ended.
const progressLinger = 2 * time.Second

// call runs one call of a remote tool.
func (r *remote) call(ctx context.Context, name string, args json.RawMessage) (any, error) {
	r.mu.Lock()
	cs, lastErr := r.session, r.lastErr
	r.mu.Unlock()
	if cs == nil {
		if lastErr == "" {
			lastErr = "not connected yet"
		}
		return nil, quiver.Fail(quiver.CodeToolError, "the MCP server %q is unavailable (%s); Quiver keeps reconnecting, so try again shortly", r.cfg.Name, lastErr)
	}
	params := &sdk.CallToolParams{Name: name, Arguments: args}
	token := newCallID()
	params.SetProgressToken(token)
	passTraceContext(ctx, params)
	r.progress.Store(token, ctx)
	// Notifications are handled apart from responses, so the last ones may be handled just
	// after the call returned: keep the token a moment longer.
	defer time.AfterFunc(progressLinger, func() { r.progress.Delete(token) })
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // the dispatcher reports the timeout or cancellation
		}
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			return nil, quiver.Fail(quiver.CodeToolError, "the MCP server %q refused the call to %s: %s", r.cfg.Name, name, rpcErr.Message)
		}
		// The connection is broken: drop it so that the loop reconnects.
		r.mu.Lock()
		if r.session == cs {
			r.session = nil
			r.lastErr = err.Error()
		}
		r.mu.Unlock()
		go cs.Close()
		return nil, quiver.Fail(quiver.CodeToolError, "the MCP server %q could not be reached (%v); Quiver is reconnecting, so try again shortly", r.cfg.Name, err)
	}
	return FromResult(res), nil
}

// FromResult converts an MCP tools/call result into a Quiver result: isError becomes an error
// result whose message is the result's text; text-only content becomes the result's text,
// other content (image, audio, embedded resource, resource link) Quiver content;
// structuredContent becomes the structured value.
func FromResult(res *sdk.CallToolResult) *quiver.Result {
	var texts []string
	var content []quiver.Content
	textOnly := true
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			texts = append(texts, c.Text)
			content = append(content, quiver.TextContent(c.Text))
		case *sdk.ImageContent:
			textOnly = false
			content = append(content, quiver.Content{Type: quiver.ContentImage, Data: base64.StdEncoding.EncodeToString(c.Data), MimeType: mimeOr(c.MIMEType)})
		case *sdk.AudioContent:
			textOnly = false
			content = append(content, quiver.Content{Type: quiver.ContentAudio, Data: base64.StdEncoding.EncodeToString(c.Data), MimeType: mimeOr(c.MIMEType)})
		case *sdk.EmbeddedResource:
			if c.Resource == nil || c.Resource.URI == "" {
				continue
			}
			textOnly = false
			qc := quiver.Content{Type: quiver.ContentResource, URI: c.Resource.URI, MimeType: c.Resource.MIMEType, Text: c.Resource.Text}
			if len(c.Resource.Blob) > 0 {
				qc.Data = base64.StdEncoding.EncodeToString(c.Resource.Blob)
			}
			content = append(content, qc)
		case *sdk.ResourceLink:
			if c.URI == "" {
				continue
			}
			textOnly = false
			content = append(content, quiver.Content{Type: quiver.ContentResource, URI: c.URI, MimeType: c.MIMEType, Text: c.Name})
		}
	}
	if res.IsError {
		msg := strings.Join(texts, "\n")
		if msg == "" {
			msg = "the remote tool failed without saying why"
		}
		return &quiver.Result{Status: quiver.StatusError, Code: quiver.CodeToolError, Error: msg}
	}
	out := &quiver.Result{Status: quiver.StatusSuccess}
	if textOnly {
		out.Text = strings.Join(texts, "\n")
	} else {
		out.Content = content
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil && string(b) != "null" {
			out.Value = b
		}
	}
	return out
}

func mimeOr(m string) string {
	if m == "" {
		return "application/octet-stream"
	}
	return m
}

// passTraceContext puts the call's trace context (W3C traceparent and tracestate, through the
// global propagator) in the request's _meta, where MCP servers look for it, so that the remote
// tool's work joins the caller's trace.
func passTraceContext(ctx context.Context, params *sdk.CallToolParams) {
	p := otel.GetTextMapPropagator()
	if len(p.Fields()) == 0 || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	carrier := propagation.MapCarrier{}
	p.Inject(ctx, carrier)
	meta := params.GetMeta()
	if meta == nil {
		meta = map[string]any{}
	}
	for k, v := range carrier {
		meta[k] = v
	}
	params.SetMeta(meta)
}
