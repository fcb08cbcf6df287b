package mcp

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"
)

// TestPeopleSessionsBounded: a remote keeps at most maxPeopleSessions sessions of people,
// closing the one used least recently for a new one, and those idle longer than personIdle
// first; a key taken again is the same session; once closed, none opens.
func TestPeopleSessionsBounded(t *testing.T) {
	key := func(i int) [32]byte { return sha256.Sum256(fmt.Appendf(nil, "token %d", i)) }
	var pp people
	for i := range maxPeopleSessions {
		s, opener := pp.take(key(i))
		if !opener {
			t.Fatalf("session %d is not new", i)
		}
		close(s.ready)
	}
	// Key 0 is used again, so key 1 is the least recent.
	if s, opener := pp.take(key(0)); opener || s != pp.sessions[key(0)] {
		t.Fatal("taking a key again opened another session")
	}
	s, _ := pp.take(key(maxPeopleSessions))
	close(s.ready)
	if _, ok := pp.sessions[key(1)]; ok || len(pp.sessions) != maxPeopleSessions {
		t.Fatalf("%d sessions, the least recent kept: %v", len(pp.sessions), ok)
	}
	if _, ok := pp.sessions[key(0)]; !ok {
		t.Fatal("the session used again was closed")
	}
	// Sessions idle past personIdle close when the next one opens.
	pp.mu.Lock()
	for _, s := range pp.sessions {
		s.used = time.Now().Add(-personIdle - time.Second)
	}
	pp.mu.Unlock()
	s, _ = pp.take(key(-1))
	close(s.ready)
	if len(pp.sessions) != 1 {
		t.Fatalf("%d sessions after the idle ones closed", len(pp.sessions))
	}
	pp.closeAll()
	if s, opener := pp.take(key(-2)); opener || s.err == nil || len(pp.sessions) != 0 {
		t.Fatalf("a session opened after closeAll: %v %v", opener, s.err)
	}
}
