package quiver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
)

// The result of a call a person decided on records the decision in its Meta (issue 46): the
// action, who decided with what and when, and for an edit what the call asked for beside what
// ran, both as validated (defaults applied, meta-fields apart). Approve and deny carry who and
// when without the arguments; a pause, which is no decision yet, records nothing. What the
// tool put in Meta stays beside it, and what the recorder stores is the same.
func TestDecisionRecordedInTheResult(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	who := quiver.Decision{UserID: "usr_ann", KeyID: "key_ann", DecidedAt: at}
	decide := func(d quiver.Decision) quiver.Decision {
		d.UserID, d.KeyID, d.AccessToken, d.DecidedAt = who.UserID, who.KeyID, who.AccessToken, who.DecidedAt
		return d
	}
	tests := []struct {
		name     string
		decision quiver.Decision
		want     *quiver.DecisionRecord // nil: no record
	}{
		{"edit", decide(quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(`{"amount":90,"_reasoningForCall":"lowered"}`)}),
			&quiver.DecisionRecord{Action: quiver.Edit, UserID: "usr_ann", KeyID: "key_ann", DecidedAt: at,
				AskedArgs: json.RawMessage(`{"to":"bob","amount":900}`), ApprovedArgs: json.RawMessage(`{"amount":90,"to":"alice"}`)}},
		{"invalid edit", decide(quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(`{"to":"bob","amount":5000}`)}),
			&quiver.DecisionRecord{Action: quiver.Edit, UserID: "usr_ann", KeyID: "key_ann", DecidedAt: at,
				AskedArgs: json.RawMessage(`{"to":"bob","amount":900}`), ApprovedArgs: json.RawMessage(`{"to":"bob","amount":5000}`)}},
		{"malformed edit", decide(quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(`{"to":`)}),
			&quiver.DecisionRecord{Action: quiver.Edit, UserID: "usr_ann", KeyID: "key_ann", DecidedAt: at,
				AskedArgs: json.RawMessage(`{"to":"bob","amount":900}`), ApprovedArgs: json.RawMessage(`"{\"to\":"`)}},
		{"approve", decide(quiver.Decision{Action: quiver.Approve}),
			&quiver.DecisionRecord{Action: quiver.Approve, UserID: "usr_ann", KeyID: "key_ann", DecidedAt: at}},
		{"approve with an access token", quiver.Decision{Action: quiver.Approve, UserID: "usr_bo", AccessToken: true, DecidedAt: at},
			&quiver.DecisionRecord{Action: quiver.Approve, UserID: "usr_bo", AccessToken: true, DecidedAt: at}},
		{"deny", decide(quiver.Decision{Action: quiver.Deny, Message: "not to Bob"}),
			&quiver.DecisionRecord{Action: quiver.Deny, UserID: "usr_ann", KeyID: "key_ann", DecidedAt: at, Message: "not to Bob"}},
		{"a confirmer that knows no one", quiver.Decision{Action: quiver.Approve}, &quiver.DecisionRecord{Action: quiver.Approve}},
		{"pause", quiver.Decision{Action: quiver.Pause}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The tool's own Meta, and a default the edit leaves out (to: alice).
			tool := quiver.Func("transfer_money", "Transfers money.", func(_ context.Context, a struct {
				To     string `json:"to,omitempty" default:"alice"`
				Amount int    `json:"amount" minimum:"1" maximum:"1000"`
			}) (*quiver.Result, error) {
				return &quiver.Result{Status: quiver.StatusSuccess, Text: "sent", Meta: json.RawMessage(`{"bank":"ok"}`)}, nil
			}, quiver.WithConfirmation())
			rec := &memRecorder{}
			d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Recorder: rec,
				Confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) { return tt.decision, nil }}
			r := dispatchCall(t, context.Background(), d, quiver.Call{ID: "c1", Name: "transfer_money", Args: json.RawMessage(`{"to":"bob","amount":900}`)})
			got, ok := quiver.DecisionOf(r)
			if tt.want == nil {
				if ok {
					t.Fatalf("a %s records decision %+v", tt.name, got)
				}
				return
			}
			if !ok {
				t.Fatalf("no decision in the result's meta %s", r.Meta)
			}
			wantRecord(t, got, *tt.want)
			if tt.decision.Action == quiver.Approve && !strings.Contains(string(r.Meta), `"bank":"ok"`) {
				t.Errorf("the tool's own meta is gone: %s", r.Meta)
			}
			stored := rec.all()
			if len(stored) != 1 {
				t.Fatalf("%d results recorded", len(stored))
			}
			s, _ := quiver.DecisionOf(&stored[0].Result)
			wantRecord(t, s, *tt.want)
		})
	}
}

// wantRecord compares two decision records, their argument sets as JSON values.
func wantRecord(t *testing.T, got, want quiver.DecisionRecord) {
	t.Helper()
	sameJSON := func(a, b json.RawMessage) bool {
		if len(a) == 0 || len(b) == 0 {
			return len(a) == len(b)
		}
		var x, y any
		if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
			return false
		}
		xa, _ := json.Marshal(x)
		ya, _ := json.Marshal(y)
		return string(xa) == string(ya)
	}
	if got.Action != want.Action || got.UserID != want.UserID || got.KeyID != want.KeyID || got.AccessToken != want.AccessToken ||
		!got.DecidedAt.Equal(want.DecidedAt) || got.Message != want.Message ||
		!sameJSON(got.AskedArgs, want.AskedArgs) || !sameJSON(got.ApprovedArgs, want.ApprovedArgs) {
		t.Errorf("decision record\n got %+v (asked %s, approved %s)\nwant %+v (asked %s, approved %s)",
			got, got.AskedArgs, got.ApprovedArgs, want, want.AskedArgs, want.ApprovedArgs)
	}
}

// A secret in either argument set is masked in the record as in the rest of the result: the
// model asked with the secret, and the person's edit wrote it again.
func TestDecisionRecordMasksSecrets(t *testing.T) {
	const secret = "sk-live-7f3a9c2e41"
	tool := quiver.Func("call_api", "Calls an API.", func(_ context.Context, a struct {
		Header string `json:"header"`
	}) (string, error) {
		return "called", nil
	}, quiver.WithConfirmation(), quiver.WithVariables(quiver.Variable{Name: "api_key", Type: quiver.VarSecret}))
	rec := &memRecorder{}
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Recorder: rec,
		Resolver: quiver.Layered{Thread: quiver.Vars{"api_key": secret}},
		Confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
			return quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(`{"header":"Bearer ` + secret + `!"}`), UserID: "usr_ann"}, nil
		}}
	r := dispatchCall(t, context.Background(), d, quiver.Call{Name: "call_api", Args: json.RawMessage(`{"header":"` + secret + `"}`)})
	wantSuccess(t, r)
	got, ok := quiver.DecisionOf(r)
	if !ok || len(got.AskedArgs) == 0 || len(got.ApprovedArgs) == 0 {
		t.Fatalf("no edit recorded: %s", r.Meta)
	}
	if strings.Contains(string(r.Meta), secret) {
		t.Errorf("the secret is in the decision's record: %s", r.Meta)
	}
	if stored := rec.all(); len(stored) != 1 || strings.Contains(string(stored[0].Result.Meta), secret) {
		t.Errorf("the secret is in the recorded decision: %+v", stored)
	}
	if !strings.Contains(string(got.ApprovedArgs), "Bearer ") {
		t.Errorf("approved arguments %s lost what was no secret", got.ApprovedArgs)
	}
}
