package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/thread"
)

// A call a person edited keeps the decision in its stored result (issue 46), on SQLite and
// PostgreSQL: the run that resumes after the decision reads it back from the store, and the
// tool message's meta says who decided, with which key, when, what the model asked for and
// what ran. Before, the store kept the thread's user as the decider and the result said
// nothing of the decision.
func TestEditedApprovalIsRecordedWithTheResult(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		reg := &quiver.Registry{}
		if err := reg.Register(quiver.Func("pay", "Pays an amount.", func(_ context.Context, in struct {
			Amount int    `json:"amount" minimum:"1"`
			Note   string `json:"note,omitempty"`
			Fast   bool   `json:"fast,omitempty"`
		}) (string, error) {
			return "paid", nil
		}, quiver.WithConfirmation())); err != nil {
			t.Fatal(err)
		}
		th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_test", UserID: "usr_owner"})
		if err != nil {
			t.Fatal(err)
		}
		r := &agent.Runner{Store: st, Registry: reg, Model: &turnModel{turns: []model.Response{
			{ToolCalls: calls(call("p1", "pay", `{"amount":5,"note":"order 7"}`))}, {Text: "Paid."}}}}
		a := &agent.Agent{Name: "payer", Prompt: &agent.Prompt{Name: "payer", Tools: []string{"pay"}}}
		if out, err := r.Run(ctx, th, a, "pay"); err != nil || out.Status != agent.RunPaused {
			t.Fatalf("the run: %+v, %v; want it paused", out, err)
		}
		edit := quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(`{"amount":7,"fast":true}`), UserID: "usr_ann", KeyID: "key_ann"}
		if err := r.Decide(ctx, th, a, "p1", edit); err != nil {
			t.Fatal(err)
		}
		if out, err := r.Resume(ctx, th, a); err != nil || out.Status != agent.RunFinished {
			t.Fatalf("the resumed run: %+v, %v", out, err)
		}
		decided, err := st.Decisions(ctx, "wsp_test", th.ID())
		if err != nil || len(decided) != 1 {
			t.Fatalf("decisions %v, %v", decided, err)
		}
		_, results := resultsByCall(t, th)
		if len(results["p1"]) != 1 || results["p1"][0].Result == nil {
			t.Fatalf("the edited call's results: %v", results["p1"])
		}
		res, err := thread.Result(results["p1"][0].Result)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := quiver.DecisionOf(res)
		if !ok {
			t.Fatalf("the stored result records no decision: meta %s", res.Meta)
		}
		wantRecord(t, got, quiver.DecisionRecord{Action: quiver.Edit, UserID: "usr_ann", KeyID: "key_ann",
			DecidedAt: decided[0].DecidedAt, AskedArgs: json.RawMessage(`{"amount":5,"note":"order 7"}`),
			ApprovedArgs: json.RawMessage(`{"amount":7,"fast":true}`)})
		if got.DecidedAt.IsZero() {
			t.Error("the record has no time")
		}
	})
}

// wantRecord compares two decision records, their argument sets as JSON values.
func wantRecord(t *testing.T, got, want quiver.DecisionRecord) {
	t.Helper()
	if got.Action != want.Action || got.UserID != want.UserID || got.KeyID != want.KeyID || got.AccessToken != want.AccessToken ||
		!got.DecidedAt.Equal(want.DecidedAt) || got.Message != want.Message ||
		!jsonSame(got.AskedArgs, want.AskedArgs) || !jsonSame(got.ApprovedArgs, want.ApprovedArgs) {
		t.Errorf("decision record\n got %+v (asked %s, approved %s)\nwant %+v (asked %s, approved %s)",
			got, got.AskedArgs, got.ApprovedArgs, want, want.AskedArgs, want.ApprovedArgs)
	}
}

// jsonSame reports whether two JSON texts hold the same value (both empty counts).
func jsonSame(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
