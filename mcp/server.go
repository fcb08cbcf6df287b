// Package mcp connects Quiver to the Model Context Protocol, on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk/mcp, imported here as sdk).
//
// Serving: [NewServer] offers the tools a [quiver.Dispatcher] permits to MCP clients,
// over streamable HTTP ([Server.HTTPHandler]) or stdio ([Server.Run] with an
// [sdk.StdioTransport]). Every tools/call goes through the dispatcher, so policy, validation,
// confirmation, variables, secret masking, timeouts and recording apply exactly as for any
// other caller. Progress and log messages a tool reports with [quiver.ReportProgress] and
// [quiver.Log] reach the client as progress and logging notifications; a client's
// cancellation cancels the tool's context; [Confirm] asks the client's user to approve calls
// to tools that require confirmation, through elicitation.
//
// Importing: [Import] connects to remote MCP servers (a command speaking stdio, or a
// streamable HTTP URL) and registers their tools in a [quiver.Registry] under a prefix
// ("everything.echo"), so they are called, governed and recorded like local tools. A remote
// that is down or slow yields error results, never a hang, and is reconnected in the
// background.
package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/schema"
)

// SessionInfo describes an MCP session, for [ServerOptions.Session].
type SessionInfo struct {
	// ID is the session's id (the Mcp-Session-Id header over HTTP; empty over stdio and for
	// requests of the sessionless protocol, each of which is a session of its own).
	ID string
	// ClientName and ClientVersion are what the client said it is when it initialized (in
	// each request's _meta, for the sessionless protocol).
	ClientName, ClientVersion string
	// Sessionless says the request is of the sessionless protocol (2026-07-28 on): a session
	// of its own, whose ID is empty.
	Sessionless bool
	// ThreadID, for a request of the sessionless protocol, is the thread its call is to be
	// recorded on: the one the client named ([ThreadMetaKey]), or the one its confirmation was
	// asked on. Empty: the hook's choice. Check that it is one the caller may record on.
	ThreadID string
}

// ServerOptions configures a [Server]. The zero value serves the dispatcher's tools with the
// caller's scope.
type ServerOptions struct {
	// Name and Version identify the server to clients; "quiver" and "dev" when empty.
	Name, Version string
	// Instructions are optional instructions for clients.
	Instructions string
	// Logger receives the server's own diagnostics; nil discards them.
	Logger *slog.Logger
	// Session is called once per MCP session, before its first tool call runs: the scope it
	// returns is the scope of every call of the session (the workspace, and the thread calls
	// are recorded in); a request of the sessionless protocol is a session of its own. An error
	// fails the call with a JSON-RPC internal error (a *jsonrpc.Error is answered as it is: the
	// request's fault, say) and the next call asks again. Nil runs calls without a scope.
	Session func(ctx context.Context, s SessionInfo) (quiver.Scope, error)
	// Capabilities, when set, replaces the capabilities the server advertises besides tools
	// (which it always advertises), for servers that add resources or prompts to [Server.SDK].
	Capabilities *sdk.ServerCapabilities
	// CompletionHandler, SubscribeHandler and UnsubscribeHandler are passed to the SDK server,
	// for servers that add prompts or resources.
	CompletionHandler  func(context.Context, *sdk.CompleteRequest) (*sdk.CompleteResult, error)
	SubscribeHandler   func(context.Context, *sdk.SubscribeRequest) error
	UnsubscribeHandler func(context.Context, *sdk.UnsubscribeRequest) error
	// Prompts are served as MCP prompts (prompts/list, prompts/get), with the prompts
	// capability; see [Prompt].
	Prompts []Prompt
	// ThreadFiles, when set, serves threads' files as MCP resources through the resource
	// template [ThreadFileTemplate] (resources/templates/list, resources/read), with the
	// resources capability; resources/list lists none (a thread may hold very many files).
	ThreadFiles ThreadFilesFunc
	// MaxResourceBytes caps the size of a file resources/read answers with; a larger one is
	// refused. Zero or less: DefaultMaxResourceBytes.
	MaxResourceBytes int64
	// AwaitConnection, when set, waits until the caller of ctx has connected provider with the
	// scopes (a person's connection, see quiver.UserToken), or ctx ends. With it, a call answered
	// authorization_required is put to a client that supports URL-mode elicitation: its user is
	// sent to connect, and the call is made again once they have (see [ElicitationTimeout]).
	AwaitConnection func(ctx context.Context, provider string, scopes []string) error
	// States seals the request state a client of the sessionless protocol hands back with its
	// user's answer to a confirmation (see [Confirm]). Give the nodes of a fleet the same one
	// (their secret keyring), so that any node takes an answer to another's question. Nil: a
	// key of this server's own.
	States Sealer
	// Answers takes each answer to a confirmation once (see [AnswerLedger]). Give the nodes of
	// a fleet one they share, with States. Nil: this server's memory.
	Answers AnswerLedger
}

