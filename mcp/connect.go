package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/ids"
)

// A call that acts as its person at a provider they have not connected is answered
// authorization_required, with where to connect (quiver.UserToken). A client that can send its
// user to a URL (URL-mode elicitation) is asked to, and the call goes on once they connected:
// in the middle of the call for a client of a session, through a multi round-trip request for
// one of the sessionless protocol.

// connectionNeed is what an authorization_required result says is missing.
type connectionNeed struct {
	Provider string   `json:"provider"`
	URL      string   `json:"authorization_url"`
	Scopes   []string `json:"scopes"`
}

// needOf reads what r needs; false when it names no URL to connect at.
func needOf(r *quiver.Result) (connectionNeed, bool) {
	var need connectionNeed
	_ = json.Unmarshal(r.Meta, &need)
	return need, need.URL != ""
}

// connectQuestion is what the client's user is asked: to connect at the URL.
func connectQuestion(name string, need connectionNeed) *sdk.ElicitParams {
	return &sdk.ElicitParams{Mode: "url", ElicitationID: ids.New("elicit"), URL: need.URL,
		Message: fmt.Sprintf("The tool %s acts as you at %s. Connect your account there, and the call goes on.", name, need.Provider)}
}

// canOpenURLs reports whether a client supports URL-mode elicitation.
func canOpenURLs(caps *sdk.ClientCapabilities) bool {
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// connectAndRetry puts a call that needs its person's connection (r) to the client's user, when
// the client supports URL-mode elicitation: the user is sent to connect, and once they have
// (their connection stored, by whichever node served the callback) the call is made again,
// and that result answered. Otherwise, or if the user declines, r is answered: it says where
// to connect.
func (s *Server) connectAndRetry(ctx context.Context, ss *sdk.ServerSession, name string, args json.RawMessage, r *quiver.Result) (*quiver.Result, error) {
	need, ok := needOf(r)
	p := ss.InitializeParams()
	if s.opts.AwaitConnection == nil || !ok || p == nil || !canOpenURLs(p.Capabilities) {
		return r, nil
	}
	ectx, cancel := context.WithTimeout(ctx, ElicitationTimeout)
	defer cancel()
	ask := connectQuestion(name, need)
	res, err := ss.Elicit(ectx, ask)
	if err != nil || res.Action != "accept" {
		return r, nil
	}
	if err := s.opts.AwaitConnection(ectx, need.Provider, need.Scopes); err != nil {
		return r, nil
	}
	_ = ss.NotifyElicitationComplete(ctx, &sdk.ElicitationCompleteParams{ElicitationID: ask.ElicitationID})
	return s.d.Dispatch(ctx, quiver.Call{ID: newCallID(), Name: name, Args: args})
}

// connectInputID names the input request that sends the user to connect.
const connectInputID = "quiver.connect"

// askToConnect answers a call of the sessionless protocol that needs its person's connection
// (r) with the question, when the client can send its user to a URL and this request does not
// already answer it (a user who declined is not asked again: r is answered).
func (s *Server) askToConnect(ctx context.Context, req *sdk.CallToolRequest, round *inputRound, name string, args json.RawMessage, r *quiver.Result) {
	need, ok := needOf(r)
	if s.opts.AwaitConnection == nil || !ok || round.answered || !canOpenURLs(req.ClientCapabilities()) {
		return
	}
	scope := quiver.ScopeFrom(ctx)
	st := requestState{Ask: connectInputID, Thread: scope.ThreadID, User: scope.UserID, Tool: name, Args: argsDigest(args),
		Provider: need.Provider, Scopes: need.Scopes, Expires: time.Now().Add(ElicitationTimeout).Unix()}
	sealed, err := st.seal(s.opts.States)
	if err != nil {
		s.logger.ErrorContext(ctx, "mcp: sealing a request state", "err", err)
		return // r says where to connect
	}
	round.question(connectInputID, connectQuestion(name, need), sealed)
}

// awaitAnsweredConnection waits, when req answers the question to connect (accepted, with the
// state it was asked with), until the user has connected or ElicitationTimeout passes: the
// call then runs with the connection.
func (s *Server) awaitAnsweredConnection(ctx context.Context, req *sdk.CallToolRequest, round *inputRound, name string, args json.RawMessage) {
	answer, ok := req.Params.InputResponses[connectInputID].(*sdk.ElicitResult)
	if !ok || s.opts.AwaitConnection == nil {
		return
	}
	st, err := openState(s.opts.States, req.Params.RequestState)
	if err != nil || st.Ask != connectInputID || st.Tool != name || st.Args != argsDigest(args) {
		return
	}
	round.answered = true
	if answer.Action != "accept" {
		return
	}
	ectx, cancel := context.WithTimeout(ctx, ElicitationTimeout)
	defer cancel()
	// Connected or not, the call is made: it says where to connect if they did not.
	_ = s.opts.AwaitConnection(ectx, st.Provider, st.Scopes)
}
