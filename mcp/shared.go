package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Sessions shared by the nodes of a fleet. With HTTPOptions.Sessions set, a session opened on
// one node is stored, and any node continues it: a node that receives a request of a session
// it does not hold finds it in the store, checks that the request comes from the session's
// owner, and makes a copy of its own by initializing the SDK's session again with the
// client's initialize (so that the copy knows what the client can do, elicitation
// included). The client keeps the session id it was given (the shared id), which every node
// maps to the id of its own copy on the way in and back on the way out.
//
// A copy lasts while it is used (it is closed after the idle timeout); the store's session
// lasts while any node uses it: a node renews it at most every sharedRecheck, which is also
// how soon a node's copy learns that the session was closed elsewhere when no Relay tells it
// at once.
//
// What a server asks its client (elicitation, to confirm a call) goes out on the stream of
// the node running the call, and the client's answer, a POST of JSON-RPC responses, may reach
// any node: with HTTPOptions.Relay set, that node hands it to every node (the one that asked
// takes it; the SDK drops answers it did not ask for).

// SessionStore keeps the sessions of the streamable HTTP transport where every node serving
// the same clients finds them (see [HTTPOptions.Sessions]).
type SessionStore interface {
	// OpenSession stores a new session, or refuses it with a *SessionLimitError when its
	// owner or the server has too many.
	OpenSession(ctx context.Context, s *SharedSession) error
	// ResumeSession returns the session, kept alive for another idle timeout, or an error
	// wrapping ErrNoSession when it was closed, expired or never was.
	ResumeSession(ctx context.Context, id string) (*SharedSession, error)
	// CloseSession ends the session; ErrNoSession when it was not open.
	CloseSession(ctx context.Context, id string) error
}

// SharedSession is a session as a SessionStore keeps it.
type SharedSession struct {
	// ID is the session's id, which the client sends as Mcp-Session-Id.
	ID string
	// Owner is whom the session belongs to (HTTPOptions.Owner of the request that opened
	// it): a request of another owner is answered as one of an unknown session.
	Owner string
	// Initialize are the params of the client's initialize request, as sent.
	Initialize json.RawMessage
}

// ErrNoSession is the error of a SessionStore that has no such open session.
var ErrNoSession = errors.New("mcp: no such session")

// SessionLimitError is a session refused by a SessionStore's caps.
type SessionLimitError struct {
	// Cap is the cap reached: "total" (the server's), "workspace" (the workspace's share;
	// both HTTP 503) or "owner" (the owner's, HTTP 429).
	Cap string
	// Open is the number of sessions the cap counts.
	Open int
}

func (e *SessionLimitError) Error() string {
	return fmt.Sprintf("mcp: %d sessions open, the %s cap", e.Open, e.Cap)
}

// Relay carries clients' answers to server requests between the nodes that serve the same
// sessions (see [HTTPOptions.Relay]).
type Relay interface {
	// Publish hands body, a POST of JSON-RPC responses to session sessionID, to the other
	// nodes; an empty body tells them that the session was closed.
	Publish(ctx context.Context, sessionID string, body []byte) error
	// Subscribe calls fn with what the other nodes publish, until unsubscribe is called.
	Subscribe(fn func(sessionID string, body []byte)) (unsubscribe func())
}

// errNotOwner refuses a request of a session to another owner than the session's.
var errNotOwner = errors.New("mcp: the session is another owner's")

// maxInitializeParams bounds the client's initialize, which a session keeps in the store.
const maxInitializeParams = 32 << 10

// maxSessionID bounds the session ids looked up in the store; the server's are 31 bytes.
const maxSessionID = 200

// sharedRecheck is how long a node trusts its copy of a session without asking the store.
const sharedRecheck = 5 * time.Second

type sharedIDKey struct{}

// SharedSessionID returns the shared id of the MCP session a request is part of, on a server
// whose sessions are shared (see [HTTPOptions.Sessions]); "" otherwise.
func SharedSessionID(ctx context.Context) string {
	id, _ := ctx.Value(sharedIDKey{}).(string)
	return id
}

