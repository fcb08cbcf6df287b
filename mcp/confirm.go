package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/store/secret"
)

// ElicitationTimeout bounds how long [Confirm] waits for the client's user to answer; the call
// is refused then, saying so. A client of the sessionless protocol answers in a request of its
// own: its answer is taken for that long after the question.
const ElicitationTimeout = 10 * time.Minute

// Confirm returns a [quiver.Confirmer] for dispatchers that serve MCP clients: a call that came
// over MCP and needs confirmation is put to the client's user through elicitation. Accepting
// runs it; declining or cancelling denies it (an error result saying so). A client that does
// not support elicitation cannot ask its user, so the call is refused with an error result
// that says why. Calls that did not come over MCP go to fallback, or stay paused when it is nil.
//
// A client of a session (protocol versions up to 2025-11-25) is asked in the middle of the
// call (elicitation/create). A client of the sessionless protocol (2026-07-28 on) is answered
// that the call needs its input (resultType "input_required", a multi round-trip request):
// that call is recorded as waiting for a confirmation, and the client calls again with its
// user's answer, which any node of a fleet takes (see [ServerOptions.States]).
func Confirm(fallback quiver.Confirmer) quiver.Confirmer {
	return func(ctx context.Context, call *quiver.Call) (quiver.Decision, error) {
		req := Request(ctx)
		if req != nil {
			if round, ok := ctx.Value(roundKey{}).(*inputRound); ok {
				return round.confirm(ctx, req, call)
			}
			return askUser(ctx, req.Session, call)
		}
		if fallback != nil {
			return fallback(ctx, call)
		}
		return quiver.Decision{Action: quiver.Pause}, nil
	}
}

// askUser puts call to the user of the session's client through elicitation.
func askUser(ctx context.Context, ss *sdk.ServerSession, call *quiver.Call) (quiver.Decision, error) {
	var info *sdk.Implementation
	var caps *sdk.ClientCapabilities
	if p := ss.InitializeParams(); p != nil {
		info, caps = p.ClientInfo, p.Capabilities
	}
	if err := canElicit(info, caps); err != nil {
		return quiver.Decision{}, err
	}
	// A lost answer must not hold the call (and its session) for ever.
	ectx, cancel := context.WithTimeout(ctx, ElicitationTimeout)
	defer cancel()
	res, err := ss.Elicit(ectx, confirmQuestion(call))
	if err != nil {
		return quiver.Decision{}, fmt.Errorf("asking the MCP client's user: %w", err)
	}
	return decisionOf(res), nil
}

// confirmQuestion is what the client's user is asked about call: a form with no fields,
// which they accept, decline or cancel.
func confirmQuestion(call *quiver.Call) *sdk.ElicitParams {
	msg := fmt.Sprintf("Allow the tool %s to run with these arguments?\n%s", call.Name, truncate(string(quiver.ArgsForHistory(call.Args)), 2000))
	return &sdk.ElicitParams{
		Message:         msg,
		RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}},
	}
}

// decisionOf is the decision the user's answer makes.
func decisionOf(res *sdk.ElicitResult) quiver.Decision {
	switch res.Action {
	case "accept":
		return quiver.Decision{Action: quiver.Approve}
	case "decline":
		return quiver.Decision{Action: quiver.Deny, Message: "the user declined it in the MCP client"}
	default:
		return quiver.Decision{Action: quiver.Deny, Message: "the user cancelled the confirmation in the MCP client"}
	}
}

// canElicit refuses a client that does not support elicitation: its user cannot be asked.
func canElicit(info *sdk.Implementation, caps *sdk.ClientCapabilities) error {
	if caps != nil && caps.Elicitation != nil {
		return nil
	}
	client := "the MCP client"
	if info != nil && info.Name != "" {
		client = fmt.Sprintf("the MCP client %q", info.Name)
	}
	return fmt.Errorf("%s does not support elicitation, so its user cannot be asked to approve the call; "+
		"use a client that supports elicitation, or have the tool's confirmation requirement lifted", client)
}

// confirmInputID names the input request a confirmation asks with, in inputRequests and in
// the client's inputResponses.
const confirmInputID = "quiver.confirm"

type roundKey struct{}

// inputRound is one request of a multi round-trip tools/call (the sessionless protocol): what
// the call asked the client for, if anything, for the door to answer with.
type inputRound struct {
	states   Sealer
	answers  AnswerLedger
	callID   string // the request's own call: a call a tool makes under it is not asked this way
	answered bool   // the request answers the question to connect (see awaitAnsweredConnection)

	id    string // of the input request
	ask   *sdk.ElicitParams
	state string
}

// question notes what the call asks its client, and the sealed state to hand back with the answer.
func (r *inputRound) question(id string, ask *sdk.ElicitParams, state string) {
	r.id, r.ask, r.state = id, ask, state
}

