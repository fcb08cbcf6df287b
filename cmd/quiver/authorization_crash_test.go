//go:build unix

package main

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/crashtest"
	"github.com/quiverhq/quiver/internal/oauthtest"
)

// The runs that wait for their person's connection, across SIGKILLs: runs paused
// waiting_for_authorization survive the kill of their server; the person connects through the
// next life, which is killed as soon as the callback has stored the connection (before it
// could have run anything); the life after runs each waiting call once, and the runs finish.
var authCrashServer = crashServer{
	test:      "TestServeAuthorizationCrashChild",
	envDB:     "QUIVER_AUTH_CRASH_DB",
	envAgents: "QUIVER_AUTH_CRASH_AGENTS",
	envLife:   "QUIVER_AUTH_CRASH_LIFE",
	envArgs:   "QUIVER_AUTH_CRASH_ARGS",
}

// TestServeAuthorizationCrashChild is the server the test kills: its tool reads the caller's
// mailbox at acme, with their token.
func TestServeAuthorizationCrashChild(t *testing.T) {
	life, ok := authCrashServer.life()
	if !ok {
		return
	}
	quiver.MustRegister(quiver.Func("read_mail", "Reads the caller's mailbox at acme.", func(ctx context.Context, _ struct{}) (string, error) {
		if _, err := quiver.UserToken(ctx, "acme", "read"); err != nil {
			return "", err
		}
		reportTally(ctx, life)
		return tallied(life), nil
	}, quiver.WithConnection("acme", "read")))
	authCrashServer.serve()
}

func TestServeAuthorizationSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test kills and restarts the server")
	}
	forEachCrashBackend(t, func(t *testing.T, db string, _ int) { testAuthorizationSurvivesKills(t, db) })
}

func testAuthorizationSurvivesKills(t *testing.T, db string) {
	const runs = 3
	as := oauthtest.NewAuthServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	public := "http://" + addr
	asURL, _ := url.Parse(as.URL)
	dir := t.TempDir()
	agents, script := filepath.Join(dir, "agents"), filepath.Join(dir, "mailer.yaml")
	writeTestFiles(t, map[string]string{
		script:                               "turns:\n  - calls: [{name: read_mail, args: {}}]\n  - expect: {result_is_error: false, result_contains: tallied}\n    text: Done.\n",
		filepath.Join(agents, "mailer.yaml"): "name: mailer\nmodel: scripted:" + script + "\ntools: [read_mail]\n",
	})
	h := newCrashHarness(t, authCrashServer, db, agents)
	h.env = []string{authCrashServer.envArgs + "=--addr " + addr + " --public-url " + public + " --openapi-internal-hosts " + asURL.Host}

	// Life 0: the provider declared, the runs started and paused for the connection; killed.
	child, base := h.start(0)
	doc := map[string]any{"providers": []map[string]any{{"name": "acme", "authorization_url": as.URL + "/authorize", "token_url": as.URL + "/token",
		"client_id": as.Register(public + "/connections/callback"), "scopes": []string{"read"}}}}
	if status, _, out := apiDo(t, "PUT", base+"/connection-providers", h.admin, asJSON(map[string]any{"document": doc, "after": 0})); status != 200 {
		t.Fatalf("declaring acme: %d %v", status, out)
	}
	threads := h.startRuns(base, "mailer", "Any mail?", runs)
	waitUntil(t, "the runs to wait for the connection", 60*time.Second, func() (bool, string) {
		for _, id := range threads {
			_, _, th := apiDo(t, "GET", base+"/threads/"+id, h.admin, "")
			run, _ := th["run"].(map[string]any)
			if th["status"] != "waiting" || run["reason"] != "waiting_for_authorization" {
				return false, asJSON(th)
			}
		}
		return true, ""
	})
	h.stopKilled(child)

	// Life 1: the person connects; killed once the callback has answered.
	child, base = h.start(1)
	status, _, out := apiDo(t, "POST", base+"/connections/acme", h.admin, `{}`)
	if status != 200 {
		t.Fatalf("starting the connection: %d %v", status, out)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Get(out["authorization_url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	callback := res.Header.Get("Location")
	if !strings.HasPrefix(callback, public+"/connections/callback?") {
		t.Fatalf("the provider sent the browser to %q", callback)
	}
	if res, err = http.Get(callback); err != nil || res.StatusCode != 200 {
		t.Fatalf("the callback: %v %v", res, err)
	}
	res.Body.Close()
	h.stopKilled(child)

	// Life 2 finishes the runs. A call runs once, or again only when the kill of life 1 came
	// after it ran and before its result was stored (the stored result is then the last
	// execution's); a call whose result was stored never runs again.
	child, base = h.start(2)
	histories := h.finishRuns(child, base, threads, 2)
	if len(histories) != runs {
		t.Fatalf("%d histories, want %d", len(histories), runs)
	}
	for id, msgs := range histories {
		answered := false
		for _, m := range msgs {
			msg := m.(map[string]any)
			switch {
			case msg["role"] == "tool":
				content, _ := msg["content"].(string)
				callID, _ := msg["tool_call_id"].(string)
				checkExecutions(t, id, callID, content, h.ran[id+"/"+callID])
			case msg["role"] == "assistant" && msg["content"] == "Done.":
				answered = true
			}
		}
		if !answered {
			t.Errorf("thread %s did not answer Done.", id)
		}
	}
}

// stopKilled kills a life with SIGKILL and reads what it reported.
func (h *crashHarness) stopKilled(child *crashtest.Child) {
	h.t.Helper()
	child.Kill()
	rest, killed := child.Finish()
	if !killed {
		h.t.Fatalf("the life was not killed:\n%s", child.Stderr())
	}
	h.collect(child, rest)
}