// Server serves the tools of a [quiver.Dispatcher] over MCP. The tool list is read from the
// dispatcher on every tools/list, so tools registered or removed at run time (imported ones,
// say) appear without a restart; call [Server.ToolsChanged] to tell connected clients.
type Server struct {
	d      *quiver.Dispatcher
	srv    *sdk.Server
	opts   ServerOptions
	logger *slog.Logger

	mu       sync.Mutex
	sessions map[*sdk.ServerSession]*sessionState
	listed   *listing // the last tools/list answer, reused while the tools are the same
}

type sessionState struct {
	mu    sync.Mutex
	done  bool
	scope quiver.Scope
}

// listing is a rendered tool list and the tools it was rendered from.
type listing struct {
	tools []*quiver.Tool
	set   *schema.ToolSet
	list  []*sdk.Tool
}

// NewServer returns a server offering the tools d permits. Set d.Confirm to [Confirm] (before
// d's first call) for tools that require confirmation to be approved through elicitation.
func NewServer(d *quiver.Dispatcher, opts *ServerOptions) *Server {
	s := &Server{d: d, sessions: map[*sdk.ServerSession]*sessionState{}}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.States == nil {
		s.opts.States = newStateKeys()
	}
	if s.opts.Answers == nil {
		s.opts.Answers = newLocalAnswers()
	}
	s.logger = s.opts.Logger
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	name, version := s.opts.Name, s.opts.Version
	if name == "" {
		name = "quiver"
	}
	if version == "" {
		version = "dev"
	}
	// Tools log to clients of the versions before 2026-07-28, which deprecates logging.
	//lint:ignore SA1019 see above
	caps := &sdk.ServerCapabilities{Logging: &sdk.LoggingCapabilities{}}
	if s.opts.Capabilities != nil {
		c := *s.opts.Capabilities
		caps = &c
	}
	caps.Tools = &sdk.ToolCapabilities{ListChanged: true}
	if len(s.opts.Prompts) > 0 && caps.Prompts == nil {
		// The prompts are given once, so their list never changes.
		caps.Prompts = &sdk.PromptCapabilities{}
	}
	if s.opts.ThreadFiles != nil && caps.Resources == nil {
		// One template, given once: the list never changes.
		caps.Resources = &sdk.ResourceCapabilities{}
	}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: name, Version: version}, &sdk.ServerOptions{
		Instructions:       s.opts.Instructions,
		Logger:             s.opts.Logger,
		Capabilities:       caps,
		CompletionHandler:  s.opts.CompletionHandler,
		SubscribeHandler:   s.opts.SubscribeHandler,
		UnsubscribeHandler: s.opts.UnsubscribeHandler,
	})
	s.srv.AddReceivingMiddleware(specErrors, s.receive)
	s.addPrompts(s.opts.Prompts)
	if s.opts.ThreadFiles != nil {
		s.addThreadFiles(s.opts.ThreadFiles)
	}
	return s
}

// SDK returns the underlying SDK server, to add resources and prompts. Its tools are not
// used: tools come from the dispatcher.
func (s *Server) SDK() *sdk.Server { return s.srv }

// Run serves one session over t (an [sdk.StdioTransport] for stdio) until the client
// disconnects or ctx is done. When the client's input ends, the requests already read are
// answered first.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.srv.Run(ctx, drainingTransport{t})
}

// Connect starts a session over t and returns at once; for in-process clients and tests.
func (s *Server) Connect(ctx context.Context, t sdk.Transport) (*sdk.ServerSession, error) {
	return s.srv.Connect(ctx, t, nil)
}

// Close ends every open session.
func (s *Server) Close() {
	for ss := range s.srv.Sessions() {
		ss.Close()
	}
}

// toolListSentinel is added and removed at once to make the SDK send tools/list_changed.
const toolListSentinel = "quiver.tools_changed"

