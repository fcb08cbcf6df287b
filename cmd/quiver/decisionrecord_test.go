package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// decisionSite is a quiver serve whose payer agent calls charge {amount: 5, note: order 7},
// a tool that waits for a person's confirmation and takes an optional currency too: what
// the decision record's tests edit (a value changed, one removed, one added).
func decisionSite(t testing.TB) *consoleSite {
	t.Helper()
	agents, script := scriptedAgentsDir(t)
	writeTestFiles(t, map[string]string{
		script("payer"): "turns:\n  - calls: [{name: charge, args: {amount: 5, note: order 7}}]\n  - text: Charged.\n",
		filepath.Join(agents, "payer.yaml"): "name: payer\ndescription: Pays what it is asked to.\nmodel: scripted:" + script("payer") +
			"\ntools: [charge]\n",
	})
	base, admin := serveAgentsAPI(t, []string{"--db", filepath.Join(t.TempDir(), "q.db")}, agents)
	if admin == "" {
		t.Fatal("quiver serve printed no admin key")
	}
	createJSTool(t, base, admin, "charge",
		`export default ({ amount, note, currency }) => "charged " + amount + (currency ? " " + currency : "") + (note ? " for " + note : "")`,
		`{"type":"object","description":"Charges an amount.","properties":{"amount":{"type":"integer","minimum":1},`+
			`"note":{"type":"string"},"currency":{"type":"string"}},"required":["amount"]}`, true)
	return &consoleSite{api: base, admin: admin}
}

// approver makes a member key of the site's workspace and returns its secret, its id and its
// user: the person who decides, another than the admin who started the run.
func (s *consoleSite) approver(t testing.TB) (secret, keyID, userID string) {
	t.Helper()
	status, _, out := apiDo(t, "POST", s.api+"/keys", s.admin, `{"role":"member","name":"approver"}`)
	secret, _ = out["secret"].(string)
	if status != 201 || secret == "" {
		t.Fatalf("POST /v1/keys for a member: %d %v", status, out)
	}
	status, _, who := apiDo(t, "GET", s.api+"/session", secret, "")
	keyID, _ = who["key_id"].(string)
	userID, _ = who["user_id"].(string)
	if status != 200 || keyID == "" || userID == "" {
		t.Fatalf("GET /v1/session with the member key: %d %v", status, who)
	}
	return secret, keyID, userID
}

// apiDecision is a decision record as a thread's messages carry it, in a result's meta.
type apiDecision struct {
	Action       string          `json:"action"`
	UserID       string          `json:"user_id"`
	KeyID        string          `json:"key_id"`
	AccessToken  bool            `json:"access_token"`
	DecidedAt    time.Time       `json:"decided_at"`
	Message      string          `json:"message"`
	AskedArgs    json.RawMessage `json:"asked_args"`
	ApprovedArgs json.RawMessage `json:"approved_args"`
}

