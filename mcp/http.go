package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/internal/hostcheck"
)

// Defaults of [HTTPOptions]. A session holds about 20 KB of the server's memory until it ends,
// so the defaults bound what clients that open sessions and never close them can hold to about
// 20 MB.
const (
	// DefaultSessionIdleTimeout is how long a session may go without a request before it is
	// closed.
	DefaultSessionIdleTimeout = 5 * time.Minute
	// DefaultMaxSessions is the number of sessions open at once.
	DefaultMaxSessions = 1000
	// DefaultMaxSessionsPerOwner is the number of sessions one owner (by default, one IP
	// address) may have open at once.
	DefaultMaxSessionsPerOwner = 250
)

// CodeTooManySessions is the JSON-RPC error code of the answer to a request that would open a
// session beyond [HTTPOptions.MaxSessions] (HTTP 503) or [HTTPOptions.MaxSessionsPerOwner]
// (HTTP 429). It is in the range JSON-RPC leaves to servers.
const CodeTooManySessions = -32030

// HTTPOptions configures [Server.HTTPHandler].
type HTTPOptions struct {
	// MaxRequestBytes caps the body of one HTTP request; larger ones get 413. Zero means 4 MiB.
	MaxRequestBytes int64
	// AllowedOrigins lists the Origin header values accepted besides local ones
	// (http://localhost, http://127.0.0.1 and http://[::1], any port). A request with another
	// Origin gets 403: browsers send it, so this keeps web pages from driving the server.
	AllowedOrigins []string
	// AllowedHosts lists the host names (without port) accepted in the Host header besides
	// local ones: localhost, loopback addresses and the address the request arrived on. A
	// request with another Host gets 403, which defeats DNS rebinding (a web page whose
	// name is made to resolve to this server sends its own name as Host). Give the host of
	// the URL clients use when they reach the server by a name (a DNS name, a reverse proxy).
	AllowedHosts []string
	// SessionTimeout closes a session that has had no request for that long (a request in
	// progress keeps it open); its client must initialize a new one. Zero means
	// DefaultSessionIdleTimeout; negative, never.
	SessionTimeout time.Duration
	// MaxSessions caps the sessions open at once: a request that would open another gets 503
	// with a JSON-RPC error ([CodeTooManySessions]) until some close. Zero means
	// DefaultMaxSessions; negative, no cap.
	MaxSessions int
	// MaxSessionsPerOwner caps the sessions one owner (see Owner) has open at once: a request
	// that would open another gets 429 with a JSON-RPC error ([CodeTooManySessions]), so that
	// one client cannot take every session. Zero means DefaultMaxSessionsPerOwner; negative,
	// no cap.
	MaxSessionsPerOwner int
	// Owner names whom a request that opens a session comes from, for MaxSessionsPerOwner
	// (an API key, say). Nil uses the client's IP address; behind a reverse proxy every client
	// has the proxy's, so give one that reads what the proxy forwards.
	Owner func(*http.Request) string
	// Pool, when set, is shared with other handlers (a server with an MCP server per
	// workspace): each session also takes a place in it, so that the sessions of all of them
	// together stay within the pool's cap (503 beyond it). MaxSessions is then this handler's
	// share, which no one handler can exceed.
	Pool *SessionPool
	// Logger receives the transport's diagnostics; nil discards them.
	Logger *slog.Logger
	// Sessions, when set, keeps the sessions where every node of a fleet finds them, so that
	// any node continues any session (see [SessionStore]); the store then enforces the caps on
	// sessions (MaxSessions, MaxSessionsPerOwner and Pool are not used), and SessionTimeout
	// closes a node's copy of a session it has not used for that long.
	Sessions SessionStore
	// Relay, with Sessions, carries a client's answers to what a node asked it (elicitation)
	// to the node that asked, whichever node the answers reach.
	Relay Relay
}

// SessionPool caps the sessions of several HTTP handlers together (see [HTTPOptions.Pool]).
type SessionPool struct{ l *sessionLimiter }

// NewSessionPool returns a pool of max sessions (negative: no cap) whose refusals are logged
// to logger (nil discards them).
func NewSessionPool(max int, logger *slog.Logger) *SessionPool {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &SessionPool{&sessionLimiter{max: max, perOwner: -1, logger: logger, owners: map[string]int{}}}
}

// Open is the number of sessions open in the pool's handlers.
func (p *SessionPool) Open() int {
	p.l.mu.Lock()
	defer p.l.mu.Unlock()
	return p.l.total
}