// sharedSessions are a door's copies of shared sessions, by shared id.
type sharedSessions struct {
	store  SessionStore
	relay  Relay
	h      http.Handler // the SDK's stateful handler, which holds the copies
	idle   time.Duration
	logger *slog.Logger

	mu     sync.Mutex
	copies map[string]*sessionCopy
}

// sessionCopy is this node's copy of a shared session.
type sessionCopy struct {
	ready   chan struct{} // closed once made (or failed)
	err     error
	localID string
	owner   string

	mu      sync.Mutex
	checked time.Time // last found open in the store
	used    time.Time
	timer   *time.Timer
}

// serve serves a request of shared session id.
func (ss *sharedSessions) serve(d *httpDoor, w http.ResponseWriter, r *http.Request, id string) {
	if len(id) > maxSessionID {
		writeRPCError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("session not found: a session id is at most %d bytes", maxSessionID))
		return
	}
	owner := d.o.Owner(r)
	if r.Method == http.MethodDelete {
		ss.serveDelete(w, r, id, owner)
		return
	}
	if r.Method == http.MethodPost {
		body, ok := readBody(w, r, d.maxBody)
		if !ok {
			return
		}
		if ss.relay != nil && onlyResponses(body) {
			ss.relayAnswers(w, r, id, owner, body)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	c, err := ss.copyOf(r, id, owner)
	if err != nil {
		ss.refuseCopy(w, id, err)
		return
	}
	r.Header.Set("Mcp-Session-Id", c.localID)
	sw := &sessionIDWriter{ResponseWriter: w, id: id}
	if r.Method == http.MethodPost {
		servePost(ss.h, sw, r)
		return
	}
	ss.h.ServeHTTP(sw, r)
}

// serveDelete closes shared session id for its owner.
func (ss *sharedSessions) serveDelete(w http.ResponseWriter, r *http.Request, id, owner string) {
	switch err := ss.close(r.Context(), id, owner); {
	case errors.Is(err, errNotOwner):
		refuseOtherOwner(w)
	case errors.Is(err, ErrNoSession):
		writeRPCError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "session not found: it was closed or expired")
	case err != nil:
		ss.logger.Error("mcp: closing a shared session", "session", id, "err", err)
		writeRPCError(w, http.StatusServiceUnavailable, nil, jsonrpc.CodeInternalError, "the server could not close this session: try again shortly")
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// refuseCopy answers a request whose session could not be continued here (err says why).
func (ss *sharedSessions) refuseCopy(w http.ResponseWriter, id string, err error) {
	switch {
	case errors.Is(err, errNotOwner):
		refuseOtherOwner(w)
	case errors.Is(err, ErrNoSession):
		writeRPCError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest,
			"session not found: it was closed or expired, or is not yours; send initialize without Mcp-Session-Id to open a new one")
	default:
		ss.logger.Error("mcp: continuing a shared session", "session", id, "err", err)
		writeRPCError(w, http.StatusServiceUnavailable, nil, jsonrpc.CodeInternalError, "the server could not continue this session: try again shortly")
	}
}

// relayAnswers serves a POST of JSON-RPC responses (a client's answers to what a node asked
// it) to session id: the node that asked may be any, so they are delivered here and relayed to
// the others. Only the session's owner may answer in it: an answer can approve a call.
func (ss *sharedSessions) relayAnswers(w http.ResponseWriter, r *http.Request, id, owner string, body []byte) {
	if c := ss.held(id, owner); c != nil {
		ss.deliver(r.Context(), c, body)
	} else {
		s, err := ss.store.ResumeSession(r.Context(), id)
		switch {
		case errors.Is(err, ErrNoSession):
			writeRPCError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "session not found: it was closed or expired")
			return
		case err != nil:
			ss.logger.Error("mcp: reading a shared session", "session", id, "err", err)
			writeRPCError(w, http.StatusServiceUnavailable, nil, jsonrpc.CodeInternalError, "the server could not read this session: try again shortly")
			return
		case s.Owner != owner:
			refuseOtherOwner(w)
			return
		}
	}
	if err := ss.relay.Publish(r.Context(), id, body); err != nil {
		ss.logger.Warn("mcp: relaying a client's answer to the other nodes", "session", id, "err", err)
	}
	w.WriteHeader(http.StatusAccepted)
}