// ToolsChanged tells connected clients that the tool list changed (a notification they
// answer with a new tools/list).
func (s *Server) ToolsChanged() {
	s.mu.Lock()
	s.listed = nil
	s.mu.Unlock()
	// The SDK sends the notification when its own tool list changes (debounced); its list is
	// otherwise unused, since tools/list and tools/call are answered from the dispatcher.
	s.srv.AddTool(&sdk.Tool{Name: toolListSentinel, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return nil, errors.New("unused")
		})
	s.srv.RemoveTools(toolListSentinel)
}

func (s *Server) receive(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		bindSlot(ctx, req)
		switch method {
		case "initialize":
			capInitializeVersion(req)
		case "tools/list":
			if r, ok := req.(*sdk.ListToolsRequest); ok {
				return s.listTools(ctx, r)
			}
		case "tools/call":
			if r, ok := req.(*sdk.CallToolRequest); ok {
				return s.answerCall(ctx, r)
			}
		}
		return passOn(ctx, next, method, req)
	}
}

// bindSlot binds the session slot ctx holds, if any, to req's session.
func bindSlot(ctx context.Context, req sdk.Request) {
	if sl, ok := ctx.Value(slotKey{}).(*sessionSlot); ok {
		if ss, ok := req.GetSession().(*sdk.ServerSession); ok {
			sl.bind(ss)
		}
	}
}

// answerCall answers a tools/call from the dispatcher, as the sessionless protocol says
// answers when r follows it: a call that waits for its client's input (a confirmation) is
// answered with the question, resultType "input_required".
func (s *Server) answerCall(ctx context.Context, r *sdk.CallToolRequest) (sdk.Result, error) {
	if !sessionless(r) {
		return s.callTool(ctx, r, nil)
	}
	round := &inputRound{states: s.opts.States, answers: s.opts.Answers}
	res, err := s.callTool(ctx, r, round)
	switch {
	case err != nil:
		return nil, err
	case round.asked():
		ask := &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{round.id: round.ask}, RequestState: round.state}
		return typedCall{ask, "input_required"}, nil
	}
	return typedCall{res, "complete"}, nil
}

// passOn has the SDK answer req; a cacheable result in a session's protocol leaves out the
// cache fields the sessionless protocol defined.
func passOn(ctx context.Context, next sdk.MethodHandler, method string, req sdk.Request) (sdk.Result, error) {
	res, err := next(ctx, method, req)
	if c, ok := res.(sdk.CacheableResult); ok && err == nil && !sessionless(req) {
		return withoutCacheFields(c)
	}
	return res, err
}

// lastSessionVersion is the newest protocol version served through initialize: 2026-07-28
// replaced it with sessionless requests.
const lastSessionVersion = "2025-11-25"

// capInitializeVersion records a session that asked initialize for 2026-07-28 or later as
// what it is served at, 2025-11-25. The SDK keeps the version the client asked for and reads
// it back to shape answers: without this, such a session (mcp-go's default) was sent
// resultType, ttlMs and cacheScope, which 2025-11-25 does not define.
func capInitializeVersion(req sdk.Request) {
	if r, ok := req.(*sdk.ServerRequest[*sdk.InitializeParams]); ok && r.Params != nil && r.Params.ProtocolVersion > lastSessionVersion {
		r.Params.ProtocolVersion = lastSessionVersion
	}
}

// sessionless reports whether req follows the sessionless protocol (2026-07-28 and later),
// the first to define a result's cache fields (ttlMs, cacheScope) and its resultType.
func sessionless(req sdk.Request) bool {
	v, ok := req.(interface{ ProtocolVersion() string })
	return ok && v.ProtocolVersion() >= protocolVersionSessionless
}

// typedCall is a tools/call answer of the sessionless protocol, which must say its
// resultType: "complete" (the official TypeScript SDK refuses an answer without it) or
// "input_required". The SDK sets it only on answers of the tools it runs itself; this server
// answers tools/call from the dispatcher.
type typedCall struct {
	*sdk.CallToolResult
	resultType string
}

func (c typedCall) MarshalJSON() ([]byte, error) {
	b, err := c.CallToolResult.MarshalJSON()
	if err != nil || bytes.Contains(b, []byte(`"resultType":`)) {
		return b, err
	}
	field := `"resultType":"` + c.resultType + `"`
	out := make([]byte, 0, len(b)+len(field)+1)
	out = append(out, '{')
	out = append(out, field...)
	if len(b) > 2 {
		out = append(out, ',')
	}
	return append(out, b[1:]...), nil
}