// asked reports whether the request's own call waits for its client's input.
func (r *inputRound) asked() bool { return r.ask != nil }

// confirm decides call from the user's answer the request carries, when the request state it
// comes with is the one given when this call was asked about; otherwise it asks (the call is
// paused, and the door answers with the question).
func (r *inputRound) confirm(ctx context.Context, req *sdk.CallToolRequest, call *quiver.Call) (quiver.Decision, error) {
	if call.ID != r.callID {
		return quiver.Decision{}, errors.New("a call made by a tool cannot ask the MCP client's user: " +
			"only the call the client made can, and its client speaks the sessionless protocol")
	}
	scope := quiver.ScopeFrom(ctx)
	if answer, ok := req.Params.InputResponses[confirmInputID].(*sdk.ElicitResult); ok {
		st, err := openState(r.states, req.Params.RequestState)
		if err == nil && st.Ask == confirmInputID && st.ID != "" && st.answers(scope, call) {
			first, err := r.answers.Take(ctx, st.ID, time.Unix(st.Expires, 0))
			if err != nil {
				return quiver.Decision{}, fmt.Errorf("recording the MCP client's answer: %w", err)
			}
			if first {
				return decisionOf(answer), nil
			}
		}
		// An answer to another question (other arguments, another call), one taken already
		// (the same request again), or too late: the user is asked about this one.
	}
	if err := canElicit(req.ClientInfo(), req.ClientCapabilities()); err != nil {
		return quiver.Decision{}, err
	}
	st := requestState{ID: ids.Random(16), Ask: confirmInputID, Thread: scope.ThreadID, User: scope.UserID, Tool: call.Name,
		Args: argsDigest(call.Args), Expires: time.Now().Add(ElicitationTimeout).Unix()}
	sealed, err := st.seal(r.states)
	if err != nil {
		return quiver.Decision{}, fmt.Errorf("sealing the request state: %w", err)
	}
	r.question(confirmInputID, confirmQuestion(call), sealed)
	return quiver.Decision{Action: quiver.Pause}, nil
}

// Sealer seals what a server gives its clients to hand back (the request state of a multi
// round-trip request), so that a client can neither read nor change it; [secret.Keyring] is
// one. The nodes of a fleet must share it, so that any node opens what another sealed.
type Sealer interface {
	Seal(plain []byte, where string) (string, error)
	Open(sealed, where string) ([]byte, error)
}

// statePlace binds a sealed request state to its use.
const statePlace = "mcp-request-state"

// requestState is what a multi round-trip tools/call gives its client to hand back with the
// user's answer: the thread the asking was recorded on (the answered call is recorded there
// too), and the question it answers. A client that hands back an answer holds its user's
// decision, as with elicitation; what the state adds is that the answer is taken for the call
// asked about alone (same caller, tool and arguments), once (see [AnswerLedger]), and only
// until it expires.
type requestState struct {
	// ID names a confirmation's question, for the ledger that takes its answer once.
	ID      string `json:"id,omitempty"`
	Ask     string `json:"ask"` // the input request's id: what was asked
	Thread  string `json:"thread,omitempty"`
	User    string `json:"user,omitempty"`
	Tool    string `json:"tool"`
	Args    string `json:"args"` // SHA-256 of the arguments (as validated, for a confirmation), hex
	Expires int64  `json:"exp"`  // Unix seconds
	// Provider and Scopes are the connection the user was sent to make.
	Provider string   `json:"provider,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`
}

func (st requestState) seal(keys Sealer) (string, error) {
	plain, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	return keys.Seal(plain, statePlace)
}

// openState opens a request state sealed by a node of this server, and refuses one that expired.
func openState(keys Sealer, sealed string) (requestState, error) {
	var st requestState
	if sealed == "" {
		return st, errors.New("no request state")
	}
	plain, err := keys.Open(sealed, statePlace)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(plain, &st); err != nil {
		return st, err
	}
	if time.Now().Unix() > st.Expires {
		return st, errors.New("the request state expired")
	}
	return st, nil
}

// answers reports whether the state was given when call, by the caller of scope, was asked about.
func (st requestState) answers(scope quiver.Scope, call *quiver.Call) bool {
	return st.User == scope.UserID && st.Tool == call.Name && st.Args == argsDigest(call.Args)
}

func argsDigest(args json.RawMessage) string {
	sum := sha256.Sum256(args)
	return hex.EncodeToString(sum[:])
}

// newStateKeys is the sealer of a server given none: a key of its own, which no other process
// holds (a fleet gives its shared keyring, see ServerOptions.States).
func newStateKeys() Sealer {
	k, _, err := secret.GenerateKey()
	if err != nil {
		panic(fmt.Sprintf("mcp: generating a key for request states: %v", err)) // the system's randomness failed
	}
	return secret.NewKeyring(k)
}
