package mcp

import (
	"encoding/json"
	"mime"
	"net/http"
)

// protocolVersionSessionless is the first MCP version whose requests need no session
// (SEP-2575): each request carries its protocol version, the client's name and its
// capabilities in its _meta, so that any node of a fleet answers any request. Over HTTP a POST
// of that protocol without an Mcp-Session-Id goes to the SDK's stateless handler; initialize
// still opens a session for clients of the versions before it (2025-11-25 and older), which
// keep theirs. A server that needs its client's input mid-request (a confirmation) asks
// through a multi round-trip request (SEP-2322, see confirmByInput).
const protocolVersionSessionless = "2026-07-28"

// serveStateless serves a POST of the sessionless protocol. A subscriptions/listen stays open
// until its client leaves, so it takes a place in the limiter, as a session does, while it
// lasts; every other request is answered and done.
func (d *httpDoor) serveStateless(w http.ResponseWriter, r *http.Request, id json.RawMessage, listens bool) {
	if listens {
		slot, ok := d.takePlace(w, r, id)
		if !ok {
			return
		}
		defer slot.settle() // never bound to a session: given back when the stream ends
	}
	servePost(d.stateless, w, r)
}

// stateless reports whether a POST without a session id is a request of the sessionless
// protocol that opens nothing, from its headers alone: that protocol names each request's
// method in Mcp-Method, which the SDK checks against the body (a request whose header and body
// differ is refused), so its body need not be read here. An initialize, a
// subscriptions/listen (which takes a place while it lasts) and a request without the header
// are read (needsSession).
func stateless(r *http.Request) bool {
	method := r.Header.Get("Mcp-Method")
	return method != "" && method != "initialize" && method != "subscriptions/listen" &&
		r.Header.Get("Mcp-Protocol-Version") >= protocolVersionSessionless
}

// sessionRequest is what needsSession found in a body posted without a session id.
type sessionRequest struct {
	id        json.RawMessage // of its first request, for the answer
	needs     bool            // it holds a request that needs a session (anything but initialize)
	opens     bool            // it holds an initialize, which opens a session
	stateless bool            // its requests are of the sessionless protocol (server/discover among them)
	listens   bool            // it holds a subscriptions/listen, which stays open
}

// needsSession reads a body posted without a session id. Bodies it cannot read are counted
// as opening a session, so that they are held to the limits whatever the SDK makes of them.
func needsSession(r *http.Request, body []byte) sessionRequest {
	unread := sessionRequest{opens: true}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return unread
	}
	raw, ok := messages(body)
	if !ok {
		return unread
	}
	var sr sessionRequest
	modern := r.Header.Get("Mcp-Protocol-Version") >= protocolVersionSessionless
	needs := !modern
	calls := false
	for _, m := range raw {
		req, ok := readRequest(m)
		if !ok {
			return unread
		}
		if req == nil {
			continue // a notification or a response
		}
		calls = true
		version, named := req.metaVersion()
		if named || req.Method == "initialize" || req.Method == "server/discover" {
			needs = false
		}
		modern = modern || version >= protocolVersionSessionless || req.Method == "server/discover"
		sr.add(req)
	}
	sr.needs = needs && calls
	sr.stateless = modern && calls && !sr.opens
	return sr
}

// rpcRequest is a JSON-RPC request of a body, as far as needsSession reads it.
type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// readRequest reads a message of a body: nil for a notification or a response; false when it
// does not decode.
func readRequest(m json.RawMessage) (*rpcRequest, bool) {
	var msg rpcRequest
	if json.Unmarshal(m, &msg) != nil {
		return nil, false
	}
	if msg.Method == "" || len(msg.ID) == 0 || string(msg.ID) == "null" {
		return nil, true
	}
	return &msg, true
}

// metaVersion is the protocol version a request names in its _meta, as requests of the
// sessionless protocol do; false when it names none.
func (msg *rpcRequest) metaVersion() (string, bool) {
	var params struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(msg.Params, &params)
	raw, ok := params.Meta["io.modelcontextprotocol/protocolVersion"]
	var version string
	_ = json.Unmarshal(raw, &version)
	return version, ok
}

// add notes a request of the body: the first one's id, and whether one opens a session or a
// listening stream.
func (sr *sessionRequest) add(req *rpcRequest) {
	if sr.id == nil {
		sr.id = req.ID
	}
	switch req.Method {
	case "initialize":
		sr.opens = true
	case "subscriptions/listen":
		sr.listens = true
	}
}