// HTTPHandler returns the streamable HTTP transport for the server, with stateful sessions,
// to be mounted at /mcp. DNS rebinding protection is on: a request whose Host is neither
// local nor allowed is refused, and so is one whose Origin is neither local nor allowed.
// Sessions are capped in number (in total and per owner) and closed when idle (see
// [HTTPOptions]).
func (s *Server) HTTPHandler(opts *HTTPOptions) http.Handler {
	var o HTTPOptions
	if opts != nil {
		o = *opts
	}
	o.setDefaults()
	maxBody := o.MaxRequestBytes
	if maxBody == 0 {
		maxBody = sdk.DefaultMaxRequestBodyBytes
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	server := func(*http.Request) *sdk.Server { return s.srv }
	h := sdk.NewStreamableHTTPHandler(server, o.sdkOptions())
	stateless := sdk.NewStreamableHTTPHandler(server, o.statelessOptions())
	guard := hostcheck.Policy{Hosts: o.AllowedHosts, Origins: o.AllowedOrigins}
	d := &httpDoor{h: h, stateless: stateless, guard: guard, lim: o.limiter(logger), o: o, maxBody: maxBody}
	if o.Sessions != nil {
		d.shared = &sharedSessions{store: o.Sessions, relay: o.Relay, h: h, idle: o.SessionTimeout, logger: logger,
			copies: map[string]*sessionCopy{}}
		if o.Relay != nil {
			o.Relay.Subscribe(d.shared.relayed)
		}
	}
	return d
}

// setDefaults sets the options left zero to their defaults; a negative SessionTimeout is the
// SDK's "never" (0).
func (o *HTTPOptions) setDefaults() {
	switch {
	case o.SessionTimeout == 0:
		o.SessionTimeout = DefaultSessionIdleTimeout
	case o.SessionTimeout < 0:
		o.SessionTimeout = 0
	}
	if o.MaxSessions == 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxSessionsPerOwner == 0 {
		o.MaxSessionsPerOwner = DefaultMaxSessionsPerOwner
	}
	if o.Owner == nil {
		o.Owner = remoteIP
	}
}

// sdkOptions are the options of the SDK's handler.
func (o *HTTPOptions) sdkOptions() *sdk.StreamableHTTPOptions {
	sdkOpts := &sdk.StreamableHTTPOptions{
		MaxRequestBodyBytes: o.MaxRequestBytes,
		SessionTimeout:      o.SessionTimeout,
		Logger:              o.Logger,
		// The SDK checks Host only on loopback connections; the guard checks it on every
		// connection, and accepts the hosts the operator allowed.
		DisableLocalhostProtection: true,
	}
	if o.Sessions != nil {
		sdkOpts.SessionTimeout = 0 // the copies of shared sessions expire on their own timers
	}
	return sdkOpts
}

// statelessOptions are the options of the SDK's handler of the sessionless protocol.
func (o *HTTPOptions) statelessOptions() *sdk.StreamableHTTPOptions {
	return &sdk.StreamableHTTPOptions{
		Stateless: true,
		// A request of that protocol is its POST: a client that goes away has cancelled it,
		// as a client of a session does with notifications/cancelled.
		PropagateRequestCancellation: true,
		MaxRequestBodyBytes:          o.MaxRequestBytes,
		Logger:                       o.Logger,
		DisableLocalhostProtection:   true, // as in sdkOptions: the guard checks Host
	}
}

// limiter is the sessions' limiter, sharing its pool's count when the options give one.
func (o *HTTPOptions) limiter(logger *slog.Logger) *sessionLimiter {
	lim := &sessionLimiter{max: o.MaxSessions, perOwner: o.MaxSessionsPerOwner, idle: o.SessionTimeout, logger: logger, owners: map[string]int{}}
	if o.Pool != nil {
		lim.pool = o.Pool.l
		lim.pool.mu.Lock()
		lim.pool.idle = o.SessionTimeout
		lim.pool.mu.Unlock()
	}
	return lim
}

// httpDoor is MCP's streamable HTTP transport as this server serves it: the SDK's handler
// behind the Host and Origin check, the session limits, and JSON-RPC answers to what the SDK
// refuses in plain text.
type httpDoor struct {
	h         http.Handler // sessions (initialize, Mcp-Session-Id)
	stateless http.Handler // requests of the sessionless protocol (2026-07-28 on)
	shared    *sharedSessions
	guard     hostcheck.Policy
	lim       *sessionLimiter
	o         HTTPOptions
	maxBody   int64
}

func (d *httpDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if why := d.guard.Check(r); why != "" {
		http.Error(w, "Forbidden: "+why, http.StatusForbidden)
		return
	}
	if id := r.Header.Get("Mcp-Session-Id"); id != "" && d.shared != nil {
		d.shared.serve(d, w, r, id)
		return
	}
	if id := r.Header.Get("Mcp-Session-Id"); r.Method == http.MethodDelete && id != "" {
		// Answered once the session's place is free again (see sessionLimiter.ends).
		held := &heldResponse{header: w.Header()}
		d.h.ServeHTTP(held, r)
		d.lim.awaitRelease(r.Context(), id)
		held.writeTo(w)
		return
	}
	if r.Method != http.MethodPost {
		d.h.ServeHTTP(w, r)
		return
	}
	if r.Header.Get("Mcp-Session-Id") != "" {
		servePost(d.h, w, r)
		return
	}
	d.open(w, r)
}

// servePost serves a POST of a session through h, its plain-text refusals of JSON-RPC
// messages turned into JSON-RPC errors (see rpcErrorWriter), which name the request's id: the
// start of the body is kept for that.
func servePost(h http.Handler, w http.ResponseWriter, r *http.Request) {
	head := &prefixBuffer{max: 64 << 10}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(r.Body, head), r.Body}
	ew := &rpcErrorWriter{ResponseWriter: w}
	h.ServeHTTP(ew, r)
	ew.finish(head.Bytes())
}