// open serves an initialize without a session id: the session is stored within its caps
// first, then opened here under the shared id.
func (ss *sharedSessions) open(d *httpDoor, w http.ResponseWriter, r *http.Request, body []byte, rpcID json.RawMessage) {
	params := initializeParams(body)
	if len(params) > maxInitializeParams {
		writeRPCError(w, http.StatusBadRequest, rpcID, jsonrpc.CodeInvalidParams,
			fmt.Sprintf("initialize: its params are %d bytes, over the %d a session keeps", len(params), maxInitializeParams))
		return
	}
	id := "mcps_" + rand.Text()
	owner := d.o.Owner(r)
	err := ss.store.OpenSession(r.Context(), &SharedSession{ID: id, Owner: owner, Initialize: params})
	if err != nil {
		var le *SessionLimitError
		if !errors.As(err, &le) {
			ss.logger.Error("mcp: storing a new session", "err", err)
			writeRPCError(w, http.StatusServiceUnavailable, rpcID, jsonrpc.CodeInternalError, "the server could not open a session: try again shortly")
			return
		}
		if secs := int(math.Ceil(ss.idle.Seconds())); secs > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		}
		status, what := http.StatusServiceUnavailable, map[string]string{"total": "the server has %d open, its limit",
			"workspace": "this workspace has %d open, its limit"}[le.Cap]
		if le.Cap == "owner" {
			status, what = http.StatusTooManyRequests, perClient(owner)
		}
		writeRPCError(w, status, rpcID, CodeTooManySessions, sessionLimitText(what, le.Open, idleText(ss.idle)))
		return
	}
	c := &sessionCopy{ready: make(chan struct{}), owner: owner}
	ss.mu.Lock()
	ss.copies[id] = c
	ss.mu.Unlock()
	r = r.WithContext(context.WithValue(r.Context(), sharedIDKey{}, id))
	sw := &sessionIDWriter{ResponseWriter: w, id: id}
	ew := &rpcErrorWriter{ResponseWriter: sw}
	ss.h.ServeHTTP(ew, r)
	ew.finish(body)
	ss.made(id, c, sw.localID, nil)
	if sw.localID == "" {
		// The SDK opened no session (a bad initialize): nothing to keep.
		_ = ss.store.CloseSession(context.WithoutCancel(r.Context()), id)
	}
}