// decisionOf returns the decision record of the result of call callID among a thread's
// messages, as GET /v1/threads/{id}/messages returns them.
func (s *consoleSite) decisionOf(t testing.TB, threadID, callID string) (*apiDecision, string) {
	t.Helper()
	_, raw := threadMessages(t, s.api, s.admin, threadID)
	var page struct {
		Messages []struct {
			ToolCallID string `json:"tool_call_id"`
			Result     *struct {
				Meta struct {
					Decision *apiDecision `json:"decision"`
				} `json:"meta"`
			} `json:"result"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(raw), &page); err != nil {
		t.Fatal(err)
	}
	for _, m := range page.Messages {
		if m.ToolCallID == callID && m.Result != nil {
			return m.Result.Meta.Decision, raw
		}
	}
	return nil, raw
}

// The thread's messages over the API carry, on the result of a call a person edited, who
// decided (the member's user and key, not the admin who started the run), when, what the
// model asked for and what ran (issue 46); a denial says who and when too. Before, the
// result said nothing of the decision.
func TestAPIThreadMessagesRecordTheDecision(t *testing.T) {
	timed(t)
	site := decisionSite(t)
	secret, keyID, userID := site.approver(t)

	thread := site.namedThread(t, "payer", "Edited charge")
	startAPIRun(t, site.api, site.admin, thread, "payer", "Please pay for order 7.")
	callID := site.pausedCall(t, thread)
	before := time.Now().Add(-time.Minute)
	body := asJSON(map[string]any{"call_id": callID, "action": "edit", "args": map[string]any{"amount": 7, "currency": "EUR"}})
	if status, _, out := apiDo(t, "POST", site.api+"/threads/"+thread+"/decisions", secret, body); status != 202 {
		t.Fatalf("the edit: %d %v", status, out)
	}
	site.waitMessages(t, thread, "Charged.")
	d, raw := site.decisionOf(t, thread, callID)
	if d == nil {
		t.Fatalf("the edited call's result records no decision:\n%s", raw)
	}
	if d.Action != "edit" || d.UserID != userID || d.KeyID != keyID || d.AccessToken || d.DecidedAt.Before(before) ||
		d.DecidedAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("decision %+v, want an edit by %s with key %s, decided now", d, userID, keyID)
	}
	if !jsonSame(d.AskedArgs, `{"amount":5,"note":"order 7"}`) || !jsonSame(d.ApprovedArgs, `{"amount":7,"currency":"EUR"}`) {
		t.Errorf("asked %s and approved %s, want what the model asked and what ran", d.AskedArgs, d.ApprovedArgs)
	}
	site.waitMessages(t, thread, "charged 7 EUR")

	denied := site.namedThread(t, "payer", "Denied charge")
	startAPIRun(t, site.api, site.admin, denied, "payer", "Pay again.")
	callID = site.pausedCall(t, denied)
	body = asJSON(map[string]any{"call_id": callID, "action": "deny", "message": "Not today."})
	if status, _, out := apiDo(t, "POST", site.api+"/threads/"+denied+"/decisions", secret, body); status != 202 {
		t.Fatalf("the denial: %d %v", status, out)
	}
	site.waitMessages(t, denied, "Charged.")
	d, raw = site.decisionOf(t, denied, callID)
	if d == nil || d.Action != "deny" || d.UserID != userID || d.KeyID != keyID || d.DecidedAt.Before(before) ||
		d.Message != "Not today." || len(d.AskedArgs) != 0 || len(d.ApprovedArgs) != 0 {
		t.Errorf("the denial's record %+v, want who and when, no arguments:\n%s", d, raw)
	}
}

// jsonSame reports whether raw holds the JSON value want does.
func jsonSame(raw json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return asJSON(a) == asJSON(b)
}

// The thread page shows, on the result of a call a person edited, who approved it (the
// member's user and key), when, and what the edit changed field by field: amount changed
// 5 → 7, note removed, currency added (issue 46). Live, on the page open while the run
// waited (the event stream), and on a page opened afterwards (the thread's messages).
func TestConsoleShowsTheEditedArguments(t *testing.T) {
	timed(t)
	chromiumPath(t) // skip (or fail) before starting anything
	site := decisionSite(t)
	site.origin = strings.TrimSuffix(site.api, "/v1")
	secret, keyID, userID := site.approver(t)
	thread := site.namedThread(t, "payer", "Edited charge")
	startAPIRun(t, site.api, site.admin, thread, "payer", "Please pay for order 7.")
	callID := site.pausedCall(t, thread)

	live := newBrowser(t)
	live.signIn(site, site.admin)
	live.route("#/threads/" + thread)
	live.waitFor("the waiting call", testEls("call-waiting")+`.length > 0`, 0)
	body := asJSON(map[string]any{"call_id": callID, "action": "edit", "args": map[string]any{"amount": 7, "currency": "EUR"}})
	if status, _, out := apiDo(t, "POST", site.api+"/threads/"+thread+"/decisions", secret, body); status != 202 {
		t.Fatalf("the edit: %d %v", status, out)
	}

	decision := testEls("decision") + `.find((e) => e.closest('[data-call-id="` + callID + `"]'))`
	shows := func(tab *browserTab) {
		t.Helper()
		tab.waitFor("the decision on the edited call's result", decision+`?.dataset.action === "edit"`, 0)
		field := func(name string) string {
			return decision + `.querySelector('[data-test="` + name + `"]')?.textContent || ""`
		}
		if got := tab.string(field("decision-by")); got != userID {
			t.Errorf("approved by %q, want the member's user %s", got, userID)
		}
		if got := tab.string(field("decision-key")); got != keyID {
			t.Errorf("with key %q, want %s", got, keyID)
		}
		if got := tab.string(field("decision-at")); strings.TrimLeft(got, " ·") == "" {
			t.Error("the decision shows no time")
		}
		rows := tab.string(`JSON.stringify([...` + decision + `.querySelectorAll('[data-test="diff-row"]')].map((r) => [r.dataset.key, r.dataset.change,
			r.querySelector('[data-test="diff-old"]')?.textContent ?? "", r.querySelector('[data-test="diff-new"]')?.textContent ?? ""]))`)
		if want := `[["amount","changed","5","7"],["note","removed","\"order 7\"",""],["currency","added","","\"EUR\""]]`; rows != want {
			t.Errorf("the diff's rows %s, want %s", rows, want)
		}
	}
	shows(live)
	live.waitFor("the result of the edited call", hasText("charged 7 EUR"), 0)

	later := live.newTab()
	later.signIn(site, site.admin)
	later.route("#/threads/" + thread)
	shows(later)
}
