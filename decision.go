package quiver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// MetaDecision is the key of a result's Meta that holds the record of a person's decision on
// its call (a DecisionRecord). It is written by the dispatcher at the confirmation gate, so
// every door that shows a result's Meta (a thread's messages over the API, MCP's _meta, the
// event stream, the console) shows who decided without code of its own.
const MetaDecision = "decision"

// DecisionRecord is what a call's result keeps of the decision that let it run or refused it:
// the action, who decided and when, and for an edit both argument sets, so that a reader sees
// what the model (or caller) asked for beside what ran. Secrets are masked in both, as in the
// rest of the result.
type DecisionRecord struct {
	Action      DecisionAction `json:"action"`
	UserID      string         `json:"user_id,omitempty"`
	KeyID       string         `json:"key_id,omitempty"`
	AccessToken bool           `json:"access_token,omitempty"`
	DecidedAt   time.Time      `json:"decided_at,omitzero"`
	Message     string         `json:"message,omitempty"` // Deny: what the model was told
	// AskedArgs are the arguments the call came with, as validated (defaults applied,
	// meta-fields apart); Edit only.
	AskedArgs json.RawMessage `json:"asked_args,omitempty"`
	// ApprovedArgs are the edited arguments as validated and run. An edit that fails
	// validation keeps them as the person wrote them, and the result is the error that says
	// why. Edit only.
	ApprovedArgs json.RawMessage `json:"approved_args,omitempty"`
}

// DecisionOf reads the record of a person's decision from a result's Meta; false when the
// call needed none (or the Meta holds no valid one).
func DecisionOf(r *Result) (DecisionRecord, bool) {
	var meta struct {
		Decision *DecisionRecord `json:"decision"`
	}
	if r == nil || len(r.Meta) == 0 || json.Unmarshal(r.Meta, &meta) != nil || meta.Decision == nil {
		return DecisionRecord{}, false
	}
	return *meta.Decision, true
}

// applyDecision applies a person's decision to c: as asked (approve), with the edited
// arguments validated again (edit). It returns the result of a call that must not run (deny,
// pause, an edit that fails validation), nil for one that runs.
func (d *Dispatcher) applyDecision(ctx context.Context, c *Call, dec Decision) *Result {
	switch dec.Action {
	case Approve:
		return nil
	case Edit:
		c.Args = dec.Args
		// Meta-fields the edit names replace the call's (null drops one); those it
		// leaves out are kept, so a form that shows only the arguments keeps them.
		r := d.prepareArgs(c)
		if r == nil {
			r = d.parseMeta(c)
		}
		if r == nil {
			r = d.checkDoor(ctx, c)
		}
		if r != nil {
			r.Error = "the edited arguments are invalid: " + r.Error
		}
		return r
	case Deny:
		msg := fmt.Sprintf("the user denied the call to %s", c.Name)
		if dec.Message != "" {
			msg += ": " + dec.Message
		}
		return Errorf(CodeDenied, "%s", msg)
	case Pause:
		return Errorf(CodeConfirmationRequired, "tool %s requires a person's confirmation before it runs; the call is waiting for a decision", c.Name)
	default:
		return Errorf(CodeConfirmationRequired, "tool %s: unknown confirmation decision %q", c.Name, dec.Action)
	}
}

// decisionRecord is the record of dec on a call that asked for asked and ran (or was refused)
// with approved; nil for what is no person's decision (a pause, an unknown action).
func decisionRecord(dec Decision, asked, approved json.RawMessage) *DecisionRecord {
	if dec.Action != Approve && dec.Action != Edit && dec.Action != Deny {
		return nil
	}
	rec := &DecisionRecord{Action: dec.Action, UserID: dec.UserID, KeyID: dec.KeyID, AccessToken: dec.AccessToken,
		DecidedAt: dec.DecidedAt, Message: dec.Message}
	if dec.Action == Edit {
		rec.AskedArgs, rec.ApprovedArgs = argsObject(asked), argsObject(approved)
	}
	return rec
}

// argsObject is a call's arguments for the record: no arguments read as {}, so that a diff of
// the two sets compares objects, and an edit that is not JSON at all is kept as the string it
// was (the record must stay valid JSON to be kept).
func argsObject(args json.RawMessage) json.RawMessage {
	args = bytes.TrimSpace(args)
	switch {
	case len(args) == 0 || string(args) == "null":
		return json.RawMessage(`{}`)
	case !json.Valid(args):
		b, _ := json.Marshal(string(args))
		return b
	}
	return args
}

// withMeta returns r with its Meta holding set's keys beside what the tool put there. The
// result is copied: the tool's own result may be shared.
func withMeta(r *Result, set map[string]any) *Result {
	meta := map[string]json.RawMessage{}
	if len(r.Meta) > 0 && json.Unmarshal(r.Meta, &meta) != nil {
		meta = map[string]json.RawMessage{} // not reached: execution lets only an object through
	}
	for k, v := range set {
		b, err := json.Marshal(v)
		if err != nil {
			return r
		}
		meta[k] = b
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return r
	}
	out := *r
	out.Meta = b
	return &out
}