// ExamplesMetaKey is the key of a tool's examples (its [quiver.Example] list: arguments and an
// optional result) in the tool's _meta in tools/list, where MCP clients can show them or pass
// them to their models.
const ExamplesMetaKey = "io.quiver/examples"

// listCacheScope is the cacheScope of a tools/list answer: the list depends on who asks (the
// workspace's stored tools, the key's policy), so only the asker's own client may cache it.
// Its ttlMs is 0 (stale at once): tools change at run time, and list_changed says when.
const listCacheScope = "private"

func (s *Server) listTools(ctx context.Context, req *sdk.ListToolsRequest) (sdk.Result, error) {
	if req.Params != nil && req.Params.Cursor != "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown cursor: this server returns every tool in one page"}
	}
	l, err := s.listing()
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	list := l.list
	if s.d.Entitled != nil {
		list = l.entitled(s.d.Entitled(ctx))
	}
	if !sessionless(req) {
		return &legacyToolList{Tools: list}, nil
	}
	return &sdk.ListToolsResult{Cacheable: sdk.Cacheable{CacheScope: listCacheScope}, Tools: list}, nil
}

// entitled is the listing's tools allowed allows (all of them when it is nil), rendered once
// for every caller: a caller's list is a selection of the one rendering.
func (l *listing) entitled(allowed func(*quiver.Tool) bool) []*sdk.Tool {
	if allowed == nil {
		return l.list
	}
	out := make([]*sdk.Tool, 0, len(l.list))
	for i, t := range l.tools {
		if allowed(t) {
			out = append(out, l.list[i])
		}
	}
	return out
}

// legacyToolList is a tools/list answer for protocol versions before 2026-07-28: the SDK's
// ListToolsResult always carries ttlMs and cacheScope, which those versions do not define.
type legacyToolList struct {
	sdk.ResultBase
	Tools []*sdk.Tool `json:"tools"`
}

// legacyResult is an answer the SDK built (prompts/list, resources/list and /read, ...),
// re-encoded without the fields versions before 2026-07-28 do not define. Those lists are
// small and asked for rarely; tools/list, the hot one, is built without them (legacyToolList).
type legacyResult struct {
	sdk.ResultBase
	body json.RawMessage
}

func (r *legacyResult) MarshalJSON() ([]byte, error) { return r.body, nil }

func withoutCacheFields(res sdk.CacheableResult) (sdk.Result, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	delete(fields, "ttlMs")
	delete(fields, "cacheScope")
	delete(fields, "resultType")
	if b, err = json.Marshal(fields); err != nil {
		return nil, err
	}
	return &legacyResult{body: b}, nil
}

// listing renders the tools the dispatcher permits, reusing the last rendering while they are
// the same tools.
//
// A tool whose output schema is advisory (quiver.Spec.OutputAdvisory: an OpenAPI document's
// description of a service's answer, which the service may not keep) is listed without it.
// MCP says a server declaring a tool's outputSchema must return structured content that
// conforms to it, and clients act on that: the TypeScript SDK (2.x) fails a call whose
// structuredContent does not match, and one that returns none, unless the result is an error.
// Declared, such a tool's passed-through answer would be the client's failure. Undeclared, its
// answer still comes as structuredContent, with the warning in _meta; the schema is still the
// tool's over /v1 and in what the models are told.
func (s *Server) listing() (*listing, error) {
	tools := s.d.Tools()
	s.mu.Lock()
	prev := s.listed
	s.mu.Unlock()
	if prev != nil && slices.Equal(prev.tools, tools) {
		return prev, nil
	}
	reg := s.d.Registry
	if reg == nil {
		reg = quiver.Default
	}
	set, err := schema.Render(schema.MCP, quiver.ToolSchemas(reg, tools))
	if err != nil {
		return nil, fmt.Errorf("rendering the tool list: %w", err)
	}
	l := &listing{tools: tools, set: set, list: make([]*sdk.Tool, 0, len(set.Tools))}
	for i, rt := range set.Tools {
		t := &sdk.Tool{Name: rt.Name, Description: rt.Description, InputSchema: rt.Parameters}
		spec := tools[i].Spec()
		if rt.Output != nil && !spec.OutputAdvisory {
			t.OutputSchema = rt.Output
		}
		t.Annotations = annotations(spec)
		if len(spec.Examples) > 0 {
			// MCP has no field for examples; a tool's _meta carries what the protocol does not.
			t.Meta = sdk.Meta{ExamplesMetaKey: spec.Examples}
		}
		l.list = append(l.list, t)
	}
	s.mu.Lock()
	s.listed = l
	s.mu.Unlock()
	return l, nil
}

