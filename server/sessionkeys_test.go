package server

import (
	"testing"
	"time"
)

// A session's key is forgotten once the session has been idle past twice the server's idle
// timeout, so that sessions opened one after another do not grow the map; a live one stays.
func TestSessionKeysForgetIdleSessions(t *testing.T) {
	sk := newSessionKeys(time.Minute)
	sk.keys["old"] = sessionKey{"key_a", time.Now().Add(-3 * time.Minute)}
	sk.keys["live"] = sessionKey{"key_b", time.Now().Add(-time.Minute)}
	sk.remember("new", "key_c")
	if _, ok := sk.keys["old"]; ok {
		t.Error("a session idle for 3 minutes (twice the 1-minute timeout is 2) is still remembered")
	}
	for _, id := range []string{"live", "new"} {
		if _, ok := sk.keys[id]; !ok {
			t.Errorf("session %s was forgotten", id)
		}
	}
	if never := newSessionKeys(0); never.idle != sessionKeyIdleMax {
		t.Errorf("without an idle timeout, keys are kept %s, want %s", never.idle, sessionKeyIdleMax)
	}
}
