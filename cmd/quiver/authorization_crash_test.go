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

// TestServeAuthorizationAcrossNodes: on PostgreSQL, a fleet of two nodes serving at once, the
// node the runs paused on killed while its person connects (see testAuthorizationAcrossNodes).
func TestServeAuthorizationAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test kills a server")
	}
	for _, b := range serveBackends(t) {
		if b.name == "postgres" {
			t.Run(b.name, func(t *testing.T) { testAuthorizationAcrossNodes(t, b.args(t)[1]) })
		}
	}
}

// authorizationWorld is a crash test's provider, agent and harness: runs of the agent call
// read_mail, which needs the person's connection to acme.
type authorizationWorld struct {
	h      *crashHarness
	as     *oauthtest.AuthServer
	asHost string
}

const authorizationRuns = 3

func newAuthorizationWorld(t *testing.T, db string) *authorizationWorld {
	as := oauthtest.NewAuthServer(t)
	asURL, _ := url.Parse(as.URL)
	dir := t.TempDir()
	agents, script := filepath.Join(dir, "agents"), filepath.Join(dir, "mailer.yaml")
	writeTestFiles(t, map[string]string{
		script:                               "turns:\n  - calls: [{name: read_mail, args: {}}]\n  - expect: {result_is_error: false, result_contains: tallied}\n    text: Done.\n",
		filepath.Join(agents, "mailer.yaml"): "name: mailer\nmodel: scripted:" + script + "\ntools: [read_mail]\n",
	})
	return &authorizationWorld{h: newCrashHarness(t, authCrashServer, db, agents), as: as, asHost: asURL.Host}
}

// freeAddr is a loopback address no one listens on, for a node to serve at.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startNode starts life serving at addr, its public URL public (where the provider sends
// people back).
func (w *authorizationWorld) startNode(life int, addr, public string) (*crashtest.Child, string) {
	w.h.env = []string{authCrashServer.envArgs + "=--addr " + addr + " --public-url " + public + " --openapi-internal-hosts " + w.asHost}
	return w.h.start(life)
}

// declareAndPause declares acme (coming back to public), starts the runs and waits until each
// waits for the connection.
func (w *authorizationWorld) declareAndPause(t *testing.T, base, public string) []string {
	doc := map[string]any{"providers": []map[string]any{{"name": "acme", "authorization_url": w.as.URL + "/authorize", "token_url": w.as.URL + "/token",
		"client_id": w.as.Register(public + "/connections/callback"), "scopes": []string{"read"}}}}
	if status, _, out := apiDo(t, "PUT", base+"/connection-providers", w.h.admin, asJSON(map[string]any{"document": doc, "after": 0})); status != 200 {
		t.Fatalf("declaring acme: %d %v", status, out)
	}
	threads := w.h.startRuns(base, "mailer", "Any mail?", authorizationRuns)
	waitUntil(t, "the runs to wait for the connection", 60*time.Second, func() (bool, string) {
		for _, id := range threads {
			_, _, th := apiDo(t, "GET", base+"/threads/"+id, w.h.admin, "")
			run, _ := th["run"].(map[string]any)
			if th["status"] != "waiting" || run["reason"] != "waiting_for_authorization" {
				return false, asJSON(th)
			}
		}
		return true, ""
	})
	return threads
}

// startFlow starts the admin's connection to acme at base and takes the browser through the
// provider's page: it returns the callback the provider sent it to, not yet followed.
func (w *authorizationWorld) startFlow(t *testing.T, base, public string) string {
	status, _, out := apiDo(t, "POST", base+"/connections/acme", w.h.admin, `{}`)
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
	return callback
}

func followCallback(t *testing.T, callback string) {
	res, err := http.Get(callback)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("the callback: %v %v", res, err)
	}
	res.Body.Close()
}

func testAuthorizationSurvivesKills(t *testing.T, db string) {
	w := newAuthorizationWorld(t, db)
	h := w.h
	addr := freeAddr(t)
	public := "http://" + addr

	// Life 0: the provider declared, the runs started and paused for the connection; killed.
	child, base := w.startNode(0, addr, public)
	threads := w.declareAndPause(t, base, public)
	h.stopKilled(child)

	// Life 1: the person connects; killed once the callback has answered.
	child, base = w.startNode(1, addr, public)
	followCallback(t, w.startFlow(t, base, public))
	h.stopKilled(child)

	// Life 2 finishes the runs. A call runs once, or again only when the kill of life 1 came
	// after it ran and before its result was stored (the stored result is then the last
	// execution's); a call whose result was stored never runs again.
	child, base = w.startNode(2, addr, public)
	w.checkFinished(t, h.finishRuns(child, base, threads, 2))
}

// testAuthorizationAcrossNodes: two nodes of a fleet serve at once, the provider sending people
// back to the second. The runs pause on the first; the person starts connecting there, and the
// first is killed; the second serves the callback, and runs each waiting call once.
func testAuthorizationAcrossNodes(t *testing.T, db string) {
	w := newAuthorizationWorld(t, db)
	h := w.h
	addrA, addrB := freeAddr(t), freeAddr(t)
	public := "http://" + addrB // the fleet's public URL, which reaches node B

	nodeA, baseA := w.startNode(0, addrA, public)
	nodeB, baseB := w.startNode(1, addrB, public)
	threads := w.declareAndPause(t, baseA, public)
	callback := w.startFlow(t, baseA, public)
	h.stopKilled(nodeA)
	followCallback(t, callback)
	histories := h.finishRuns(nodeB, baseB, threads, 1)
	w.checkFinished(t, histories)
	for key, lives := range h.ran {
		if len(lives) != 1 || lives[0] != "1" {
			t.Errorf("call %s ran in lives %v, want once, on node B (life 1)", key, lives)
		}
	}
}

// checkFinished checks the finished runs' histories: each call's executions as checkExecutions
// does, and the run's answer.
func (w *authorizationWorld) checkFinished(t *testing.T, histories map[string][]any) {
	h := w.h
	if len(histories) != authorizationRuns {
		t.Fatalf("%d histories, want %d", len(histories), authorizationRuns)
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