func ptr[T any](v T) *T { return &v }

// annotations are the MCP annotations a tool is served with: those it declares, and
// destructiveHint true for a tool that needs confirmation and says neither whether it is
// destructive nor whether it is read-only. A tool's own declaration wins: one that needs a
// person's approval for another reason may say destructiveHint false, and its calls still
// wait for the approval (hints are for clients, never for governance). The SDK's readOnlyHint
// and idempotentHint are plain booleans, so unset is served as false, MCP's default for both.
func annotations(spec quiver.Spec) *sdk.ToolAnnotations {
	a := spec.Annotations
	if spec.RequiresConfirmation && a.DestructiveHint == nil && a.ReadOnlyHint == nil {
		a.DestructiveHint = ptr(true)
	}
	if a.IsZero() {
		return nil
	}
	out := &sdk.ToolAnnotations{Title: a.Title, DestructiveHint: a.DestructiveHint, OpenWorldHint: a.OpenWorldHint}
	if a.ReadOnlyHint != nil {
		out.ReadOnlyHint = *a.ReadOnlyHint
	}
	if a.IdempotentHint != nil {
		out.IdempotentHint = *a.IdempotentHint
	}
	return out
}

type requestKey struct{}

// Request returns the MCP request of the tools/call a tool is running for, or nil when the call
// did not come over MCP. Tools that need the client (sampling, elicitation) reach its session
// through it; a request of the sessionless protocol (2026-07-28 on) has no session to ask
// through, and the SDK refuses such requests there (a confirmation goes through [Confirm]).
func Request(ctx context.Context) *sdk.CallToolRequest {
	r, _ := ctx.Value(requestKey{}).(*sdk.CallToolRequest)
	return r
}

// callTool dispatches a tools/call; round, for a request of the sessionless protocol, takes
// what the call asks its client for.
func (s *Server) callTool(ctx context.Context, req *sdk.CallToolRequest, round *inputRound) (*sdk.CallToolResult, error) {
	scope, err := s.scope(ctx, req)
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return nil, rpcErr // the request's own fault, which the hook names
	}
	if err != nil {
		s.logger.ErrorContext(ctx, "mcp: preparing the session", "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server could not prepare this session: " + err.Error()}
	}
	name, args := s.inbound(req.Params.Name, req.Params.Arguments)
	if s.opts.Session != nil {
		ctx = quiver.WithScope(ctx, scope)
	}
	ctx = quiver.WithDoor(traceContext(ctx, req), quiver.DoorMCP)
	ctx = context.WithValue(ctx, requestKey{}, req)
	ctx = quiver.WithReporter(ctx, &reporter{session: req.Session, token: req.Params.GetProgressToken(), tool: name})
	call := quiver.Call{ID: newCallID(), Name: name, Args: args}
	if round != nil {
		round.callID = call.ID
		ctx = context.WithValue(ctx, roundKey{}, round)
		s.awaitAnsweredConnection(ctx, req, round, name, args)
	}
	r, err := s.d.Dispatch(ctx, call)
	if err == nil && r.Code == quiver.CodeAuthorizationRequired {
		if round == nil {
			r, err = s.connectAndRetry(ctx, req.Session, name, args, r)
		} else {
			s.askToConnect(ctx, req, round, name, args, r)
		}
	}
	if err != nil {
		// The call ran, but its record could not be stored (the recorder tries again for a
		// while first): what is answered is recorded, so the client hears that instead.
		s.logger.ErrorContext(ctx, "mcp: recording a tool call", "tool", name, "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("the tool %s ran, but its record could not be stored (%v); look at the session's thread before calling it again", name, err)}
	}
	return ToResult(r), nil
}

// inbound maps a tools/call's name, as tools/list served it, back to the registered name, and
// its arguments to the tool's own schema. A name MCP rejects ("look up: weather?", one over 128
// characters) is served under a mapped name (schema.Render); the mapping depends on the tool set
// alone, so a client that kept a name from an earlier list, or that calls without listing
// first (another process served the list), still reaches the tool. A name that is not a served
// one is dispatched as it is: a registered name, or an unknown tool.
func (s *Server) inbound(name string, args json.RawMessage) (string, json.RawMessage) {
	s.mu.Lock()
	l := s.listed
	s.mu.Unlock()
	if l != nil {
		if canonical, out, ok := l.set.Inbound(name, args); ok {
			return canonical, out
		}
	}
	// Not in the last list (none yet, or the tools changed since): the current one.
	l, err := s.listing()
	if err != nil {
		return name, args
	}
	if canonical, out, ok := l.set.Inbound(name, args); ok {
		return canonical, out
	}
	return name, args
}

