package mcp

import (
	"encoding/json"
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
	flipped := []byte(sealed)
	flipped[len(flipped)-3] ^= 1
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
