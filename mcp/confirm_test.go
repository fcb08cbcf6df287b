package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
)

// A request state opens only where it was sealed, untouched and before it expires, and it
// answers only the question it was given for: the same caller, tool and arguments.
func TestRequestStates(t *testing.T) {
	keys, other := newStateKeys(), newStateKeys()
	call := &quiver.Call{Name: "delete_branch", Args: json.RawMessage(`{"branch":"old"}`)}
	scope := quiver.Scope{WorkspaceID: "wsp_1", UserID: "usr_1", ThreadID: "thr_1"}
	st := requestState{Ask: confirmInputID, Thread: scope.ThreadID, User: scope.UserID, Tool: call.Name, Args: argsDigest(call.Args),
		Expires: time.Now().Add(time.Minute).Unix()}
	sealed, err := st.seal(keys)
	if err != nil {
		t.Fatal(err)
	}
	expired := st
	expired.Expires = time.Now().Add(-time.Second).Unix()
	sealedExpired, err := expired.seal(keys)
	if err != nil {
		t.Fatal(err)
	}
	// Another character of the encoding's alphabet, so that the value still decodes and it is
	// the authentication that refuses it.
	flipped := []byte(sealed)
	if i := len(flipped) - 3; flipped[i] == 'A' {
		flipped[i] = 'B'
	} else {
		flipped[i] = 'A'
	}
	for _, c := range []struct {
		name, sealed string
		keys         Sealer
		want         string
	}{
		{"another server's key", sealed, other, "cannot decrypt"},
		{"changed", string(flipped), keys, "cannot decrypt"},
		{"expired", sealedExpired, keys, "expired"},
		{"none", "", keys, "no request state"},
	} {
		if _, err := openState(c.keys, c.sealed); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	got, err := openState(keys, sealed)
	if err != nil || got.Thread != "thr_1" {
		t.Fatalf("the state as sealed: %+v %v", got, err)
	}
	cases := []struct {
		name  string
		scope quiver.Scope
		call  *quiver.Call
		want  bool
	}{
		{"the question", scope, call, true},
		{"another caller", quiver.Scope{WorkspaceID: "wsp_1", UserID: "usr_2"}, call, false},
		{"another tool", scope, &quiver.Call{Name: "delete_repo", Args: call.Args}, false},
		{"other arguments", scope, &quiver.Call{Name: call.Name, Args: json.RawMessage(`{"branch":"main"}`)}, false},
	}
	for _, c := range cases {
		if got.answers(c.scope, c.call) != c.want {
			t.Errorf("%s: answers %v, want %v", c.name, !c.want, c.want)
		}
	}
}

// The ledger of a server given none takes an answer once, forgets answers whose states
// expired when it fills, and refuses more than it can hold rather than forget a live one.
func TestLocalAnswers(t *testing.T) {
	ctx := t.Context()
	now := time.Unix(1_000_000, 0)
	l := newLocalAnswers()
	l.now = func() time.Time { return now }
	take := func(id string, expires time.Time) (bool, error) {
		t.Helper()
		return l.Take(ctx, id, expires)
	}
	if ok, err := take("a", now.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("the first answer: %v %v, want taken", ok, err)
	}
	if ok, err := take("a", now.Add(time.Minute)); ok || err != nil {
		t.Fatalf("the same answer again: %v %v, want refused without an error", ok, err)
	}
	for i := 1; len(l.taken) < maxLocalAnswers; i++ {
		l.taken[fmt.Sprint("old", i)] = now.Add(-time.Second) // expired
	}
	if ok, err := take("b", now.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("an answer with the ledger full of expired ones: %v %v, want taken", ok, err)
	}
	if len(l.taken) != 2 {
		t.Errorf("%d answers kept after pruning, want 2 (a and b)", len(l.taken))
	}
	for i := 0; len(l.taken) < maxLocalAnswers; i++ {
		l.taken[fmt.Sprint("live", i)] = now.Add(time.Minute)
	}
	if ok, err := take("c", now.Add(time.Minute)); ok || !errors.Is(err, errLedgerFull) {
		t.Fatalf("an answer with the ledger full of live ones: %v %v, want %v", ok, err, errLedgerFull)
	}
	if ok, _ := take("a", now.Add(time.Minute)); ok {
		t.Error("a taken answer was taken again once the ledger filled")
	}
}