// ThreadMetaKey is the key of a tools/call's _meta under which a client of the sessionless
// protocol names the thread (of the workspace) its call is recorded on; without it, the
// Session hook chooses (quiver serve: the caller's thread of the day). A client of a session
// has its session's thread.
const ThreadMetaKey = "io.quiver/threadId"

// scope is the scope a tools/call runs in: its session's, or, for a request of the sessionless
// protocol over HTTP, one of its own (see ServerOptions.Session). Over stdio the connection is
// the session whatever the version: its calls share its scope.
func (s *Server) scope(ctx context.Context, req *sdk.CallToolRequest) (quiver.Scope, error) {
	if !sessionless(req) || req.Extra == nil || req.Extra.Header == nil {
		return s.sessionScope(ctx, req.Session)
	}
	if s.opts.Session == nil {
		return quiver.Scope{}, nil
	}
	info := SessionInfo{Sessionless: true}
	if c := req.ClientInfo(); c != nil {
		info.ClientName, info.ClientVersion = c.Name, c.Version
	}
	if st, err := openState(s.opts.States, req.Params.RequestState); err == nil {
		// The answer to a question: recorded where the asking was.
		info.ThreadID = st.Thread
	} else if id, ok := req.Params.Meta[ThreadMetaKey].(string); ok {
		info.ThreadID = id
	}
	return s.opts.Session(ctx, info)
}

func (s *Server) sessionScope(ctx context.Context, ss *sdk.ServerSession) (quiver.Scope, error) {
	if s.opts.Session == nil {
		return quiver.Scope{}, nil
	}
	s.mu.Lock()
	st := s.sessions[ss]
	if st == nil {
		st = &sessionState{}
		s.sessions[ss] = st
		go func() {
			_ = ss.Wait()
			s.mu.Lock()
			delete(s.sessions, ss)
			s.mu.Unlock()
		}()
	}
	s.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return st.scope, nil
	}
	info := SessionInfo{ID: cmp.Or(SharedSessionID(ctx), ss.ID())}
	if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
		info.ClientName, info.ClientVersion = p.ClientInfo.Name, p.ClientInfo.Version
	}
	scope, err := s.opts.Session(ctx, info)
	if err != nil {
		return quiver.Scope{}, err
	}
	st.scope, st.done = scope, true
	return scope, nil
}

// newCallID names a call; ids that sort by time keep the store's indexes of calls appending at
// their end.
func newCallID() string { return ids.New("mcp") }

// reporter turns a tool's progress and logs into notifications on its MCP session.
type reporter struct {
	session *sdk.ServerSession
	token   any
	tool    string
}

func (r *reporter) Progress(ctx context.Context, done, total float64, msg string) {
	if r.token == nil {
		return // the client asked for no progress
	}
	_ = r.session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: r.token, Progress: done, Total: total, Message: msg})
}

func (r *reporter) Log(ctx context.Context, level quiver.LogLevel, msg string) {
	//lint:ignore SA1019 logging notifications are what MCP clients of this protocol version read.
	_ = r.session.Log(ctx, &sdk.LoggingMessageParams{Level: sdk.LoggingLevel(level), Logger: r.tool, Data: msg})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// traceContext continues the client's trace in the call's span: W3C trace context from the
// request's _meta (traceparent, tracestate), where MCP clients put it, else from the HTTP
// request's headers. The propagator is the global one, a no-op until a program sets one.
func traceContext(ctx context.Context, req *sdk.CallToolRequest) context.Context {
	p := otel.GetTextMapPropagator()
	if parent, ok := req.Params.Meta["traceparent"].(string); ok && parent != "" {
		carrier := propagation.MapCarrier{"traceparent": parent}
		if state, ok := req.Params.Meta["tracestate"].(string); ok {
			carrier["tracestate"] = state
		}
		return p.Extract(ctx, carrier)
	}
	if req.Extra != nil && req.Extra.Header != nil {
		return p.Extract(ctx, propagation.HeaderCarrier(req.Extra.Header))
	}
	return ctx
}