// open serves a POST without a session id, which makes the SDK open a session whatever it
// holds: only initialize may, and only within the limits.
func (d *httpDoor) open(w http.ResponseWriter, r *http.Request) {
	if stateless(r) {
		servePost(d.stateless, w, r)
		return
	}
	body, ok := readBody(w, r, d.maxBody)
	if !ok {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sr := needsSession(r, body)
	id := sr.id
	if sr.stateless {
		d.serveStateless(w, r, id, sr.listens)
		return
	}
	if sr.needs {
		writeRPCError(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidRequest,
			"no session: this request needs the Mcp-Session-Id header of a session; send initialize without it first, "+
				"then send the Mcp-Session-Id its answer carries with every request")
		return
	}
	if !sr.opens {
		// Notifications or responses only, which open nothing: the SDK answers them.
		d.h.ServeHTTP(w, r)
		return
	}
	if d.shared != nil {
		d.shared.open(d, w, r, body, id)
		return
	}
	slot, ok := d.takePlace(w, r, id)
	if !ok {
		return
	}
	defer slot.settle()
	r = r.WithContext(context.WithValue(r.Context(), slotKey{}, slot))
	ew := &rpcErrorWriter{ResponseWriter: w}
	d.h.ServeHTTP(ew, r)
	ew.finish(body)
}

// takePlace takes a place in the limiter for what a request opens (a session, a listening
// stream), or answers why there is none.
func (d *httpDoor) takePlace(w http.ResponseWriter, r *http.Request, id json.RawMessage) (*sessionSlot, bool) {
	slot, refusal := d.lim.acquire(d.o.Owner(r))
	if refusal != nil {
		if secs := int(math.Ceil(d.o.SessionTimeout.Seconds())); secs > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		}
		writeRPCError(w, refusal.status, id, CodeTooManySessions, refusal.message)
		return nil, false
	}
	return slot, true
}

// remoteIP is the default owner of a session: the client's IP address.
func remoteIP(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// writeRPCError answers with a JSON-RPC error in the body of an HTTP error, as the streamable
// HTTP transport allows; id is the request's (left out when unknown, see rpcErrorBody).
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int64, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(rpcErrorBody(id, code, msg))
}

// rpcErrorWriter turns the SDK's plain-text 400 answer to a JSON-RPC message it rejects (an
// unknown method, a request without id) into a JSON-RPC error response, which the streamable
// HTTP transport allows in the body of an HTTP error, so clients see -32601 or -32600 and the
// request id rather than a line of text. Everything else passes through untouched.
type rpcErrorWriter struct {
	http.ResponseWriter
	rejected bool
	text     bytes.Buffer
}

func (w *rpcErrorWriter) WriteHeader(code int) {
	if code == http.StatusBadRequest && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.rejected = true
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *rpcErrorWriter) Write(b []byte) (int, error) {
	if w.rejected {
		return w.text.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *rpcErrorWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.rejected {
		f.Flush()
	}
}

func (w *rpcErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes the JSON-RPC error for a rejected message; body is (the start of) the request.
func (w *rpcErrorWriter) finish(body []byte) {
	if !w.rejected {
		return
	}
	msg := strings.TrimSpace(w.text.String())
	// The SDK's wording tells which error it was; anything else is an invalid request.
	code := int64(jsonrpc.CodeInvalidRequest)
	switch {
	case strings.Contains(msg, "unsupported"):
		code = jsonrpc.CodeMethodNotFound
	case strings.HasPrefix(msg, "malformed payload"):
		code = jsonrpc.CodeParseError
	}
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	var id json.RawMessage
	if json.Unmarshal(body, &req) == nil && len(req.ID) > 0 {
		id = req.ID
	}
	writeRPCError(w.ResponseWriter, http.StatusBadRequest, id, code, msg)
}

// prefixBuffer keeps the first max bytes written to it.
type prefixBuffer struct {
	buf bytes.Buffer
	max int
}

func (p *prefixBuffer) Write(b []byte) (int, error) {
	if room := p.max - p.buf.Len(); room > 0 {
		p.buf.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

func (p *prefixBuffer) Bytes() []byte { return p.buf.Bytes() }

// heldResponse keeps a small answer (a DELETE's) until it may be sent.
type heldResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (h *heldResponse) Header() http.Header { return h.header }

func (h *heldResponse) WriteHeader(status int) {
	if h.status == 0 {
		h.status = status
	}
}

func (h *heldResponse) Write(b []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	return h.body.Write(b)
}

func (h *heldResponse) writeTo(w http.ResponseWriter) {
	w.WriteHeader(cmp.Or(h.status, http.StatusOK))
	_, _ = w.Write(h.body.Bytes())
}