// copyOf returns this node's copy of session id, made if need be, after checking that owner
// may use it; an error wrapping ErrNoSession when the session is not open (or not owner's).
func (ss *sharedSessions) copyOf(r *http.Request, id, owner string) (*sessionCopy, error) {
	ss.mu.Lock()
	c := ss.copies[id]
	if c == nil {
		c = &sessionCopy{ready: make(chan struct{})}
		ss.copies[id] = c
		ss.mu.Unlock()
		localID, owner, err := ss.resume(r, id)
		c.owner = owner
		ss.made(id, c, localID, err)
	} else {
		ss.mu.Unlock()
	}
	select {
	case <-c.ready:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	if c.err != nil {
		return nil, c.err
	}
	if c.owner != owner {
		return nil, errNotOwner
	}
	now := time.Now()
	c.mu.Lock()
	stale := now.Sub(c.checked) >= ss.recheck()
	c.used = now
	c.mu.Unlock()
	if stale {
		if _, err := ss.store.ResumeSession(r.Context(), id); err != nil {
			if errors.Is(err, ErrNoSession) {
				ss.drop(id, c)
			}
			return nil, err
		}
		c.mu.Lock()
		c.checked = now
		c.mu.Unlock()
	}
	return c, nil
}

// recheck is how long a copy is trusted without asking the store, which also renews the
// session there: within the idle timeout, or the session would lapse in the store while used.
func (ss *sharedSessions) recheck() time.Duration {
	if ss.idle > 0 {
		return min(sharedRecheck, ss.idle/2)
	}
	return sharedRecheck
}

// made records the outcome of making copy c of session id.
func (ss *sharedSessions) made(id string, c *sessionCopy, localID string, err error) {
	if err == nil && localID == "" {
		err = fmt.Errorf("the SDK opened no session for %s", id)
	}
	now := time.Now()
	c.localID, c.err = localID, err
	c.mu.Lock()
	c.checked, c.used = now, now
	if err == nil && ss.idle > 0 {
		c.timer = time.AfterFunc(ss.idle, func() { ss.expire(id, c) })
	}
	c.mu.Unlock()
	close(c.ready)
	if err != nil {
		ss.mu.Lock()
		if ss.copies[id] == c {
			delete(ss.copies, id)
		}
		ss.mu.Unlock()
	}
}

// resume makes this node's copy of a session another node opened: the SDK initializes a
// session again with the client's initialize, in a request that carries the values of r's
// context (the caller, the shared id), which the SDK keeps for the session's requests.
func (ss *sharedSessions) resume(r *http.Request, id string) (localID, owner string, err error) {
	s, err := ss.store.ResumeSession(r.Context(), id)
	if err != nil {
		return "", "", err
	}
	ctx := context.WithValue(context.WithoutCancel(r.Context()), sharedIDKey{}, id)
	init, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": s.Initialize})
	res := ss.post(ctx, "", init)
	localID = res.Header().Get("Mcp-Session-Id")
	if res.Code != http.StatusOK || localID == "" {
		return "", "", fmt.Errorf("initializing a copy of session %s: HTTP %d: %.200s", id, res.Code, res.Body.String())
	}
	done := ss.post(ctx, localID, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if done.Code != http.StatusAccepted {
		return "", "", fmt.Errorf("initializing a copy of session %s: notifications/initialized: HTTP %d", id, done.Code)
	}
	return localID, s.Owner, nil
}

// post serves a POST of body to the SDK's handler in this process.
func (ss *sharedSessions) post(ctx context.Context, localID string, body []byte) *httptest.ResponseRecorder {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if localID != "" {
		req.Header.Set("Mcp-Session-Id", localID)
	}
	res := httptest.NewRecorder()
	ss.h.ServeHTTP(res, req)
	return res
}

// held returns this node's copy of session id when it has one owner may use.
func (ss *sharedSessions) held(id, owner string) *sessionCopy {
	ss.mu.Lock()
	c := ss.copies[id]
	ss.mu.Unlock()
	if c == nil {
		return nil
	}
	select {
	case <-c.ready:
	default:
		return nil
	}
	if c.err != nil || c.owner != owner {
		return nil
	}
	return c
}

// deliver hands a client's answers to this node's copy.
func (ss *sharedSessions) deliver(ctx context.Context, c *sessionCopy, body []byte) {
	if res := ss.post(ctx, c.localID, body); res.Code != http.StatusAccepted {
		ss.logger.Warn("mcp: delivering a client's answer", "status", res.Code)
	}
}

// relayed delivers what another node relayed to this node's copy, if it has one.
func (ss *sharedSessions) relayed(id string, body []byte) {
	ss.mu.Lock()
	c := ss.copies[id]
	ss.mu.Unlock()
	if c == nil {
		return
	}
	select {
	case <-c.ready:
		switch {
		case c.err != nil:
		case len(body) == 0:
			ss.drop(id, c) // closed on another node
		default:
			ss.deliver(context.Background(), c, body)
		}
	default:
	}
}

// close ends owner's session id everywhere: in the store, and here.
func (ss *sharedSessions) close(ctx context.Context, id, owner string) error {
	s, err := ss.store.ResumeSession(ctx, id)
	if err != nil {
		return err
	}
	if s.Owner != owner {
		return errNotOwner
	}
	if err := ss.store.CloseSession(ctx, id); err != nil && !errors.Is(err, ErrNoSession) {
		return err
	}
	if ss.relay != nil {
		// The other nodes' copies go now rather than at their next look at the store.
		if err := ss.relay.Publish(ctx, id, nil); err != nil {
			ss.logger.Warn("mcp: telling the other nodes of a closed session", "session", id, "err", err)
		}
	}
	ss.mu.Lock()
	c := ss.copies[id]
	ss.mu.Unlock()
	if c != nil {
		<-c.ready
		ss.drop(id, c)
	}
	return nil
}

// expire closes copy c once it has gone unused for the idle timeout; the session stays open
// in the store for the other nodes (and this one, which makes a new copy if asked again).
func (ss *sharedSessions) expire(id string, c *sessionCopy) {
	c.mu.Lock()
	left := ss.idle - time.Since(c.used)
	if left > 0 {
		c.timer.Reset(left)
	}
	c.mu.Unlock()
	if left <= 0 {
		ss.drop(id, c)
	}
}

// drop closes this node's copy c of session id.
func (ss *sharedSessions) drop(id string, c *sessionCopy) {
	ss.mu.Lock()
	if ss.copies[id] != c {
		ss.mu.Unlock()
		return
	}
	delete(ss.copies, id)
	ss.mu.Unlock()
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	req, _ := http.NewRequest(http.MethodDelete, "/mcp", nil)
	req.Header.Set("Mcp-Session-Id", c.localID)
	ss.h.ServeHTTP(httptest.NewRecorder(), req)
}

// sessionIDWriter gives the client the shared id where the SDK names its copy's, and notes
// the copy's id.
type sessionIDWriter struct {
	http.ResponseWriter
	id, localID string
}

func (w *sessionIDWriter) WriteHeader(code int) {
	w.rename()
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionIDWriter) Write(b []byte) (int, error) {
	w.rename()
	return w.ResponseWriter.Write(b)
}

func (w *sessionIDWriter) rename() {
	h := w.Header()
	if local := h.Get("Mcp-Session-Id"); local != "" && local != w.id {
		w.localID = local
		h.Set("Mcp-Session-Id", w.id)
	}
}

func (w *sessionIDWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *sessionIDWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// readBody reads r's body within max bytes, answering 413 or 400 itself when it cannot.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	if int64(len(body)) > max {
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", max), http.StatusRequestEntityTooLarge)
		return nil, false
	}
	return body, true
}

// onlyResponses reports whether body is JSON-RPC responses and nothing else.
func onlyResponses(body []byte) bool {
	msgs, ok := messages(body)
	if !ok || len(msgs) == 0 {
		return false
	}
	for _, m := range msgs {
		var msg struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
		}
		if json.Unmarshal(m, &msg) != nil || msg.Method != "" || len(msg.ID) == 0 {
			return false
		}
	}
	return true
}

// initializeParams returns the params of the initialize in body.
func initializeParams(body []byte) json.RawMessage {
	msgs, _ := messages(body)
	for _, m := range msgs {
		var msg struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(m, &msg) == nil && msg.Method == "initialize" {
			return msg.Params
		}
	}
	return nil
}

// messages splits a body of one JSON-RPC message or a batch.
func messages(body []byte) ([]json.RawMessage, bool) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var raw []json.RawMessage
		if json.Unmarshal(trimmed, &raw) != nil {
			return nil, false
		}
		return raw, true
	}
	return []json.RawMessage{trimmed}, len(trimmed) > 0
}

// refuseOtherOwner answers a request of a session from another owner than the session's: a
// session id is not a credential, and another owner (another API key) may not act in it.
func refuseOtherOwner(w http.ResponseWriter) {
	writeRPCError(w, http.StatusForbidden, nil, jsonrpc.CodeInvalidRequest, "this MCP session was opened by another owner (another API key)")
}
